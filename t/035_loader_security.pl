# 035_loader_security.pl
#	The root loader trusts nothing the postgres account controls (issue 10):
#	symlinks swapped in its paths while it runs, paths from files postgres
#	writes, includes of FIFOs and devices, root-only files behind symlinks,
#	concurrent runs, and paths that are not in their normal form.
#
#	The tests run as postgres, the account the loader must not obey; the
#	loader runs as root through test/root-helper.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use POSIX ();
use PceTest;

my $bindir = `pg_config --bindir`;
chomp $bindir;
my $node = new_node('secure');
my $data = $node->data_dir;
my $base = $node->basedir;
my ($id) = `$bindir/pg_controldata -D '$data'` =~ /Database system identifier:\s+(\d+)/;
$id //= '';
like($id, qr/^\d+$/, "the cluster's system identifier ($id)");

my $canary = 'sec' . $$;
root('canary-make', $canary, $id) or BAIL_OUT('cannot make the canary');
my $canary_dir = "/var/tmp/pce-canary-$canary";
my $secret_number = unpack('Q<', "pg_cache");    # the secret file's first 8 bytes as a cluster id
sub canary_stat { my (undef, $out) = root('canary-stat', $canary); return $out // '' }
my $canary_before = canary_stat();
like($canary_before, qr/^700 0 0 \Q$canary_dir\E$/m, 'canary: a root-only directory');

# nothing a loader run printed may hold what only root can read
sub leaks
{
	my ($text) = @_;
	return $text =~ /LEAKED-SECRET|$secret_number/;
}

# ---- a symlink swapped in bpffs_dir while the loader runs ----
# The postgres account owns a directory on the (mode 1777) bpffs and a
# symlink beside it that a background process swaps, as fast as it can,
# between that directory and a root-only one.  The loader, run 200 times
# with that path (from postgresql.auto.conf, then from its command line),
# must never change anything outside the pin directory.
my $real = "/sys/fs/bpf/pce-test-real-$$";
my $link = "/sys/fs/bpf/pce-test-swap-$$";
mkdir $real or die "mkdir $real: $!";
symlink($real, $link) or die "symlink: $!";
my $swapper = fork // die "fork: $!";
if ($swapper == 0)
{
	for (;;)
	{
		for my $target ($real, $canary_dir)
		{
			unlink "$link.tmp";
			symlink($target, "$link.tmp") and rename("$link.tmp", $link);
		}
	}
	POSIX::_exit(0);
}
my $swapped_dir = "$link/pg_cache_ext";
my %outcome;
my $leaked = 0;
$node->append_conf('postgresql.auto.conf', "pg_cache_ext.bpffs_dir = '$swapped_dir'\n");
for my $i (1 .. 200)
{
	my @args = $i <= 100 ? () : ('--bpffs-dir', $swapped_dir);
	my ($ok, $out, $err) = root('loader', '-D', $data, @args);
	$outcome{ ($i <= 100 ? 'conf ' : 'cmdline ') . ($ok ? 'loaded' : 'refused') }++;
	$leaked++ if leaks("$out$err");
}
kill 'KILL', $swapper;
waitpid($swapper, 0);
note('loader runs: ' . join(', ', map { "$_ $outcome{$_}" } sort keys %outcome));
is(canary_stat(), $canary_before,
	'200 loader runs with a swapped symlink in bpffs_dir changed no owner or mode outside the pin directory');
is($outcome{'conf loaded'} // 0, 0, 'a bpffs_dir from postgresql.auto.conf (written by postgres) is never used');
is($outcome{'cmdline loaded'} // 0, 0, 'a bpffs_dir through a symlink is refused even from the command line');
my ($ok, $out, $err) = root('loader', '-D', $data);
like($err, qr/^pg_cache_ext_loader: error: \S+postgresql.auto.conf line \d+: pg_cache_ext.bpffs_dir is set in a file root does not own .*give --bpffs-dir on the command line/m,
	'one clear error naming the setting and the file');
unlike($err, qr/pce-test-swap/, 'and not the value');
root('loader', '--unload', '-D', $data, '--bpffs-dir', "$real/pg_cache_ext");
root('bpffs-rmdir', "$real/pg_cache_ext");
unlink $link, "$link.tmp";
rmdir $real;

# ---- the cgroup: never one the postgres account names or swaps ----
$node->adjust_conf('postgresql.auto.conf', 'pg_cache_ext.bpffs_dir', "''");
$node->append_conf('postgresql.auto.conf', "pg_cache_ext.cgroup = '/sys/fs/cgroup/cache_ext_evil'\n");
($ok, $out, $err) = root('loader', '--check', '-D', $data, '--mode', 'cache_ext');
ok(!$ok, 'a cgroup from postgresql.auto.conf is refused');
like($err, qr/pg_cache_ext.cgroup is set in a file root does not own .*give --cgroup on the command line/,
	'one clear error naming the setting');
$node->adjust_conf('postgresql.auto.conf', 'pg_cache_ext.cgroup', "''");
# a --cgroup through a symlink (the cgroup is opened once, by fd, following none)
my $cglink = "$base/cg-link";
symlink('/sys/fs/cgroup', $cglink) or die "symlink: $!";
($ok, $out, $err) = root('loader', '--check', '-D', $data, '--mode', 'cache_ext', '--cgroup', "$cglink/cache_ext_x");
ok(!$ok, 'a --cgroup through a symlink is refused');
like($err, qr/cannot open cgroup "\S+cg-link\/cache_ext_x": it is or goes through a symbolic link/,
	'one clear error: the symlink is not followed');

# ---- includes of a FIFO and of a device are refused promptly ----
POSIX::mkfifo("$base/fifo.conf", 0600) or die "mkfifo: $!";
for my $target ("$base/fifo.conf", '/dev/zero')
{
	my $conf = "$base/inc-" . ($target =~ /fifo/ ? 'fifo' : 'zero') . '.conf';
	PostgreSQL::Test::Utils::append_to_file($conf, "include '$target'\n");
	my $t0 = time;
	($ok, $out, $err) = root('loader', '--check', '-D', $data, '--config-file', $conf);
	my $took = time - $t0;
	ok(!$ok, "an include of $target is refused");
	like($err, qr/"\Q$target\E" is not a regular file/, "one clear error for $target");
	cmp_ok($took, '<', 2, sprintf('and promptly (%.2f s)', $took));
}

# ---- root-only files behind symlinks leak nothing ----
symlink("$canary_dir/secret", "$base/leak.conf") or die "symlink: $!";
PostgreSQL::Test::Utils::append_to_file("$base/inc-link.conf", "include 'leak.conf'\n");
($ok, $out, $err) = root('loader', '--check', '-D', $data, '--config-file', "$base/inc-link.conf");
ok(!$ok, 'an include that is a symlink to a root-only file is refused');
ok(!leaks("$out$err"), 'and nothing of that file is printed') or diag("$out$err");
like($err, qr/"\S+leak.conf": it is or goes through a symbolic link/, 'one clear error: symlink not followed');
PostgreSQL::Test::Utils::append_to_file("$base/inc-abs.conf", "include '$canary_dir/secret'\n");
($ok, $out, $err) = root('loader', '--check', '-D', $data, '--config-file', "$base/inc-abs.conf");
ok(!$ok && !leaks("$out$err"), 'an include of a root-only file by its path leaks nothing') or diag("$out$err");
like($err, qr/Permission denied/, 'the loader reads it as the cluster owner would: permission denied');

# a data directory whose global/pg_control links to a root-only file
my $fake = "$base/fakedata";
mkdir $fake and mkdir "$fake/global" or die "mkdir: $!";
chmod 0700, $fake;
symlink("$canary_dir/secret", "$fake/global/pg_control") or die "symlink: $!";
($ok, $out, $err) = root('loader', '--check', '-D', $fake);
ok(!$ok, 'a global/pg_control that is a symlink to a root-only file is refused');
ok(!leaks("$out$err"), 'and none of its bytes are printed as the cluster id') or diag("$out$err");

# ---- concurrent loaders: all succeed, the same pins ----
my $cdir = "/sys/fs/bpf/pce-test-conc-$$";
sub pin_listing
{
	opendir(my $dh, "$cdir/$id") or return "cannot open: $!";
	my @l;
	for my $name (sort grep { !/^\./ } readdir $dh)
	{
		my @st = lstat("$cdir/$id/$name");
		push @l, sprintf('%s %04o %d %d', $name, $st[2] & 07777, $st[4], $st[5]);
	}
	return join("\n", @l);
}
($ok, $out, $err) = root('loader', '-D', $data, '--bpffs-dir', $cdir);
ok($ok, 'a first loader run') or diag($err);
my $reference = pin_listing();
like($reference, qr/^scan_pids 0660 0 \d+$/m, 'pins root-owned, mode 0660');
my ($pairs_ok, $same) = (0, 0);
for my $pair (1 .. 20)
{
	my @h;
	my @res;
	for my $k (0, 1)
	{
		my ($o, $e) = ('', '');
		my $helper = $ENV{PCE_ROOT_HELPER} || '/usr/local/libexec/pg_cache_ext-test-root-helper';
		my @cmd = ($> == 0 ? () : ('sudo', '-n'), $helper, 'loader', '-D', $data, '--bpffs-dir', $cdir);
		push @res, [ \$o, \$e ];
		push @h, IPC::Run::start(\@cmd, '>', \$o, '2>', \$e);
	}
	my $both = 1;
	for my $k (0, 1)
	{
		$h[$k]->finish or do { $both = 0; diag("pair $pair: ${$res[$k][1]}") };
	}
	$pairs_ok++ if $both;
	$same++ if pin_listing() eq $reference;
}
is($pairs_ok, 20, '20 concurrent loader pairs all succeed');
is($same, 20, 'and each leaves the same pins');
root('loader', '--unload', '-D', $data, '--bpffs-dir', $cdir);
root('bpffs-rmdir', $cdir);

# ---- paths in their normal form only; the bpffs mount itself is never changed ----
my (undef, $mnt) = root('bpffs-mount', "dot$$");
chomp $mnt;
my $mode_before = (stat $mnt)[2] & 07777;
is(sprintf('%04o', $mode_before), '1777', 'a bpffs of mode 1777');
for my $bad ("$mnt/.", "$mnt/pg_cache_ext/", "$mnt//pg_cache_ext", "$mnt/x/../pg_cache_ext")
{
	($ok, $out, $err) = root('loader', '-D', $data, '--bpffs-dir', $bad);
	ok(!$ok, "--bpffs-dir $bad is refused");
	like($err, qr/^pg_cache_ext_loader: error: invalid --bpffs-dir .*: a path with /m, 'one clear error');
}
is(sprintf('%04o', (stat $mnt)[2] & 07777), '1777', "the bpffs mount's mode is unchanged");
is((stat $mnt)[4], 0, "and its owner");
root('loader', '--unload', '-D', $data, '--bpffs-dir', "$mnt/.");
root('bpffs-umount', "dot$$");

# ---- a path from a file only root can write is taken ----
my $rootconf_dir = "/sys/fs/bpf/pce-test-rootconf-$$";
my (undef, $rootconf) = root('root-conf', "rc$$", "pg_cache_ext.bpffs_dir = '$rootconf_dir'");
chomp $rootconf;
($ok, $out, $err) = root('loader', '-D', $data, '--config-file', $rootconf);
ok($ok, 'pg_cache_ext.bpffs_dir from a root-owned file is used') or diag($err);
ok(-e "$rootconf_dir/$id/scan_pids", 'and the pins are there');
root('loader', '--unload', '-D', $data, '--config-file', $rootconf);
root('bpffs-rmdir', $rootconf_dir);

is(canary_stat(), $canary_before, 'at the end, the canary is as it was');
root('canary-rm', $canary);
done_testing();
