# 050_fuzz.pl
#	Runs the libFuzzer targets over every parser of outside input (the
#	scan_commands GUC, the loader's command line and its reader of
#	postgresql.conf) for a bounded time each
#	(PCE_FUZZ_SECONDS, default 20).  A crash, a sanitizer report or a
#	violated invariant fails the test and leaves the input in tmp_check/.
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Copy qw(copy);
use File::Path qw(make_path);
use Test::More;

my $src = File::Spec->rel2abs(dirname(__FILE__) . '/..');
my $seconds = $ENV{PCE_FUZZ_SECONDS} || 20;
my $work = ($ENV{TESTDIR} || $src) . '/tmp_check/fuzz';
make_path($work);

system('make', '-s', '-C', $src, 'fuzzers') == 0
  or BAIL_OUT('cannot build the fuzzers (needs clang and libclang-rt-14-dev)');

# The input libFuzzer saved for a crash, printable and with its length: a
# failure in CI can be replayed (and added to fuzz/seeds/) from the log.
sub crash_input
{
	my ($out) = @_;
	my ($file) = $out =~ /Test unit written to (\S+)/ or return '';
	open(my $fh, '<:raw', "$work/$file") or return '';
	local $/;
	my $bytes = <$fh>;
	my $shown = substr($bytes, 0, 400) =~ s/([^\x20-\x7e])/sprintf('\\x%02x', ord($1))/ger;
	return sprintf("\ncrash input (%d bytes): \"%s\"%s", length($bytes), $shown,
		length($bytes) > 400 ? ' ...' : '');
}

for my $target (qw(scan_commands loader_options loader_config))
{
	my $corpus = "$work/corpus-$target";
	make_path($corpus);
	copy($_, $corpus) for glob("$src/fuzz/seeds/$target/*");
	my $out = `cd '$work' && '$src/fuzz/fuzz_$target' -max_total_time=$seconds -timeout=5 -rss_limit_mb=1024 '$corpus' 2>&1`;
	my $rc = $? >> 8;
	is($rc, 0, "fuzz_$target: no crash, sanitizer report or broken invariant in ${seconds}s")
	  or diag(join("\n", (split /\n/, $out)[-30 .. -1]) . crash_input($out));
	my ($runs) = $out =~ /Done (\d+) runs/;
	cmp_ok($runs // 0, '>', 1000, "fuzz_$target: ran " . ($runs // 0) . " inputs");
}

done_testing();
