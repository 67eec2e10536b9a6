#!/usr/bin/env bash
# bench/scale.sh - the stock-kernel evictor in a cluster with many relation
# files.
#
#   bench/scale.sh [--files N] [--scan-mb M] [--budget-mb B]
#
# Makes a cluster with N relation files (default 100000: unlogged tables,
# each one a main fork and an init fork, so N/2 of them, created in batches
# of 1000 per transaction), then a table of M MB (default 512), and runs a
# marked full scan of it at full disk speed (caches dropped, no throttle)
# beside a marked sort that spills to temporary files (new files the
# evictor has never seen, all the time).  Every unknown file used to cost a
# stat walk of the whole cluster; now it costs a stat per database
# directory (see src/file_index.c).  Prints records_lost, files_not_found,
# the peak page cache held by the scanned table (sampled every 10 ms) vs
# the budget, and the scan's time.  Run as root; everything lives below
# /var/tmp/pce-scale and is removed.
set -euo pipefail
cd "$(dirname "$0")/.."

FILES=100000
SCAN_MB=512
BUDGET_MB=32
while [ $# -gt 0 ]; do
	case "$1" in
	--files) FILES=$2; shift 2 ;;
	--scan-mb) SCAN_MB=$2; shift 2 ;;
	--budget-mb) BUDGET_MB=$2; shift 2 ;;
	*) echo "usage: $0 [--files N] [--scan-mb M] [--budget-mb B]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "scale.sh: run as root" >&2; exit 1; }
PGBIN=$(pg_config --bindir)
LOADER=$PGBIN/pg_cache_ext_loader
[ -x "$LOADER" ] || bash scripts/setup.sh
DIR=/var/tmp/pce-scale
PORT=55498
. bench/standalone.sh

cleanup() {
	stop_bench_cluster immediate
	[ -d "$DIR/data" ] && "$LOADER" --unload -D "$DIR/data" >/dev/null 2>&1
	rm -rf "$DIR"
}
bench_dir_begin
q() { runuser -u postgres -- "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -d postgres -c "$1"; }
now() { date +%s.%N; }

runuser -u postgres -- "$PGBIN/initdb" -D "$DIR/data" -A trust >/dev/null
cat >> "$DIR/data/postgresql.conf" <<CONF
port = $PORT
unix_socket_directories = '$DIR'
listen_addresses = ''
shared_buffers = 128MB
max_locks_per_transaction = 2048
autovacuum = off
fsync = off
max_parallel_workers_per_gather = 0
shared_preload_libraries = 'pg_cache_ext'
pg_cache_ext.scan_budget = '${BUDGET_MB}MB'
pg_cache_ext.scan_max_age = 0
CONF
[ "$("$PGBIN/postgres" -V | grep -oE '[0-9]+' | head -1)" -ge 18 ] && echo "io_method = sync" >> "$DIR/data/postgresql.conf"
"$LOADER" -D "$DIR/data" >/dev/null
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$DIR/data" -l "$DIR/log" -w start >/dev/null
q "CREATE EXTENSION pg_cache_ext"

t0=$(now)
q "CREATE PROCEDURE make_tables(n int) LANGUAGE plpgsql AS \$\$
BEGIN
	FOR i IN 1..n LOOP
		EXECUTE format('CREATE UNLOGGED TABLE f%s (i int)', i);
		IF i % 1000 = 0 THEN COMMIT; END IF;
	END LOOP;
END \$\$"
q "CALL make_tables($((FILES / 2)))"
db=$(q "SELECT oid FROM pg_database WHERE datname = 'postgres'")
nfiles=$(find "$DIR/data/base/$db" -maxdepth 1 -type f -name '[1-9]*' | wc -l)
printf 'relation files in the database directory: %d (made in %.0f s)\n' "$nfiles" "$(calc "$(now) - $t0")"

t0=$(now)
rows=$((SCAN_MB * 1024 * 1024 / 280))
q "SET pg_cache_ext.scan = off;
   CREATE TABLE big AS SELECT g, repeat('b', 240) AS pad FROM generate_series(1, $rows) g;
   CREATE TABLE sortme AS SELECT g, md5(g::text) AS h FROM generate_series(1, 1500000) g"
q "VACUUM FREEZE big"
q "VACUUM FREEZE sortme"
q "CHECKPOINT"
printf 'scanned table: %s (made in %.0f s)\n' "$(q "SELECT pg_size_pretty(pg_relation_size('big'))")" \
	"$(calc "$(now) - $t0")"

sync
echo 3 > /proc/sys/vm/drop_caches
q "SELECT cache_ext_stats_reset()" >/dev/null
lost0=$(q "SELECT value FROM cache_ext_stats() WHERE name = 'records_lost'")

# the sort spills to temporary files (unknown to the evictor) in a loop
( for _ in 1 2 3 4 5 6; do
	q "SET work_mem = '64kB'; SET pg_cache_ext.scan = on;
	   SELECT count(*) FROM (SELECT * FROM sortme ORDER BY h) s" >/dev/null 2>&1 || true
  done ) &
sorter=$!

# the sampler: one session reading the scanned table's page cache every
# 10 ms from before the scan starts until it is over, printing the peak
sample_peak() {
	runuser -u postgres -- "$PGBIN/psql" -X -q -At -h "$DIR" -p "$PORT" -d postgres 2>&1 <<'SQL' |
DO $$
DECLARE
	peak bigint := 0;
	n int := 0;
	c bigint;
BEGIN
	LOOP
		SELECT cached_bytes INTO c FROM cache_ext_relation_cache('big');
		peak := greatest(peak, c);
		n := n + 1;
		PERFORM pg_stat_clear_snapshot();
		EXIT WHEN n > 50 AND NOT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE query LIKE '%count(*) FROM big' AND state = 'active' AND pid <> pg_backend_pid());
		PERFORM pg_sleep(0.01);
	END LOOP;
	RAISE NOTICE 'peak % samples %', peak, n;
END $$;
SQL
		sed -n 's/.*NOTICE:  peak \([0-9]*\) samples \([0-9]*\).*/\1 \2/p' >"$DIR/samples"
}
sample_peak &
sampler=$!
sleep 0.2

t0=$(now)
q "SET pg_cache_ext.scan = on; SELECT count(*) FROM big" >/dev/null
scan_s=$(calc "$(now) - $t0")
wait "$sampler" 2>/dev/null || true
sleep 1
wait "$sorter" 2>/dev/null || true

read -r peak nsamples < "$DIR/samples" || { peak=0; nsamples=0; }
stat() { q "SELECT value FROM cache_ext_stats() WHERE name = '$1'"; }
lost=$(( $(stat records_lost) - lost0 ))
size=$(q "SELECT pg_relation_size('big')")
printf '\nfiles %d, scan of %d MB in %.1f s (%.0f MB/s), %d samples\n' "$nfiles" $((size >> 20)) "$scan_s" \
	"$(calc "$size / 1048576 / $scan_s")" "$nsamples"
printf 'records_lost = %d\n' "$lost"
printf 'records_read = %s, files_not_found = %s, bytes_dropped = %s\n' "$(stat records_read)" \
	"$(stat files_not_found)" "$(stat bytes_dropped)"
# one batch: the scan pages the worker reads between two enforcements of
# the budget (EVICT_BATCH_BYTES in src/evictor.c)
BATCH_MB=2
printf 'peak scan bytes cached = %.1f MB, budget = %d MB, budget + one batch = %d MB: %s\n' \
	"$(calc "$peak / 1048576")" "$BUDGET_MB" $((BUDGET_MB + BATCH_MB)) \
	"$(awk "BEGIN { print ($peak <= ($BUDGET_MB + $BATCH_MB) * 1048576) ? \"within\" : \"over\" }")"
printf 'worker CPU time (whole run): %s s\n' \
	"$(calc "$(bench_worker_cpu_ticks "$DIR/data") / $(getconf CLK_TCK)" 1)"
