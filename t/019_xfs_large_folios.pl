# 019_xfs_large_folios.pl
#	The tracker records a large folio with its real size.  XFS caches file
#	data in large folios; the tracker takes a folio's order from struct
#	folio, whose layout changed in 6.6 (bpf/tracker.bpf.c,
#	large_folio_order()), and a wrong order records a large folio as one
#	page, so that dropping the record leaves most of it cached.  A file on
#	an XFS loop image is read cold by a marked process (test/pce_mark_self),
#	then exactly the folios the tracker recorded are dropped: the recorded
#	sizes add up to what the read cached, some folio is larger than a page,
#	and nothing of the file is left.  The tracker runs for a pin directory
#	of the test's own, where no evictor reads the records.
#	test/vm/xfs-large-folio.sh is the same check as a script, for the VMs
#	that boot older kernels (6.1, where the order has a field of its own).
use strict;
use warnings;
use File::Basename;
use File::Spec;
use PostgreSQL::Test::Utils;
use Test::More;
use PceTest;

my $src = File::Spec->rel2abs(File::Basename::dirname(__FILE__) . '/..');
my $mark = "$src/test/pce_mark_self";
my $name = "lf$$";
my $pin_root = "/sys/fs/bpf/pce-test-xfs-$$";
my $id = 'xfs-check';

my ($ok, $mnt, $err) = root('xfs-mount', $name, 64);
plan skip_all => 'mkfs.xfs is not installed here (xfsprogs; scripts/setup.sh installs it on the host)'
  if !$ok && $err =~ /mkfs\.xfs missing/;
ok($ok, 'an XFS loop image is mounted') or BAIL_OUT("xfs-mount: $err");
chomp $mnt;

END
{
	local $?;
	root('loader', '--unload', '--cluster-id', $id, '--bpffs-dir', $pin_root);
	root('bpffs-rmdir', $pin_root) if -d $pin_root;
	root('xfs-umount', $name);
}

($ok, undef, $err) = root('loader', '--cluster-id', $id, '--bpffs-dir', $pin_root, '--mode', 'stock');
ok($ok, 'the tracker is loaded for a pin directory of the test\'s own') or BAIL_OUT("loader: $err");

sub tool
{
	my @args = @_;
	my ($out, $terr);
	IPC::Run::run([ $mark, @args ], '>', \$out, '2>', \$terr) or die "pce_mark_self @args: $terr";
	return $out;
}

pause_damon();    # it would page out some of the file read (PceTest.pm)
my (undef, $cold) = split ' ', tool('resident', "$mnt/data");
is($cold, 0, 'nothing of the file is cached before the read');
tool('-p', "$pin_root/$id", 'read', "$mnt/data");
my (undef, $cached, $pages) = split ' ', tool('resident', "$mnt/data");
my %rec = split ' ', tool('drain', "$pin_root/$id", "$mnt/data");
my (undef, $left) = split ' ', tool('resident', "$mnt/data");
note("file: $pages pages, $cached cached after the marked read; tracker: $rec{records} records, "
	  . "$rec{pages} pages, the largest $rec{largest} pages; $left pages left after the drop");

cmp_ok($cached, '>=', $pages * 0.99, 'the marked read cached the file');
cmp_ok($rec{largest}, '>', 1, "large folios were recorded (the largest: $rec{largest} pages)");
cmp_ok($rec{records}, '<', $pages / 2, "fewer records ($rec{records}) than pages ($pages)");
cmp_ok($rec{pages}, '>=', $cached * 0.99, "the recorded sizes add up to what the read cached ($rec{pages} of $cached pages)");
cmp_ok($rec{pages}, '<=', $pages, 'and to no more than the file');
cmp_ok($left, '<=', $pages / 100, "dropping the recorded folios dropped the file wholly ($left pages left)");

done_testing();
