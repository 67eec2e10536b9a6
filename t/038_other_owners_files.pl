# 038_other_owners_files.pl
#	Only files of the cluster's account are a scan's.  The scan-PID map is
#	the server group's to write, so a member could mark any process, root's
#	too; that process's reads of its own files must not reach the evictor's
#	ring (which file, which pages) nor the evict-first list.  A marked
#	session reads two files alike, side by side on one file system, one
#	root's and one the cluster's account owns: only the second one's
#	folios are counted for the scan, though both are read from the disk.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PceTest;

my $name = "t038-$$";
my ($node, $s) = stock_node('other_owners', 'max_parallel_workers_per_gather' => 0);
my ($ok, $dir, $err) = root('owners-files', $name, 16);
ok($ok, 'two files of 16 MiB, root\'s and the account\'s') or BAIL_OUT("owners-files: $err");
END { local $?; root('owners-rm', $name) if $name; }	# local: the helper's status is not the test's
chomp $dir;
is((stat("$dir/root.dat"))[4], 0, 'root.dat belongs to root');
is((stat("$dir/own.dat"))[4], $>, 'own.dat belongs to the cluster\'s account');

# the cached percent of $dir/$file, as root sees it: mincore(2) says
# "all cached" of a file the caller may not write
sub resident_percent
{
	my ($file) = @_;
	my (undef, $out) = root('owners-cached', $name);
	my ($root_dat, $own_dat) = split ' ', $out // '';
	return ($file =~ /root\.dat$/ ? $root_dat : $own_dat) // -1;
}

# what a marked session's read of $file, from the disk, is counted as: the
# growth of folios_added_scan and folios_added_other, and how much of the
# file was cached before and after
sub marked_read
{
	my ($file) = @_;
	root('drop-caches');
	my $cold = resident_percent($file);
	my %before = map { $_ => stat_value($node, $_) } qw(folios_added_scan folios_added_other);
	$node->safe_psql('postgres',
		"SET pg_cache_ext.scan = on; SELECT length(pg_read_binary_file('$file'))");
	my %grew = map { $_ => stat_value($node, $_) - $before{$_} } keys %before;
	return ($grew{folios_added_scan}, $grew{folios_added_other}, $cold, resident_percent($file));
}

pause_damon();    # it would page out some of what was read (PceTest.pm)
my ($own_scan, $own_other, $own_cold, $own_warm) = marked_read("$dir/own.dat");
my ($root_scan, $root_other, $root_cold, $root_warm) = marked_read("$dir/root.dat");
note("own.dat: scan $own_scan other $own_other, cached $own_cold% -> $own_warm%; "
	  . "root.dat: scan $root_scan other $root_other, cached $root_cold% -> $root_warm%");
# cached before: nothing; after: nearly all of it (DAMON paused: with it
# on, one CI run saw 87% of root.dat)
ok($own_cold < 5 && $own_warm > 90 && $root_cold < 5 && $root_warm > 90,
	'both files were read from the disk by the marked session');
cmp_ok($own_scan, '>=', 8, "the account's file is read for the scan ($own_scan folios)");
cmp_ok($root_scan, '<', $own_scan / 10,
	"root's file, read the same way by the same session, is not ($root_scan folios)");
cmp_ok($root_other, '>=', $own_scan * 0.9,
	"its folios are counted as another's insertions ($root_other)");
is(stat_value($node, 'records_lost'), '0', 'no tracker record lost');
$node->stop;
done_testing();
