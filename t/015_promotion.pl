# 015_promotion.pl
#	Promotion on the stock-kernel mechanism: pages a scan brought into the
#	page cache that an unmarked backend then reads are kept when the
#	evictor enforces the budget; the scan's other pages go.  With
#	pg_cache_ext.promote_on_access = off the same reads keep nothing, which
#	shows the test can fail; nor do reads by a backend that is scanning.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use PceTest;

# With MGLRU the kernel does not activate folios, so nothing is promoted.
if (open my $fh, '<', '/sys/kernel/mm/lru_gen/enabled')
{
	my $v = <$fh>;
	plan skip_all => "MGLRU is enabled ($v): the stock mechanism cannot see reuse there"
	  if defined $v && hex($v) != 0;
}

my ($node, $s) = stock_node('promotion',
	'pg_cache_ext.scan_budget' => "'256MB'",
	'pg_cache_ext.scan_max_age' => 0,
	'autovacuum' => 'off',
	'max_parallel_workers_per_gather' => 0);
unlike($s->{reason}, qr/without promotion/, "the loader attached promotion ($s->{reason})");
like($s->{promotion}, qr/^on: /, "status says promotion is on ($s->{promotion})");
pause_damon();    # it would page out the half read (PceTest.pm)

# ~40 MB, in one segment file
$node->safe_psql('postgres', q{
	SET pg_cache_ext.scan = off;
	CREATE TABLE shared_t AS SELECT g, repeat('s', 200) AS pad FROM generate_series(1, 170000) g;
	VACUUM FREEZE shared_t; CHECKPOINT;
});
my $size = $node->safe_psql('postgres', "SELECT pg_relation_size('shared_t')");
my $half = int($size / 2 / 8192) * 8192;
my $mb = 1024 * 1024;

sub set_conf
{
	my (%conf) = @_;
	$node->safe_psql('postgres',
		join('', map { "ALTER SYSTEM SET pg_cache_ext.$_ = $conf{$_}; " } sort keys %conf)
		  . 'SELECT pg_reload_conf()');
	usleep(300_000);
}

sub stats_line
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(name || '=' || value, ' ') FROM cache_ext_stats() "
		  . "WHERE name ~ 'tracked|dropped|promoted|records|added_scan|not_found'");
}

sub cached_bytes
{
	return $node->safe_psql('postgres',
		"SELECT cached_bytes FROM cache_ext_relation_cache('shared_t')");
}

# A marked scan brings the whole table in; an unmarked backend then reads
# its first half (read(2) through pg_read_binary_file, as a backend reading
# blocks into shared_buffers would); then the budget shrinks to 1 MB.
sub try_scan_then_read_half
{
	my ($promote, $reader_scan) = @_;
	set_conf(scan_budget => "'256MB'", promote_on_access => $promote);
	# empty shared_buffers, so that every block of the scan comes from the kernel
	$node->restart;
	root('drop-caches');
	my $drops = caches_dropped();
	note(sprintf('after drop-caches: %.1f MB cached', cached_bytes() / $mb));
	my $promoted_before = stat_value($node, 'bytes_promoted');
	$node->safe_psql('postgres', 'SET pg_cache_ext.scan = on; SELECT count(*) FROM shared_t');
	wait_until(sub { stat_value($node, 'bytes_tracked') > $size * 0.8 }, 5);
	my $tracked = stat_value($node, 'bytes_tracked');
	note(sprintf('after the scan: %.1f MB cached', cached_bytes() / $mb));
	$node->safe_psql('postgres',
		"SET pg_cache_ext.scan = $reader_scan; SELECT length(pg_read_binary_file(pg_relation_filepath('shared_t'), 0, $half))");
	my $promoted;
	wait_until(sub {
		$promoted = stat_value($node, 'bytes_promoted') - $promoted_before;
		$promoted >= $half * 0.9
	}, 3);
	note(sprintf('after the read: %.1f MB cached; ', cached_bytes() / $mb) . stats_line());
	set_conf(scan_budget => "'1MB'");
	wait_until(sub { stat_value($node, 'bytes_tracked') <= $mb }, 5);
	note('after the budget shrank: ' . stats_line());
	return ($tracked, $promoted, cached_bytes(), caches_dropped() != $drops);
}

# The above, redone (up to three times) when another run dropped the
# machine's caches meanwhile.
sub scan_then_read_half
{
	my @r;
	for my $try (1 .. 3)
	{
		@r = try_scan_then_read_half(@_);
		last if !$r[3];
		note("another run dropped the page cache during try $try; again");
	}
	return @r[0 .. 2];
}

# On 18 and later under every io_method: the marked scan's pages are read
# by I/O workers, io_uring or the backend, and must be tracked all the same.
for my $method (io_methods($node))
{
	my $m = defined $method ? "io_method = $method: " : '';
	if (defined $method)
	{
		$node->safe_psql('postgres', "ALTER SYSTEM SET io_method = '$method'");
		$node->restart;	# scan_then_read_half restarts too; this one checks the setting
		is($node->safe_psql('postgres', 'SHOW io_method'), $method, "the server runs with io_method = $method");
	}
	my ($tracked, $promoted, $cached) = scan_then_read_half('on', 'off');
	cmp_ok($tracked, '>=', $size * 0.8, sprintf('%sthe marked scan was tracked (%.1f MB of %.1f MB)', $m, $tracked / $mb, $size / $mb));
	if (defined $method && $method eq 'worker')
	{
		# A large folio that two I/O workers read for the scan (each through
		# its own file descriptor) is activated by the scan itself, and the
		# unmarked read of it then sends no signal on a stock kernel (README,
		# "PostgreSQL 18/19 asynchronous I/O"): part of the half is promoted,
		# and what is promoted stays.
		cmp_ok($promoted, '>', 0, sprintf('%sthe unmarked read promoted part of its half (%.1f MB of %.1f MB)', $m, $promoted / $mb, $half / $mb));
		cmp_ok($cached, '>=', $promoted * 0.95, sprintf('%spromotion on: what was promoted stays cached (%.1f MB)', $m, $cached / $mb));
	}
	else
	{
		cmp_ok($promoted, '>=', $half * 0.9, sprintf('%sthe unmarked read promoted its half (%.1f MB)', $m, $promoted / $mb));
		cmp_ok($cached, '>=', $half * 0.95, sprintf('%spromotion on: the half an unmarked backend read stays cached (%.1f MB of %.1f MB)', $m, $cached / $mb, $half / $mb));
	}
	cmp_ok($cached, '<=', $half + 2 * $mb, sprintf('%spromotion on: the rest of the scan left the cache (%.1f MB cached)', $m, $cached / $mb));

	($tracked, $promoted, $cached) = scan_then_read_half('off', 'off');
	cmp_ok($promoted, '==', 0, "${m}promotion off: nothing promoted");
	cmp_ok($cached, '<=', 2 * $mb, sprintf('%spromotion off: the same reads keep nothing (%.1f MB cached)', $m, $cached / $mb));

	like(status($node)->{promotion}, qr/^off \(pg_cache_ext.promote_on_access\)/, "${m}status says promotion is off, and why");

	# a second read by a backend that is itself scanning is no sign of OLTP use
	($tracked, $promoted, $cached) = scan_then_read_half('on', 'on');
	cmp_ok($promoted, '==', 0, "${m}a marked reader promotes nothing");
	cmp_ok($cached, '<=', 2 * $mb, sprintf('%sand its reads keep nothing (%.1f MB cached)', $m, $cached / $mb));
}

# without the activation link, status says promotion is unavailable
root('unpin', "$s->{pin_dir}/tracker_activate_link");
like(status($node)->{promotion}, qr/^unavailable: /, 'without its link, status says promotion is unavailable');
load_bpf($node);
like(status($node)->{promotion}, qr/^on: /, 'a loader rerun brings it back');

is(stat_value($node, 'drop_errors'), '0', 'no drop errors');
is(stat_value($node, 'records_lost'), '0', 'no record lost');
my $log = slurp_file($node->logfile);
unlike($log, qr/ERROR|PANIC|server process .* terminated/, 'no error in the server log');
$node->stop;
done_testing();
