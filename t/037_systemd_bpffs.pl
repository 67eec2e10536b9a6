# Pins the server can reach on a systemd host, whose /sys/fs/bpf is mode 0700
# (systemd's mount-setup table), without loosening it.  Each cluster runs in
# a private mount namespace made like such a host (test/root-helper
# systemd-bpffs-start: bpffs mode 0700 at /sys/fs/bpf, a /run of its own),
# so the host's mounts stay as they were.
#
# With the defaults the loader mounts a bpffs of its own at /run/pg_cache_ext
# (mode 0711) and the extension is active: a cold marked scan is tracked,
# and what exceeds the scan budget leaves the cache.
# With the pins below systemd's /sys/fs/bpf (the default before), the loader
# refuses to load and the idle server names the directory it cannot search
# and the cure.
use strict;
use warnings;
use lib 't';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PceTest;

my $host_bpf_mode = (stat '/sys/fs/bpf')[2] & 07777;

# Start $node's server in a systemd-like namespace after the loader ran
# there with @loader_args; returns what the helper printed, as a hash.
sub start_like_systemd
{
	my ($node, @loader_args) = @_;
	my ($ok, $out, $err) =
	  root('systemd-bpffs-start', $node->data_dir, $node->logfile, @loader_args);
	diag($err) if $err;
	$node->_update_pid(1);
	my %said = map { split / /, $_, 2 } grep { /^\w+ / } split /\n/, $out // '';
	return (\%said, $err // '');
}

# ---- the defaults: the loader's own bpffs, reachable, active ----
my $node = new_node('systemd', 'pg_cache_ext.scan_threshold' => 0, 'autovacuum' => 'off',
	'max_parallel_workers_per_gather' => 0);
my ($said, $err) = start_like_systemd($node);
is($said->{sys_fs_bpf_mode}, '1700', 'in the namespace /sys/fs/bpf is systemd\'s mode 0700 bpffs');
is($said->{loader_exit}, '0', 'the loader ran with the defaults') or diag($err);
like($said->{run_pg_cache_ext}, qr/^bpf .*mode=711/,
	'the loader mounted a bpffs of its own at /run/pg_cache_ext, mode 0711');
$node->safe_psql('postgres', 'CREATE EXTENSION pg_cache_ext');
my $s = status($node);
is($s->{state}, 'active', 'the extension is active under a 0700 /sys/fs/bpf') or diag($s->{reason});
like($s->{pin_dir}, qr{^/run/pg_cache_ext/pins/\d+-\d+-\d+$}, 'its pins are below /run/pg_cache_ext/pins');

# A cold marked scan is tracked: its folios are counted as scan folios and
# recorded, and the evictor drops what exceeds the scan budget.  The scan's
# share shows in folios_added_scan; folios_added_other is no measure of it:
# it counts every other insertion on the machine since the loader ran (this
# test's CREATE TABLE and its WAL, any other work), and it counts folios,
# which 6.18's ext4 may make large on a sequential read.  Before this was
# asserted only the totals were printed (+54 scan folios for the scan, 8579
# other ones in all), which read as if the scan was counted as other; over
# the scan alone it is +1958 and +4597 scan folios against +43 and +58 other
# ones (6.18, 2026-12-03).
my $budget_mb = 8;
$node->safe_psql('postgres', "ALTER SYSTEM SET pg_cache_ext.scan_budget = '${budget_mb}MB'");
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
$node->safe_psql('postgres',
	"CREATE TABLE t AS SELECT g, repeat('x', 200) AS f FROM generate_series(1, 160000) g");
$node->safe_psql('postgres', 'VACUUM (FREEZE) t');
$node->safe_psql('postgres', 'CHECKPOINT');
worker_settled($node, $budget_mb, 20);    # VACUUM's pages (a scan too) dropped before
my $table_mb = $node->safe_psql('postgres', "SELECT pg_relation_size('t') / 1048576");
root('drop-caches');
my $since = tracker_counts($node);
my %before = map { $_ => stat_value($node, $_) } qw(folios_added_scan folios_added_other bytes_dropped);
$node->safe_psql('postgres', 'SELECT count(*) FROM t');
ok(worker_settled($node, $budget_mb, 20, $since), 'the worker read every record of the scan');
my %delta = map { $_ => stat_value($node, $_) - $before{$_} } keys %before;
note("a cold marked scan of $table_mb MB: "
	  . join(', ', map { "$_ +$delta{$_}" } sort keys %delta) . "; cache_ext_stats(): "
	  . $node->safe_psql('postgres', "SELECT string_agg(name || '=' || value, ' ') FROM cache_ext_stats() WHERE value <> 0"));
cmp_ok($delta{folios_added_scan}, '>', 0, 'the marked scan\'s folios are counted as scan folios');
cmp_ok($delta{bytes_dropped} / 1048576, '>=', $table_mb - $budget_mb - 4,
	"what exceeded the ${budget_mb} MB budget was dropped ($delta{bytes_dropped} bytes of a $table_mb MB table)");
cmp_ok(relation_cached_mb($node, 't'), '<=', $budget_mb + 2,
	"the scanned table keeps no more than the budget cached");
$node->stop;

is((stat '/sys/fs/bpf')[2] & 07777, $host_bpf_mode, "the host's /sys/fs/bpf is as it was");

# ---- pins below systemd's /sys/fs/bpf: refused by the loader, explained by the server ----
my $closed = new_node('systemd_closed', 'pg_cache_ext.bpffs_dir' => "'/sys/fs/bpf/pg_cache_ext'");
($said, $err) = start_like_systemd($closed, '--bpffs-dir', '/sys/fs/bpf/pg_cache_ext');
is($said->{loader_exit}, '1', 'the loader refuses pins the server cannot reach');
like($err, qr/^pg_cache_ext_loader: error: the cluster's account "\w+" cannot reach \/sys\/fs\/bpf\/pg_cache_ext\/\d+-\d+-\d+: .*mode 0700.*default --bpffs-dir \/run\/pg_cache_ext\/pins/m,
	'one clear error naming the cure');
$closed->safe_psql('postgres', 'CREATE EXTENSION pg_cache_ext');
is($closed->safe_psql('postgres', 'SELECT 1'), '1', 'queries work');
$s = status($closed);
is($s->{state}, 'idle', 'the server is idle');
like($s->{reason},
	qr{^pins unreachable: the server's user may not search /sys/fs/bpf \(mode 1700, owner uid 0; .*default /run/pg_cache_ext/pins.*rather than loosening /sys/fs/bpf},
	'the reason names the directory it cannot search and the cure');
$closed->stop;
is((stat '/sys/fs/bpf')[2] & 07777, $host_bpf_mode, "the host's /sys/fs/bpf is still as it was");

# ---- --debian-cluster (the drop-in's way): data_directory read as the cluster's account ----
my $deb = new_node('debian_cluster');
my $conf = $deb->basedir . '/debian.conf';
my $write_conf = sub {
	open my $fh, '>', $conf or die $!;
	print $fh join("\n", '# as /etc/postgresql/VERSION/NAME/postgresql.conf', @_), "\n";
	close $fh;
};
my $deb_dir = "data_directory = '" . $deb->data_dir . "'";
$write_conf->($deb_dir, "shared_preload_libraries = 'pg_stat_statements, pg_cache_ext'");
my ($ok, $out);
($ok, $out, $err) = root('loader', '--debian-cluster', '15-pcetest', '--config-file', $conf);
ok($ok, '--debian-cluster: the loader takes the data directory from data_directory') or diag($err);
$deb->start;
$deb->safe_psql('postgres', 'CREATE EXTENSION pg_cache_ext');
is(status($deb)->{state}, 'active', '--debian-cluster: that cluster is active');
my $deb_pins = status($deb)->{pin_dir};
$deb->stop;
($ok, $out, $err) = root('loader', '--unload', '--debian-cluster', '15-pcetest', '--config-file', $conf);
ok($ok, '--debian-cluster --unload') or diag($err);
ok(!-e $deb_pins, '--unload removed its pins');

# The drop-in runs the loader for every cluster: one that does not preload
# pg_cache_ext gets nothing loaded, one line, exit 0 (its start goes on).
for my $case ([ 'is not set', $deb_dir ],
	[ 'in \S+debian.conf line 3', $deb_dir, "shared_preload_libraries = 'pg_stat_statements'" ])
{
	my ($said, @lines) = @$case;
	my $what = $said =~ /line/ ? 'set without it' : $said;
	$write_conf->(@lines);
	($ok, $out, $err) = root('loader', '--debian-cluster', '15-pcetest', '--config-file', $conf);
	ok($ok, "a cluster without pg_cache_ext in shared_preload_libraries ($what): exit 0") or diag($err);
	like($out, qr/\Apg_cache_ext_loader: cluster 15-pcetest does not preload pg_cache_ext \(shared_preload_libraries $said\): nothing loaded\n\z/,
		'one line says why nothing was loaded');
	unlike($err, qr/pg_cache_ext_loader/, 'and no error');    # (sudo may complain of the host name)
	ok(!-e $deb_pins, 'no pins were made for it');
}
# a bad pg_cache_ext.mode of a cluster that does not preload the module is no error
$write_conf->($deb_dir, "pg_cache_ext.mode = 'bogus'");
($ok, $out, $err) = root('loader', '--debian-cluster', '15-pcetest', '--config-file', $conf);
ok($ok, 'a cluster without the module: its pg_cache_ext settings are not judged') or diag($err);
# ALTER SYSTEM's file is read too (the server reads it after postgresql.conf)
$write_conf->($deb_dir);
$deb->append_conf('postgresql.auto.conf', "shared_preload_libraries = 'pg_cache_ext'\n");
($ok, $out, $err) = root('loader', '--debian-cluster', '15-pcetest', '--config-file', $conf);
ok($ok && -e $deb_pins, 'shared_preload_libraries from postgresql.auto.conf: the module is loaded')
  or diag("$out$err");
root('loader', '--unload', '--debian-cluster', '15-pcetest', '--config-file', $conf);

$write_conf->("data_directory = '/root'");
($ok, $out, $err) = root('loader', '--debian-cluster', '15-pcetest', '--config-file', $conf);
ok(!$ok, 'a data_directory the cluster\'s account cannot open is refused (it is opened as that account)');
like($err, qr/^pg_cache_ext_loader: error: cannot open "\/root\/global\/pg_control": Permission denied/m,
	'one clear error');
$write_conf->("port = 5432");
($ok, $out, $err) = root('loader', '--debian-cluster', '15-pcetest', '--config-file', $conf);
like($err, qr/^pg_cache_ext_loader: error: cluster 15-pcetest: \S+debian.conf sets no data_directory/m,
	'no data_directory: one clear error');
($ok, $out, $err) = root('loader', '--debian-cluster', '15/main');
like($err, qr/^pg_cache_ext_loader: error: invalid --debian-cluster "15\/main": use VERSION-NAME/m,
	'a bad instance name: one clear error');
($ok, $out, $err) = root('loader', '--debian-cluster', '15-main', '-D', $deb->data_dir);
like($err, qr/^pg_cache_ext_loader: error: --debian-cluster excludes -D/m, 'not with -D');

done_testing();
