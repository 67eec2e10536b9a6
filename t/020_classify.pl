# 020_classify.pl
#	Scan classification seen from outside: a second session and the kernel
#	map see a scanning backend, its parallel workers, pg_dump and an
#	autovacuum worker marked while they work, and every way a statement can
#	end -- error, timeout, cancel, terminate, SIGKILL -- leaves no entry.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use PceTest;

my $node = new_node('classify',
	'max_worker_processes' => 8,
	'max_parallel_workers' => 4,
	'autovacuum_naptime' => '1s',
	'log_autovacuum_min_duration' => 0,
	'restart_after_crash' => 'on',
	'max_wal_senders' => 2,
	'wal_level' => 'replica');
load_bpf($node) or BAIL_OUT('loader failed');
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION pg_cache_ext;
	CREATE TABLE big (g int, pad text) WITH (autovacuum_enabled = off);
	INSERT INTO big SELECT g, repeat('x', 200) FROM generate_series(1, 200000) g;
	CREATE TABLE small AS SELECT g FROM generate_series(1, 100) g;
	VACUUM ANALYZE big, small;
});
my $threshold = $node->safe_psql('postgres', 'SHOW pg_cache_ext.scan_threshold');
cmp_ok($node->safe_psql('postgres', "SELECT pg_relation_size('big') > pg_size_bytes('$threshold')"),
	'eq', 't', "big is above the default threshold ($threshold)");

sub marks_now
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(pid || ':' || reason || ':' || coalesce(relation::text, '-'), ',' ORDER BY pid) FROM cache_ext_scans()");
}

# Run $sql in a background session; return (session, pid).
sub start_in_background
{
	my ($sql, $setup) = @_;
	my $bg = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $bg->query_safe('SELECT pg_backend_pid()');
	$bg->query_safe($setup) if $setup;
	$bg->query_until(qr/started/, "\\echo started\n$sql;\n");
	return ($bg, $pid);
}

sub no_entry_within
{
	my ($pid, $secs) = @_;
	return wait_until(sub {
		my $k = kernel_marks($node);
		$k && !exists $k->{$pid}
		  && $node->safe_psql('postgres', "SELECT count(*) FROM cache_ext_scans() WHERE pid = $pid") eq '0';
	}, $secs);
}

# ---- a seq scan above the threshold, seen from a second session ----
my ($bg, $pid) = start_in_background('SELECT count(*) FROM big WHERE CASE WHEN g % 2000 = 0 THEN pg_sleep(0.02) IS NOT NULL ELSE true END',
	'SET max_parallel_workers_per_gather = 0');
ok(wait_until(sub { marks_now() =~ /\b$pid:seqscan:big\b/ }, 5),
	'a seq scan of a big table is marked, with its relation, seen from another session');
ok(exists kernel_marks($node)->{$pid}, 'and the kernel map has it');
$bg->quit;
ok(no_entry_within($pid, 2), 'unmarked when it ends');

# ---- small table and index lookup: never marked ----
($bg, $pid) = start_in_background('SELECT count(*), pg_sleep(1.5) FROM small',
	'SET max_parallel_workers_per_gather = 0');
usleep(500_000);
unlike(marks_now() // '', qr/\b$pid:/, 'a seq scan of a small table is not marked');
$bg->quit;
($bg, $pid) = start_in_background('SELECT pg_sleep(1.5) FROM big WHERE ctid = \'(0,1)\'',
	'SET max_parallel_workers_per_gather = 0');
usleep(500_000);
unlike(marks_now() // '', qr/\b$pid:/, 'a TID lookup on the big table is not marked');
$bg->quit;

# ---- parallel seq scan: leader and every worker ----
($bg, $pid) = start_in_background(
	'SELECT count(*) FROM big WHERE CASE WHEN g % 2000 = 0 THEN pg_sleep(0.04) IS NOT NULL ELSE true END',
	"SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
	 SET min_parallel_table_scan_size = 0; SET parallel_leader_participation = on");
my $seen_workers = 0;
wait_until(sub {
	my $n = $node->safe_psql('postgres', qq{
		SELECT count(*) FROM cache_ext_scans() s JOIN pg_stat_activity a USING (pid)
		 WHERE a.backend_type = 'parallel worker' AND a.leader_pid = $pid AND s.reason = 'seqscan'});
	$seen_workers = $n if $n > $seen_workers;
	$seen_workers >= 2;
}, 10);
is($seen_workers, 2, 'both parallel workers are marked');
like(marks_now() // '', qr/\b$pid:seqscan/, 'the leader is marked');
my @worker_pids = split /\n/, $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE leader_pid = $pid AND pid <> $pid");
$bg->quit;
ok(no_entry_within($pid, 2), 'leader unmarked when the query ends');
ok(wait_until(sub { my $k = kernel_marks($node); !grep { exists $k->{$_} } @worker_pids }, 2),
	'worker entries gone from the kernel map');

# ---- pg_dump ----
my $copy_before = stat_value($node, 'marks_copy_to');
my $bindir = `pg_config --bindir`;
chomp $bindir;
command_ok([ "$bindir/pg_dump", '-d', $node->connstr('postgres'), '-t', 'big', '-f', '/dev/null' ],
	'pg_dump runs');
cmp_ok(stat_value($node, 'marks_copy_to'), '>', $copy_before, 'pg_dump\'s COPY TO was marked');

# ---- session override ----
($bg, $pid) = start_in_background('SELECT pg_sleep(1.5)', 'SET pg_cache_ext.scan = on');
ok(wait_until(sub { marks_now() =~ /\b$pid:session\b/ }, 3), 'SET pg_cache_ext.scan = on marks any statement');
$bg->quit;
($bg, $pid) = start_in_background('SELECT count(*), pg_sleep(1.5) FROM big',
	'SET pg_cache_ext.scan = off; SET max_parallel_workers_per_gather = 0');
usleep(700_000);
unlike(marks_now() // '', qr/\b$pid:/, 'SET pg_cache_ext.scan = off never marks');
$bg->quit;
$node->safe_psql('postgres', 'CREATE ROLE analyst LOGIN; ALTER ROLE analyst SET pg_cache_ext.scan = on');
my $analyst = $node->background_psql('postgres', extra_params => [ '-U', 'analyst' ]);
$pid = $analyst->query_safe('SELECT pg_backend_pid()');
$analyst->query_until(qr/started/, "\\echo started\nSELECT pg_sleep(1.5);\n");
ok(wait_until(sub { marks_now() =~ /\b$pid:session\b/ }, 3), 'ALTER ROLE ... SET pg_cache_ext.scan = on marks that role');
$analyst->quit;

# ---- autovacuum ----
my $av_before = stat_value($node, 'marks_autovacuum');
$node->safe_psql('postgres', q{
	UPDATE big SET pad = repeat('y', 200) WHERE g % 2 = 0;
	ALTER TABLE big SET (autovacuum_enabled = on, autovacuum_vacuum_scale_factor = 0,
	                     autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 10,
	                     autovacuum_vacuum_cost_limit = 200);
});
my $av_seen = 0;
wait_until(sub {
	$av_seen ||= $node->safe_psql('postgres',
		"SELECT count(*) FROM cache_ext_scans() WHERE reason = 'autovacuum' AND relation = 'big'::regclass") > 0;
	$av_seen && stat_value($node, 'marks_autovacuum') > $av_before;
}, 60);
ok($av_seen, 'an autovacuum worker is marked while it vacuums the big table');
$node->safe_psql('postgres', 'ALTER TABLE big SET (autovacuum_enabled = off)');
ok(wait_until(sub { $node->safe_psql('postgres',
	"SELECT count(*) FROM cache_ext_scans() WHERE reason = 'autovacuum'") eq '0' }, 30),
	'and unmarked when it is done');

# ---- a WAL sender serving a base backup ----
my $bb_before = stat_value($node, 'marks_basebackup');
my $bb_seen = 0;
my $bb = IPC::Run::start([ "$bindir/pg_basebackup", '-d', $node->connstr('postgres'), '-D',
	"${PostgreSQL::Test::Utils::tmp_check}/backup", '--max-rate=8M', '--no-sync', '-c', 'fast' ]);
wait_until(sub {
	$bb_seen ||= $node->safe_psql('postgres',
		"SELECT count(*) FROM cache_ext_scans() s JOIN pg_stat_activity a USING (pid)
		  WHERE s.reason = 'basebackup' AND a.backend_type = 'walsender'") > 0;
}, 20);
ok($bb->finish, 'pg_basebackup completes');
ok($bb_seen, 'the WAL sender is marked while it sends the base backup');
cmp_ok(stat_value($node, 'marks_basebackup'), '>', $bb_before, 'counted as a basebackup mark');
ok(wait_until(sub { $node->safe_psql('postgres',
	"SELECT count(*) FROM cache_ext_scans() WHERE reason = 'basebackup'") eq '0' }, 3),
	'and unmarked when the backup is done');

# ---- every way a scan can end leaves no entry (checked within 1 s) ----
# about 4 s: long enough to interrupt (CASE keeps the planner from
# evaluating the cheap-looking pg_sleep() on every row)
my $scan = 'SELECT count(*) FROM big WHERE CASE WHEN g % 1000 = 0 THEN pg_sleep(0.02) IS NOT NULL ELSE true END';
my $serial = 'SET max_parallel_workers_per_gather = 0';

($bg, $pid) = start_in_background('SELECT 1 / (g - 150000) FROM big', $serial);
$bg->quit;
ok(no_entry_within($pid, 1), 'division by zero mid-scan: no entry');

($bg, $pid) = start_in_background($scan, "$serial; SET statement_timeout = '700ms'");
ok(wait_until(sub { exists kernel_marks($node)->{$pid} }, 2), 'timeout case: marked first');
usleep(900_000);
ok(no_entry_within($pid, 1), 'statement_timeout: no entry');
$bg->quit;

($bg, $pid) = start_in_background($scan, $serial);
ok(wait_until(sub { exists kernel_marks($node)->{$pid} }, 2), 'cancel case: marked first');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
ok(no_entry_within($pid, 1), 'pg_cancel_backend: no entry');
$bg->quit;

($bg, $pid) = start_in_background($scan, $serial);
ok(wait_until(sub { exists kernel_marks($node)->{$pid} }, 2), 'terminate case: marked first');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok(no_entry_within($pid, 1), 'pg_terminate_backend (FATAL): no entry');
eval { $bg->quit };    # its connection is gone

($bg, $pid) = start_in_background($scan, $serial);
ok(wait_until(sub { exists kernel_marks($node)->{$pid} }, 2), 'SIGKILL case: marked first');
my $t0 = time;
kill 'KILL', $pid;
ok(wait_until(sub { my $k = kernel_marks($node); $k && !exists $k->{$pid} }, 1),
	sprintf('SIGKILL: kernel map entry removed within 1 s (%.2f s)', time - $t0));
eval { $bg->quit };
$node->poll_query_until('postgres', 'SELECT 1', '1');
cmp_ok(stat_value($node, 'stale_marks_removed'), '>=', 1, 'the stale mark removal is counted');
is($node->safe_psql('postgres', 'SELECT count(*) FROM cache_ext_scans()'), '0', 'no marks left at all');

$node->stop;
unload_bpf($node);
done_testing();
