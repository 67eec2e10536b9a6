# 012_aio_attribution.pl
#	Reads are attributed to the marked process however PostgreSQL performs
#	them: on 18 and later under every io_method (worker: I/O worker
#	processes read for the backend; io_uring: the backend or its io-wq
#	threads; sync: the backend), before 18 by the backend.  For each:
#	  - a marked scan of a table four times the budget, while an unmarked
#	    backend reads another table: the scanned table ends within budget,
#	    the hot table read before is untouched, and the unmarked reader's
#	    table keeps its pages (an I/O worker reading for an unmarked backend
#	    inserts ordinary pages);
#	  - VACUUM, ANALYZE, CREATE INDEX and COPY TO of the same table end
#	    within budget too, the hot table untouched;
#	  - an unmarked backend that reads, through the same path, the table a
#	    scan just brought in promotes those pages: they stay when the budget
#	    shrinks (classic LRU only: with MGLRU the kernel activates nothing;
#	    with I/O workers only part of them: see the README);
#	  - cache_ext_status() says how reads are attributed, and no longer
#	    warns about io_method; cache_ext_stats() counts the I/O workers'
#	    scan pages.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use PceTest;

my $budget_mb = 16;
my $extent_mb = 1;
my $mb = 1024 * 1024;

my ($node, $s) = stock_node('aio',
	'pg_cache_ext.scan_budget' => "'${budget_mb}MB'",
	'pg_cache_ext.scan_max_age' => 0,
	'autovacuum' => 'off',
	'max_parallel_workers_per_gather' => 0,
	# parallel workers of CREATE INDEX run no hook of the module, so they
	# are not marked (with or without AIO): the index build reads alone here
	'max_parallel_maintenance_workers' => 0,
	'maintenance_work_mem' => "'64MB'");

my $mglru = 0;
if (open my $fh, '<', '/sys/kernel/mm/lru_gen/enabled')
{
	my $v = <$fh>;
	$mglru = defined $v && hex($v) != 0;
}

# hot ~24 MB, other ~24 MB (read by the concurrent unmarked backend),
# big ~130 MB (eight times the budget), shared_t ~24 MB (for promotion)
$node->safe_psql('postgres', q{
	SET pg_cache_ext.scan = off;
	CREATE TABLE hot AS SELECT g, repeat('h', 200) AS pad FROM generate_series(1, 100000) g;
	CREATE TABLE other AS SELECT g, repeat('o', 200) AS pad FROM generate_series(1, 100000) g;
	CREATE TABLE big AS SELECT g, repeat('b', 200) AS pad FROM generate_series(1, 550000) g;
	CREATE TABLE shared_t AS SELECT g, repeat('s', 200) AS pad FROM generate_series(1, 100000) g;
	VACUUM FREEZE hot; VACUUM FREEZE other; VACUUM FREEZE big; VACUUM FREEZE shared_t; CHECKPOINT;
});
my $big_bytes = $node->safe_psql('postgres', "SELECT pg_relation_size('big')");
cmp_ok($big_bytes, '>', 4 * $budget_mb * $mb, 'the scanned table is four times the budget');

pause_damon();    # it would page out the hot table (PceTest.pm)

sub cached_fraction { return relation_cached_fraction($node, @_); }

sub cached_mb { return relation_cached_mb($node, @_); }

sub stats_line
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(name || '=' || value, ' ') FROM cache_ext_stats() "
		  . "WHERE name ~ '^(folios_added|folios_promoted|records_read|bytes_tracked|bytes_promoted|bytes_dropped)'");
}

# the worker has read every record and holds no more than the budget
sub settle
{
	my ($budget, $since) = @_;
	worker_settled($node, $budget, 10, $since) or note('the worker did not catch up within 10 s');
}

# Read a table once, unmarked, through the file (not shared_buffers).
sub read_unmarked
{
	my ($rel) = @_;
	$node->safe_psql('postgres', qq{
		SET pg_cache_ext.scan = off;
		SELECT length(pg_read_binary_file(pg_relation_filepath('$rel')));
	});
	return cached_fraction($rel);
}

# The helpers' counters that must grow under $method: I/O workers read for
# the backend under worker; the backend itself otherwise (io_uring may or
# may not punt a read to a thread, so its counter is not required to move).
sub helper_counter
{
	my ($method) = @_;
	return defined $method && $method eq 'worker' ? 'folios_added_scan_by_io_worker' : 'folios_added_scan';
}

# Empty caches, hot read once; $work runs (the classifier marks it by its
# own rules: a large seq scan, a utility command); the scanned table must end
# within budget and hot untouched.  $concurrent, if given, runs unmarked in
# another session while $work runs, and its table must keep its pages.
# One try of a round: what it measured, and whether another run dropped the
# machine's caches meanwhile (the round is then redone).
sub try_round
{
	my ($m, $method, $label, $work, $concurrent) = @_;
	my %r;
	$node->restart;    # empty shared_buffers: every block comes from the kernel
	root('drop-caches');
	my $drops = caches_dropped();
	$r{hot_before} = read_unmarked('hot');
	# after the restart: records_read starts again from 0, the BPF counts do not
	my $since = tracker_counts($node);
	my $counter = helper_counter($method);
	my $helpers_before = stat_value($node, $counter);
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c', $work ],
		'>', \$out, '2>', \$err);
	if ($concurrent)
	{
		wait_until(sub {
			$node->safe_psql('postgres', 'SELECT count(*) FROM cache_ext_scans()') > 0
		}, 10);
		$node->safe_psql('postgres', "SET pg_cache_ext.scan = off; $concurrent");
	}
	$h->finish;
	$r{err} = $err;
	settle($budget_mb, $since);
	note("$m$label: " . stats_line());
	$r{helpers} = stat_value($node, $counter) - $helpers_before;
	$r{counter} = $counter;
	($r{hot}, $r{big}, $r{other}) = (cached_fraction('hot'), cached_mb('big'), cached_fraction('other'));
	$r{disturbed} = caches_dropped() != $drops;
	return \%r;
}

sub round_with
{
	my ($m, $method, $label, $work, $concurrent) = @_;
	my $r;
	for my $try (1 .. 3)
	{
		$r = try_round(@_);
		last if !$r->{disturbed};
		note("$m$label: another run dropped the page cache during try $try; again");
	}
	cmp_ok($r->{hot_before}, '>=', 0.99, "$m$label: hot table fully cached before");
	is($r->{err}, '', "$m$label: ran without error");
	cmp_ok($r->{helpers}, '>', 0, "$m$label: the scan's pages were attributed to it ($r->{counter} +$r->{helpers})");
	cmp_ok($r->{hot}, '>=', 0.95, "$m$label: hot table untouched ($r->{hot} cached)");
	cmp_ok($r->{big}, '<=', $budget_mb + $extent_mb, "$m$label: the scanned table holds <= budget + one extent ($r->{big} MB)");
	cmp_ok($r->{other}, '>=', 0.95, "${m}the unmarked reader's table keeps its pages ($r->{other} cached)")
	  if $concurrent;
}

# A marked scan brings shared_t in; an unmarked count(*) then reads it
# through the same path (I/O workers under worker): its pages are promoted
# and stay when the budget shrinks to 1 MB.
# One try: (tracked, bytes promoted, bytes cached at the end, disturbed?)
sub try_same_table
{
	my ($size) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET pg_cache_ext.scan_budget = '256MB'; SELECT pg_reload_conf()");
	usleep(300_000);
	$node->restart;
	root('drop-caches');
	my $drops = caches_dropped();
	my $promoted_before = stat_value($node, 'bytes_promoted');
	$node->safe_psql('postgres', 'SET pg_cache_ext.scan = on; SELECT count(*) FROM shared_t');
	my $tracked = wait_until(sub { stat_value($node, 'bytes_tracked') >= $size * 0.8 }, 5);
	# the scan went through a ring of shared buffers, so the unmarked reader
	# reads from the kernel again (no restart: the evictor's record of the
	# scan's pages would go with the worker)
	$node->safe_psql('postgres', 'SET pg_cache_ext.scan = off; SELECT count(*) FROM shared_t');
	my $promoted = 0;
	wait_until(sub {
		$promoted = stat_value($node, 'bytes_promoted') - $promoted_before;
		$promoted >= $size * 0.9
	}, 5);
	$node->safe_psql('postgres', "ALTER SYSTEM SET pg_cache_ext.scan_budget = '1MB'; SELECT pg_reload_conf()");
	wait_until(sub { stat_value($node, 'bytes_tracked') <= $mb }, 5);
	my $cached = $node->safe_psql('postgres', "SELECT cached_bytes FROM cache_ext_relation_cache('shared_t')");
	$node->safe_psql('postgres', "ALTER SYSTEM SET pg_cache_ext.scan_budget = '${budget_mb}MB'; SELECT pg_reload_conf()");
	usleep(300_000);
	return ($tracked, $promoted, $cached, caches_dropped() != $drops);
}

sub same_table_promotion
{
	my ($m, $method) = @_;
	my $size = $node->safe_psql('postgres', "SELECT pg_relation_size('shared_t')");
	my ($tracked, $promoted, $cached, $disturbed);
	for my $try (1 .. 3)
	{
		($tracked, $promoted, $cached, $disturbed) = try_same_table($size);
		last if !$disturbed;
		note("${m}same table: another run dropped the page cache during try $try; again");
	}
	ok($tracked, "${m}same table: the marked scan was tracked");
	if (defined $method && $method eq 'worker')
	{
		# large folios two I/O workers read for the scan were activated by
		# the scan itself: the reader's use of them sends no signal (README)
		cmp_ok($promoted, '>', 0, sprintf('%ssame table: the unmarked reader promoted part of it (%.1f MB of %.1f MB)', $m, $promoted / $mb, $size / $mb));
		cmp_ok($cached, '>=', $promoted * 0.95, sprintf("%ssame table: what the unmarked reader promoted stays (%.1f MB cached)", $m, $cached / $mb));
	}
	else
	{
		cmp_ok($promoted, '>=', $size * 0.9, sprintf('%ssame table: the unmarked reader promoted it (%.1f MB)', $m, $promoted / $mb));
		cmp_ok($cached, '>=', $size * 0.95, sprintf("%ssame table: the unmarked reader's pages stay (%.1f MB cached)", $m, $cached / $mb));
	}
}

for my $method (io_methods($node))
{
	my $m = defined $method ? "io_method = $method: " : '';
	use_io_method($node, $method);

	my $st = status($node);
	ok(!exists $st->{warning}, "${m}no warning in cache_ext_status()");
	if (defined $method && $method eq 'worker')
	{
		ok(wait_until(sub { status($node)->{attribution} =~ /\((\d+) I\/O workers registered\)/ && $1 > 0 }, 5),
			'io_method = worker: the attribution row says I/O workers are registered: ' . status($node)->{attribution});
	}
	else
	{
		like($st->{attribution}, qr/by the reading process/, "${m}the attribution row: $st->{attribution}");
	}

	round_with($m, $method, 'scan beside an unmarked reader of another table', 'SELECT count(*) FROM big',
		'SELECT count(*) FROM other');

	round_with($m, $method, 'VACUUM', 'VACUUM (DISABLE_PAGE_SKIPPING) big');
	round_with($m, $method, 'ANALYZE', 'ANALYZE big');
	# a redone round finds the index of the try before
	round_with($m, $method, 'CREATE INDEX', 'SET client_min_messages = warning; DROP INDEX IF EXISTS big_g; CREATE INDEX big_g ON big (g)');
	$node->safe_psql('postgres', 'DROP INDEX big_g');
	round_with($m, $method, 'COPY TO', "COPY big TO '/dev/null'");

  SKIP:
	{
		skip 'MGLRU is enabled: the stock mechanism cannot see reuse there', 3 if $mglru;
		same_table_promotion($m, $method);
	}
}

is(stat_value($node, 'records_lost'), '0', 'no tracker record lost');
my $log = slurp_file($node->logfile);
unlike($log, qr/ERROR|PANIC|server process .* terminated/, 'no error in the server log');
$node->stop;
done_testing();
