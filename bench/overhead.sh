#!/usr/bin/env bash
# bench/overhead.sh - what pg_cache_ext costs when it is not helping.
#
#   bench/overhead.sh [--rounds N] [--seconds S]
#
# Three measurements, each side by side in one run, interleaved:
#   1. tracker: cold sequential read of a 1 GiB file by an unmarked process,
#      with the tracker attached vs detached (issue 3's bound: < 3%).
#   2. pgbench -S (select-only) TPS with pg_cache_ext in
#      shared_preload_libraries vs without, same cluster and settings,
#      restarted between runs (issue 6's bound: >= 99%).
#   3. the cost of one mark + unmark pair: per-statement latency of
#      "SELECT 1" with pg_cache_ext.scan = on (every statement marked and
#      unmarked) minus with scan = off (issue 6's bound: < 20 us).
# Run as root; everything lives below /var/tmp/pce-overhead and is removed.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=5
SECONDS_PER_RUN=10
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) ROUNDS=$2; shift 2 ;;
	--seconds) SECONDS_PER_RUN=$2; shift 2 ;;
	*) echo "usage: $0 [--rounds N] [--seconds S]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "overhead.sh: run as root" >&2; exit 1; }
command -v pg_cache_ext_loader >/dev/null 2>&1 || [ -x "$(pg_config --bindir)/pg_cache_ext_loader" ] ||
	bash scripts/setup.sh

PGBIN=$(pg_config --bindir)
LOADER=$PGBIN/pg_cache_ext_loader
DIR=/var/tmp/pce-overhead
PORT=55499
mount | grep -q ' /sys/fs/bpf type bpf' || mount -t bpf bpf /sys/fs/bpf

cleanup() {
	[ -f "$DIR/data/postmaster.pid" ] &&
		runuser -u postgres -- "$PGBIN/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null 2>&1
	"$LOADER" --unload --cluster-id overhead-bench >/dev/null 2>&1 || true
	[ -d "$DIR/data" ] && "$LOADER" --unload -D "$DIR/data" >/dev/null 2>&1
	rm -rf "$DIR"
}
trap cleanup EXIT
cleanup
mkdir -p "$DIR"
chown postgres "$DIR"

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# ---- 1. tracker cost on unmarked cold reads ----
echo "== 1. tracker cost: cold sequential read of 1 GiB by an unmarked process, $ROUNDS rounds"
dd if=/dev/urandom of="$DIR/file" bs=1M count=1024 status=none
sync
cold_read() {
	sync
	echo 1 > /proc/sys/vm/drop_caches
	local t0 t1
	t0=$(date +%s.%N)
	dd if="$DIR/file" of=/dev/null bs=1M status=none
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l
}
: > "$DIR/attached"
: > "$DIR/detached"
for r in $(seq "$ROUNDS"); do
	"$LOADER" --cluster-id overhead-bench >/dev/null
	a=$(cold_read)
	"$LOADER" --unload --cluster-id overhead-bench >/dev/null
	d=$(cold_read)
	echo "$a" >> "$DIR/attached"
	echo "$d" >> "$DIR/detached"
	printf '  round %d: attached %.3f s, detached %.3f s\n' "$r" "$a" "$d"
done
ta=$(median < "$DIR/attached")
td=$(median < "$DIR/detached")
tracker_pct=$(echo "($ta / $td - 1) * 100" | bc -l)
printf '  median: attached %.3f s, detached %.3f s: tracker costs %+.2f%% (bound: < 3%%)\n' "$ta" "$td" "$tracker_pct"

# ---- a cluster for 2 and 3 ----
runuser -u postgres -- "$PGBIN/initdb" -D "$DIR/data" -A trust >/dev/null
cat >> "$DIR/data/postgresql.conf" <<CONF
port = $PORT
unix_socket_directories = '$DIR'
listen_addresses = ''
shared_buffers = 128MB
max_connections = 20
CONF
"$LOADER" -D "$DIR/data" >/dev/null
pgctl() { runuser -u postgres -- "$PGBIN/pg_ctl" -D "$DIR/data" -l "$DIR/log" -w "$@" >/dev/null; }
with_preload() {
	sed -i '/^shared_preload_libraries/d' "$DIR/data/postgresql.conf"
	[ "$1" = yes ] && echo "shared_preload_libraries = 'pg_cache_ext'" >> "$DIR/data/postgresql.conf"
	pgctl restart 2>/dev/null || pgctl start
}
with_preload no
runuser -u postgres -- "$PGBIN/pgbench" -h "$DIR" -p "$PORT" -i -s 10 -q postgres >/dev/null 2>&1
tps_of() { grep -oE 'tps = [0-9.]+' | head -1 | awk '{ print $3 }'; }

# ---- 2. pgbench -S with and without the extension loaded ----
echo "== 2. pgbench -S, 2 clients, ${SECONDS_PER_RUN}s per run, $ROUNDS rounds: loaded vs not loaded"
: > "$DIR/tps_on"
: > "$DIR/tps_off"
for r in $(seq "$ROUNDS"); do
	for cfg in no yes; do
		with_preload $cfg
		tps=$(runuser -u postgres -- "$PGBIN/pgbench" -h "$DIR" -p "$PORT" -n -S -c 2 -j 2 \
			-T "$SECONDS_PER_RUN" postgres 2>/dev/null | tps_of)
		if [ $cfg = yes ]; then echo "$tps" >> "$DIR/tps_on"; else echo "$tps" >> "$DIR/tps_off"; fi
		printf '  round %d: %-12s %s TPS\n' "$r" "$([ $cfg = yes ] && echo loaded || echo not\ loaded)" "$tps"
	done
done
on=$(median < "$DIR/tps_on")
off=$(median < "$DIR/tps_off")
tps_pct=$(echo "$on / $off * 100" | bc -l)
printf '  median: loaded %.0f TPS, not loaded %.0f TPS: %.1f%% (bound: >= 99%%)\n' "$on" "$off" "$tps_pct"

# ---- 3. one mark + unmark ----
echo "== 3. mark + unmark cost: SELECT 1 latency with pg_cache_ext.scan = on vs off, 1 client, $ROUNDS rounds"
with_preload yes
echo 'SELECT 1;' > "$DIR/select1.sql"
chown postgres "$DIR/select1.sql"
lat_of() { grep -oE 'latency average = [0-9.]+' | awk '{ print $4 }'; }
: > "$DIR/lat_on"
: > "$DIR/lat_off"
for r in $(seq "$ROUNDS"); do
	for scan in off on; do
		lat=$(PGOPTIONS="-c pg_cache_ext.scan=$scan" runuser -u postgres --preserve-environment -- \
			"$PGBIN/pgbench" -h "$DIR" -p "$PORT" -n -f "$DIR/select1.sql" -c 1 -M prepared \
			-T "$SECONDS_PER_RUN" postgres 2>/dev/null | lat_of)
		echo "$lat" >> "$DIR/lat_$scan"
		printf '  round %d: scan=%-3s %s ms per statement\n' "$r" "$scan" "$lat"
	done
done
marks=$(runuser -u postgres -- "$PGBIN/psql" -X -At -h "$DIR" -p "$PORT" -d postgres \
	-c "CREATE EXTENSION IF NOT EXISTS pg_cache_ext" \
	-c "SELECT value FROM cache_ext_stats() WHERE name = 'marks_session'" | tail -1)
lon=$(median < "$DIR/lat_on")
loff=$(median < "$DIR/lat_off")
mark_us=$(echo "($lon - $loff) * 1000" | bc -l)
printf '  median: %.4f ms marked vs %.4f ms unmarked: one mark + unmark costs %.1f us (bound: < 20 us; %s marks counted)\n' \
	"$lon" "$loff" "$mark_us" "$marks"

echo
echo "summary:"
printf '  tracker on unmarked cold reads   %+6.2f%%   (< 3%%)\n' "$tracker_pct"
printf '  pgbench -S TPS, loaded/not       %6.1f%%   (>= 99%%)\n' "$tps_pct"
printf '  mark + unmark pair               %6.1f us (< 20 us)\n' "$mark_us"
