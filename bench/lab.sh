#!/bin/sh
# bench/lab.sh: the OLTP-beside-scans benchmark inside the cache_ext lab VM
# (shared/kernel-lab: the cache_ext research kernel under QEMU), so that
# configuration (c), the cache_ext policy, has numbers beside the others.
#
# usage: sudo bench/lab.sh [--out DIR]
#
# Configurations, interleaved on the same data (the second workload runs
# them in reverse order), one phase each, every phase from a cold cache:
#	a	no extension doing anything (module preloaded, pg_cache_ext.mode = off)
#	b	pg_cache_ext, stock mechanism (loader --mode stock)
#	c	pg_cache_ext, cache_ext policy (loader --mode cache_ext)
#	y	as (a), scans included, with no memory limit: nothing is evicted, the
#		physical limit of any cache policy on this (emulated) CPU
# Workloads: pgbench point SELECTs (uniform) beside a looping
# SELECT count(*) of a larger table, then beside a looping VACUUM of it.
#
# Environment: SCALE (pgbench scale, default 4), SCAN_MB (scanned table,
# default 256), LIMIT_MB (the cluster's memory.max, default 112), DUR
# (measured seconds per phase, default 20), WARM (5), CLIENTS (2), PHASES
# (default "a:count b:count c:count y:count y:vacuum c:vacuum b:vacuum a:vacuum"),
# PCE_KERNEL_LAB, PCE_LAB_TIMEOUT (1800).  The loader and the module are
# this build's (the VM sees them in place of the installed ones); the
# server is the host's PostgreSQL 15.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
OUT="$HERE/out/lab-$(date +%Y%m%d-%H%M%S)"
[ "${1:-}" = --out ] && OUT=$2
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
SCALE=${SCALE:-4} SCAN_MB=${SCAN_MB:-256} LIMIT_MB=${LIMIT_MB:-112}
DUR=${DUR:-20} WARM=${WARM:-5} CLIENTS=${CLIENTS:-2}

lab=${PCE_KERNEL_LAB:-}
for d in "$SRC/../shared/kernel-lab" /work/shared/kernel-lab; do
	[ -z "$lab" ] && [ -x "$d/run-in-vm" ] && lab=$d
done
[ -n "$lab" ] || { echo "bench/lab.sh: no kernel lab (set PCE_KERNEL_LAB)" >&2; exit 77; }
make -s -C "$SRC" all loader/pg_cache_ext_loader >&2

work=$(mktemp -d /var/tmp/pce-lab-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"; chown postgres "$work"
cp "$SRC/loader/pg_cache_ext_loader" "$HERE/lab-inside.sh" "$SRC/test/lab/lab-common.sh" "$work/"
cc -O2 -Wall -I"$SRC/bpf" -o "$work/pce_mark_self" "$SRC/test/pce_mark_self.c" -lbpf
# this build's module and SQL, mounted inside the VM over the installed
# ones (the host's install may be another build, whose pins differ)
mkdir "$work/ext"
cp "$SRC/pg_cache_ext.so" "$SRC/pg_cache_ext.control" "$SRC"/pg_cache_ext--*.sql "$work/ext/"

# the cluster, made on the host (initdb and pgbench -i take minutes under TCG)
as_pg() { runuser -u postgres -- "$@"; }
as_pg "$PGBIN/initdb" -D "$work/pgdata" -A trust -U postgres -N >/dev/null
cat >> "$work/pgdata/postgresql.conf" <<CONF
shared_buffers = 16MB
listen_addresses = ''
unix_socket_directories = '$work'
max_connections = 20
fsync = off
synchronous_commit = off
autovacuum = off
max_parallel_workers_per_gather = 0
shared_preload_libraries = 'pg_cache_ext'
pg_cache_ext.mode = off
CONF
as_pg "$PGBIN/pg_ctl" -D "$work/pgdata" -l "$work/host.log" -w start >/dev/null
as_pg "$PGBIN/pgbench" -h "$work" -i -q -s "$SCALE" postgres >/dev/null 2>&1
rows=$((SCAN_MB * 1024 * 1024 / 8192 * 4))
as_pg "$PGBIN/psql" -h "$work" -d postgres -X -q -v ON_ERROR_STOP=1 \
	-c "CREATE TABLE scan_t AS SELECT g AS id, repeat('s', 1800) AS pad FROM generate_series(1, $rows) g" \
	-c "VACUUM FREEZE" -c "CHECKPOINT"
as_pg "$PGBIN/pg_ctl" -D "$work/pgdata" -m fast -w stop >/dev/null

mkdir -p "$OUT"
echo "bench/lab.sh: scale $SCALE, scan table $SCAN_MB MiB, memory.max $LIMIT_MB MiB, ${DUR}s per phase" >&2
"$lab/run-in-vm" -m 2048 -d 4 -C "$work" -t "${PCE_LAB_TIMEOUT:-1800}" -- \
	env PGBIN="$PGBIN" LIMIT_MB="$LIMIT_MB" DUR="$DUR" WARM="$WARM" CLIENTS="$CLIENTS" ${PHASES:+PHASES="$PHASES"} \
	sh "$work/lab-inside.sh" "$work" > "$OUT/console.txt" 2>&1 || {
	rc=$?; tail -40 "$OUT/console.txt" >&2
	echo "bench/lab.sh: the VM run failed (exit $rc); the phases it finished:" >&2; }
grep '^PHASE ' "$OUT/console.txt" > "$OUT/phases.txt" || true
perl "$HERE/lab-report.pl" "$OUT/phases.txt" "scale $SCALE, scan table $SCAN_MB MiB, memory.max $LIMIT_MB MiB, ${DUR}s per phase, $CLIENTS clients" | tee "$OUT/report.txt"
echo "bench/lab.sh: results in $OUT" >&2
