# 024_pid_namespace.pl
#	Marks are honoured when the server runs in a PID namespace of its own,
#	as in a container, with the loader on the host: the module puts its own
#	PIDs (MyProcPid, 57 to itself) in the map, and the BPF side must match
#	them to the task at hand, whose PID the kernel's helpers give in the
#	host's numbering (81234).  The same cold marked scan runs beside it on
#	a server started the ordinary way (the control): in both its folios are
#	tracked and dropped.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use PceTest;

my $budget_mb = 4;
my %started_in_ns;    # host PID of a postmaster started in a namespace, by node name

END
{
	kill 'INT', $_ for values %started_in_ns;
}

# Start $node's postmaster as PID 1 of a new PID namespace with its own
# /proc (unshare --pid --fork --mount-proc), as a container does.
sub start_in_pid_namespace
{
	my ($node) = @_;
	my ($ok, $out, $err) = root('pidns-postgres', $node->data_dir, $node->logfile);
	ok($ok, 'postgres started in a PID namespace of its own') or diag($err);
	chomp $out;
	$started_in_ns{ $node->name } = $out;
	my $up = wait_until(sub {
		system('pg_isready', '-q', '-h', $node->host, '-p', $node->port) == 0;
	}, 60);
	ok($up, 'the server in the namespace accepts connections') or BAIL_OUT('no server');
	return $out;
}

sub stop_in_pid_namespace
{
	my ($node) = @_;
	my $pid = delete $started_in_ns{ $node->name } or return;
	kill 'INT', $pid;
	wait_until(sub { !-e "/proc/$pid" }, 60);
}

sub stats_line
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(name || '=' || value, ' ') FROM cache_ext_stats() "
		  . "WHERE name IN ('folios_added_scan', 'records_read', 'bytes_tracked', 'bytes_dropped', 'marks', 'unmarks', 'stale_marks_removed')");
}

# Wait until the worker has read every record and holds no more than the budget.
sub settle { worker_settled($_[0], $budget_mb, 15); }

# One cold marked scan on a fresh cluster started by $start; checks that
# the scan's folios were tracked and dropped.
sub cold_marked_scan
{
	my ($label, $start) = @_;
	my $node = new_node("pidns_$label",
		'pg_cache_ext.scan_budget' => "'${budget_mb}MB'",
		'pg_cache_ext.scan_max_age' => 0,
		'autovacuum' => 'off',
		'max_parallel_workers_per_gather' => 0);
	load_bpf($node) or BAIL_OUT('loader failed');
	$start->($node);
	$node->safe_psql('postgres', 'CREATE EXTENSION pg_cache_ext');
	my $s = status($node);
	if ($s->{mechanism} ne 'stock')
	{
		plan skip_all => "stock mechanism not active here: $s->{reason}";
	}
	is($s->{state}, 'active', "$label: the extension is active");

	# ~80 MB: five times shared_buffers, so most of it is read from the kernel
	$node->safe_psql('postgres', q{
		SET pg_cache_ext.scan = off;
		CREATE TABLE big AS SELECT g, repeat('b', 200) AS pad FROM generate_series(1, 340000) g;
		VACUUM FREEZE big; CHECKPOINT;
	});
	my $big_bytes = $node->safe_psql('postgres', "SELECT pg_relation_size('big')");
	# cold: dropped from the page cache (retried: a page under writeback stays)
	my $cold = 1;
	for my $try (1 .. 5)
	{
		root('drop-caches');
		$cold = $node->safe_psql('postgres',
			"SELECT round(cached_fraction::numeric, 3) FROM cache_ext_relation_cache('big')");
		last if $cold <= 0.05;
		usleep(500_000);
	}
	cmp_ok($cold, '<=', 0.05, "$label: the table is not cached before the scan ($cold)");
	my $added_before = stat_value($node, 'folios_added_scan');
	my $dropped_before = stat_value($node, 'bytes_dropped');

	my $out = $node->safe_psql('postgres', q{
		SET pg_cache_ext.scan = on;
		SELECT pg_backend_pid();
		SELECT count(*) FROM big;
	});
	my ($backend_pid) = split /\n/, $out;
	settle($node);
	note("$label: backend $backend_pid; stats after: " . stats_line($node));

	my $added = stat_value($node, 'folios_added_scan') - $added_before;
	my $dropped = stat_value($node, 'bytes_dropped') - $dropped_before;
	my $cached = $node->safe_psql('postgres',
		"SELECT round(cached_fraction::numeric, 3) FROM cache_ext_relation_cache('big')");
	cmp_ok($added, '>', 0, "$label: the tracker saw the marked backend's reads ($added folios)");
	cmp_ok($dropped, '>=', 0.4 * $big_bytes,
		"$label: the evictor dropped most of the scanned table ($dropped of $big_bytes bytes)");
	cmp_ok($cached, '<=', 0.35, "$label: the scanned table left the page cache ($cached cached)");
	return ($node, $backend_pid);
}

# the control: the server in the host's PID namespace
my ($host_node) = cold_marked_scan('host', sub { $_[0]->start });
my $host_postmaster = (split /\n/, slurp_file($host_node->data_dir . '/postmaster.pid'))[0];
isnt($host_postmaster, 1, 'control: the postmaster is not PID 1');
$host_node->stop;

# the container: the server in a PID namespace of its own
my $ns_host_pid;
my ($ns_node, $ns_backend) = cold_marked_scan('namespace', sub {
	$ns_host_pid = start_in_pid_namespace($_[0]);
});
my $ns_postmaster = (split /\n/, slurp_file($ns_node->data_dir . '/postmaster.pid'))[0];
is($ns_postmaster, 1, 'namespace: the postmaster is PID 1 to itself');
isnt($ns_host_pid, 1, "namespace: and $ns_host_pid to the host");

# pg_cache_ext_run inside the server's container: it marks itself with its
# PID there, and the mark handed down to its child (sh -> cat of the cold
# table's file) must be keyed the same way, or cat's reads go untracked.
my $file = $ns_node->data_dir . '/' . $ns_node->safe_psql('postgres', "SELECT pg_relation_filepath('big')");
my $cold = 1;
for my $try (1 .. 5)
{
	root('drop-caches');
	$cold = $ns_node->safe_psql('postgres',
		"SELECT round(cached_fraction::numeric, 3) FROM cache_ext_relation_cache('big')");
	last if $cold <= 0.05;
	usleep(500_000);
}
my $external_before = stat_value($ns_node, 'folios_added_external');
my ($wrap_ok, undef, $wrap_err) = root('pidns-wrap', $ns_node->data_dir, $file);
ok($wrap_ok, 'namespace: pg_cache_ext_run ran a cat of the table in the container') or diag($wrap_err);
unlike($wrap_err // '', qr/pg_cache_ext_run/, 'namespace: and the wrapper said nothing (its child was marked at fork)');
settle($ns_node);
my $external = stat_value($ns_node, 'folios_added_external') - $external_before;
my $cached = $ns_node->safe_psql('postgres',
	"SELECT round(cached_fraction::numeric, 3) FROM cache_ext_relation_cache('big')");
cmp_ok($external, '>', 0, "namespace: the wrapped cat's reads were the tree's ($external folios)");
cmp_ok($cached, '<=', 0.35, "namespace: and what it read left the page cache ($cached cached)");

stop_in_pid_namespace($ns_node);

done_testing();
