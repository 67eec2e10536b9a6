# 039_lap_start.pl
#	A marked synchronized scan that starts while a VACUUM of its table
#	scans the heap starts where the VACUUM is (src/lap_start.c): a SELECT
#	and a COPY TO.  The controls start where synchronized scans say (block
#	0 here): an unmarked scan, a marked one with
#	pg_cache_ext.scans_join_vacuum off, and a marked one with
#	synchronize_seqscans off (as pg_dump sets it).  Then the same beside a
#	marked COPY TO with synchronize_seqscans off (pg_dump's), held
#	mid-table by its client: the controls start where synchronized scans
#	say, and once the COPY has ended a scan no longer goes to it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PceTest;
use Time::HiRes qw(usleep);

my ($node, $s) = stock_node('lap_start',
	'autovacuum' => 'off',
	'synchronize_seqscans' => 'on',
	'max_parallel_workers_per_gather' => 0);
$node->safe_psql('postgres', q{
	SET pg_cache_ext.scan = off;
	CREATE TABLE big AS SELECT g, repeat('b', 200) AS pad FROM generate_series(1, 300000) g;
	DELETE FROM big WHERE g % 50 = 0;
});
my $blocks = $node->safe_psql('postgres', "SELECT pg_relation_size('big') / 8192");
note("big: $blocks blocks");

# the block of a ctid
sub block_of_ctid { my ($ctid) = @_; return ($ctid =~ /^\((\d+),/)[0]; }

sub vacuum_block
{
	return $node->safe_psql('postgres', q{
		SELECT heap_blks_scanned FROM pg_stat_progress_vacuum
		 WHERE relid = 'big'::regclass AND phase = 'scanning heap'});
}

# the block the first row of a scan came from, with the settings given
sub first_block
{
	my ($settings) = @_;
	return block_of_ctid($node->safe_psql('postgres', "$settings; SELECT ctid FROM big LIMIT 1"));
}

# a VACUUM slowed down to a crawl, in the heap scan
my $vacuum = $node->background_psql('postgres', on_error_stop => 0);
$vacuum->query_safe("SET vacuum_cost_delay = '20ms'; SET vacuum_cost_limit = 20");
$vacuum->query_until(qr/started/, "\\echo started\nVACUUM big;\n");
ok(wait_until(sub { my $b = vacuum_block(); $b ne '' && $b > $blocks / 10 }, 120),
	'the VACUUM is in the heap scan, a tenth of the table in');

# how far the VACUUM moves in a second: the worker's copy of its block is
# at most a round (250 ms) old, and syncscan.c rounds down to 16 blocks
my $b0 = vacuum_block();
sleep 1;
my $pace = vacuum_block() - $b0;
my $slack = 16 + $pace;
note("the VACUUM reads $pace blocks a second; a scan may start up to $slack blocks behind it");
cmp_ok($pace, '<', $blocks / 20, 'the VACUUM is slow enough to be found');

my $joined0 = stat_value($node, 'scans_joined_vacuum');
is(first_block('SET pg_cache_ext.scan = off'), 0,
	'an unmarked scan starts where synchronized scans say: block 0');
is(first_block('SET pg_cache_ext.scan = on; SET pg_cache_ext.scans_join_vacuum = off'), 0,
	'a marked scan with scans_join_vacuum off starts at block 0');
is(first_block('SET pg_cache_ext.scan = on; SET synchronize_seqscans = off'), 0,
	'a marked scan with synchronize_seqscans off (as pg_dump) starts at block 0');
is(stat_value($node, 'scans_joined_vacuum'), $joined0, 'scans_joined_vacuum counted none of them');

my $before = vacuum_block();
my $at = first_block('SET pg_cache_ext.scan = on');
my $after = vacuum_block();
ok($at >= $before - $slack && $at <= $after + 1,
	"a marked SELECT starts beside the VACUUM: block $at, the VACUUM at $before .. $after");
is(stat_value($node, 'scans_joined_vacuum'), $joined0 + 1, 'scans_joined_vacuum counted it');

my $file = $PostgreSQL::Test::Utils::tmp_check . '/big.copy';
$before = vacuum_block();
$node->safe_psql('postgres', "SET pg_cache_ext.scan = on; COPY big TO '$file'");
$after = vacuum_block();
open(my $fh, '<', $file) or die "$file: $!";
my ($g) = split /\t/, scalar <$fh>;
close $fh;
unlink $file;
$at = block_of_ctid($node->safe_psql('postgres',
	"SET pg_cache_ext.scan = off; SELECT ctid FROM big WHERE g = $g"));
ok($at >= $before - $slack && $at <= $after + 1,
	"a marked COPY TO starts beside the VACUUM: block $at (g $g), the VACUUM at $before .. $after");
is(stat_value($node, 'scans_joined_vacuum'), $joined0 + 2, 'scans_joined_vacuum counted it');

# Right after the VACUUM ends, before the worker's next round (its copy of
# the VACUUM's block is up to 250 ms old), a marked scan starts where
# synchronized scans say: where the unmarked scan just before did, not at
# the block the VACUUM had got to (which is further on by then).
sleep 2;
my $left = first_block('SET pg_cache_ext.scan = off');
my $gone_at = vacuum_block();
$node->safe_psql('postgres', 'SELECT pg_cancel_backend(pid) FROM pg_stat_progress_vacuum');
ok(wait_until(sub { vacuum_block() eq '' }, 30), "the VACUUM is cancelled at block $gone_at");
my $right_after = first_block('SET pg_cache_ext.scan = on');
is($right_after, $left,
	"a marked scan right after the VACUUM starts where the unmarked one did (block $left), not near $gone_at");
is(stat_value($node, 'scans_joined_vacuum'), $joined0 + 2, 'and is not counted');
$vacuum->quit;

# The table out of the page cache first, so that the COPY brings it in: on
# 18 with io_method = worker, an I/O worker's read names the process it
# reads for only in a file some scan brought pages of (the tracker's
# scanned_mappings), and the table, written unmarked, is all cached now.
root('drop-caches');

# A marked COPY TO as pg_dump runs it (synchronize_seqscans off): its client
# reads two thirds of the rows, then stops reading, and the COPY waits on
# its socket a little further on (what the pipe and the socket hold).
my $copy = $node->background_psql('postgres', on_error_stop => 0);
$copy->query_safe('SET pg_cache_ext.scan = on; SET synchronize_seqscans = off');
my $copy_pid = $copy->query_safe('SELECT pg_backend_pid()');
$copy->{stdout} = '';
$copy->{run}->pump_nb;
$copy->{stdin} .= "COPY big TO STDOUT;\n\\echo copied\n";
my $want_bytes = 2 * $node->safe_psql('postgres',
	"SELECT sum(length(g::text) + length(pad) + 2) FROM big") / 3;
my $t0 = time;
while (length($copy->{stdout}) < $want_bytes && time - $t0 < 120)
{
	$copy->{run}->pump_nb;
	usleep(10_000);
}
# the last whole line the client has
my ($last_g) = substr($copy->{stdout}, -10_000) =~ /\n(\d+)\t[^\n]*\n[^\n]*\z/;
my $received = block_of_ctid($node->safe_psql('postgres',
	"SET pg_cache_ext.scan = off; SELECT ctid FROM big WHERE g = $last_g"));
is($node->safe_psql('postgres', "SELECT reason FROM cache_ext_scans() WHERE pid = $copy_pid"),
	'copy_to', "the COPY is marked as a COPY TO; its client has the rows up to block $received");
sleep 1;	# the worker's round (250 ms) and the evictor's positions

# where it waits: the pipe, the socket and psql hold up to a few hundred kB
my $ahead = 256;
my $unmarked = first_block('SET pg_cache_ext.scan = off');
ok($unmarked < $received - 16 || $unmarked > $received + $ahead,
	"synchronized scans say block $unmarked, away from the COPY (block $received on)");
is(first_block('SET pg_cache_ext.scan = on; SET pg_cache_ext.scans_join_copy = off'), $unmarked,
	'a marked scan with scans_join_copy off starts where synchronized scans say');
is(first_block('SET pg_cache_ext.scan = on; SET synchronize_seqscans = off'), 0,
	'a marked scan with synchronize_seqscans off starts at block 0');
$joined0 = stat_value($node, 'scans_joined_vacuum');
$at = first_block('SET pg_cache_ext.scan = on');
ok($at >= $received - 16 && $at <= $received + $ahead,
	"a marked SELECT starts beside the COPY: block $at, its client has up to block $received");
is(stat_value($node, 'scans_joined_vacuum'), $joined0, 'scans_joined_vacuum does not count it');

# The COPY reads to its end; right after, a marked scan starts where the
# one before left the location (block $at), not where the COPY last read.
$t0 = time;
while ($copy->{stdout} !~ /copied/ && time - $t0 < 120)
{
	$copy->{run}->pump_nb;
	$copy->{stdout} = substr($copy->{stdout}, -100) if length($copy->{stdout}) > 1_000_000;
	usleep(10_000);
}
like($copy->{stdout}, qr/copied/, 'the COPY ended');
$unmarked = first_block('SET pg_cache_ext.scan = off');
is(first_block('SET pg_cache_ext.scan = on'), $unmarked,
	"a marked scan right after the COPY starts where synchronized scans say (block $unmarked)");
$copy->quit;

$node->stop;
done_testing();
