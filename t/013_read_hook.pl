# 013_read_hook.pl
#	Where the stock tracker sees reads (its read hook: the readers'
#	positions of the sibling rule and promotion on reads come from it), as
#	the loader chooses it from PCE_READ_HOOK_TABLE (--read-hook):
#	- by default the read tracepoint, where the kernel has it (6.10+),
#	  else fentry on filemap_read (Debian 12's 6.1), else none;
#	- --read-hook=fentry: fentry where the kernel accepts it; where it
#	  refuses fentry (as this project's build machines do) the loader says
#	  so and falls back to none, and cache_ext_status() says which;
#	- --read-hook=none: no read hook, promotion by activation;
#	- a value the loader does not know is refused, and a rerun with the
#	  default puts the first hook back.
#	What each hook does is tested by t/015, t/017 and t/018, on this kernel
#	(the tracepoint) and in the vm12 lane (fentry on 6.1).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PceTest;

my ($node, $s) = stock_node('read_hook');
my $default_hook = $s->{read_hook};

my $tracepoint = 'tp_btf/mm_filemap_get_pages';
my $fentry = 'fentry/filemap_read';

# ---- the default ----
if (kernel_has_read_tracepoint())
{
	is($s->{read_hook}, $tracepoint, "by default the read tracepoint ($s->{kernel})");
}
else
{
	like($s->{read_hook}, qr/^(\Q$fentry\E|)$/,
		"without the read tracepoint, fentry or none ($s->{kernel}: '$s->{read_hook}')");
}
like($s->{promotion}, $s->{read_hook} eq '' ? qr/activates|MGLRU/ : qr/^on: scan pages another backend reads are kept$/,
	"promotion is by reads exactly when a read hook is attached ($s->{promotion})");

# ---- --check lists the hooks the loader would try ----
my ($ok, $out, $err) = root('loader', '--check', '-D', $node->data_dir);
ok($ok, 'the loader --check runs');
my @listed = $out =~ /^read hook: +(\S+) /mg;
is("@listed", "$tracepoint $fentry none", '--check lists the tracepoint, fentry, none, in that order');
($ok, $out, $err) = root('loader', '--check', '-D', $node->data_dir, '--read-hook=fentry');
ok($ok, 'the loader --check --read-hook=fentry runs');
like($out, qr/^read hook: +\Q$fentry\E /m, 'it lists fentry');
unlike($out, qr/\Q$tracepoint\E/, 'and starts the list there');

# ---- fentry asked for ----
($ok, $out, $err) = load_bpf($node, '--read-hook=fentry');
ok($ok, 'the loader runs with --read-hook=fentry');
$s = status($node);
my $said = $out . $err;
note("loader: $said");
if ($s->{read_hook} eq $fentry)
{
	like($said, qr/reads are seen by \Q$fentry\E/, 'the loader says fentry is attached');
	like($s->{promotion}, qr/reads are kept/, 'promotion by reads');
}
else
{
	is($s->{read_hook}, '', "fentry not attached here ($s->{kernel}): no read hook");
	like($said, qr/(the tracker did not load with|cannot attach) \Q$fentry\E \([^)]+\): trying the next read hook|the kernel has no \Q$fentry\E: trying the next/,
		'the loader says fentry was refused or missing, and why');
	like($said, qr/no read hook: the readers' positions are not seen/, 'and what is lost');
	like($s->{promotion}, qr/activates|MGLRU/, "promotion falls back to activations ($s->{promotion})");
}
is($s->{mechanism}, 'stock', 'the stock mechanism stays in force');

# ---- none asked for (in any case, as --mode) ----
($ok, $out, $err) = load_bpf($node, '--read-hook=NONE');
ok($ok, 'the loader runs with --read-hook=NONE');
$s = status($node);
is($s->{read_hook}, '', 'no read hook');
like($s->{promotion}, qr/activates|MGLRU/, "promotion by activation ($s->{promotion})");

# ---- the default again, then a bad value ----
($ok, $out, $err) = load_bpf($node);
ok($ok, 'the loader runs again with the default');
is(status($node)->{read_hook}, $default_hook, "the default's hook is back ('$default_hook')");

($ok, $out, $err) = load_bpf($node, '--read-hook=kprobe');
ok(!$ok, 'an unknown --read-hook is refused');
like($err, qr/invalid --read-hook "kprobe": use auto, tracepoint, fentry or none/, 'with the choices');
$s = status($node);
is($s->{read_hook}, $default_hook, 'and what was in place stays');
is($s->{mechanism}, 'stock', 'with the stock mechanism in force');

$node->stop;
done_testing();
