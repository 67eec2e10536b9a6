# 025_pin_trust.pl
#	The server uses only pins that root made for it.  Every pin of the
#	cluster's directory -- the maps, the ring buffer, the links, the
#	struct_ops map -- must be owned by root, give other users nothing and
#	give group access only to the server's group, in a directory that only
#	root can change; the directory and the pins are not followed through
#	symbolic links.  A pin that fails leaves the extension idle, with a
#	reason that names the pin and the cure, until it is repaired.
use strict;
use warnings;
use File::Basename;
use File::Path qw(make_path remove_tree);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PceTest;

my $node = new_node('pintrust');
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION pg_cache_ext');
my ($ok, $out, $err) = load_bpf($node);
ok($ok, 'loader runs') or BAIL_OUT("loader failed: $err");
ok(wait_until(sub { status($node)->{state} eq 'active' }, 5), 'active once the loader has run');
my $s = status($node);
my $pindir = $s->{pin_dir};
my $group = scalar getgrgid($));
my $stock = $s->{mechanism} eq 'stock';

# every pin the loader made for the server is checked, whatever its kind
# (the root-only owner pin binds the directory to its data directory: the
# server never opens it)
my @pins = sort grep { $_ ne 'owner' } map { basename($_) } glob("$pindir/*");
my @expect = qw(io_workers knobs loader_info scan_owners scan_pids stats);
push @expect, $stock
  ? qw(folio_events scan_positions tracker_link tracker_remove_link tracker_writeback_link)
  : qw(policy_link policy_ops);
for my $p (@expect)
{
	ok((grep { $_ eq $p } @pins), "the loader pinned $p");
}

# Wait until the state is $want, and the worker agrees (it keeps its
# descriptors open: it must notice too).
sub settles
{
	my ($want, $why_re) = @_;
	return wait_until(
		sub {
			my $st = status($node);
			return 0 unless $st->{state} eq $want;
			return 1 if $want eq 'active';
			return $st->{reason} =~ $why_re && $st->{worker} =~ /idle: /;
		},
		5);
}

# ---- other users' bits on each pin: maps, ring buffer, links ----
for my $p (@pins)
{
	my $path = "$pindir/$p";
	# maps are root:postgres 0660, links and policy_ops root:root 0600
	my $orig = sprintf('%04o', (lstat $path)[2] & 07777);
	for my $mode ('0666', '0604', '0661')
	{
		root('chmod', $mode, $path);
		my $re = qr/^refusing \Q$path\E: mode $mode lets other users in; pins must be owned by root, group \Q$group\E, mode 0660 \(rerun pg_cache_ext_loader\)/;
		ok(settles('idle', $re), "$p at mode $mode: idle, and the worker stops")
		  or diag(explain(status($node)));
		like(status($node)->{reason}, $re, "$p at mode $mode: the reason names the pin and the cure");
	}
	root('chmod', $orig, $path);
	ok(settles('active'), "$p back at $orig: active again");
}

# ---- the owner must be root ----
my $victim = $stock ? 'folio_events' : 'policy_link';
root('chown', "postgres:$group", "$pindir/$victim");
ok(settles('idle', qr/owned by uid/), "$victim owned by postgres: idle");
like(status($node)->{reason},
	qr/^refusing \Q$pindir\/$victim\E: owned by uid $>, not root \(uid 0 as this server sees it\); pins must be owned by root/,
	'the reason says the owner is wrong');
root('chown', "root:$group", "$pindir/$victim");
ok(settles('active'), 'owner root again: active');

# ---- group access only for the server's group ----
root('chown', 'root:root', "$pindir/scan_pids");
ok(settles('idle', qr/group 0 may open it/), 'scan_pids group root, mode 0660: idle');
like(status($node)->{reason},
	qr/^refusing \Q$pindir\E\/scan_pids: group 0 may open it, not only the server's group \Q$group\E; .*\(rerun pg_cache_ext_loader --group \Q$group\E\)/,
	'the reason names the group and the loader option');
root('chown', "root:$group", "$pindir/scan_pids");
ok(settles('active'), 'group back: active');

# a link as the loader leaves it (root:root 0600: the server only checks
# that it exists) gives nobody anything: accepted; with group access for
# the server's group, as an older loader left it, too
my $link = $stock ? 'tracker_link' : 'policy_link';
root('chown', "root:$group", "$pindir/$link");
root('chmod', '0660', "$pindir/$link");
ok(settles('active'), "$link root:$group 0660 (as an older loader left it): still active");
root('chown', 'root:root', "$pindir/$link");
root('chmod', '0600', "$pindir/$link");
ok(settles('active'), "$link root:root 0600 (as the loader pins it): active");
is(status($node)->{state}, 'active', 'and stays active');

# ---- the directory: root's, and nobody else may write into it ----
root('chmod', '0757', $pindir);
ok(settles('idle', qr/pin directory/), 'pin directory writable by others: idle');
like(status($node)->{reason},
	qr/^refusing \Q$pindir\E: the pin directory must be a directory owned by root that only root can change \(it is a directory, uid 0, mode 0757\)/,
	'the reason names the directory');
root('chmod', '0750', $pindir);
ok(settles('active'), 'directory repaired: active');

# ---- rerunning the loader is the cure it names ----
root('chmod', '0666', "$pindir/stats");
ok(settles('idle', qr/stats: mode 0666/), 'stats at 0666: idle');
($ok, $out, $err) = load_bpf($node);
ok($ok, 'loader rerun') or diag($err);
ok(settles('active'), 'the loader rerun repairs it: active');
$node->stop;

# ---- no symbolic links: neither the pin directory nor the pins ----
# A second cluster whose bpffs_dir is a directory the postgres account owns
# (not bpffs at all): there its pin directory is a symbolic link to the
# first cluster's pins, or a directory of symbolic links to them.  Either
# way the server refuses it, though every target is sound.
my $fake = PostgreSQL::Test::Utils::tempdir();
my $other = new_node('pinsymlink', 'pg_cache_ext.bpffs_dir' => "'$fake'");
$other->start;
my $other_id = pin_dir_name($other);
$other->safe_psql('postgres', 'CREATE EXTENSION pg_cache_ext');
$node->start;

symlink($pindir, "$fake/$other_id") or die "symlink: $!";
$s = status($other);
is($s->{state}, 'idle', 'pin directory a symbolic link to sound pins: idle');
like($s->{reason}, qr/^refusing \Q$fake\/$other_id\E: the pin directory must be a directory owned by root .*\(it is a symbolic link/,
	'the reason says it is a symbolic link');

unlink("$fake/$other_id");
make_path("$fake/$other_id");
chmod(0750, "$fake/$other_id");
symlink("$pindir/$_", "$fake/$other_id/$_") for @pins;
$s = status($other);
is($s->{state}, 'idle', 'a directory of symbolic links to sound pins: idle');
like($s->{reason}, qr/^refusing \Q$fake\/$other_id\E: the pin directory must be a directory owned by root .*uid $>/,
	'the reason says the directory is not root\'s');

$other->stop;
$node->stop;
unload_bpf($node);
done_testing();
