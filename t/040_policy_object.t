# 040_policy_object.t
#	The cache_ext policy object (bpf/policy.bpf.o) opens with the build
#	machine's libbpf and has its struct_ops map and every callback program.
#	No load: this runs on any kernel, as root or as postgres.
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Spec;
use Test::More;

my $build = $ENV{PCE_BUILD_DIR}
  || File::Spec->rel2abs(File::Spec->catdir(dirname(__FILE__), '..'));
my $obj  = "$build/bpf/policy.bpf.o";
my $tool = "$build/test/check_policy_object";

plan skip_all => "$obj not built (run make)" unless -f $obj;
unless (-x $tool)
{
	my $src = "$build/test/check_policy_object.c";
	plan skip_all => "$tool not built (make test/check_policy_object)"
	  unless -f $src
	  && system('cc', '-O2', '-o', $tool, $src, '-lbpf', '-lelf', '-lz') == 0;
}

my @out = `'$tool' '$obj' 2>&1`;
my $rc  = $? >> 8;
my ($checks, $failed) = (0, 0);
for (@out)
{
	if (/^(not )?ok \d+ - (.*)$/)
	{
		$checks++;
		$failed++ if $1;
		ok(!$1, $2);
	}
	elsif (!/^1\.\.\d+/)
	{
		diag($_);
	}
}
cmp_ok($checks, '>=', 20, 'check_policy_object ran all its checks');
is($rc, 0, 'check_policy_object exit status');
done_testing();
