# 021_mark_lifetime.pl
#	A mark lasts exactly as long as the work it stands for, and covers every
#	process doing it: marking statements nested 100 deep leave a pooled
#	backend unmarked afterwards; a cursor keeps its mark through a later
#	savepoint's rollback and a failed cursor does not keep it past its
#	transaction; the parallel workers of CREATE INDEX and VACUUM (PARALLEL 2)
#	are marked like their leader; an autovacuum worker whose index
#	expression runs a query stays marked through it; and the worker's unmark
#	of a process that is gone never removes the mark of a newer process that
#	got the same PID.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use PceTest;

my $node = new_node('lifetime',
	'max_worker_processes' => 10,
	'max_parallel_workers' => 6,
	'max_parallel_maintenance_workers' => 2,
	'autovacuum_naptime' => '1s',
	'default_statistics_target' => 1,
	# read by av_key() below: autovacuum workers take it from here, sessions set 0
	'pce_test.delay' => "'0.02'");
load_bpf($node) or BAIL_OUT('loader failed');
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION pg_cache_ext;
	CREATE TABLE big (g int, pad text) WITH (autovacuum_enabled = off, parallel_workers = 2);
	INSERT INTO big SELECT g, repeat('x', 200) FROM generate_series(1, 200000) g;
	CREATE TABLE one AS SELECT 1 AS x;
	VACUUM ANALYZE big, one;
});

sub marked
{
	my ($pid) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(reason, ',' ORDER BY reason) FROM cache_ext_scans() WHERE pid = $pid");
}

sub in_kernel_map
{
	my ($pid) = @_;
	my $k = kernel_marks($node);
	return $k && exists $k->{$pid};
}

# ---- 100 nested marking statements ----
$node->safe_psql('postgres', q{
	CREATE FUNCTION deep(n int) RETURNS bool LANGUAGE plpgsql AS $$
	DECLARE r bool;
	BEGIN
		IF n = 0 THEN
			SELECT count(*) = 1 INTO r FROM cache_ext_scans() WHERE pid = pg_backend_pid();
			RETURN r;
		END IF;
		-- FROM makes it a query run by the executor, not a simple expression
		SELECT deep(n - 1) INTO r FROM one;
		RETURN r;
	END $$;
});
my $pooled = $node->background_psql('postgres', on_error_stop => 0);
my $pid = $pooled->query_safe('SELECT pg_backend_pid()');
$pooled->query_safe('SET pg_cache_ext.scan = on');
is($pooled->query_safe('SELECT deep(100)'), 't',
	'under scan = on, a function recursing 100 deep is marked at its deepest statement');
$pooled->query_safe('SET pg_cache_ext.scan = auto');
is(marked($pid), '', 'and its backend is unmarked once the statement ends (cache_ext_scans)');
ok(!in_kernel_map($pid), 'and the kernel map has no entry for it');
$pooled->query_safe('SELECT 1');
is(marked($pid), '', 'nor after the next statement of that pooled backend');

$pooled->quit;

# Run $sql expecting it to fail; returns its error text.
sub fails
{
	my ($session, $sql) = @_;
	my ($out, $failed) = $session->query($sql);
	my $err = $session->{stderr};
	$session->{stderr} = '';	# or the next query_safe takes it for its own
	return $failed ? $err : '';
}

# ---- a cursor opened in a released savepoint, then a later savepoint rolled back ----
$pooled = $node->background_psql('postgres', on_error_stop => 0);
$pid = $pooled->query_safe('SELECT pg_backend_pid()');
$pooled->query_safe('SET max_parallel_workers_per_gather = 0');
$pooled->query_safe(q{BEGIN; SAVEPOINT a; DECLARE c CURSOR FOR SELECT g FROM big; RELEASE a;});
is(marked($pid), 'seqscan', 'a cursor over the big table marks its backend');
$pooled->query_safe(q{SAVEPOINT b; SELECT 1 FROM one});
like(fails($pooled, 'SELECT x / 0 FROM one'), qr/division by zero/,
	'a statement fails in the later savepoint');
$pooled->query_safe('ROLLBACK TO b');
is(marked($pid), 'seqscan', 'still marked after rolling back a later savepoint: the cursor is open');
is($pooled->query_safe('FETCH 3 FROM c'), "1\n2\n3", 'the cursor still reads');
$pooled->query_safe('CLOSE c');
is(marked($pid), '', 'unmarked when the cursor is closed');
$pooled->query_safe('COMMIT');
$pooled->quit;

# ---- a cursor that fails inside a savepoint ----
$pooled = $node->background_psql('postgres', on_error_stop => 0);
$pid = $pooled->query_safe('SELECT pg_backend_pid()');
$pooled->query_safe('SET max_parallel_workers_per_gather = 0');
$pooled->query_safe(q{BEGIN; DECLARE f CURSOR FOR SELECT 1 / (g - 150000) FROM big; SAVEPOINT s;});
is(marked($pid), 'seqscan', 'a cursor that will fail is marked');
like(fails($pooled, 'FETCH ALL FROM f'), qr/division by zero/, 'its FETCH fails in the savepoint');
$pooled->query_safe('ROLLBACK TO s; CLOSE f; COMMIT');
is(marked($pid), '', 'unmarked once the failed cursor is closed and its transaction commits');
ok(!in_kernel_map($pid), 'and the kernel map has no entry for it');
$pooled->quit;

# ---- parallel CREATE INDEX: the workers take the leader's mark ----
$node->safe_psql('postgres', q{
	-- slow enough to watch: every 2000th row sleeps 20 ms, in whichever process reads it
	CREATE FUNCTION slow_key(g int) RETURNS int LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
	BEGIN
		IF g % 2000 = 0 THEN PERFORM pg_sleep(0.02); END IF;
		RETURN g;
	END $$;
});

# Run $sql in a background session while watching its parallel workers;
# returns (workers seen, workers seen marked with $reason and in the kernel map).
sub watch_workers
{
	my ($sql, $setup, $reason) = @_;
	my $bg = $node->background_psql('postgres');
	my $leader = $bg->query_safe('SELECT pg_backend_pid()');
	$bg->query_safe($setup);
	$bg->query_until(qr/started/, "\\echo started\n$sql;\n\\echo done\n");
	my (%seen, %marked);
	wait_until(sub {
		for (split /\n/, $node->safe_psql('postgres', qq{
			SELECT a.pid, coalesce(s.reason = '$reason' AND s.in_kernel_map, false)
			  FROM pg_stat_activity a LEFT JOIN cache_ext_scans() s USING (pid)
			 WHERE a.leader_pid = $leader AND a.pid <> $leader}))
		{
			my ($wpid, $ok) = split /\|/;
			$seen{$wpid} = 1;
			$marked{$wpid} = 1 if $ok eq 't';
		}
		$node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $leader AND state = 'idle'") eq '1';
	}, 60);
	$bg->quit;
	return (scalar(keys %seen), scalar(keys %marked));
}

my $ci_before = stat_value($node, 'marks_create_index');
my ($seen, $marked) = watch_workers('CREATE INDEX big_slow ON big ((slow_key(g)))',
	"SET max_parallel_maintenance_workers = 2; SET maintenance_work_mem = '256MB'",
	'create_index');
is($seen, 2, 'CREATE INDEX ran with 2 parallel workers');
is($marked, $seen, 'every one of them was marked create_index, in the kernel map');
is(stat_value($node, 'marks_create_index') - $ci_before, 1 + $seen,
	'marks_create_index counts the leader and each worker');

# ---- VACUUM (PARALLEL 2): index vacuuming in parallel workers ----
$node->safe_psql('postgres', q{
	CREATE TABLE vac (a int, b int, c int) WITH (autovacuum_enabled = off);
	INSERT INTO vac SELECT g, g, g FROM generate_series(1, 300000) g;
	CREATE INDEX ON vac (a); CREATE INDEX ON vac (b); CREATE INDEX ON vac (c);
	DELETE FROM vac WHERE a % 3 = 0;
});
my $vac_before = stat_value($node, 'marks_vacuum');
my ($vout, $verr) = ('', '');
$node->psql('postgres', q{
	SET min_parallel_index_scan_size = 0;
	VACUUM (PARALLEL 2, VERBOSE) vac;
}, stdout => \$vout, stderr => \$verr);
my ($launched) = $verr =~ /launched (\d+) parallel vacuum workers? for index vacuuming/;
is($launched, 2, 'VACUUM (PARALLEL 2) launched 2 workers for its 3 indexes');
is(stat_value($node, 'marks_vacuum') - $vac_before, 1 + ($launched // 0),
	'the leader and each of its workers were marked vacuum');
# an autovacuum worker may be marked now (naptime 1s): only vacuum marks
# count; a parallel worker unmarks itself as it exits, after the leader is told
# it is done, so its mark may stay for a moment
ok(wait_until(sub { $node->safe_psql('postgres',
	"SELECT count(*) FROM cache_ext_scans() WHERE reason = 'vacuum'") eq '0' }, 10),
	'no vacuum mark left once it is done');

# ---- an autovacuum worker whose index expression runs a query ----
$node->safe_psql('postgres', q{
	-- its query marks (scan = on), in every process that evaluates it
	CREATE FUNCTION av_key(int) RETURNS int LANGUAGE sql IMMUTABLE
		SET pg_cache_ext.scan = on AS 'SELECT $1';
	-- then the process works on without a query of its own (a simple
	-- expression runs no ExecutorStart): the worker's mark must cover it
	CREATE FUNCTION av_pause(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
	BEGIN
		PERFORM pg_sleep(current_setting('pce_test.delay')::float8);
		RETURN 0;
	END $$;
	SET pce_test.delay = 0;
	CREATE TABLE av (g int) WITH (autovacuum_enabled = off);
	CREATE INDEX av_expr ON av ((av_key(g) + av_pause(g)));
	INSERT INTO av SELECT g FROM generate_series(1, 2000) g;
	ALTER TABLE av SET (autovacuum_enabled = on, autovacuum_analyze_scale_factor = 0,
	                    autovacuum_analyze_threshold = 100);
});
# ANALYZE samples 300 rows (statistics target 1) and evaluates the
# expression on each: 300 queries, each followed by 20 ms of other work, 6 s.
my ($phase_start, @late);
wait_until(sub {
	my $row = $node->safe_psql('postgres', q{
		SELECT p.pid || '|' || p.phase || '|' || coalesce(s.reason, '-') || '|' || coalesce(s.in_kernel_map::text, '-')
		  FROM pg_stat_progress_analyze p LEFT JOIN cache_ext_scans() s USING (pid)
		 WHERE p.relid = 'av'::regclass});
	return defined $phase_start if $row eq '';
	my ($avpid, $phase, $reason, $ink) = split /\|/, $row;
	return 0 unless $phase eq 'computing statistics';
	$phase_start //= time;
	push @late, "$reason/$ink" if time - $phase_start > 0.7;
	return 0;
}, 90);
ok(defined $phase_start, 'autovacuum analyzed the table, evaluating the index expression');
cmp_ok(scalar(@late), '>=', 3, 'watched it for a while (' . scalar(@late) . ' samples)');
is(join(',', grep { $_ ne 'autovacuum/true' } @late), '',
	'the autovacuum worker stayed marked autovacuum, in the kernel map, through the queries it ran');
$node->safe_psql('postgres', 'ALTER TABLE av SET (autovacuum_enabled = off)');
ok(wait_until(sub { $node->safe_psql('postgres', 'SELECT count(*) FROM cache_ext_scans()') eq '0' }, 10),
	'and unmarked when it is done');

# ---- the worker lets go of a process that is gone, after its PID is reused ----
# The worker marked an autovacuum worker; it is stopped (SIGSTOP) while that
# process exits and a new backend gets the same PID and marks itself; then
# the worker goes on and lets go of the autovacuum worker's mark.
$node->safe_psql('postgres', q{
	CREATE TABLE av2 (g int, pad text) WITH (autovacuum_enabled = off);
	INSERT INTO av2 SELECT g, repeat('x', 200) FROM generate_series(1, 100000) g;
	UPDATE av2 SET pad = repeat('y', 200) WHERE g % 2 = 0;
	ALTER TABLE av2 SET (autovacuum_enabled = on, autovacuum_vacuum_scale_factor = 0,
	                     autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 20,
	                     autovacuum_vacuum_cost_limit = 100);
});
my $avpid = '';
ok(wait_until(sub {
	$avpid = $node->safe_psql('postgres',
		"SELECT pid FROM cache_ext_scans() WHERE reason = 'autovacuum' AND relation = 'av2'::regclass");
	$avpid ne '';
}, 60), 'an autovacuum worker is marked by the worker while it vacuums');
my ($worker) = status($node)->{worker} =~ /^pid (\d+):/;
ok($worker, "the worker's PID, from cache_ext_status()") or BAIL_OUT('no worker');
kill 'STOP', $worker;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($avpid)");
ok(wait_until(sub { !-e "/proc/$avpid" }, 10), 'the autovacuum worker exits');
$node->safe_psql('postgres', 'ALTER TABLE av2 SET (autovacuum_enabled = off)');

# a new backend with that PID: psql takes one PID, its backend the next
my ($reused, $bpid);
for my $try (1 .. 40)
{
	my ($set) = root('last-pid', $avpid - 1 - ($try % 3));
	last unless $set;
	$reused = $node->background_psql('postgres');
	$bpid = $reused->query_safe('SELECT pg_backend_pid()');
	last if $bpid == $avpid;
	$reused->quit;
	undef $reused;
}
SKIP:
{
	skip 'could not get a backend with the PID of the autovacuum worker', 3 unless $reused;
	$reused->query_safe('SET pg_cache_ext.scan = on');
	$reused->query_until(qr/started/, "\\echo started\nSELECT pg_sleep(4);\n");
	# (the slot of the old process stays until the worker sweeps it)
	ok(wait_until(sub { marked($avpid) =~ /\bsession\b/ && in_kernel_map($avpid) }, 3),
		"a new backend got PID $avpid and is marked by its own statement");
	kill 'CONT', $worker;
	usleep(1_000_000);	# four rounds of the worker's housekeeping
	ok(in_kernel_map($avpid), 'the worker letting go of the old process leaves the new mark in the kernel map');
	is(marked($avpid), 'session', 'and in cache_ext_scans');
	$reused->quit;
}
kill 'CONT', $worker;

$node->stop;
unload_bpf($node);
done_testing();
