# 029_replica.pl
#	A primary and its streaming standby on one host never share pins.  A
#	physical standby has its primary's system identifier, so a pin
#	directory named by it alone was shared: the standby's worker removed the
#	primary's live marks (no backend of its own stood behind them) and
#	consumed its scan records, and --unload of the standby left the primary
#	idle.  Each data directory now has its own pin directory: a marked scan
#	on either side counts only there, hot-standby queries are marked like
#	the primary's, and unloading the standby leaves the primary active.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use PceTest;

my $budget_mb = 4;
my %settings = (
	'pg_cache_ext.scan_budget' => "'${budget_mb}MB'",
	'pg_cache_ext.scan_max_age' => 0,
	'autovacuum' => 'off',
	'max_parallel_workers_per_gather' => 0);

my $primary = new_node('primary', init => { allows_streaming => 1 }, %settings);
load_bpf($primary) or BAIL_OUT('loader failed for the primary');
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION pg_cache_ext');
my $ps = status($primary);
plan skip_all => "stock mechanism not active here: $ps->{reason}" if $ps->{mechanism} ne 'stock';

# ~80 MB, five times shared_buffers: a scan reads most of it from the kernel
$primary->safe_psql('postgres', q{
	SET pg_cache_ext.scan = off;
	CREATE TABLE big AS SELECT g, repeat('b', 200) AS pad FROM generate_series(1, 340000) g;
	VACUUM FREEZE big; CHECKPOINT;
});

$primary->backup('from_primary');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'from_primary', has_streaming => 1);
my ($ok, $out, $err) = load_bpf($standby);
ok($ok, 'the loader runs for the standby (its own data directory)') or diag($err);
$standby->start;
$primary->wait_for_catchup($standby);

is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');
my $ss = status($standby);
is($ss->{state}, 'active', 'the standby is active') or diag("reason: $ss->{reason}");
isnt($ss->{pin_dir}, $ps->{pin_dir}, "the standby has its own pin directory ($ss->{pin_dir})");
is(status($primary)->{state}, 'active', 'the primary is still active');

# Wait until a node's worker has read every record and holds no more than the budget.
sub settle { worker_settled($_[0], $budget_mb, 15); }

sub counters
{
	my ($node) = @_;
	my %c;
	for (split /\n/, $node->safe_psql('postgres', "SELECT name || '=' || value FROM cache_ext_stats()"))
	{
		my ($k, $v) = split /=/, $_, 2;
		$c{$k} = $v;
	}
	return \%c;
}

# A cold scan of big on $scanner, marked by the plan rule (no session
# override): its counters and only its counters move.
sub scan_on
{
	my ($scanner, $other, $label) = @_;
	root('drop-caches');
	my %before = (scanner => counters($scanner), other => counters($other));
	my $pid = $scanner->safe_psql('postgres', 'SELECT pg_backend_pid()');
	$scanner->safe_psql('postgres', 'SELECT count(*) FROM big');
	settle($scanner);
	settle($other);
	my %after = (scanner => counters($scanner), other => counters($other));
	my $delta = sub { $after{ $_[0] }{ $_[1] } - $before{ $_[0] }{ $_[1] } };
	note("$label: scanner " . join(' ', map { "$_=" . $delta->('scanner', $_) }
		qw(marks_seqscan folios_added_scan records_read bytes_dropped)));
	cmp_ok($delta->('scanner', 'marks_seqscan'), '>=', 1, "$label: the scan was marked (seqscan)");
	cmp_ok($delta->('scanner', 'folios_added_scan'), '>', 0, "$label: its folios were tracked there");
	cmp_ok($delta->('scanner', 'bytes_dropped'), '>', 0, "$label: and dropped there");
	is($delta->('other', 'folios_added_scan'), 0, "$label: the other side's tracker counted none of them");
	is($delta->('other', 'records_read'), 0, "$label: the other side's worker read none of its records");
	is($delta->('other', 'marks'), 0, "$label: the other side marked nothing");
	my $cached = $scanner->safe_psql('postgres',
		"SELECT round(cached_fraction::numeric, 3) FROM cache_ext_relation_cache('big')");
	cmp_ok($cached, '<=', 0.35, "$label: the scanned table left the page cache ($cached cached)");
}

scan_on($primary, $standby, 'scan on the primary');
scan_on($standby, $primary, 'hot-standby scan');

# A live mark of the primary survives the standby's sweeps (which remove
# marks no backend of their own stands behind, after a second of grace).
my $bg = $primary->background_psql('postgres');
$bg->query_safe('SET pg_cache_ext.scan = on');
my $bpid = $bg->query_safe('SELECT pg_backend_pid()');
$bg->query_until(qr/sleeping/, "\\echo sleeping\nSELECT pg_sleep(4);\n");
ok(wait_until(sub { exists((kernel_marks($primary) // {})->{$bpid}) }, 2), "the primary's sleeping backend is marked");
sleep 3;
ok(exists((kernel_marks($primary) // {})->{$bpid}), 'its mark is still there 3 s later');
ok(!exists((kernel_marks($standby) // {})->{$bpid}), "and it is not in the standby's map");
$bg->quit;

# --unload of the standby leaves the primary's pins and state alone
($ok, $out, $err) = root('loader', '--unload', '-D', $standby->data_dir);
ok($ok, '--unload of the standby') or diag($err);
ok(!-e $ss->{pin_dir}, "the standby's pin directory is gone");
ok(-e "$ps->{pin_dir}/scan_pids", "the primary's pins are there");
is(status($standby)->{state}, 'idle', 'the standby is idle');
is(status($primary)->{state}, 'active', 'the primary is active');
root('drop-caches');
my $added = stat_value($primary, 'folios_added_scan');
$primary->safe_psql('postgres', 'SELECT count(*) FROM big');
cmp_ok(stat_value($primary, 'folios_added_scan') - $added, '>', 0, "the primary's scans are still tracked");

$standby->stop;
$primary->stop;
done_testing();
