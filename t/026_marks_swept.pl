# 026_marks_swept.pl
#	Every entry of the scan-PID map carries the real start time of its
#	process, or the worker's stale sweep removes it.  A member of the pins'
#	group can write the map; entries it writes without a start time (0)
#	must not stay, or the map could be filled for good and no scan marked.
use strict;
use warnings;
use File::Basename;
use File::Spec;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PceTest;

my $src = File::Spec->rel2abs(File::Basename::dirname(__FILE__) . '/..');
my $node = new_node('swept');
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION pg_cache_ext');
my ($ok, $out, $err) = load_bpf($node);
ok($ok, 'loader runs') or BAIL_OUT("loader failed: $err");
ok(wait_until(sub { status($node)->{state} eq 'active' }, 5), 'active');
my $pin_dir = status($node)->{pin_dir};
$node->safe_psql('postgres', 'CREATE TABLE t AS SELECT g FROM generate_series(1, 5000) g');

sub entries { return status($node)->{kernel_map_entries}; }

# ---- a few entries without a start time, for PIDs no process has ----
my $removed_before = stat_value($node, 'stale_marks_removed');
my $fill = '';
IPC::Run::run([ "$src/test/pce_fill_map", $pin_dir, 100, 0 ], '>', \$fill);
like($fill, qr/^added 100$/, 'a group member adds 100 entries with start time 0');
# the sweep runs every 250 ms; its map view is refreshed every second
ok(wait_until(sub { entries() eq '0' }, 3), 'the worker removes them within the sweep period')
  or diag('entries left: ' . entries());
cmp_ok(stat_value($node, 'stale_marks_removed') - $removed_before, '>=', 100,
	'and counts them as stale');

# ---- the whole map filled with them: scans are marked again soon ----
IPC::Run::run([ "$src/test/pce_fill_map", $pin_dir, 9000, 0 ], '>', \$fill);
like($fill, qr/^added 8192 stopped /, 'the map filled with 8192 entries without a start time');
ok(wait_until(sub { entries() eq '0' }, 5), 'the worker empties it');
my $full_before = stat_value($node, 'map_full');
my $marks_before = stat_value($node, 'marks');
is($node->safe_psql('postgres', 'SET pg_cache_ext.scan_threshold = 0; SELECT count(*) FROM t'),
	'5000', 'a scan afterwards');
cmp_ok(stat_value($node, 'marks'), '>', $marks_before, 'is marked');
is(stat_value($node, 'map_full'), $full_before, 'and its mark found room in the map');

$node->stop;
unload_bpf($node);
done_testing();
