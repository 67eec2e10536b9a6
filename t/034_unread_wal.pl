# 034_unread_wal.pl
#	WAL that no process will read leaves the page cache once flushed
#	(src/wal.c): a bulk load writes a few WAL segments, and
#	- with no WAL sender, no archiving and no replication slot, the worker
#	  drops the segments the flush has passed;
#	- with a replication slot (a reader to come) they stay cached;
#	- with pg_cache_ext.drop_unread_wal = off they stay cached.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PceTest;

my ($node, $s) = stock_node('unread_wal',
	'wal_level' => 'replica',
	'max_wal_senders' => 2,
	'max_replication_slots' => 2,
	'max_wal_size' => '1GB',
	'checkpoint_timeout' => '1h',
	'autovacuum' => 'off');
pause_damon();    # it would page out the WAL kept cached (PceTest.pm)

# Load a table ($name, about 40 MB: three WAL segments or more); returns
# the segments the load filled, all closed once it committed.
sub load_table
{
	my ($name) = @_;
	my $first = $node->safe_psql('postgres', 'SELECT pg_walfile_name(pg_current_wal_insert_lsn())');
	$node->safe_psql('postgres',
		"CREATE TABLE $name AS SELECT g, repeat('w', 400) AS pad FROM generate_series(1, 80000) g");
	my $now = $node->safe_psql('postgres', 'SELECT pg_walfile_name(pg_current_wal_insert_lsn())');
	my @segments = grep { $_ ge $first && $_ lt $now }
	  split /\n/, $node->safe_psql('postgres',
		"SELECT name FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}\$' ORDER BY name");
	return @segments;
}

# MB of those segments in the page cache (fincore)
sub cached_mb
{
	my @paths = map { $node->data_dir . "/pg_wal/$_" } @_;
	my $out = `fincore -b -n -o RES @paths`;
	my $bytes = 0;
	$bytes += $_ for split /\s+/, $out;
	return sprintf('%.1f', $bytes / 1048576);
}

my @unread = load_table('nobody_reads');
cmp_ok(scalar @unread, '>=', 2, 'the load filled ' . scalar(@unread) . ' WAL segments');
my $left;
ok(wait_until(sub { ($left = cached_mb(@unread)) <= 0.5 }, 10),
	"with no WAL reader, the flushed segments leave the page cache ($left MB of "
	  . 16 * @unread . ' MB cached)');

$node->safe_psql('postgres', "SELECT pg_create_physical_replication_slot('a_reader_to_come', true)");
my @kept = load_table('a_slot_reads');
sleep 2;	# eight rounds of the worker's housekeeping
my $kept_mb = cached_mb(@kept);
cmp_ok($kept_mb, '>=', 16 * @kept * 0.9,
	"with a replication slot they stay cached ($kept_mb of " . 16 * @kept . ' MB)');
$node->safe_psql('postgres', "SELECT pg_drop_replication_slot('a_reader_to_come')");

$node->safe_psql('postgres', 'ALTER SYSTEM SET pg_cache_ext.drop_unread_wal = off');
$node->reload;
sleep 1;
my @off = load_table('not_dropped');
sleep 2;
my $off_mb = cached_mb(@off);
cmp_ok($off_mb, '>=', 16 * @off * 0.9,
	"with pg_cache_ext.drop_unread_wal = off they stay cached ($off_mb of " . 16 * @off . ' MB)');

$node->stop;
done_testing();
