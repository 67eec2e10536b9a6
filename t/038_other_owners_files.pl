# 038_other_owners_files.pl
#	Only files of the cluster's account are a scan's.  The scan-PID map is
#	the server group's to write, so a member could mark any process, root's
#	too; that process's reads of its own files must not reach the evictor's
#	ring (which file, which pages) nor the evict-first list.  A marked
#	session reads the same bytes twice, from a root-owned file of the
#	PostgreSQL installation and from a copy the cluster's account owns:
#	only the copy's pages are counted for the scan.
use strict;
use warnings;
use File::Copy;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PceTest;

my ($node, $s) = stock_node('other_owners', 'max_parallel_workers_per_gather' => 0);
my $root_file = $node->config_data('--sharedir') . '/postgres.bki';
my @st = stat($root_file);
cmp_ok($st[4] // -1, '==', 0, "$root_file belongs to root");
my $own_file = $node->basedir . '/postgres.bki.copy';
copy($root_file, $own_file) or BAIL_OUT("copy: $!");
is((stat($own_file))[4], $>, 'its copy belongs to the cluster\'s account');

# the growth of folios_added_scan and folios_added_other while a marked
# session reads $file from the disk
sub marked_read
{
	my ($file) = @_;
	root('drop-caches');
	my %before = map { $_ => stat_value($node, $_) } qw(folios_added_scan folios_added_other);
	$node->safe_psql('postgres',
		"SET pg_cache_ext.scan = on; SELECT length(pg_read_binary_file('$file'))");
	return map { stat_value($node, $_) - $before{$_} } qw(folios_added_scan folios_added_other);
}

my ($own_scan, $own_other) = marked_read($own_file);
my ($root_scan, $root_other) = marked_read($root_file);
note("own copy: scan $own_scan other $own_other; root's file: scan $root_scan other $root_other");
cmp_ok($own_scan, '>=', 10, "the copy the account owns is read for the scan ($own_scan folios)");
cmp_ok($root_scan, '<', $own_scan / 10,
	"root's file, read by the same marked session, is not ($root_scan folios)");
cmp_ok($root_other, '>=', $own_scan * 0.9,
	"its folios are counted as another's insertions ($root_other)");
is(stat_value($node, 'records_lost'), '0', 'no tracker record lost');
$node->stop;
done_testing();
