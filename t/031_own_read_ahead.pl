# 031_own_read_ahead.pl
#	A scanner's own read-ahead is not dropped before it reads it (the
#	evictor's read_next, stock mechanism).  With a budget smaller than the
#	read-ahead the disk gives a sequential reader, the pages just ahead of
#	a count(*) are over the budget as soon as they come in; dropped then,
#	the scan reads them from disk a second time (and the kernel restarts
#	its read-ahead small).  What a reader reads next is kept first, beyond
#	the budget if it must be: the scan reads each page from disk once, and
#	the table is back within the budget once it is done.  Also behind
#	another reader that passed the whole table (as a wrapped synchronized
#	scan has), where what a reader reads next is what is within two
#	read-ahead windows ahead of it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PceTest;

my $mb = 1024 * 1024;
my $budget_mb = 1;    # the smallest pg_cache_ext.scan_budget

# Two windows of read-ahead ahead of the reader must be well over the
# budget (the drops' target is half of it to all of it).
my $read_ahead_mb = read_ahead_mb($PostgreSQL::Test::Utils::tmp_check);
plan skip_all => sprintf('the disk reads %.0f kB ahead: two windows (%.1f MB) are not well over '
	  . 'the smallest budget (%d MB), so no read-ahead is dropped without the rule here',
	$read_ahead_mb * 1024, 2 * $read_ahead_mb, $budget_mb)
  if 2 * $read_ahead_mb < 4 * $budget_mb;

my ($node) = stock_node('own_read_ahead',
	'pg_cache_ext.scan_budget' => "'${budget_mb}MB'",
	'pg_cache_ext.scan_max_age' => 0,
	'autovacuum' => 'off',
	'synchronize_seqscans' => 'off',
	'max_parallel_workers_per_gather' => 0);
skip_without_read_positions($node);
pause_damon();    # it would page out what the scan read ahead (PceTest.pm)

$node->safe_psql('postgres', q{
	SET pg_cache_ext.scan = off;
	CREATE TABLE t AS SELECT g, repeat('r', 400) AS pad FROM generate_series(1, 400000) g;
	VACUUM FREEZE t;
	CHECKPOINT;
});
my $size = $node->safe_psql('postgres', "SELECT pg_relation_size('t')");
note(sprintf('table %.0f MB, budget %d MB, the disk reads %.1f MB ahead', $size / $mb, $budget_mb,
	$read_ahead_mb));
root('drop-caches');

# A marked count(*) of t in a session of its own: the MB it read from
# disk (its backend's and the I/O workers'), once the worker caught up.
my @io_workers = io_worker_pids($node);
sub marked_count_read_mb
{
	my ($what) = @_;
	my $scan = $node->background_psql('postgres', on_error_stop => 0);
	$scan->query_safe('SET pg_cache_ext.scan = on');
	my $before = tracker_counts($node);
	my $read_before = disk_read_bytes($scan, @io_workers);
	$scan->query_safe('SELECT count(*) FROM t');
	my $read_mb = (disk_read_bytes($scan, @io_workers) - $read_before) / $mb;
	$scan->quit;
	ok(worker_settled($node, $budget_mb, 20, $before), "the worker caught up with $what");
	return $read_mb;
}

my $dropped = stat_value($node, 'bytes_dropped');
my $read_mb = marked_count_read_mb('the scan');
my $dropped_mb = (stat_value($node, 'bytes_dropped') - $dropped) / $mb;
note(sprintf('the scan read %.1f MB from disk; %.1f MB dropped meanwhile', $read_mb, $dropped_mb));

# the drops did run: the table is many budgets
cmp_ok($dropped_mb, '>=', $size / $mb / 2,
	sprintf('the evictor dropped the scan\'s pages as it went (%.0f MB)', $dropped_mb));
# from disk (the caches were dropped, and the count is the readers')
cmp_ok($read_mb, '>=', 0.9 * $size / $mb,
	sprintf('the scan read the table from disk (%.1f MB)', $read_mb));
# Once, and its last read-ahead beyond the table's end at most (a drop of
# the read-ahead read it again: 4.6x here without read_next).
cmp_ok($read_mb, '<=', $size / $mb * 1.05 + 2 * $read_ahead_mb,
	sprintf('the scan read each page from disk once (%.1f MB for a %.1f MB table)', $read_mb,
		$size / $mb));
ok(wait_until(sub { relation_cached_mb($node, 't') <= $budget_mb + 0.5 }, 10),
	sprintf('the table is back within the budget after the scan (%.1f MB)',
		relation_cached_mb($node, 't')));

# Behind another reader (a wrapped synchronized scan is one): a cursor
# moved near the table's end has passed all of it, so the scan's
# read-ahead is not beyond where any reader got; it is kept as what is
# within two read-ahead windows ahead of its reader, and read once.
my $ahead = $node->background_psql('postgres', on_error_stop => 0);
$ahead->query_safe('SET pg_cache_ext.scan = on');
$ahead->query_safe('BEGIN; DECLARE a NO SCROLL CURSOR FOR SELECT g FROM t');
$ahead->query_safe('MOVE FORWARD 399000 IN a');
root('drop-caches');
$read_mb = marked_count_read_mb('the scan behind the cursor');
cmp_ok($read_mb, '>=', 0.9 * $size / $mb,
	sprintf('the scan behind the cursor read the table from disk (%.1f MB)', $read_mb));
cmp_ok($read_mb, '<=', $size / $mb * 1.05 + 2 * $read_ahead_mb,
	sprintf('the scan behind the cursor read each page from disk once (%.1f MB for a %.1f MB table)',
		$read_mb, $size / $mb));
$ahead->quit;

done_testing();
