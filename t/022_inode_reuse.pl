# 022_inode_reuse.pl
#	A stale record must not drop another file's pages.  The tracker names a
#	file by (device, inode, generation); once a table is dropped, its inode
#	number may be given to a new file.  Here the records of a marked scan of
#	a table wait (large budget) while the table is dropped and new tables
#	are made until one gets the dropped file's inode number; the new table
#	is read unmarked (cached, not a scan's), then the budget shrinks: the
#	evictor handles the old records, finds the inode number in the
#	directory, and must see by the generation that it is another file.
#	The tables live in a tablespace on a small fresh ext4 image, which
#	hands a freed inode number to the next new file (the big root file
#	system did not within 2000 tables).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PceTest;

my $mb = 1024 * 1024;
my $name = "t022-$$";
my ($ok, $ts, $err) = root('ts-mount', 'ext4', $name);
ok($ok, 'a small ext4 loop image is mounted for a tablespace') or BAIL_OUT("ts-mount: $err");
chomp $ts;
END { local $?; root('ts-umount', $name) if $name; }	# local: the helper's status is not the test's
my ($node, $s) = stock_node('inode_reuse',
	'pg_cache_ext.scan_budget' => "'512MB'",
	'pg_cache_ext.scan_max_age' => 0,
	'autovacuum' => 'off',
	'max_parallel_workers_per_gather' => 0);
pause_damon();    # it would page out the new table read once (PceTest.pm)
# From 18, I/O workers keep a dropped table's file open (idle, they read no
# invalidations), so its inode number stays in use; the reads here are made
# by the backends themselves, and the dropped file is closed by all.
use_io_method($node, 'sync');

sub file_inode
{
	my ($rel) = @_;
	my $path = $node->safe_psql('postgres', "SELECT pg_relation_filepath('$rel')");
	my @st = stat($node->data_dir . "/$path");
	return @st ? $st[1] : -1;
}

$node->safe_psql('postgres', qq{
	SET pg_cache_ext.scan = off;
	CREATE TABLESPACE small_ext4 LOCATION '$ts';
	SET default_tablespace = small_ext4;
	CREATE TABLE old_t AS SELECT g, repeat('o', 200) AS pad FROM generate_series(1, 60000) g;
	VACUUM FREEZE old_t; CHECKPOINT;
});
my $old_ino = file_inode('old_t');
my $old_size = $node->safe_psql('postgres', "SELECT pg_relation_size('old_t')");

root('drop-caches');
my $tracked_before = stat_value($node, 'bytes_tracked');
$node->safe_psql('postgres', 'SET pg_cache_ext.scan = on; SELECT count(*) FROM old_t');
ok(wait_until(sub { stat_value($node, 'bytes_tracked') - $tracked_before >= $old_size * 0.9 }, 10),
	sprintf('the marked scan of old_t is tracked and waits (%.1f MB)', stat_value($node, 'bytes_tracked') / $mb));

# the main fork's first segment is unlinked at the next checkpoint
$node->safe_psql('postgres', 'DROP TABLE old_t; CHECKPOINT');
my ($new, $i) = (undef, 0);
while (!defined $new && $i < 200)
{
	$i++;
	$node->safe_psql('postgres', "CREATE TABLE new_$i (g int, pad text) TABLESPACE small_ext4");
	$new = "new_$i" if file_inode("new_$i") == $old_ino;
}
ok(defined $new, "a new table got the dropped table's inode number $old_ino (after $i tables)")
  or BAIL_OUT('no inode number reuse on this file system');

$node->safe_psql('postgres', qq{
	SET pg_cache_ext.scan = off;
	INSERT INTO $new SELECT g, repeat('n', 200) FROM generate_series(1, 60000) g;
	VACUUM FREEZE $new; CHECKPOINT;
	SELECT count(*) FROM $new;
});
is(file_inode($new), $old_ino, "$new still has inode $old_ino");
my $cached_before = relation_cached_fraction($node, $new);
cmp_ok($cached_before, '>=', 0.99, "the new table is cached after an unmarked read ($cached_before)");

my %before = map { $_ => stat_value($node, $_) } qw(files_not_found extents_dropped);
$node->safe_psql('postgres', "ALTER SYSTEM SET pg_cache_ext.scan_budget = '1MB'; SELECT pg_reload_conf()");
ok(wait_until(sub { stat_value($node, 'bytes_tracked') <= $mb }, 10),
	'the budget shrank: the stale records were handled');
my $cached = relation_cached_fraction($node, $new);
cmp_ok($cached, '>=', 0.99,
	"the stale records of the dropped table did not drop the new table's pages ($cached cached)")
  or diag(join ' ', map { "$_=" . stat_value($node, $_) } qw(files_not_found extents_dropped bytes_dropped));
cmp_ok(stat_value($node, 'files_not_found') - $before{files_not_found}, '>=', 1,
	'the dropped table\'s file is counted as not found');

is(stat_value($node, 'records_lost'), '0', 'no tracker record lost');
unlike(slurp_file($node->logfile), qr/ERROR|PANIC|server process .* terminated/, 'no error in the server log');
$node->safe_psql('postgres', "DROP TABLE $new");
$node->stop;
done_testing();
