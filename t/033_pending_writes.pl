# 033_pending_writes.pl
#	Scan pages whose blocks are dirty in shared_buffers stay cached until
#	PostgreSQL wrote them (src/shared_buffers.c): a scan that sets hint
#	bits leaves dirty buffers that another process writes later, and a
#	write into a dropped page can stall on a read of the rest of the block.
#	- A marked count(*) of a small table that fits in shared_buffers sets
#	  its hint bits: every block is dirty there, and its pages are tracked.
#	- A marked scan of a larger table then pushes the scans' pages over the
#	  budget: the small table's pages, the oldest, are what a drop takes
#	  first.  They must stay cached while their buffers are dirty, waiting
#	  (bytes_waiting), not dropped and tracked again in turn.
#	- After a CHECKPOINT wrote those buffers, the next drops take them.
#	- Pages are left only while the pages waiting are within an eighth of
#	  the budget: with a budget of 16 MB and a 6 MB table (within half of
#	  it), the evictor writes the blocks of the pages it cannot leave (as
#	  the bgwriter would), and the scans' pages stay within the budget once
#	  those are written back; no checkpoint, no bgwriter.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use PceTest;

my $budget_mb = 32;

my ($node, $s) = stock_node('pending_writes',
	'pg_cache_ext.scan_budget' => "'${budget_mb}MB'",
	'pg_cache_ext.scan_max_age' => 0,
	'shared_buffers' => '32MB',
	'bgwriter_lru_maxpages' => 0,	# nobody writes the dirty buffers but the checkpoint
	'checkpoint_timeout' => '1h',
	'autovacuum' => 'off',
	'max_parallel_workers_per_gather' => 0);
pause_damon();    # it would page out the pages left for PostgreSQL's writes (PceTest.pm)

sub cached_mb { return relation_cached_mb($node, @_); }

# small: 2.6 MB, no hint bits set yet (fits in shared_buffers without a ring:
# the scan's buffers stay there, dirty), within an eighth of the budget (what
# a drop leaves for PostgreSQL's writes); large: 48 MB, frozen and clean
$node->safe_psql('postgres', q{
	SET pg_cache_ext.scan = off;
	CREATE EXTENSION pg_buffercache;
	CREATE TABLE small AS SELECT g, repeat('s', 200) AS pad FROM generate_series(1, 11000) g;
	CREATE TABLE small2 AS SELECT g, repeat('s', 200) AS pad FROM generate_series(1, 26000) g;
	CREATE TABLE large AS SELECT g, repeat('l', 200) AS pad FROM generate_series(1, 180000) g;
	VACUUM (FREEZE) large;
	CHECKPOINT;
});
# nothing of either table in shared_buffers or the page cache
$node->restart;
root('drop-caches');

my $small_mb = $node->safe_psql('postgres',
	"SELECT round(pg_relation_size('small') / 1048576.0, 1)");
cmp_ok($small_mb, '>=', 2, "the small table is $small_mb MB");
cmp_ok($small_mb, '<', $budget_mb / 8, 'and within an eighth of the budget');

$node->safe_psql('postgres', 'SET pg_cache_ext.scan = on; SELECT count(*) FROM small');
my $dirty_buffers = $node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_buffercache
	 WHERE relfilenode = pg_relation_filenode('small') AND isdirty});
my $blocks = $node->safe_psql('postgres', "SELECT pg_relation_size('small') / 8192");
cmp_ok($dirty_buffers, '>=', $blocks * 0.9,
	"the marked count(*) left the small table's blocks dirty in shared_buffers ($dirty_buffers of $blocks)");

# over the budget: the small table's pages are the oldest tracked ones
$node->safe_psql('postgres', 'SET pg_cache_ext.scan = on; SELECT count(*) FROM large');
usleep(1_500_000);	# the worker's rounds
my $large_cached = cached_mb('large');
cmp_ok($large_cached, '<=', $budget_mb + 2,
	"the evictor kept the large table within the budget ($large_cached MB)");
my $small_cached = cached_mb('small');
cmp_ok($small_cached, '>=', $small_mb * 0.9,
	"pages whose blocks are dirty in shared_buffers stay cached ($small_cached of $small_mb MB)");
my $waiting_mb = stat_value($node, 'bytes_waiting') / 1048576;
cmp_ok($waiting_mb, '>=', $small_mb * 0.9,
	sprintf('they wait for PostgreSQL\'s write (%.1f MB waiting)', $waiting_mb));
note('after the large scan: ' . $node->safe_psql('postgres',
	"SELECT string_agg(name || '=' || value, ' ') FROM cache_ext_stats() "
	  . "WHERE name ~ 'tracked|dropped|waiting'"));

# written by the checkpoint: the next drops take them
$node->safe_psql('postgres', 'CHECKPOINT');
my $deadline = time + 15;
do
{
	$node->safe_psql('postgres', 'SET pg_cache_ext.scan = on; SELECT count(*) FROM large');
	usleep(500_000);
	$small_cached = cached_mb('small');
} while ($small_cached > 0.5 && time < $deadline);
cmp_ok($small_cached, '<=', 0.5,
	"once written back, the small table's pages are dropped ($small_cached MB left)");

# Beyond the cap: a second small table (6 MB, still without a ring), dirty in
# shared_buffers; then a budget of 16 MB leaves 2 MB of it for PostgreSQL's
# writes (and the rest of the extent that reached it, at most 1 MB), where
# half of the budget would leave it all.  What is written back is tracked
# again, within the budget: kept while the scans' pages are within it.
$node->safe_psql('postgres', 'SET pg_cache_ext.scan = on; SELECT count(*) FROM small2');
my $dirty_before = dirty_buffers('small2');
my $blocks2 = $node->safe_psql('postgres', "SELECT pg_relation_size('small2') / 8192");
cmp_ok($dirty_before, '>=', $blocks2 * 0.9,
	"a marked count(*) left the second small table's blocks dirty ($dirty_before of $blocks2)");
my $small_budget_mb = 16;
$node->safe_psql('postgres', "ALTER SYSTEM SET pg_cache_ext.scan_budget = '${small_budget_mb}MB'");
$node->reload;
$node->safe_psql('postgres', 'SET pg_cache_ext.scan = on; SELECT count(*) FROM large');
$deadline = time + 15;
my ($dirty_after, $scans_cached);
do
{
	usleep(500_000);
	$dirty_after = dirty_buffers('small2');
	$scans_cached = cached_mb('small2') + cached_mb('large');
} while (($scans_cached > $small_budget_mb + 2 || $dirty_after > $dirty_before * 0.7) && time < $deadline);
cmp_ok($dirty_after, '<=', $dirty_before * 0.7,
	"beyond an eighth of the budget the evictor wrote the blocks it could not leave ($dirty_after of $dirty_before still dirty)");
cmp_ok($scans_cached, '<=', $small_budget_mb + 2,
	"and the scans' pages are within budget + one batch once written back ($scans_cached MB)");

$node->stop;
done_testing();

sub dirty_buffers
{
	my ($rel) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_buffercache WHERE relfilenode = pg_relation_filenode('$rel') AND isdirty");
}
