# 001_foundation.pl
#	The foundation end to end: loader and server split by privilege, the
#	status the server reports with and without the loader, and one clear
#	error for each bad setup.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PceTest;

my $bindir = `pg_config --bindir`;
chomp $bindir;
my $loader = "$bindir/pg_cache_ext_loader";

# ---- no loader yet: the server and every query work, status says why ----
my $node = new_node('foundation');
unload_bpf($node);
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION pg_cache_ext');
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'SELECT 1 works without a loader');
$node->safe_psql('postgres', 'CREATE TABLE t AS SELECT g FROM generate_series(1, 100000) g');
is($node->safe_psql('postgres', 'SET pg_cache_ext.scan_threshold = 0; SELECT count(*) FROM t'),
	'100000', 'a scan works without a loader');
my $s = status($node);
is($s->{state}, 'idle', 'idle without a loader');
like($s->{reason}, qr/^pins missing: .* does not exist .*pg_cache_ext_loader/,
	'reason names the missing pins and the loader');
is($s->{loader}, 'not reachable', 'loader not reachable');
is($node->safe_psql('postgres',
	"SELECT count(*) FROM cache_ext_scans() WHERE NOT in_kernel_map"), '0',
	'no mark left over from the scan');

# ---- the loader: non-root, no bpffs, --check ----
my ($ok, $out, $err);
$ok = IPC::Run::run([ $loader, '-D', $node->data_dir ], '>', \$out, '2>', \$err);
if ($> != 0)
{
	ok(!$ok, 'loader as non-root fails');
	like($err, qr/^pg_cache_ext_loader: error: must be run as root/m,
		'one clear line: must be run as root');
}
else
{
	pass('skip non-root check: tests run as root') for 1 .. 2;
}
($ok, $out, $err) = root('loader', '-D', $node->data_dir, '--bpffs-dir', '/tmp/pg_cache_ext');
ok(!$ok, 'loader refuses a directory that is not on bpffs');
like($err, qr/^pg_cache_ext_loader: error: bpffs is not mounted: .*not a bpffs mount/m,
	'one clear line: bpffs is not mounted');
($ok, $out, $err) = root('loader', '--check', '-D', $node->data_dir);
ok($ok, 'loader --check as root succeeds');
like($out, qr/would load:\s+(stock-kernel tracker|cache_ext policy)/, '--check says what it would load');
ok(!-e "/run/pg_cache_ext/pins/" . cluster_id($node), '--check created nothing');
($ok, $out, $err) = root('loader', '-D', '/nonexistent');
like($err, qr/cannot open "\/nonexistent\/global\/pg_control"/, 'loader: a bad data directory is one clear error');
($ok, $out, $err) = root('loader', '-D', $node->data_dir, '--mode', 'bogus');
like($err, qr/invalid --mode "bogus"/, 'loader: a bad --mode is one clear error');

# ---- --user and --group: names, or numbers (a container's ids) ----
($ok, $out, $err) = load_bpf($node, '--group', 'pce-no-such-group');
ok(!$ok, 'loader: an unknown --group fails');
like($err, qr/^pg_cache_ext_loader: error: group "pce-no-such-group" does not exist .*or gives its number/m,
	'one clear line: the group does not exist');
($ok, $out, $err) = load_bpf($node, '--user', 'pce-no-such-user');
ok(!$ok, 'loader: an unknown --user fails');
like($err, qr/^pg_cache_ext_loader: error: user "pce-no-such-user" does not exist/m,
	'one clear line: the user does not exist');
($ok, $out, $err) = load_bpf($node, '--group', '0');
like($err, qr/^pg_cache_ext_loader: error: --group "0" is root's group/m, '--group 0 is refused');
($ok, $out, $err) = root('loader', '--cluster-id', 'pce-t001-root', '--user', '0');
like($err, qr/^pg_cache_ext_loader: error: --user "0" is root/m, '--user 0 is refused');
ok(!-e '/run/pg_cache_ext/pins/pce-t001-root', 'before it made any pin');
my $owner_uid = (stat($node->data_dir))[4];
my $other_uid = $owner_uid + 54321;
($ok, $out, $err) = load_bpf($node, '--user', $other_uid);
like($err, qr/is owned by uid $owner_uid, not by the cluster's account "$other_uid"/,
	'--user as a number that does not own the data directory is refused');
# a group of the test's account other than the default --group (postgres),
# as a number, so that the test can still look at the pins
my ($default_gid) = (getgrnam('postgres'))[2];
my ($other_gid) = grep { $_ != $default_gid } split(' ', $));
$other_gid //= $default_gid;
($ok, $out, $err) = load_bpf($node, '--user', $owner_uid, '--group', $other_gid);
ok($ok, "--user $owner_uid --group $other_gid: numbers are taken") or diag($err);
is((stat("/run/pg_cache_ext/pins/" . cluster_id($node) . "/scan_pids"))[5], $other_gid,
	"the pins belong to group $other_gid");
load_bpf($node);

# ---- the loader reads pg_cache_ext.* from the cluster's configuration ----
$node->append_conf('postgresql.conf', "pg_cache_ext.mode = 'stock'");
($ok, $out, $err) = root('loader', '--check', '-D', $node->data_dir);
like($out, qr/^configuration:\s+pg_cache_ext.mode = 'stock' \(\S+postgresql.conf line \d+\)$/m,
	'--check names the setting it read and its file and line');
like($out, qr/^mode:\s+stock$/m, 'the mode from postgresql.conf applies');
($ok, $out, $err) = root('loader', '--check', '-D', $node->data_dir, '--mode', 'auto');
like($out, qr/^mode:\s+auto \(command line\)$/m, 'the command line wins over postgresql.conf');
# enum values are case-insensitive in PostgreSQL: the loader takes what the server takes
($ok, $out, $err) = root('loader', '--check', '-D', $node->data_dir, '--mode', 'CACHE_EXT');
like($out, qr/^mode:\s+cache_ext \(command line\)$/m, '--mode in upper case is the same mode');
$node->append_conf('postgresql.conf', "pg_cache_ext.mode = 'Stock'");
($ok, $out, $err) = root('loader', '--check', '-D', $node->data_dir);
like($out, qr/^mode:\s+stock$/m, 'pg_cache_ext.mode in mixed case is read as the server reads it') or diag($out . $err);
# (a path the root loader acts on only from a file only root can write:
# t/035_loader_security.pl tests that one written by postgres is refused)
my @other_conf = ("# a configuration file elsewhere, as Debian keeps it", "pg_cache_ext.bpffs_dir = 'relative/dir'");
my (undef, $conf_file) = root('root-conf', "foundation-$$", @other_conf);
chomp $conf_file;
($ok, $out, $err) = root('loader', '--check', '-D', $node->data_dir, '--config-file', $conf_file);
ok(!$ok, 'a bad value in the configuration file is refused');
like($err, qr/^pg_cache_ext_loader: error: \S+foundation-\d+.conf line 2: invalid pg_cache_ext.bpffs_dir: not an absolute path/m,
	'one clear error with the file and line');
# includes are followed as the server follows them, relative to the file
my $main_conf = $node->basedir . '/main.conf';
mkdir $node->basedir . '/conf.d';
PostgreSQL::Test::Utils::append_to_file($node->basedir . '/conf.d/20-pce.conf', "pg_cache_ext.mode = 'cache_ext'\n");
PostgreSQL::Test::Utils::append_to_file($node->basedir . '/conf.d/10-pce.conf', "pg_cache_ext.mode = 'stock'\n");
PostgreSQL::Test::Utils::append_to_file($node->basedir . '/conf.d/30-pce.conf.bak', "pg_cache_ext.mode = 'auto'\n");
PostgreSQL::Test::Utils::append_to_file($main_conf,
	"pg_cache_ext.mode = 'auto'\ninclude_if_exists 'missing.conf'\ninclude_dir = 'conf.d'\n");
($ok, $out, $err) = root('loader', '--check', '-D', $node->data_dir, '--config-file', $main_conf);
like($out, qr/^configuration:\s+pg_cache_ext.mode = 'cache_ext' \(\S+conf.d\/20-pce.conf line 1 \(included from \S+main.conf line 3\)\)$/m,
	'include_dir: its *.conf files are read in name order, others ignored') or diag($out . $err);
PostgreSQL::Test::Utils::append_to_file($main_conf, "include '/dev/null'\n");
($ok, $out, $err) = root('loader', '--check', '-D', $node->data_dir, '--config-file', $main_conf);
like($err, qr/"\/dev\/null" is not a regular file/, 'an include of anything but a regular file is refused');

# named per run: the lanes of two checkouts may run at the same time
my $conf_pins = "/sys/fs/bpf/pce-test-conf-$$";
root('root-conf', "foundation-$$", @other_conf, "pg_cache_ext.bpffs_dir = '$conf_pins'");
($ok, $out, $err) = root('loader', '-D', $node->data_dir, '--config-file', $conf_file);
ok($ok, 'the loader runs with --config-file') or diag($err);
ok(-e "$conf_pins/" . cluster_id($node) . '/scan_pids',
	'and pins where that file says (the later line wins)');
($ok, $out, $err) = root('loader', '--unload', '-D', $node->data_dir, '--config-file', $conf_file);
ok($ok && !-e "$conf_pins/" . cluster_id($node), '--unload finds them the same way');
root('bpffs-rmdir', $conf_pins);
$node->adjust_conf('postgresql.conf', 'pg_cache_ext.mode', "'auto'");

# ---- loader run: active, pins group postgres mode 0660 ----
($ok, $out, $err) = load_bpf($node);
ok($ok, 'loader runs') or diag($err);
my $pindir = "/run/pg_cache_ext/pins/" . cluster_id($node);
my @st = stat("$pindir/scan_pids");
is(sprintf('%04o', $st[2] & 07777), '0660', 'scan_pids pin is mode 0660');
is(scalar getgrgid($st[5]), 'postgres', 'scan_pids pin is group postgres');
ok(wait_until(sub { status($node)->{state} eq 'active' }, 5), 'active once the loader has run');
$s = status($node);
my $has_cache_ext = $s->{kernel_has_cache_ext} eq 'yes';
is($s->{mechanism}, $has_cache_ext ? 'cache_ext' : 'stock', 'mechanism matches the kernel');
like($s->{loader}, qr/^reachable \(pid \d+/, 'loader reachable');
like($s->{worker}, qr/^pid \d+: /, 'worker reports');

# ---- the unprivileged path ----
my $postmaster = (split /\n/, slurp_file($node->data_dir . '/postmaster.pid'))[0];
is(capeff($postmaster), '0000000000000000', 'postmaster runs without capabilities');
isnt($>, 0, 'tests (and so the server) run as a non-root user') if $> != 0;
my $bg = $node->background_psql('postgres');
my $bpid = $bg->query_safe('SELECT pg_backend_pid()');
$bg->query_safe('SET pg_cache_ext.scan = on');
$bg->query_until(qr/started/, "\\echo started\nSELECT pg_sleep(3);\n");
ok(wait_until(sub { my $m = kernel_marks($node); $m && exists $m->{$bpid} }, 3),
	'a backend marked itself in the pinned map, read back by an unprivileged reader');
is($node->safe_psql('postgres', "SELECT reason || ' ' || in_kernel_map FROM cache_ext_scans() WHERE pid = $bpid"),
	'session true', 'cache_ext_scans() shows the mark and that the kernel map has it');
$bg->quit;
ok(wait_until(sub { my $m = kernel_marks($node); $m && !exists $m->{$bpid} }, 3),
	'mark gone after the session ends');

# ---- a second loader run reuses the maps: marks and counters survive ----
$bg = $node->background_psql('postgres');
$bpid = $bg->query_safe('SELECT pg_backend_pid()');
$bg->query_safe('SET pg_cache_ext.scan = on');
$bg->query_until(qr/started/, "\\echo started\nSELECT pg_sleep(4);\n");
ok(wait_until(sub { my $m = kernel_marks($node); $m && exists $m->{$bpid} }, 3), 'marked before reload');
my $marks_before = stat_value($node, 'marks');
($ok, $out, $err) = load_bpf($node);
ok($ok, 'second loader run succeeds') or diag($err);
ok(exists kernel_marks($node)->{$bpid}, 'the mark survived the loader rerun');
is(status($node)->{state}, 'active', 'still active after the rerun');
$bg->quit;

# ---- cache_ext asked for where the kernel refuses it: stock stays ----
SKIP:
{
	skip 'the kernel has cache_ext: forcing it is the normal path', 8 if $has_cache_ext;
	# from nothing pinned: the tracker's links must come from this run
	unload_bpf($node);
	$marks_before = stat_value($node, 'marks');
	($ok, $out, $err) = load_bpf($node, '--mode=cache_ext');
	ok(!$ok, 'loader --mode=cache_ext fails on a kernel without cache_ext');
	like($err, qr/^pg_cache_ext_loader: error: cannot attach the cache_ext policy: .*\(the stock-kernel tracker stays active\)/m,
		'one clear error that says the stock tracker stays');
	$s = status($node);
	is($s->{state}, 'active', 'the server stays active');
	is($s->{mechanism}, 'stock', 'on the stock mechanism');
	like($s->{reason}, qr/./, "status gives the reason ($s->{reason})");
	ok($node->safe_psql('postgres', 'SET pg_cache_ext.scan_threshold = 0; SELECT count(*) FROM t') > 0,
		'queries work');
	cmp_ok(stat_value($node, 'marks'), '>', $marks_before, 'and scans are still marked');
	# larger than shared_buffers (16 MB), so that the scan reads the files
	$node->safe_psql('postgres', "SET pg_cache_ext.scan = off; "
		  . "CREATE TABLE cold AS SELECT g, repeat('c', 200) AS pad FROM generate_series(1, 150000) g");
	root('drop-caches');
	my $added_before = stat_value($node, 'folios_added_scan');
	$node->safe_psql('postgres', 'SET pg_cache_ext.scan_threshold = 0; SELECT count(*) FROM cold');
	my $added = stat_value($node, 'folios_added_scan') - $added_before;
	cmp_ok($added, '>', 0, "and the tracker attached after the refusal records the scan's reads ($added folios)");
	$node->safe_psql('postgres', 'DROP TABLE cold');
	load_bpf($node);
}

# ---- pins with wrong permissions ----
root('chmod', '0666', "$pindir/scan_pids");
$s = status($node);
is($s->{state}, 'idle', 'idle with a world-accessible pin');
like($s->{reason}, qr/^refusing .*scan_pids: mode 0666 lets other users in/, 'one clear reason: refusing mode 0666');
root('chmod', '0600', "$pindir/scan_pids");
$s = status($node);
like($s->{reason}, qr/^permission denied on .*scan_pids/, 'one clear reason: permission denied') if $> != 0;
load_bpf($node);
is(status($node)->{state}, 'active', 'rerunning the loader repairs the permissions');

# ---- --unload: idle again, queries fine ----
($ok, $out, $err) = unload_bpf($node);
ok($ok, 'loader --unload') or diag($err);
ok(!-e $pindir, 'pins removed');
$s = status($node);
is($s->{state}, 'idle', 'idle after unload');
is($node->safe_psql('postgres', 'SET pg_cache_ext.scan_threshold = 0; SELECT count(*) FROM t'),
	'100000', 'scans still work after unload');
$node->stop;

# ---- bpffs_dir not on bpffs ----
my $nobpf = new_node('nobpffs', "pg_cache_ext.bpffs_dir" => "'/tmp/not-bpffs/pg_cache_ext'");
$nobpf->start;
$nobpf->safe_psql('postgres', 'CREATE EXTENSION pg_cache_ext');
like(status($nobpf)->{reason}, qr/^bpffs is not mounted at \/tmp\/not-bpffs/,
	'one clear reason: bpffs is not mounted');
$nobpf->stop;

# ---- not in shared_preload_libraries ----
my $plain = new_node('nopreload', preload => 0);
$plain->start;
my ($rc, $stdout, $stderr) = $plain->psql('postgres', 'CREATE EXTENSION pg_cache_ext');
isnt($rc, 0, 'CREATE EXTENSION fails without shared_preload_libraries');
like($stderr, qr/ERROR:  pg_cache_ext must be loaded via shared_preload_libraries/,
	'one clear error: must be loaded via shared_preload_libraries');
is($plain->safe_psql('postgres', 'SELECT 1'), '1', 'the server is fine');
$plain->stop;

done_testing();

sub cluster_id
{
	my ($n) = @_;
	return pin_dir_name($n);
}
