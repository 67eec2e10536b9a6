# 016_tracked_dropped.pl
#	What the stock-kernel evictor tracks and drops.
#	- The first scan after a bulk load sets hint bits, and PostgreSQL writes
#	  those pages back: they are dirty when the evictor drops them, and
#	  posix_fadvise(DONTNEED) skips them.  They must wait for their
#	  writeback and then go: the table ends within the budget.
#	- A marked sort that spills writes temporary files (pgsql_tmp): their
#	  pages are no scan's reads and must not be tracked nor dropped, only
#	  relation files are.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use PceTest;

my $budget_mb = 16;
my $mb = 1024 * 1024;

my ($node, $s) = stock_node('tracked_dropped',
	'pg_cache_ext.scan_budget' => "'${budget_mb}MB'",
	'pg_cache_ext.scan_max_age' => 0,
	'autovacuum' => 'off',
	'log_temp_files' => 0,
	'max_parallel_workers_per_gather' => 0);

sub cached_mb { return relation_cached_mb($node, @_); }

sub stats_line
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(name || '=' || value, ' ') FROM cache_ext_stats() "
		  . "WHERE name ~ 'tracked|dropped|waiting|records|added_scan|not_found'");
}

# ---- the first scan after a bulk load ----
# ~330 MB, no VACUUM: the scan sets every tuple's hint bits
$node->safe_psql('postgres', q{
	SET pg_cache_ext.scan = off;
	CREATE TABLE loaded AS SELECT g, repeat('l', 250) AS pad FROM generate_series(1, 1150000) g;
	CHECKPOINT;
});
my $size = $node->safe_psql('postgres', "SELECT pg_relation_size('loaded')");
cmp_ok($size, '>', 300 * $mb, sprintf('the bulk-loaded table is over 300 MB (%.0f MB)', $size / $mb));
root('drop-caches');
my $dropped_before = stat_value($node, 'bytes_dropped');
$node->safe_psql('postgres', 'SET pg_cache_ext.scan = on; SELECT count(*) FROM loaded');
note(sprintf('after the scan: %.1f MB cached, %s', cached_mb('loaded'), stats_line()));
my $dirty = $node->safe_psql('postgres',
	"SELECT round(dirty_bytes / 1048576.0, 1) FROM cache_ext_relation_cache('loaded')");
note("dirty right after the scan: $dirty MB");
# The issue measured 336 MB of 345 MB still cached 10 s after such a scan.
# Bound: the budget, one extent, and shared_buffers (16 MB): with data
# checksums (initdb's default from 18 on) a hint bit is WAL-logged, the
# scan's ring then leaves such dirty buffers in shared_buffers, and the
# checkpointer or bgwriter writes them later; pages they bring back are
# not the scan's reads (issue 16).
my $bound_mb = $budget_mb + 1 + 16;
my $t0 = time;
wait_until(sub { cached_mb('loaded') <= $bound_mb }, 60);
my $took = time - $t0;
note(sprintf('the table was within budget %.1f s after the scan', $took));
cmp_ok($took, '<=', 5,
	sprintf('after the first scan of a bulk load, the table holds <= budget + one extent + shared_buffers within 5 s (%.1f MB)', cached_mb('loaded')))
  or diag(stats_line());
note('then: ' . stats_line());
# Pages of a block still dirty in shared_buffers wait for PostgreSQL's
# write (evictor.c, page_left), which the bgwriter may leave to the next
# checkpoint (lane 18: 13 MB still waiting 10 s on, with checksums): take
# the checkpoint, then nothing may be left waiting.
$node->safe_psql('postgres', 'CHECKPOINT');
ok(wait_until(sub { stat_value($node, 'bytes_waiting') == 0 }, 10), 'no page is left waiting after a checkpoint')
  or diag(stats_line());
# A page the scan dirtied and the evictor dropped may come back when
# PostgreSQL writes the buffer out, and leave again: bytes_dropped counts
# each departure, as cachestat saw it, so at least what left the cache.
my $dropped = stat_value($node, 'bytes_dropped') - $dropped_before;
cmp_ok($dropped, '>=', $size - ($budget_mb + 1) * $mb - 8 * $mb,
	sprintf('bytes_dropped counts what left the cache (%.1f MB of a %.1f MB table)', $dropped / $mb, $size / $mb));

# ---- a marked sort that spills to temporary files ----
$node->safe_psql('postgres', q{
	SET pg_cache_ext.scan = off;
	CREATE TABLE sorted AS SELECT g, md5(g::text) AS h, repeat('s', 100) AS pad FROM generate_series(1, 300000) g;
	VACUUM FREEZE sorted; CHECKPOINT;
	SELECT count(*) FROM sorted;
});
$node->safe_psql('postgres', "ALTER SYSTEM SET pg_cache_ext.scan_budget = '1MB'; SELECT pg_reload_conf()");
# The table is cached now: the marked query below inserts only its
# temporary files' pages.  Unless another run on this machine drops the
# whole page cache meanwhile (then the marked sort reads the table from
# disk, and its pages are rightly dropped): that attempt is made again.
my (%before, $log_offset, $sum);
for my $attempt (1 .. 3)
{
	$node->safe_psql('postgres', 'SET pg_cache_ext.scan = off; SELECT count(*) FROM sorted');
	my $drops = caches_dropped();
	usleep(300_000);
	%before = map { $_ => stat_value($node, $_) } qw(bytes_dropped extents_dropped files_not_found records_read bytes_tracked bytes_waiting);
	$log_offset = -s $node->logfile;
	$sum = $node->safe_psql('postgres', q{
		SET work_mem = '64kB'; SET pg_cache_ext.scan = on;
		SELECT sum(n) FROM (SELECT g::bigint * row_number() OVER (ORDER BY h) AS n FROM sorted) s;
	});
	usleep(500_000);
	last if caches_dropped() == $drops;
	note("attempt $attempt: another run dropped the page cache during the marked sort, again");
}
my $expected = $node->safe_psql('postgres', q{
	SELECT sum(n) FROM (SELECT g::bigint * row_number() OVER (ORDER BY h) AS n FROM sorted) s;
});
is($sum, $expected, 'the marked sort that spilled returns the right result');
like(substr(slurp_file($node->logfile), $log_offset), qr/temporary file: path "[^"]*pgsql_tmp/,
	'the marked sort spilled to temporary files');
ok(wait_until(sub { stat_value($node, 'records_read') > $before{records_read} }, 5),
	'the tracker recorded the temporary files\' pages');
note('after the sort: ' . stats_line());
is(stat_value($node, 'bytes_dropped') - $before{bytes_dropped}, 0, 'no temporary file page was dropped');
is(stat_value($node, 'extents_dropped') - $before{extents_dropped}, 0, 'no temporary file extent was dropped');
# (tracked and waiting together, with 256 kB to spare: an extent of the
# loaded table left for PostgreSQL's write waits, and is tracked again once
# written; tracked it counts all its pages, waiting only those cached)
cmp_ok(stat_value($node, 'bytes_tracked') + stat_value($node, 'bytes_waiting'), '<=',
	$before{bytes_tracked} + $before{bytes_waiting} + 256 * 1024,
	'no temporary file page is tracked (the scan\'s pages within the budget may be)');
cmp_ok(stat_value($node, 'files_not_found') - $before{files_not_found}, '>=', 1,
	'the temporary files are counted as not tracked');

is(stat_value($node, 'records_lost'), '0', 'no tracker record lost');
is(stat_value($node, 'drop_errors'), '0', 'no drop errors');
my $log = slurp_file($node->logfile);
unlike($log, qr/ERROR|PANIC|server process .* terminated/, 'no error in the server log');
$node->stop;
done_testing();
