# 030_reliability.pl
#	Faults and load lose nothing: the loader going away and coming back,
#	the loader SIGKILLed at every point of its run, a half-made set of pins, server restarts, reloads with changed knobs,
#	two clusters side by side, a full map, 100 scanning sessions beside
#	pgbench, DROP/CREATE EXTENSION under load, and other users kept out.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use PceTest;

my $bindir = `pg_config --bindir`;
chomp $bindir;
my $src = File::Spec->rel2abs(File::Basename::dirname(__FILE__) . '/..');

my $node = new_node('reliability', max_connections => 130, 'pg_cache_ext.scan_threshold' => 0);
load_bpf($node) or BAIL_OUT('loader failed');
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION pg_cache_ext;
	CREATE TABLE t AS SELECT g, repeat('x', 100) AS pad FROM generate_series(1, 5000) g;
});
$node->command_ok([ "$bindir/pgbench", '-i', '-s', '2', '-q', $node->connstr('postgres') ], 'pgbench init');
my $pin_dir = status($node)->{pin_dir};

my $scan_sql = "${PostgreSQL::Test::Utils::tmp_check}/scan.sql";
PostgreSQL::Test::Utils::append_to_file($scan_sql, "SELECT count(*) FROM t;\n");

# pgbench in the background; returns the harness and its output refs
sub pgbench_bg
{
	my (@args) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ "$bindir/pgbench", '-n', @args, $node->connstr('postgres') ],
		'>', \$out, '2>', \$err);
	return ($h, \$out, \$err);
}

sub kernel_map_entries { return status($node)->{kernel_map_entries}; }

# ---- the loader goes away and comes back while scans run ----
my ($h, $out, $err) = pgbench_bg('-c', 4, '-T', 8, '-f', $scan_sql);
usleep(1_000_000);
ok(unload_bpf($node), 'loader --unload during scans');
my $s = status($node);
is($s->{state}, 'idle', 'degraded to idle while the loader is gone');
like($s->{reason}, qr/pins missing/, 'reason says the pins are missing');
usleep(1_000_000);
ok(load_bpf($node), 'loader rerun during scans');
ok(wait_until(sub { status($node)->{state} eq 'active' }, 3), 'recovers by itself');
ok(wait_until(sub { kernel_map_entries() > 0 }, 3),
	'scans mark the new map again without reconnecting');
ok($h->finish, 'no scan failed while the loader went and came back') or diag($$err);
ok(wait_until(sub { kernel_map_entries() eq '0' }, 2), 'no stale marks afterwards');

# ---- a loader interrupted halfway: maps but no link ----
root('unpin', "$pin_dir/tracker_link");
$s = status($node);
is($s->{state}, 'idle', 'maps without a link: idle, not a false "active"');
like($s->{reason}, qr/link is not pinned .*rerun pg_cache_ext_loader/, 'reason says to rerun the loader');
ok(load_bpf($node), 'loader rerun repairs it');
is(status($node)->{state}, 'active', 'active again');

# ---- the loader SIGKILLed at every point of its run, while scans run ----
{
	my ($h, $out, $err) = pgbench_bg('-c', 2, '-T', 15, '-f', $scan_sql);
	my (%outcome, %states, @bad);
	# each delay twice: over the pins of a complete run, and from no pins
	for my $from_scratch (0, 1)
	{
		for (my $usec = 0; $usec <= 100_000; $usec += 2_500)
		{
			unload_bpf($node) if $from_scratch;
			my (undef, $what) = root('loader-killed-after', $usec, '-D', $node->data_dir);
			chomp $what;
			$outcome{$what}++;
			my $st = status($node);
			$states{ $st->{state} }++;
			push @bad, "$usec us: $st->{state} ($st->{reason})"
			  unless $st->{state} eq 'active' || ($st->{state} eq 'idle' && $st->{reason} ne '');
			note("killed after $usec us from no pins: $st->{state} ($st->{reason})")
			  if $from_scratch && $what eq 'killed';
		}
	}
	note('loader runs: ' . join(', ', map { "$_ $outcome{$_}" } sort keys %outcome)
		  . '; states seen: ' . join(', ', map { "$_ $states{$_}" } sort keys %states));
	cmp_ok($outcome{killed} // 0, '>=', 10, 'the loader was killed halfway at least 10 times');
	is_deeply(\@bad, [], 'after each kill the server is active, or idle with a reason');
	ok(load_bpf($node), 'a loader run after the kills succeeds');
	is(status($node)->{state}, 'active', 'and the extension is active');
	my @leftover = grep { /_new$/ } map { File::Basename::basename($_) } glob("$pin_dir/*");
	is_deeply(\@leftover, [], 'no half-renamed pin left');
	ok($h->finish, 'no scan failed while the loader was killed') or diag($$err);
	ok(wait_until(sub { kernel_map_entries() eq '0' }, 2), 'no stale marks afterwards');
}

# ---- knobs follow pg_reload_conf() ----
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET pg_cache_ext.promote_on_access = off;
	ALTER SYSTEM SET pg_cache_ext.scan_min_percent = 42;
	SELECT pg_reload_conf();
});
ok(wait_until(sub { (`$bindir/pg_cache_ext_loader --show -D ${\$node->data_dir}` // '') =~
	/^knobs tracking 1 promote_on_access 0 scan_min_percent 42$/m }, 3),
	'changed GUCs reach the knobs map at reload, without a restart');
unload_bpf($node);
load_bpf($node);
ok(wait_until(sub { (`$bindir/pg_cache_ext_loader --show -D ${\$node->data_dir}` // '') =~
	/^knobs tracking 1 promote_on_access 0 scan_min_percent 42$/m }, 3),
	'maps made anew by the loader get the GUC values, not the loader defaults');
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET pg_cache_ext.mode = off; SELECT pg_reload_conf();
});
ok(wait_until(sub { (`$bindir/pg_cache_ext_loader --show -D ${\$node->data_dir}` // '') =~
	/^knobs tracking 0 /m }, 3), 'mode = off switches tracking off in the kernel');
is(status($node)->{state}, 'idle', 'and status says idle');
$node->safe_psql('postgres', q{
	ALTER SYSTEM RESET ALL; SELECT pg_reload_conf();
});
ok(wait_until(sub { status($node)->{state} eq 'active' }, 3), 'back to active after RESET');

# ---- a full map never fails a query ----
my ($ok, $fill) = (0, '');
IPC::Run::run([ "$src/test/pce_fill_map", $pin_dir, 9000 ], '>', \$fill);
# at least 8192: the worker's sweep of dead PIDs (below) may free some of
# the fake entries while they are added (CI, trixie lane: 8703)
my ($filled, $why) = $fill =~ /^added (\d+) stopped (.*)$/m;
ok(defined $filled && $filled >= 8192 && $why eq 'Argument list too long',
	sprintf('the map takes 8192 entries, then refuses with E2BIG (%s added, then: %s)',
		$filled // 'none', $why // $fill));
my $full_before = stat_value($node, 'map_full');
# the worker sweeps the fake entries within 250 ms: a scan that started after
# the sweep found room; fill again and retry (a few times at most)
my ($scan_rows, $tries) = ('', 0);
while (1)
{
	$scan_rows = $node->safe_psql('postgres', 'SELECT count(*) FROM t');
	last if $scan_rows ne '5000' || stat_value($node, 'map_full') > $full_before || ++$tries >= 5;
	IPC::Run::run([ "$src/test/pce_fill_map", $pin_dir, 9000 ], '>', \$fill);
}
is($scan_rows, '5000', 'a scan with the map full succeeds');
cmp_ok(stat_value($node, 'map_full'), '>', $full_before,
	"and the refused mark is counted in map_full (after $tries refills)");
ok(wait_until(sub { kernel_map_entries() eq '0' }, 3),
	'the worker removes the 8192 entries of processes that do not exist');

# ---- a mark of a live process that no backend stands behind ----
# (an unmark that could not reach the map, e.g. while the pins were unusable)
my $idle = $node->background_psql('postgres');
my $idle_pid = $idle->query_safe('SELECT pg_backend_pid()');
IPC::Run::run([ "$src/test/pce_fill_map", $pin_dir, 'live', $idle_pid ], '>', \$fill);
like($fill, qr/^marked $idle_pid/, 'an orphan mark for a live, idle backend');
ok(wait_until(sub { !exists kernel_marks($node)->{$idle_pid} }, 3),
	'the worker removes a mark that no backend stands behind');
$idle->quit;

# ---- load: 100 scanning sessions beside pgbench -S for a minute ----
my $seconds = $ENV{PCE_LOAD_SECONDS} || 60;
my $marks_before = stat_value($node, 'marks');
my $full_under_load = stat_value($node, 'map_full');
my ($scans, $sout, $serr) = pgbench_bg('-c', 100, '-j', 2, '-T', $seconds, '-f', $scan_sql);
my ($oltp, $oout, $oerr) = pgbench_bg('-S', '-c', 2, '-T', $seconds);
usleep(($seconds / 2) * 1_000_000);
# DROP / CREATE EXTENSION while the scans run
my ($rc) = $node->psql('postgres', 'DROP EXTENSION pg_cache_ext');
is($rc, 0, 'DROP EXTENSION while 100 sessions scan');
($rc) = $node->psql('postgres', 'CREATE EXTENSION pg_cache_ext');
is($rc, 0, 'CREATE EXTENSION again while they scan');
ok($scans->finish, "100 scanning sessions for ${seconds}s: no error") or diag($$serr);
ok($oltp->finish, 'pgbench -S beside them: no error') or diag($$oerr);
my ($scan_tx) = $$sout =~ /number of transactions actually processed: (\d+)/;
cmp_ok($scan_tx // 0, '>', 100, "scans ran (" . ($scan_tx // 0) . " of them)");
is(stat_value($node, 'map_full'), $full_under_load, 'the map never overflowed under load');
is(stat_value($node, 'map_errors'), '0', 'no map errors under load');
ok(wait_until(sub { kernel_map_entries() eq '0' }, 2), 'no entry left in the kernel map');
is($node->safe_psql('postgres', 'SELECT count(*) FROM cache_ext_scans()'), '0', 'no mark left in shared memory');
my $marks = stat_value($node, 'marks') - $marks_before;
cmp_ok($marks, '>=', $scan_tx // 0, "every scan was marked ($marks marks)");

# ---- restart: state rebuilt, counters restart and say since when ----
my $since = status($node)->{stats_since};
$node->restart;
$s = status($node);
is($s->{state}, 'active', 'active after a restart');
isnt($s->{stats_since}, $since, 'stats_since says the counters were reset');
is(stat_value($node, 'marks'), '0', 'module counters start again');

# ---- two clusters: separate pins and maps, no cross-talk ----
my $other = new_node('other');
load_bpf($other) or BAIL_OUT('loader failed for the second cluster');
$other->start;
$other->safe_psql('postgres', 'CREATE EXTENSION pg_cache_ext');
isnt(status($other)->{pin_dir}, $pin_dir, 'the second cluster has its own pin directory');
my $bg = $node->background_psql('postgres');
my $bpid = $bg->query_safe('SELECT pg_backend_pid()');
$bg->query_safe('SET pg_cache_ext.scan = on');
$bg->query_until(qr/started/, "\\echo started\nSELECT pg_sleep(2);\n");
ok(wait_until(sub { exists kernel_marks($node)->{$bpid} }, 2), 'a mark in the first cluster\'s map');
ok(!exists kernel_marks($other)->{$bpid}, 'is not in the second cluster\'s map');
is(status($other)->{kernel_map_entries}, '0', 'the second cluster sees no entry at all');
$bg->quit;
$other->stop;
unload_bpf($other);

# ---- other local users are kept out ----
my $id = pin_dir_name($node);
my ($nok, $nout, $nerr) = root('as-nobody', '--show', '--cluster-id', $id);
ok(!$nok, 'user nobody cannot open the pins');
like($nerr, qr/Permission denied/, 'permission denied, by file mode');

$node->stop;
unload_bpf($node);
done_testing();
