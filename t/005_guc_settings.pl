# 005_guc_settings.pl
#	No setting can crash the server: as a plain role, every string and enum
#	GUC of the extension is set and reset every way the GUC machinery has
#	(SET, SET LOCAL, RESET, RESET ALL, set_config(), a function's SET
#	clause, a role's default, in and out of transactions, with COMMIT,
#	ROLLBACK, ROLLBACK TO SAVEPOINT and errors), over and over.  Since
#	PostgreSQL 16 a check hook's extra that was not allocated with
#	guc_malloc() crashes the backend at the second SET or the RESET, and the
#	postmaster restarts every backend (the test harness sets
#	restart_after_crash = off, so the server goes down); here the
#	postmaster's PID must stay the same, a session opened before must still
#	be connected, and the log must show no crash.  Needs no loader.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PceTest;

my $node = new_node('guc_settings');
$node->start;
my $pid_before = postmaster_pid($node);

# A session that idles through it all: a crash restart would end it too,
# although the postmaster keeps its PID.
my %watch = (in => '', out => '', err => '');
$watch{h} = IPC::Run::start([ 'psql', '-X', '-A', '-t', '-d', $node->connstr('postgres') ],
	'<', \$watch{in}, '>', \$watch{out}, '2>', \$watch{err},
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
my $watch_pid = watch_query('SELECT pg_backend_pid()');
$node->safe_psql('postgres', 'CREATE EXTENSION pg_cache_ext; CREATE ROLE plain LOGIN');
my ($rc, $out, $err) = $node->psql('postgres', q{
	CREATE FUNCTION with_commands() RETURNS text LANGUAGE sql
	  SET pg_cache_ext.scan_commands = 'vacuum, analyze'
	  RETURN current_setting('pg_cache_ext.scan_commands');
	CREATE FUNCTION with_scan() RETURNS text LANGUAGE sql
	  SET pg_cache_ext.scan = 'on'
	  RETURN current_setting('pg_cache_ext.scan');
	GRANT EXECUTE ON FUNCTION with_commands(), with_scan() TO plain;
	-- as the role's default too: RESET returns to it
	ALTER ROLE plain SET pg_cache_ext.scan_commands = 'copy_to';
	ALTER ROLE plain SET pg_cache_ext.scan = off;
}, on_error_stop => 1);
is($rc, 0, 'functions and role defaults that set the GUCs are created') or diag($err);

# Every way of setting and resetting GUC g between values a and b, and a bad
# value that the check hook refuses.
sub every_way
{
	my ($g, $a, $b, $bad) = @_;
	return qq{
SET $g = $a; SET $g = $b; RESET $g;
SET $g = $a; SET $g = $a; RESET ALL;
SET $g = $b; RESET $g; RESET $g;
BEGIN; SET LOCAL $g = $a; SET LOCAL $g = $b; COMMIT;
BEGIN; SET $g = $a; SET LOCAL $g = $b; COMMIT;
BEGIN; SET $g = $a; ROLLBACK;
BEGIN; SET LOCAL $g = $b; ROLLBACK;
BEGIN; RESET $g; SET $g = $a; RESET ALL; ROLLBACK;
BEGIN; SET $g = $a; SAVEPOINT s; SET $g = $b; ROLLBACK TO s; RESET $g; RELEASE s; COMMIT;
BEGIN; SET LOCAL $g = $a; SAVEPOINT s; RESET $g; SET $g = $bad; ROLLBACK TO s; SET $g = $b; COMMIT;
BEGIN; SET $g = $a; SET $g = $bad; ROLLBACK;
SET $g = $a; SET $g = $bad; RESET $g;
SELECT set_config('$g', $a, false), set_config('$g', $b, true);
BEGIN; SELECT set_config('$g', $a, true); SELECT set_config('$g', $b, false); ROLLBACK;
SELECT with_commands(), with_scan();
SET $g = $b; SELECT with_commands(), with_scan(); RESET ALL;
BEGIN; SET LOCAL $g = $a; SELECT with_commands(), with_scan(); COMMIT;
DISCARD ALL;
};
}

my %gucs = (
	'pg_cache_ext.scan_commands' => [ q{'vacuum'}, q{'none'}, q{'bogus'} ],
	'pg_cache_ext.scan' => [ 'on', 'off', 'maybe' ],
	'pg_cache_ext.scan_threshold' => [ q{'8MB'}, '-1', '-2' ],
	# server-wide: every SET fails cleanly
	'pg_cache_ext.mode' => [ 'off', 'stock', 'sometimes' ],
	'pg_cache_ext.bpffs_dir' => [ q{'/tmp'}, q{'/sys/fs/bpf'}, q{'relative'} ],
	'pg_cache_ext.cgroup' => [ q{'/sys/fs/cgroup'}, q{''}, q{'x'} ],
);

for my $g (sort keys %gucs)
{
	my $script = every_way($g, @{ $gucs{$g} }) x 10;
	($rc, $out, $err) = $node->psql('postgres', $script, on_error_stop => 0,
		extra_params => [ '-U', 'plain' ]);
	is($rc, 0, "$g: every way of setting and resetting it, ten times: the session survives")
	  or diag(substr($err, -2000));
	unlike($err, qr/server closed the connection|terminated abnormally|invalid pointer|PANIC/,
		"$g: no crash reported to the client");
}

# values are taken, and RESET goes back to the role's default
is(plain_psql(
	"SET pg_cache_ext.scan_commands = 'vacuum'; SET pg_cache_ext.scan_commands = 'analyze, reindex'; SHOW pg_cache_ext.scan_commands",
), 'analyze, reindex', 'the last SET is in force');
is(plain_psql(
	"SET pg_cache_ext.scan_commands = 'vacuum'; RESET pg_cache_ext.scan_commands; SHOW pg_cache_ext.scan_commands",
), 'copy_to', 'RESET returns to the role default');
is(plain_psql(
	"BEGIN; SET LOCAL pg_cache_ext.scan_commands = 'vacuum'; COMMIT; SHOW pg_cache_ext.scan_commands",
), 'copy_to', 'SET LOCAL ends with its transaction');

# the same from four sessions at once, while the server reloads
my $script = join('', map { every_way($_, @{ $gucs{$_} }) } 'pg_cache_ext.scan_commands', 'pg_cache_ext.scan') x 5;
my @runs;
for my $i (1 .. 4)
{
	my %r = (in => $script, out => '', err => '');
	$r{h} = IPC::Run::start([ 'psql', '-X', '-q', '-U', 'plain', '-d', $node->connstr('postgres') ],
		'<', \$r{in}, '>', \$r{out}, '2>', \$r{err});
	push @runs, \%r;
}
if (postmaster_pid($node) ne 'none') { $node->reload for 1 .. 3; }
for my $r (@runs)
{
	# a write to a psql that lost its server dies (broken pipe)
	my $ok = eval { $r->{h}->finish; $r->{h}->result(0) == 0 };
	ok($ok, 'a concurrent session ran to its end') or diag(substr($r->{err}, -2000));
}

is(plain_psql( 'SELECT 1'), '1', 'the server answers');
is(postmaster_pid($node), $pid_before, 'the postmaster PID is unchanged');
is(watch_query('SELECT pg_backend_pid()'), $watch_pid,
	'a session opened before is still connected (no crash restart)');
$watch{in} .= "\\q\n";
$watch{h}->finish;
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|server process .* was terminated|all server processes terminated/,
	'the log shows no crashed backend and no crash restart');
unlike($log, qr/pfree called with invalid pointer|AbortTransaction while in COMMIT state/,
	'the log shows no invalid free');

$node->stop if postmaster_pid($node) ne 'none';
done_testing();

# a query as the plain role; its output, or the error if it fails
sub plain_psql
{
	my ($sql) = @_;
	my ($r, $o, $e) = $node->psql('postgres', $sql, extra_params => [ '-U', 'plain' ]);
	return $r == 0 ? $o : "failed: $e";
}

# one query through the idle session; its output, or "" if it is gone
sub watch_query
{
	my ($sql) = @_;
	$watch{out} = '';
	$watch{in} .= "$sql;\n";
	eval { $watch{h}->pump until $watch{out} =~ /\n\z/ || !$watch{h}->pumpable; };
	chomp(my $o = $watch{out});
	return $o;
}

sub postmaster_pid
{
	my ($n) = @_;
	my $file = $n->data_dir . '/postmaster.pid';
	return 'none' if !-e $file;    # the server is down
	my ($pid) = split /\n/, slurp_file($file);
	return $pid;
}
