# 028_external.pl
#	Readers outside the server: pg_cache_ext_run marks a whole process tree
#	(here sh -> sh -> tar | cat, the tar a grandchild) as a scanner of the
#	cluster.  With OLTP on a hot table beside a tar of a data directory
#	larger than the cluster's memory cgroup, the hot table stays cached
#	with the wrapper and is pushed out by the same tar without it.  The
#	tree's tasks show in cache_ext_scans() (reason external, their
#	command) while it runs and are unmarked when it ends; a wrapper killed
#	with SIGKILL leaves its tree's marks to the worker's sweep.  Pages the
#	tree reads outside the data directory are left alone.  A WAL segment
#	the tree read first is not tracked for a backend's later marked read.
use strict;
use warnings;
use File::Basename;
use File::Spec;
use File::Temp qw(tempdir);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use PceTest;

my $src = File::Spec->rel2abs(File::Basename::dirname(__FILE__) . '/..');
my $budget_mb = 16;
my $limit = 160 * 1024 * 1024;
my $bindir = `pg_config --bindir`;
chomp $bindir;
my $run = "$bindir/pg_cache_ext_run";

my ($node, $s) = stock_node('external',
	'pg_cache_ext.scan_budget' => "'${budget_mb}MB'",
	'pg_cache_ext.scan_max_age' => 0,
	'autovacuum' => 'off',
	'max_parallel_workers_per_gather' => 0);
my $datadir = $node->data_dir;

# hot: ~86 MB with an 8 MB index for the OLTP, over half of the cgroup, so
# that the kernel's active list cannot keep it (the tar reads the hot table
# too, which activates its pages); big: ~260 MB, beyond the cgroup
$node->safe_psql('postgres', q{
	SET pg_cache_ext.scan = off;
	CREATE TABLE hot AS SELECT g, repeat('h', 200) AS pad FROM generate_series(1, 360000) g;
	CREATE INDEX hot_g ON hot (g);
	CREATE TABLE big AS SELECT g, repeat('b', 200) AS pad FROM generate_series(1, 3300000) g;
	VACUUM FREEZE hot; VACUUM FREEZE big; CHECKPOINT;
});
my $du = `du -sb $datadir`;
my ($datadir_bytes) = $du =~ /^(\d+)/;
cmp_ok($datadir_bytes, '>', $limit, "the data directory ($datadir_bytes bytes) is larger than the cgroup");

my $cgname = "external-$$";
my ($ok, $cg) = root('cgroup-create', $cgname, $limit);
ok($ok, 'memory cgroup created') or BAIL_OUT('no memory cgroup');
my $postmaster = (split /\n/, slurp_file("$datadir/postmaster.pid"))[0];
root('cgroup-move', $cgname, $postmaster, split ' ', `pgrep -P $postmaster`);

sub cached_fraction { return relation_cached_fraction($node, @_); }

# Other test runs on this machine may drop the whole page cache
# (root-helper drop-caches) in the middle of a round, which would look like
# an eviction.  A canary file outside the cgroup, read again every 100 ms
# (so that no idle-page reclaim such as a DAMON pageout scheme takes it),
# stays cached through the round unless that happened (the machine has
# plenty of memory outside the cgroup); then the round is run again.
my $scratch = tempdir(CLEANUP => 1);
my $canary = "$scratch/canary";
system("dd if=/dev/urandom of=$canary bs=1M count=4 status=none") == 0 or die 'dd';

sub resident_percent
{
	my ($file) = @_;
	my ($percent) = `$src/test/pce_mark_self resident $file` =~ /^([\d.]+) /;
	return $percent // 0;
}

# MB of the WAL segments in the page cache
sub wal_cached_mb
{
	my $pages = 0;
	for my $seg (glob("$datadir/pg_wal/0*"))
	{
		my (undef, $resident) = split ' ', `$src/test/pce_mark_self resident $seg`;
		$pages += $resident // 0;
	}
	return $pages * 4096 / 1048576;
}

sub canary_read { system("cat $canary > /dev/null"); }
sub canary_intact { return resident_percent($canary) >= 100; }
my $canary_lost = 0;

# between two samples: was the canary dropped since the last read?
sub canary_check { $canary_lost ||= !canary_intact(); canary_read(); }

sub external_rows
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(command, ',' ORDER BY pid) FROM cache_ext_scans() WHERE reason = 'external'");
}

# Start @cmd in the cluster's cgroup (a backup on the database host shares
# its memory): a shell waits on stdin until it has been moved there.
sub start_in_cgroup
{
	my @cmd = @_;
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start([ 'sh', '-c', 'read go; exec "$@"', 'sh', @cmd ],
		'<', \$in, '>', \$out, '2>', \$err);
	root('cgroup-move', $cgname, $h->{KIDS}[0]{PID});
	$in = "go\n";
	$h->pump while length $in;
	return ($h, \$out, \$err);
}

# The tar is a grandchild: wrapper -> sh -> sh -> (tar | cat).  GNU tar
# reads nothing when its archive is /dev/null, hence the pipe.  In name
# order, so that it reads the hot table (created first: a lower file
# number) before the big one and the WAL: the hot pages it touches are
# already cached, and what it reads after them is what pushes them out.
# (In directory order it may read the hot table last, and bring back at
# the end what it pushed out before.)
#
# Compressed, as backups are: an uncompressed tar reads at disk speed, and
# on this busy 2-core machine the worker's evictor was seen falling behind
# such a reader by 260 MB (bytes_tracked 277 MB over a 16 MB budget), so
# the cgroup filled and reclaim took half of the hot table (README, limits).
#
# The whole data directory, pg_wal included: what an external tree reads of
# WAL and the other non-relation files is tracked too (the one rule of
# tracked files, src/file_index.c), or those pages would stay and push the
# hot table out.
my @tar = ('sh', '-c', "sh -c 'tar --sort=name -czf - -C $datadir . 2>/dev/null | cat > /dev/null'");

# Start cold, read the hot table once (not marked), then the OLTP: pgbench
# point SELECTs on it at a modest rate, beside the tar, until the tar ends.
sub round_with
{
	my ($label, @cmd) = @_;
	for my $try (1 .. 3)
	{
		$canary_lost = 0;
		my @result = round_once($label, @cmd);
		canary_check();
		return @result if !$canary_lost;
		note("$label: the page cache was dropped by another process during the round: again");
	}
	BAIL_OUT('the page cache was dropped by another process in three rounds running');
}

sub round_once
{
	my ($label, @cmd) = @_;
	root('drop-caches');
	canary_read();
	# in 1 MB pieces: the whole file at once would take as much anonymous
	# memory in the cgroup as it takes page cache
	$node->safe_psql('postgres', q{SET pg_cache_ext.scan = off;
		SELECT sum(length(pg_read_binary_file(pg_relation_filepath('hot'), off, 1048576)))
		FROM generate_series(0, pg_relation_size('hot') - 1, 1048576) off});
	cmp_ok(cached_fraction('hot'), '>=', 0.99, "$label: hot table cached before");
	my $script = $node->basedir . '/oltp.sql';
	PostgreSQL::Test::Utils::append_to_file($script,
		"\\set id random(1, 360000)\nSELECT pad FROM hot WHERE g = :id;\n") unless -e $script;
	my $oltp = IPC::Run::start([ "$bindir/pgbench", '-n', '-c', '1', '-R', '100', '-T', '600',
		'-f', $script, '-h', $node->host, '-p', $node->port, 'postgres' ],
		'>', \my $oltp_out, '2>', \my $oltp_err);
	my ($h, $out, $err) = start_in_cgroup(@cmd);
	my $seen = '';
	my @trace;
	while ($h->pumpable)
	{
		my $rows = external_rows();
		$seen = $rows if length($rows) > length($seen);
		push @trace, cached_fraction('hot') . '/' . stat_value($node, 'bytes_tracked') / 1048576;
		canary_check();
		usleep(100_000);
		$h->pump_nb;
	}
	note("$label: hot cached / MB tracked while it ran: @trace");
	note("$label: stats: " . $node->safe_psql('postgres',
		"SELECT string_agg(name || '=' || value, ' ') FROM cache_ext_stats() WHERE name ~ '^(folios_added|records|bytes_|extents_|files_not|drop_errors|marks_inh)'"));
	my (undef, $mstat) = root('cgroup-stat', $cgname);
	note("$label: cgroup: " . join(' ', grep { /^(cache|rss|shmem|active_file|inactive_file|workingset_refault_file|pgmajfault) / } split /\n/, $mstat // ''));
	$h->finish;
	$oltp->kill_kill;
	note("$label: exit $?, stderr: $$err") if $$err ne '';
	usleep(500_000);
	return (cached_fraction('hot'), $seen, wal_cached_mb());
}

# DAMON, where it runs a pageout scheme (this machine's kernel does), takes
# idle page cache anywhere, in regions far larger than the canary: it is
# paused for the two rounds (and resumed, also if the test dies)
pause_damon();
my ($hot, $seen, $wal_mb) = round_with('tar with pg_cache_ext_run', $run, '-D', $datadir, '--', @tar);
cmp_ok($hot, '>=', 0.95, "with the wrapper the hot table stays cached ($hot)");
# the WAL the tar read went too: what stays is within the budget, and the
# segment the server is writing (16 MB)
cmp_ok($wal_mb, '<=', $budget_mb + 16, "and the WAL it read is not left cached ($wal_mb MB)");
like($seen, qr/(^|,)tar(,|$)/, "the grandchild tar was marked (cache_ext_scans showed: $seen)");
like($seen, qr/pg_cache_ext_r/, 'and the wrapper itself');
is(external_rows(), '', 'no external mark is left once the command ended');
cmp_ok(stat_value($node, 'folios_added_external'), '>', 0, 'folios_added_external counts the tree');
cmp_ok(stat_value($node, 'marks_inherited'), '>=', 4, 'the marks were handed down at fork');

($hot, $seen, $wal_mb) = round_with('tar alone', @tar);
cmp_ok($hot, '<', 0.95, "without the wrapper the same tar pushes the hot table out ($hot)");
note("without the wrapper $wal_mb MB of WAL stayed cached");
is($seen, '', 'and nothing was marked');
resume_damon();

# ---- the wrapper killed by SIGKILL: the worker drops its tree's marks ----
my $sleeper = IPC::Run::start([ $run, '-D', $datadir, '--', 'sh', '-c', 'sleep 60 & wait' ]);
ok(wait_until(sub { external_rows() =~ /sleep/ }, 5), 'a tree is marked down to its sleep');
my @tree = split /\n/, $node->safe_psql('postgres',
	"SELECT pid FROM cache_ext_scans() WHERE reason = 'external' AND command <> 'pg_cache_ext_r'");
kill 'KILL', $sleeper->{KIDS}[0]{PID};
ok(wait_until(sub { external_rows() eq '' }, 5),
	'after the wrapper is SIGKILLed the worker drops the marks of its tree');
kill 'KILL', @tree;
$sleeper->finish;

# ---- pages outside the data directory: tracked, never dropped ----
my $outside = "$scratch/outside";
system("dd if=/dev/urandom of=$outside bs=1M count=48 status=none") == 0 or die 'dd';
my $percent;
for my $try (1 .. 3)
{
	root('drop-caches');
	canary_read();
	$canary_lost = 0;
	IPC::Run::run([ $run, '-D', $datadir, '--', 'cat', $outside ], '>', '/dev/null');
	canary_check();
	usleep(500_000);
	canary_check();
	usleep(500_000);
	$percent = resident_percent($outside);
	canary_check();
	last if !$canary_lost;
	note('the page cache was dropped by another process meanwhile: again');
}
cmp_ok($percent, '>=', 98,
	"a 48 MB file outside the data directory read by a wrapped command stays cached ($percent%; budget ${budget_mb} MB)");

# ---- WAL is tracked for external trees only, whoever read the file first ----
# The evictor keeps a record per file, made by its first tracked read: one
# made for the tree's read of a WAL segment must not make a backend's
# marked read of the same segment tracked.  The budget is large, so what is
# tracked waits and shows in bytes_tracked.
$node->safe_psql('postgres',
	"ALTER SYSTEM SET pg_cache_ext.scan_budget = '512MB'; SELECT pg_reload_conf()");
usleep(500_000);    # the worker reads the new budget
my ($segment) = sort grep { -s $_ == 16 * 1024 * 1024 } glob("$datadir/pg_wal/0*");
my $quarter = 4 * 1024 * 1024;
root('drop-caches');
my $tracked = stat_value($node, 'bytes_tracked');
IPC::Run::run([ $run, '-D', $datadir, '--', 'dd', "if=$segment", 'of=/dev/null', 'bs=1M', 'count=4',
	'status=none' ]);
ok(wait_until(sub { stat_value($node, 'bytes_tracked') - $tracked >= $quarter * 0.9 }, 5),
	'the first quarter of a WAL segment, read by a wrapped dd, is tracked');
$tracked = stat_value($node, 'bytes_tracked');
# the last quarter: far beyond what the dd's readahead brought in
$node->safe_psql('postgres', "SET pg_cache_ext.scan = on; SELECT length(pg_read_binary_file('pg_wal/"
	  . basename($segment) . "', 3 * $quarter, $quarter))");
ok(!wait_until(sub { stat_value($node, 'bytes_tracked') - $tracked >= $quarter / 4 }, 3),
	sprintf('its last quarter, read by a marked backend, is not (%.1f MB more tracked)',
		(stat_value($node, 'bytes_tracked') - $tracked) / 1048576));
$node->safe_psql('postgres',
	"ALTER SYSTEM SET pg_cache_ext.scan_budget = '${budget_mb}MB'; SELECT pg_reload_conf()");

# ---- the cgroup named in loader_info is not trusted ----
# loader_info is writable by the cluster's group: a member could name any
# path there, and the wrapper writes its PID into <cgroup>/cgroup.procs
# when the mechanism is cache_ext.  A symlink to a directory with a file of
# that name, and a path that climbs out of /sys/fs/cgroup, are refused and
# the file is left as it was.
my $pins = "/run/pg_cache_ext/pins/" . pin_dir_name($node);
my $target = "$scratch/victim";
mkdir $target or die "mkdir: $!";
PostgreSQL::Test::Utils::append_to_file("$target/cgroup.procs", "precious\n");
symlink($target, "$scratch/cg-link") or die "symlink: $!";
my ($old_info) = `$src/test/pce_mark_self loader-info $pins 2 $scratch/cg-link`;
chomp $old_info;
my ($old_mech, $old_cgroup) = split / /, $old_info, 2;
ok(defined $old_mech && $old_mech =~ /^\d+$/, "loader_info rewritten as the cluster's group may ($old_info)");
for my $evil ("$scratch/cg-link", "/sys/fs/cgroup/../..$scratch/cg-link", "/sys/fs/cgroup/../..$target")
{
	system("$src/test/pce_mark_self loader-info $pins 2 '$evil' > /dev/null");
	IPC::Run::run([ $run, '-D', $datadir, '--', 'true' ], '>', \my $o2, '2>', \my $e2);
	like($e2, qr/refusing the cluster's cgroup/, "a cgroup path \"$evil\" in loader_info is refused");
	is(slurp_file("$target/cgroup.procs"), "precious\n", 'and the file it leads to is untouched');
}
system("$src/test/pce_mark_self loader-info $pins $old_mech '" . ($old_cgroup // '') . "' > /dev/null");

# ---- bad input: clear errors, status 125 ----
my ($o, $e);
IPC::Run::run([ $run, '--', 'true' ], '>', \$o, '2>', \$e, init => sub { delete $ENV{PGDATA} });
like($e, qr/no data directory/, 'no -D: a clear error');
IPC::Run::run([ $run, '-D', '/nonexistent', '--', 'true' ], '>', \$o, '2>', \$e);
like($e, qr/nonexistent/, 'a bad -D: a clear error');
is($? >> 8, 125, 'with status 125');
IPC::Run::run([ $run, '-D', $datadir, '--bpffs-dir', '/sys/fs/bpf/', '--', 'true' ], '>', \$o, '2>', \$e);
like($e, qr/trailing slash/, 'a bpffs dir out of normal form is refused with the path rule');
IPC::Run::run([ $run, '-D', $datadir, '--', 'sh', '-c', 'exit 7' ], '>', \$o, '2>', \$e);
is($? >> 8, 7, "the command's exit status is the wrapper's");
is($e, '', 'and nothing is said when all is well');

my $log = slurp_file($node->logfile);
unlike($log, qr/PANIC|server process .* terminated/, 'no crash in the server log');
$node->stop;
root('cgroup-destroy', $cgname);
unload_bpf($node);
done_testing();
