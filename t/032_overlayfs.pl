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
my $real = join(':', device_of("/run/pce-test-ts-$name/lower"));
isnt(join(':', device_of($ts)), $real, "stat() names the overlay's device, not the one below ($real)");

my ($node, $s) = stock_node('overlay',
	'pg_cache_ext.scan_budget' => "'${budget_mb}MB'",
	'pg_cache_ext.scan_max_age' => 0,
	'autovacuum' => 'off',
	'max_parallel_workers_per_gather' => 0);

my $size = table_in_tablespace($node, 'on_overlay', $ts);
cmp_ok($size, '>', 64 * $mb, sprintf('the table on the overlay is over 64 MB (%.0f MB)', $size / $mb));

# What the kernel holds of the table's real file (the upper layer's), as
# fincore(1) sees it: not the module's own measurement, which t/032 tests.
sub upper_cached_mb
{
	my $rel = $node->safe_psql('postgres', "SELECT pg_relation_filepath('on_overlay')");
	$rel =~ s{^pg_tblspc/\d+/}{};
	my $out = `fincore -b -n -o RES '/run/pce-test-ts-$name/upper/ts/$rel'`;
	die "fincore of the upper layer's file failed" if $? || $out !~ /^\d+$/;
	return sprintf('%.1f', $out / $mb);
}

# through the overlay, cachestat would count none of the control's pages
unmarked_cold_read_stays($node, 'on_overlay', $size);
my $upper = upper_cached_mb();
cmp_ok($upper, '>', 0.9 * $size / $mb, "control: fincore of the upper layer's file agrees ($upper MB)");

# a marked cold scan, with each of 18's ways of reading (an I/O worker
# reads through the overlay with the mounter's credentials)
my $log_offset = -s $node->logfile;
for my $method (io_methods($node))
{
	use_io_method($node, $method);
	my $how = defined $method ? " (io_method $method)" : '';
	marked_cold_scan_within_budget($node, 'on_overlay', $size, $budget_mb, $how);
	my $upper = upper_cached_mb();
	cmp_ok($upper, '<=', $budget_mb + 1, "fincore of the upper layer's file agrees ($upper MB)$how");
}
like(slurp_file($node->logfile, $log_offset),
	qr/the overlay file system on device \d+:\d+ keeps its files on device \Q$real\E\b/,
	"the server log names the device below the overlay ($real)");
is(stat_value($node, 'records_lost'), '0', 'no tracker record lost');
is(stat_value($node, 'drop_errors'), '0', 'no drop errors');
unlike(slurp_file($node->logfile), qr/ERROR|PANIC|server process .* terminated/, 'no error in the server log');
$node->safe_psql('postgres', 'DROP TABLE on_overlay; DROP TABLESPACE on_overlay');
$node->stop;
done_testing();
