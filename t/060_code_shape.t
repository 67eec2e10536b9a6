# 060_code_shape.t
#	No function in src/ or loader/ is longer than 80 lines (declarative
#	tables are not functions): scripts/check-shape.sh.  The checker is
#	tried on a function of 81 lines first, so that a checker that finds
#	nothing cannot pass.  No cluster, no root: runs anywhere.
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Spec;
use File::Temp qw(tempdir);
use Test::More;

my $src = File::Spec->rel2abs(File::Spec->catdir(dirname(__FILE__), '..'));
my $checker = "$src/scripts/check-shape.sh";

# a function of exactly 81 lines (braces included), and one of 80
sub c_function
{
	my ($name, $lines) = @_;
	my $body = join('', map { "\tx += $_;\t/* { not a brace } */\n" } 1 .. $lines - 4);
	return "static int\n$name(int x)\n{\n$body\treturn x;\n}\n";
}
my $dir = tempdir(CLEANUP => 1);
open(my $fh, '>', "$dir/long.c") or die "$dir/long.c: $!";
print $fh "static const int table[] = {\n" . join('', map { "\t$_,\n" } 1 .. 100) . "};\n\n";
print $fh c_function('fits', 80), "\n", c_function('too_long', 81);
close $fh;

my $out = `bash '$checker' 80 '$dir/long.c' 2>&1`;
isnt($? >> 8, 0, 'the checker fails on a function of 81 lines');
like($out, qr/long\.c:\d+: too_long is 81 lines/, 'and names it, with its length');
unlike($out, qr/fits|table/, 'a function of 80 lines and a long table pass');

$out = `bash '$checker' 2>&1`;
is($? >> 8, 0, 'no function in src/ or loader/ is over 80 lines') or diag($out);

done_testing();
