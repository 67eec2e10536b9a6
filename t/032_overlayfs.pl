# 032_overlayfs.pl
#	The stock-kernel evictor on overlayfs, a container's own file system
#	when the data directory is not on a volume: a table in a tablespace on
#	an overlay whose layers are on one ext4 file system (as Docker's
#	overlay2 lays them out), read cold by a marked scan, must end within
#	the budget.  stat() names the overlay's files by the overlay's device,
#	the tracker by the real file system's below: the evictor must learn
#	the one from the other, or it finds none of the scan's files and drops
#	nothing.  cachestat(2) sees no page of an overlay file (they are the
#	real file's): what is cached and what was dropped are counted another
#	way, or the relation looks uncached and bytes_dropped stays 0.  On 18,
#	an I/O worker reads the real file with the mounter's credentials: its
#	reads for a scan must still be the scan's.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PceTest;

my $budget_mb = 8;
my $mb = 1024 * 1024;
my $name = "t032-$$";

my ($ok, $ts, $err) = root('ts-mount', 'overlay', $name);
ok($ok, 'an overlay whose layers are on one ext4 image is mounted')
  or BAIL_OUT("ts-mount overlay: $err");
chomp $ts;
END { local $?; root('ts-umount', $name) if $name; }	# local: the helper's status is not the test's

my $fstype = `stat -f -c %T '$ts'`;
chomp $fstype;
is($fstype, 'overlayfs', 'the tablespace is on overlayfs');
# the device below the overlay (the ext4 image's), as major:minor
my $real_dev = (stat "/run/pce-test-ts-$name/lower")[0];
my $real = sprintf('%d:%d',
	(($real_dev >> 8) & 0xfff) | (($real_dev >> 32) & ~0xfff),
	($real_dev & 0xff) | (($real_dev >> 12) & 0xffffff00));
isnt((stat $ts)[0], $real_dev, "stat() names the overlay's device, not the one below ($real)");

my ($node, $s) = stock_node('overlay',
	'pg_cache_ext.scan_budget' => "'${budget_mb}MB'",
	'pg_cache_ext.scan_max_age' => 0,
	'autovacuum' => 'off',
	'max_parallel_workers_per_gather' => 0);

$node->safe_psql('postgres', qq{
	SET pg_cache_ext.scan = off;
	CREATE TABLESPACE on_overlay LOCATION '$ts';
	CREATE TABLE on_overlay (g int, pad text) TABLESPACE on_overlay;
	INSERT INTO on_overlay SELECT g, repeat('o', 200) FROM generate_series(1, 300000) g;
	VACUUM FREEZE on_overlay; CHECKPOINT;
});
my $size = $node->safe_psql('postgres', "SELECT pg_relation_size('on_overlay')");
cmp_ok($size, '>', 64 * $mb, sprintf('the table on the overlay is over 64 MB (%.0f MB)', $size / $mb));

# control: an unmarked cold read stays cached, and is counted so (through
# the overlay, cachestat would count none of it)
pause_damon();
root('drop-caches');
$node->safe_psql('postgres', 'SET pg_cache_ext.scan = off; SELECT count(*) FROM on_overlay');
cmp_ok(relation_cached_mb($node, 'on_overlay'), '>', 64 * 0.9,
	'control: an unmarked cold read of the table leaves it cached, and it is counted');

# A marked cold scan, with each of 18's ways of reading (an I/O worker
# reads through the overlay with the mounter's credentials).
sub marked_scan
{
	my ($method) = @_;
	my $how = defined $method ? " (io_method $method)" : '';
	use_io_method($node, $method);
	root('drop-caches');
	my %before = map { $_ => stat_value($node, $_) }
	  qw(files_not_found extents_dropped bytes_dropped folios_added_scan);
	my $since = tracker_counts($node);    # a restart resets the worker's, not the tracker's
	$node->safe_psql('postgres', 'SET pg_cache_ext.scan = on; SELECT count(*) FROM on_overlay');
	cmp_ok(stat_value($node, 'folios_added_scan') - $before{folios_added_scan}, '>', 0,
		"the tracker recorded the marked scan's folios$how");
	ok(worker_settled($node, $budget_mb, 20, $since), "the worker read every record and is within budget$how");
	my $cached = relation_cached_mb($node, 'on_overlay');
	cmp_ok($cached, '<=', $budget_mb + 1,
		"after a marked scan on the overlay, the table holds <= budget + one extent ($cached MB)$how")
	  or diag(join ' ', map { "$_=" . stat_value($node, $_) }
		  qw(files_not_found extents_dropped bytes_dropped bytes_tracked records_read));
	cmp_ok(stat_value($node, 'extents_dropped') - $before{extents_dropped}, '>', 0,
		"the evictor dropped extents of the overlay's file$how");
	my $dropped = stat_value($node, 'bytes_dropped') - $before{bytes_dropped};
	cmp_ok($dropped, '>=', ($size - ($budget_mb + 1) * $mb) / 2,
		sprintf('bytes_dropped counts most of what left the cache (%.1f MB of %.1f MB)%s',
			$dropped / $mb, ($size / $mb) - $cached, $how));
	note("files not found meanwhile$how: "
		  . (stat_value($node, 'files_not_found') - $before{files_not_found}));
	return;
}

my $log_offset = -s $node->logfile;
marked_scan($_) for io_methods($node);
like(slurp_file($node->logfile, $log_offset),
	qr/the overlay file system on device \d+:\d+ keeps its files on device \Q$real\E\b/,
	"the server log names the device below the overlay ($real)");
is(stat_value($node, 'records_lost'), '0', 'no tracker record lost');
is(stat_value($node, 'drop_errors'), '0', 'no drop errors');
unlike(slurp_file($node->logfile), qr/ERROR|PANIC|server process .* terminated/, 'no error in the server log');
$node->safe_psql('postgres', 'DROP TABLE on_overlay; DROP TABLESPACE on_overlay');
$node->stop;
done_testing();
