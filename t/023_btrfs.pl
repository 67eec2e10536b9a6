# 023_btrfs.pl
#	The stock-kernel evictor on btrfs: a table in a tablespace on a btrfs
#	subvolume, read cold by a marked scan, must end within the budget.
#	On btrfs, stat() reports a file's device as its subvolume's anonymous
#	device, not the superblock's s_dev: the tracker must record the device
#	stat reports, or the evictor finds none of the scan's files and drops
#	nothing (then every record is counted in files_not_found).  And the
#	evictor must know how far ahead btrfs reads (its own read-ahead, not
#	the disk's), or it drops a scan's read-ahead before the scan reads it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PceTest;

my $budget_mb = 8;
my $mb = 1024 * 1024;
my $name = "t023-$$";

my ($ok, $ts, $err) = root('ts-mount', 'btrfs', $name);
plan skip_all => 'mkfs.btrfs is not installed here (btrfs-progs; scripts/setup.sh installs it)'
  if !$ok && $err =~ /mkfs\.btrfs missing/;
ok($ok, 'a btrfs loop image with a subvolume is mounted') or BAIL_OUT("btrfs-mount: $err");
chomp $ts;
END { local $?; root('ts-umount', $name) if $name; }	# local: the helper's status is not the test's

my ($node, $s) = stock_node('btrfs',
	'pg_cache_ext.scan_budget' => "'${budget_mb}MB'",
	'pg_cache_ext.scan_max_age' => 0,
	'autovacuum' => 'off',
	'max_parallel_workers_per_gather' => 0);

my $size = table_in_tablespace($node, 'on_btrfs', $ts);
cmp_ok($size, '>', 64 * $mb, sprintf('the table on btrfs is over 64 MB (%.0f MB)', $size / $mb));
my $fstype = `stat -f -c %T '$ts'`;
chomp $fstype;
is($fstype, 'btrfs', 'the tablespace is on btrfs');

unmarked_cold_read_stays($node, 'on_btrfs', $size);
marked_cold_scan_within_budget($node, 'on_btrfs', $size, $budget_mb, ' (btrfs)');

# ---- the scan's own read-ahead is btrfs's ----
# btrfs reads at least 4 MB ahead (its file system's read-ahead, not the
# loop device's).  A reader behind another (here a cursor moved to the
# table's end) has its read-ahead within what the other already passed:
# the evictor keeps it first only as far as it knows the file system
# reads ahead, and with a budget smaller than that, drops the rest as it
# comes in, so that the reader reads it from disk again.  Compared with
# what an unmarked scan of the table reads from disk (some of the table
# is in shared_buffers, and read from neither).
SKIP:
{
	skip no_read_positions_why($node), 5 unless has_read_positions($node);
	my $read_ahead = read_ahead_mb($ts);
	cmp_ok($read_ahead, '>=', 4, "btrfs reads ahead 4 MB or more ($read_ahead MB)");
	$node->append_conf('postgresql.conf', "pg_cache_ext.scan_budget = '1MB'");
	$node->reload;
	my $ahead = $node->background_psql('postgres', on_error_stop => 0);
	$ahead->query_safe('SET pg_cache_ext.scan = on; SET synchronize_seqscans = off');
	$ahead->query_safe('BEGIN; DECLARE a NO SCROLL CURSOR FOR SELECT g FROM on_btrfs');
	$ahead->query_safe('MOVE FORWARD 299000 IN a');

	my $scan = $node->background_psql('postgres', on_error_stop => 0);
	$scan->query_safe('SET synchronize_seqscans = off');
	my @io_workers = io_worker_pids($node);    # 18+: they may read for it
	my @reads_mb;
	for my $marked ('off', 'on')
	{
		root('drop-caches');
		$scan->query_safe("SET pg_cache_ext.scan = $marked");
		my $counts = tracker_counts($node);
		my $read_before = disk_read_bytes($scan, @io_workers);
		$scan->query_safe('SELECT count(*) FROM on_btrfs');
		push @reads_mb, (disk_read_bytes($scan, @io_workers) - $read_before) / $mb;
		worker_settled($node, 1, 20, $counts);
	}
	$scan->quit;
	$ahead->quit;
	my ($unmarked_mb, $marked_mb) = @reads_mb;
	cmp_ok($unmarked_mb, '>=', 0.5 * $size / $mb,
		sprintf('control: an unmarked scan read the table from disk (%.1f MB of %.1f MB)',
			$unmarked_mb, $size / $mb));
	cmp_ok($marked_mb, '>=', 0.9 * $unmarked_mb,
		sprintf('the marked scan behind the cursor read it from disk too (%.1f MB)', $marked_mb));
	cmp_ok($marked_mb, '<=', $unmarked_mb * 1.05 + 2 * $read_ahead,
		sprintf('the marked scan read each page from disk once (%.1f MB, unmarked %.1f MB)',
			$marked_mb, $unmarked_mb));
	ok(wait_until(sub { relation_cached_mb($node, 'on_btrfs') <= 1.5 }, 10),
		sprintf('the table is back within the budget after it (%.1f MB)',
			relation_cached_mb($node, 'on_btrfs')));
}

is(stat_value($node, 'records_lost'), '0', 'no tracker record lost');
is(stat_value($node, 'drop_errors'), '0', 'no drop errors');
unlike(slurp_file($node->logfile), qr/ERROR|PANIC|server process .* terminated/, 'no error in the server log');
$node->safe_psql('postgres', 'DROP TABLE on_btrfs; DROP TABLESPACE on_btrfs');
$node->stop;
done_testing();
