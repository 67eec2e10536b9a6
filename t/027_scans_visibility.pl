# 027_scans_visibility.pl
#	cache_ext_scans() follows pg_stat_activity's rule: every role sees which
#	processes are marked, for what kind of work and in which database; only
#	a role with the privileges of the row's role, or of pg_read_all_stats,
#	sees what it scans and since when.  Relation names are resolved only for
#	rows of the caller's database.  cache_ext_relation_cache() checks
#	privileges before it takes its lock.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PceTest;

my $node = new_node('visibility');
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION pg_cache_ext;
	CREATE ROLE alice LOGIN;
	CREATE ROLE bob LOGIN;
	CREATE ROLE carol LOGIN IN ROLE pg_read_all_stats;
	CREATE ROLE dave LOGIN IN ROLE alice;
	CREATE DATABASE other;
	GRANT ALL ON SCHEMA public TO alice;
});
$node->safe_psql('other', q{
	CREATE EXTENSION pg_cache_ext;
	GRANT ALL ON SCHEMA public TO alice;
});
my ($ok, $out, $err) = load_bpf($node);
ok($ok, 'loader runs') or BAIL_OUT("loader failed: $err");
ok(wait_until(sub { status($node)->{state} eq 'active' }, 5), 'active');

for my $db ('postgres', 'other')
{
	$node->safe_psql($db,
		'CREATE TABLE secret_scan AS SELECT g FROM generate_series(1, 20000) g',
		extra_params => [ '-U', 'alice' ]);
}
# In the database postgres, an OID that means another relation than
# alice's table in "other" does: a name resolved in the wrong database
# would show as this one.
my $other_relid = $node->safe_psql('other', "SELECT 'secret_scan'::regclass::oid");

# alice scans for a few seconds in the given database
sub alice_scans
{
	my ($db) = @_;
	my $bg = $node->background_psql($db, extra_params => [ '-U', 'alice' ]);
	my $pid = $bg->query_safe('SELECT pg_backend_pid()');
	$bg->query_safe('SET pg_cache_ext.scan_threshold = 0');
	$bg->query_until(qr/started/, "\\echo started\nSELECT count(*), pg_sleep(4) FROM secret_scan;\n");
	ok(wait_until(sub {
		$node->safe_psql('postgres', "SELECT count(*) FROM cache_ext_scans() WHERE pid = $pid") eq '1' }, 3),
		"alice's scan in $db is marked");
	return ($bg, $pid);
}

# what $role sees of $pid from database $db
sub seen_by
{
	my ($role, $pid, $db) = @_;
	return $node->safe_psql($db // 'postgres', qq{
		SELECT concat_ws('|', reason, database = (SELECT oid FROM pg_database WHERE datname = current_database()),
		                 coalesce(relation::text, '-'), since IS NOT NULL, coalesce(in_kernel_map::text, '-'))
		  FROM cache_ext_scans() WHERE pid = $pid},
		extra_params => [ '-U', $role ]);
}

# ---- same database ----
my ($bg, $pid) = alice_scans('postgres');
is(seen_by('alice', $pid), 'seqscan|t|secret_scan|t|true', 'alice sees her own scan, relation and all');
is(seen_by('bob', $pid), 'seqscan|t|-|f|-',
	'bob, a plain role, sees that alice\'s backend scans, not what nor since when');
is(seen_by('carol', $pid), 'seqscan|t|secret_scan|t|true', 'carol, in pg_read_all_stats, sees the relation');
is(seen_by('dave', $pid), 'seqscan|t|secret_scan|t|true', 'dave, a member of alice, sees the relation');
is(seen_by($node->safe_psql('postgres', 'SELECT current_user'), $pid), 'seqscan|t|secret_scan|t|true',
	'a superuser sees the relation');
# as pg_stat_activity: bob sees the same of her there
is($node->safe_psql('postgres',
	"SELECT query = '<insufficient privilege>' AND state IS NULL FROM pg_stat_activity WHERE pid = $pid",
	extra_params => [ '-U', 'bob' ]), 't', '(pg_stat_activity hides her query from bob too)');
$bg->quit;

# ---- another database: the OID is not resolved in the caller's ----
($bg, $pid) = alice_scans('other');
my $row = $node->safe_psql('postgres',
	"SELECT concat_ws('|', reason, database::text, coalesce(relation::text, '-')) FROM cache_ext_scans() WHERE pid = $pid");
my $other_oid = $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'other'");
is($row, "seqscan|$other_oid|-", 'a superuser in postgres sees the database of a scan in other, no relation name');
isnt($row, "seqscan|$other_oid|$other_relid", 'the OID from other is not shown as a relation of postgres');
is(seen_by('carol', $pid, 'other'), 'seqscan|t|secret_scan|t|true', 'in other itself, carol sees the name');
is(seen_by('bob', $pid, 'other'), 'seqscan|t|-|f|-', 'and bob there does not');
$bg->quit;

# ---- cache_ext_relation_cache(): privileges before the lock ----
my $locker = $node->background_psql('postgres', extra_params => [ '-U', 'alice' ]);
$locker->query_safe('BEGIN; LOCK TABLE secret_scan IN ACCESS EXCLUSIVE MODE');
my ($rc, $stdout, $stderr) = $node->psql('postgres',
	"SET statement_timeout = '3s'; SELECT * FROM cache_ext_relation_cache('secret_scan')",
	extra_params => [ '-U', 'bob' ]);
like($stderr, qr/permission denied for table secret_scan/,
	'a role without SELECT is refused at once, not queued behind the lock');
unlike($stderr, qr/statement timeout/, 'it did not wait for the lock');
$locker->query_safe('COMMIT');
$locker->quit;
like($node->safe_psql('postgres', "SELECT method FROM cache_ext_relation_cache('secret_scan')",
	extra_params => [ '-U', 'alice' ]), qr/^(cachestat|mincore)$/, 'the owner can still use it');

$node->stop;
unload_bpf($node);
done_testing();
