#!/usr/bin/perl
# bench/report.pl OUTDIR - summarise a bench/run.sh run: table (stdout),
# results.csv, results.json, per-second series and latency PNGs (gnuplot).
use strict;
use warnings;

my $out = shift or die "usage: report.pl OUTDIR\n";
my %P = read_env("$out/params.env");
my %cfgname = (
	a => 'no extension',
	b => 'pg_cache_ext (stock)',
	c => 'pg_cache_ext (cache_ext)',
	d => 'pgfincore dontneed',
	e => 'scanner in own cgroup',
	y => 'no memory limit (ref.)',
	z => 'no scans (reference)',
);

sub read_env {
	my ($f) = @_;
	my %h;
	open(my $fh, '<', $f) or return %h;
	while (<$fh>) { chomp; $h{$1} = $2 if /^(\w+)=(.*)$/; }
	return %h;
}

sub pct {
	my ($sorted, $p) = @_;
	return 0 unless @$sorted;
	my $i = int($p / 100 * $#$sorted + 0.5);
	return $sorted->[$i];
}

# ---- per phase ----
my @phases;
for my $dir (sort glob("$out/phases/*")) {
	next unless -f "$dir/phase.env";
	my %ph = read_env("$dir/phase.env");
	$ph{dir} = $dir;
	($ph{tag}) = $dir =~ m{([^/]+)$};
	# Latency and TPS are measured in the steady state: transactions that
	# ended from settle_s seconds after the phase start (when the scans have
	# had time to push pages through the cache) to its end.
	my $settle = $P{settle_s} // 0;
	my $win = ($ph{duration_s} || 1) - $settle;
	my (@lat, %sec, $n_all);
	$n_all = 0;
	for my $log (glob("$dir/oltp.*")) {
		open(my $fh, '<', $log) or next;
		while (<$fh>) {
			# client_id transaction_no time_us script_no time_epoch time_us_frac
			my @f = split;
			next unless @f >= 6 && $f[2] =~ /^\d+$/;
			$n_all++;
			push @{ $sec{ $f[4] } }, $f[2];
			my $t = $f[4] + $f[5] / 1e6 - $ph{t_start};
			push @lat, $f[2] if $t >= $settle && $t < $ph{duration_s};
		}
	}
	@lat = sort { $a <=> $b } @lat;
	my $n = scalar @lat;
	my $sum = 0;
	$sum += $_ for @lat;
	$ph{tx} = $n;
	$ph{tps} = $n / $win;
	$ph{tps_whole} = $ph{duration_s} ? $n_all / $ph{duration_s} : 0;
	$ph{lat_avg_ms} = $n ? $sum / $n / 1000 : 0;
	$ph{p50_ms} = pct(\@lat, 50) / 1000;
	$ph{p95_ms} = pct(\@lat, 95) / 1000;
	$ph{p99_ms} = pct(\@lat, 99) / 1000;
	# per-second series, relative to the phase start
	open(my $sf, '>', "$dir/series.dat") or die;
	print $sf "# t_s tps mean_ms p99_ms\n";
	for my $s (sort { $a <=> $b } keys %sec) {
		my @l = sort { $a <=> $b } @{ $sec{$s} };
		my $t = $s - $ph{t_start};
		next if $t < 0 || $t >= $ph{duration_s};
		my $m = 0;
		$m += $_ for @l;
		printf $sf "%d %d %.3f %.3f\n", $t, scalar @l, $m / @l / 1000, pct(\@l, 99) / 1000;
	}
	close $sf;
	push @phases, \%ph;
}
die "no phases found in $out/phases\n" unless @phases;

# ---- aggregate over rounds: key = dist/scan/config ----
my (%agg, @wl_order, %seen_wl);
my @num = qw(tps tps_whole p50_ms p95_ms p99_ms lat_avg_ms refaults_file pgmajfault disk_read_bytes
	hot_cached_end_pct hot_cached_start_pct scans_done pce_bytes_dropped);
for my $ph (@phases) {
	my $wl = "$ph->{dist}:$ph->{scan}";
	my $k = "$ph->{dist}:$ph->{scan}:$ph->{config}";
	push @{ $agg{$k}{runs} }, $ph;
	if ($ph->{scan} ne 'none' && !$seen_wl{$wl}++) { push @wl_order, $wl; }
}
for my $k (keys %agg) {
	my $runs = $agg{$k}{runs};
	for my $m (@num) {
		my $s = 0;
		$s += ($_->{$m} // 0) for @$runs;
		$agg{$k}{$m} = $s / @$runs;
	}
	@{ $agg{$k} }{qw(dist scan config)} = split /:/, $k;
	$agg{$k}{rounds} = scalar @$runs;
	$agg{$k}{tps_rounds} = join('/', map { sprintf('%.0f', $_->{tps}) } sort { $a->{round} <=> $b->{round} } @$runs);
}
# order workloads as run.sh ran them
my @order = split ' ', ($P{workloads} // '');
my %rank;
@rank{@order} = 0 .. $#order;
@wl_order = sort { ($rank{$a} // 99) <=> ($rank{$b} // 99) } @wl_order;
my @wl_noscan = grep { my ($d) = split /:/; 1 } ();

sub ratio { my ($x, $y) = @_; return (defined $x && defined $y && $y > 0) ? $x / $y : undef; }
sub fmt_r { my ($r) = @_; return defined $r ? sprintf("%.2fx", $r) : '-'; }

my @cfg_order = qw(z y a b c d e);
my @csv;
my %summary;
print "\n";
printf "pg_cache_ext benchmark (%s mode): kernel %s, %s CPUs, cache_ext kernel: %s\n",
	$P{mode}, $P{kernel}, $P{cpus}, $P{cache_ext_kernel};
printf "hot set pgbench_accounts+pkey %s MiB (scale %s), scanned table %s MiB, memory cgroup %s MiB,\n",
	$P{hot_mb}, $P{scale}, $P{scan_table_mb}, $P{cgroup_limit_mb};
printf "shared_buffers %s, scan budget %s MiB, (e) scan cgroup %s MiB, %s OLTP clients, %ss per phase x %s round(s),\n",
	$P{shared_buffers}, $P{scan_budget_mb}, $P{scan_cgroup_mb}, $P{clients}, $P{duration_s}, $P{rounds};
printf "TPS and latency: steady state, from %ss after the scans start to the end of the phase\n", $P{settle_s} // 0;
printf "read throttle: %s\n",
	($P{throttle_read_iops} || $P{throttle_read_mbps})
	? "blkio $P{throttle_read_iops} IOPS / $P{throttle_read_mbps} MB/s on $P{disk}" : "none";
if (($P{damon} // 'off') ne 'off') {
	print "note: DAMON runs on this machine ($P{damon}): it pages out page-cache pages that look idle, such as the\n",
		"  page-cache copies of blocks held in shared_buffers; the few hundred refaults per phase in (z) and (b) come\n",
		"  from it, and under a saturated (throttled) disk each such miss waits behind the scans' reads\n";
}
print "columns: TPS and latency percentiles of the OLTP clients (mean over rounds); vs a / vs z: TPS ratio;\n",
	"  refaults = workingset_refault_file and majflt = pgmajfault of the cluster's memory cgroup during the phase;\n",
	"  hot % = pgbench_accounts + pkey in the page cache at the end (cachestat); read MiB = disk reads of the\n",
	"  cluster (blkio); scans = scans completed; drop MiB = pages pg_cache_ext dropped (fadvise DONTNEED)\n";
for my $wl (@wl_order) {
	my ($dist, $scan) = split /:/, $wl;
	my $z = $agg{"$dist:none:z"};
	my $a = $agg{"$dist:$scan:a"};
	my $desc = $scan eq 'count2' ? "two looping count(*) scanners, ${\($P{scan_offset_s}//3)}s apart"
		: $scan eq 'count' ? "one looping count(*) scanner"
		: $scan eq 'vacuum' ? "looping VACUUM (DISABLE_PAGE_SKIPPING)"
		: $scan eq 'dump' ? "looping pg_dump -t scan_t"
		: $scan eq 'tar' ? "looping tar of the whole data directory outside the server (b, c: under pg_cache_ext_run)" : $scan;
	print "\n== OLTP $dist point SELECTs + $desc ==\n";
	my $hdr = sprintf "%-26s %8s %6s %6s %7s %7s %7s %6s %9s %7s %7s %9s %6s %8s  %s\n",
		'config', 'TPS', 'vs a', 'vs z', 'p50 ms', 'p95 ms', 'p99 ms', 'p99/z', 'refaults', 'majflt',
		'hot %', 'read MiB', 'scans', 'drop MiB', 'TPS by round';
	print $hdr;
	print '-' x (length($hdr) - 1), "\n";
	for my $c (@cfg_order) {
		my $r = $c eq 'z' ? $z : $agg{"$dist:$scan:$c"};
		if (!$r) {
			if ($c eq 'c' && ($P{configs} // '') =~ /c/) {
				printf "%-26s skipped: kernel has no cache_ext\n", "(c) $cfgname{c}";
			}
			next;
		}
		printf "%-26s %8.0f %6s %6s %7.2f %7.2f %7.2f %6s %9d %7d %7.1f %9.0f %6d %8.0f  %s\n",
			"($c) $cfgname{$c}", $r->{tps}, fmt_r(ratio($r->{tps}, $a ? $a->{tps} : undef)),
			fmt_r(ratio($r->{tps}, $z ? $z->{tps} : undef)), $r->{p50_ms}, $r->{p95_ms}, $r->{p99_ms},
			fmt_r(ratio($r->{p99_ms}, $z ? $z->{p99_ms} : undef)), $r->{refaults_file}, $r->{pgmajfault},
			$r->{hot_cached_end_pct}, $r->{disk_read_bytes} / 1048576, $r->{scans_done},
			$r->{pce_bytes_dropped} / 1048576, $r->{tps_rounds};
	}
	my $b = $agg{"$dist:$scan:b"};
	my $y = $agg{"$dist:$scan:y"};
	if ($y) {
		for my $c (qw(b c)) {
			my $r = $agg{"$dist:$scan:$c"} or next;
			printf "(%s)/(y), against the same scans with nothing evicted: TPS %s, p99 %s\n", $c,
				fmt_r(ratio($r->{tps}, $y->{tps})), fmt_r(ratio($r->{p99_ms}, $y->{p99_ms}));
		}
	}
	if ($a && $b && $z) {
		my $tb = ratio($b->{tps}, $a->{tps});
		my $tz = ratio($b->{tps}, $z->{tps});
		my $pz = ratio($b->{p99_ms}, $z->{p99_ms});
		printf "targets for (b): TPS >= 1.7x (a): %s (%s); TPS >= 90%% of (z): %s (%.0f%%); p99 <= 1.5x (z): %s (%s)\n",
			$tb >= 1.7 ? 'met' : 'MISSED', fmt_r($tb), $tz >= 0.9 ? 'met' : 'MISSED', 100 * $tz,
			$pz <= 1.5 ? 'met' : 'MISSED', fmt_r($pz);
		$summary{$wl} = { a => $a, b => $b, z => $z };
		if ($tz < 0.9 && $b->{hot_cached_end_pct} >= 98) {
			printf "note: in (b) the hot set stayed %.0f%% cached (%d refaults), so the remaining %.0f%% gap to (z) is not the\n" .
				"      page cache: it is CPU and I/O the scans themselves use (and anything else running on the machine),\n" .
				"      which pg_cache_ext cannot remove\n", $b->{hot_cached_end_pct}, $b->{refaults_file}, 100 * (1 - $tz);
		}
	}
	if ($a && $z) {
		my $loss = 1 - ratio($a->{tps}, $z->{tps});
		my $hot_a = $a->{hot_cached_end_pct};
		if ($hot_a >= 95 && $loss > 0.1) {
			printf "note: without the extension the hot set stayed %.0f%% cached, so the %.0f%% TPS loss vs (z) is CPU/disk\n" .
				"      contention from the scans, which no page-cache policy can remove\n", $hot_a, 100 * $loss;
		}
	}
}

# ---- plain words (used by scripts/demo.sh) ----
open(my $sw, '>', "$out/summary.txt") or die;
for my $wl (@wl_order) {
	my $s = $summary{$wl} or next;
	my ($a, $b, $z) = @$s{qw(a b z)};
	my ($dist, $scan) = split /:/, $wl;
	my $line = sprintf("%s OLTP with %s: with pg_cache_ext the OLTP load ran at %.0f TPS during the scans vs %.0f without it " .
		"(%.2fx; %.0f TPS with no scans at all, so %.0f%% of that); p99 latency %.2f ms vs %.2f ms (no scans: %.2f ms). " .
		"The hot table stayed %.0f%% cached vs %.0f%% without the extension; page-cache refaults %d vs %d; " .
		"disk reads %.0f MiB vs %.0f MiB.",
		$dist, $scan eq 'count2' ? 'two looping count(*) scans' : $scan,
		$b->{tps}, $a->{tps}, ratio($b->{tps}, $a->{tps}) // 0, $z->{tps}, 100 * (ratio($b->{tps}, $z->{tps}) // 0),
		$b->{p99_ms}, $a->{p99_ms}, $z->{p99_ms},
		$b->{hot_cached_end_pct}, $a->{hot_cached_end_pct}, $b->{refaults_file}, $a->{refaults_file},
		$b->{disk_read_bytes} / 1048576, $a->{disk_read_bytes} / 1048576);
	print $sw "$line\n";
}
close $sw;

# ---- CSV and JSON (per phase, and the aggregates) ----
my @cols = (qw(dist scan config round duration_s), @num, 'tx');
open(my $cf, '>', "$out/results.csv") or die;
print $cf join(',', @cols), "\n";
for my $ph (sort { $a->{tag} cmp $b->{tag} } @phases) {
	print $cf join(',', map { my $v = $ph->{$_} // ''; $v =~ /^-?\d+\.\d+$/ ? sprintf('%.3f', $v) : $v } @cols), "\n";
}
close $cf;
sub jstr { my ($v) = @_; return 'null' unless defined $v; return $v if $v =~ /^-?\d+(\.\d+)?$/; $v =~ s/(["\\])/\\$1/g; return "\"$v\""; }
open(my $jf, '>', "$out/results.json") or die;
print $jf "{\n  \"params\": {", join(', ', map { jstr($_) . ': ' . jstr($P{$_}) } sort keys %P), "},\n";
print $jf "  \"phases\": [\n", join(",\n", map { my $ph = $_;
	'    {' . join(', ', map { jstr($_) . ': ' . jstr(/_ms$|tps/ ? sprintf('%.3f', $ph->{$_}) : $ph->{$_}) } @cols) . '}' }
	sort { $a->{tag} cmp $b->{tag} } @phases), "\n  ],\n";
print $jf "  \"summary\": [\n", join(",\n", map { my $k = $_; my $r = $agg{$k};
	my ($d, $s) = @$r{qw(dist scan)};
	my $a = $agg{"$d:$s:a"}; my $z = $agg{"$d:none:z"};
	'    {' . join(', ', (map { jstr($_) . ': ' . jstr($r->{$_}) } qw(dist scan config rounds)),
		(map { jstr($_) . ': ' . jstr(sprintf('%.3f', $r->{$_})) } @num),
		'"tps_vs_a": ' . jstr(defined ratio($r->{tps}, $a ? $a->{tps} : undef) ? sprintf('%.3f', ratio($r->{tps}, $a->{tps})) : undef),
		'"tps_vs_z": ' . jstr(defined ratio($r->{tps}, $z ? $z->{tps} : undef) ? sprintf('%.3f', ratio($r->{tps}, $z->{tps})) : undef),
		'"p99_vs_z": ' . jstr(defined ratio($r->{p99_ms}, $z ? $z->{p99_ms} : undef) ? sprintf('%.3f', ratio($r->{p99_ms}, $z->{p99_ms})) : undef)) . '}' }
	sort keys %agg), "\n  ]\n}\n";
close $jf;

# ---- plots: per workload, TPS and p99 per second, one line per config (round 1) ----
my $gp = `sh -c 'command -v gnuplot'`;
chomp $gp;
my @pngs;
if ($gp) {
	for my $wl (@wl_order) {
		my ($dist, $scan) = split /:/, $wl;
		my @lines;
		for my $c (@cfg_order) {
			my ($ph) = grep { $_->{config} eq $c && $_->{dist} eq $dist && ($c eq 'z' ? 1 : $_->{scan} eq $scan) && $_->{round} == 1 } @phases;
			push @lines, [$c, "$ph->{dir}/series.dat"] if $ph;
		}
		next unless @lines;
		my $png = "$out/latency-$dist-$scan.png";
		open(my $g, '|-', "gnuplot") or next;
		print $g "set terminal pngcairo size 1100,800 noenhanced\nset output '$png'\n" if 1;
		my %sd = (count2 => "two looping count(*) scans", count => "one looping count(*) scan",
			vacuum => "looping VACUUM", dump => "looping pg_dump", tar => "a looping tar of the data directory");
		print $g "set multiplot layout 2,1 title 'OLTP ($dist point SELECTs, $P{clients} clients) during ", $sd{$scan} // $scan,
			": round 1, per second; hot set $P{hot_mb} MiB, cgroup $P{cgroup_limit_mb} MiB'\n";
		print $g "set grid\nset key outside right\nset ylabel 'mean latency (ms)'\nset logscale y\n";
		print $g "plot ", join(', ', map { "'$_->[1]' using 1:3 with lines lw 2 title '($_->[0]) $cfgname{$_->[0]}'" } @lines), "\n";
		print $g "unset logscale y\nset ylabel 'TPS'\nset xlabel 'seconds into the phase'\nset yrange [0:*]\n";
		print $g "plot ", join(', ', map { "'$_->[1]' using 1:2 with lines lw 2 title '($_->[0]) $cfgname{$_->[0]}'" } @lines), "\n";
		print $g "unset multiplot\n";
		close $g;
		push @pngs, $png if -s $png;
	}
	if (@pngs) {
		require File::Copy;
		File::Copy::copy($pngs[0], "$out/latency.png");
	}
}
print "\nfiles: $out/results.csv, $out/results.json, $out/summary.txt",
	(@pngs ? ", " . join(', ', "$out/latency.png", @pngs) : " (no gnuplot: no plot)"), "\n";
