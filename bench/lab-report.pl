#!/usr/bin/perl
# bench/lab-report.pl PHASES_FILE [PARAMS] - the table of a bench/lab.sh run:
# per workload, per configuration, TPS and p99 latency with their ratios to
# (a) and to (y), hot-set residency, refaults and scans done.
use strict;
use warnings;

my ($file, $params) = @ARGV;
die "usage: lab-report.pl PHASES_FILE [PARAMS]\n" unless $file;
my %name = (
	a => 'no extension',
	b => 'pg_cache_ext (stock)',
	c => 'pg_cache_ext (cache_ext)',
	y => 'no memory limit (reference)',
);
my (%r, @kinds);
open(my $fh, '<', $file) or die "$file: $!\n";
while (<$fh>)
{
	my %f = /(\w+)=(\S*)/g;
	next unless $f{cfg} && $f{kind};
	push @kinds, $f{kind} unless grep { $_ eq $f{kind} } @kinds;
	$r{ $f{kind} }{ $f{cfg} } = \%f;
}

sub ratio
{
	my ($x, $y) = @_;		# values, or undef where a configuration did not run
	return '-' unless defined $x && defined $y && $y > 0;
	return sprintf('%.2fx', $x / $y);
}

print "cache_ext lab (QEMU TCG, 2 vCPUs), $params\n" if $params;
for my $kind (@kinds)
{
	my $k = $r{$kind};
	my ($ka, $ky) = map { $k->{$_} || {} } qw(a y);
	printf "\nscans: %s\n", $kind eq 'count' ? 'SELECT count(*) loop' : 'VACUUM (DISABLE_PAGE_SKIPPING) loop';
	printf "%-32s %8s %7s %7s %9s %7s %7s %8s %9s %6s\n",
	  'config', 'TPS', 'vs(a)', 'vs(y)', 'p99 ms', 'vs(a)', 'vs(y)', 'hot %', 'refaults', 'scans';
	for my $c (qw(a b c y))
	{
		my $p = $k->{$c} or next;
		printf "%-32s %8.0f %7s %7s %9.2f %7s %7s %8s %9s %6s\n",
		  "($c) $name{$c}", $p->{tps} || 0, ratio($p->{tps}, $ka->{tps}), ratio($p->{tps}, $ky->{tps}),
		  $p->{p99_ms} || 0, ratio($p->{p99_ms}, $ka->{p99_ms}), ratio($p->{p99_ms}, $ky->{p99_ms}),
		  $p->{hot_pct} // '-', $p->{refaults} // '-', $p->{scans} // '-';
	}
}
