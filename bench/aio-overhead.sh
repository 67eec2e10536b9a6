#!/usr/bin/env bash
# bench/aio-overhead.sh - what the tracker costs unmarked reads on
# PostgreSQL 18 with io_method = worker (issue 13's bound: < 1%).
#
#   bench/aio-overhead.sh [--rounds N] [--mb MB]
#
# With I/O workers, every page a scan reads is inserted by an I/O worker,
# and the tracker's insertion program takes the longest path of the
# attribution rule (bpf/maps.bpf.h): the scan-PID lookup, the io_workers
# lookup, the uid check of the cluster's account, the start time, the
# reads of the worker's error context and I/O handle, the owner lookup;
# only then is the page an ordinary one.  This measures that path where it
# is spent: a cold, unmarked sequential scan (pg_cache_ext.scan = off) of a
# table of MB MiB (default 256) in a cluster with io_method = worker, with
# the kernel's run-time accounting of the BPF programs
# (kernel.bpf_stats_enabled) set against the scan's time inside the server.
# The table's files are dropped from the page cache before each round
# (dd iflag=nocache: this cluster's files only).
#
# Run as root on the host: it runs itself in the PostgreSQL 18 lane's
# chroot (scripts/lanes.sh, /var/tmp/pce-chroots/forky, built there if
# missing), holding that lane's lock; everything lives below
# /var/tmp/pce-aio-overhead in the chroot and is removed.
set -euo pipefail

ROUNDS=7
MB=256
INSIDE=""
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) ROUNDS=$2; shift 2 ;;
	--mb) MB=$2; shift 2 ;;
	--inside) INSIDE=1; shift ;;
	*) echo "usage: $0 [--rounds N] [--mb MB]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "aio-overhead.sh: run as root" >&2; exit 1; }

# ---- on the host: into the PostgreSQL 18 chroot ----
if [ -z "$INSIDE" ]; then
	source "$(dirname "$0")/../scripts/lanes.sh" --functions	# cd's to the tree
	suite=$(suite_of 18)
	root=$CHROOTS/$suite
	mkdir -p "$CHROOTS"
	exec 9>"$CHROOTS/$suite.lock"
	flock 9
	LANE_ROOT=$root
	trap 'umount_root "$LANE_ROOT"' EXIT
	ensure_chroot 18 "$suite" "$root"
	mount_root "$root"
	dst=$root/var/tmp/pce-aio-bench-src
	rm -rf "$dst"
	mkdir -p "$dst"
	tar -C "$SRC" --exclude=.git --exclude=tmp_check --exclude=results -cf - . | tar -C "$dst" -xf -
	in_root "$root" make -s -C /var/tmp/pce-aio-bench-src clean >/dev/null 2>&1 || true
	rc=0
	in_root "$root" env PCE_NO_BENCH=1 PG_MAJOR=18 \
		bash /var/tmp/pce-aio-bench-src/bench/aio-overhead.sh --inside --rounds "$ROUNDS" --mb "$MB" || rc=$?
	rm -rf "$dst"
	exit $rc
fi

# ---- in the chroot ----
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
PGBIN=/usr/lib/postgresql/18/bin
LOADER=$PGBIN/pg_cache_ext_loader
DIR=/var/tmp/pce-aio-overhead
PORT=55518
PINS=/run/pg_cache_ext/pins
. bench/standalone.sh

cleanup() {
	stop_bench_cluster fast
	[ -d "$DIR/data" ] && "$LOADER" --unload -D "$DIR/data" >/dev/null 2>&1
	[ -n "${old_stats:-}" ] && sysctl -q -w kernel.bpf_stats_enabled="$old_stats"
	rm -rf "$DIR"
}
bench_dir_begin

runuser -u postgres -- "$PGBIN/initdb" -D "$DIR/data" -A trust >/dev/null
cat >> "$DIR/data/postgresql.conf" <<CONF
port = $PORT
unix_socket_directories = '$DIR'
listen_addresses = ''
shared_buffers = 16MB
io_method = worker
shared_preload_libraries = 'pg_cache_ext'
CONF
"$LOADER" --mode=stock -D "$DIR/data" >/dev/null
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$DIR/data" -l "$DIR/log" -w start >/dev/null
psql_q() { runuser -u postgres -- "$PGBIN/psql" -X -q -At -h "$DIR" -p "$PORT" -d postgres "$@"; }
# ~ 250 bytes a row: 4200 rows per MiB
psql_q -c "CREATE EXTENSION pg_cache_ext" -c "
CREATE TABLE big AS SELECT g, repeat('x', 200) AS pad FROM generate_series(1, $MB * 4200) g;
CREATE FUNCTION timed_scan() RETURNS float8 LANGUAGE plpgsql AS \$\$
DECLARE t0 timestamptz := clock_timestamp(); n bigint;
BEGIN
	SELECT count(*) INTO n FROM big;
	RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6;
END \$\$"
psql_q -c CHECKPOINT
pin_dir=$(psql_q -c "SELECT value FROM cache_ext_status() WHERE name = 'pin_dir'")
files=$(psql_q -c "SELECT current_setting('data_directory') || '/' || pg_relation_filepath('big')")
size=$(psql_q -c "SELECT pg_relation_size('big') / 1048576")
workers=""
for _ in $(seq 40); do
	workers=$(psql_q -c "SELECT value FROM cache_ext_status() WHERE name = 'attribution'" |
		grep -oE '[0-9]+ I/O workers registered' | awk '{ print $1 }')
	[ "${workers:-0}" -gt 0 ] && break
	sleep 0.25
done
echo "PostgreSQL $(psql_q -c 'SHOW server_version'), io_method = $(psql_q -c 'SHOW io_method'), kernel $(uname -r)"
echo "attribution: $(psql_q -c "SELECT value FROM cache_ext_status() WHERE name = 'attribution'")"
[ "${workers:-0}" -gt 0 ] || { echo "aio-overhead.sh: no I/O worker registered: nothing to measure" >&2; exit 1; }

drop_table() {	# the table's segment files leave the page cache
	local f
	sync
	for f in "$files" "$files".[0-9]*; do
		[ -f "$f" ] && dd if="$f" iflag=nocache count=0 status=none
	done
	return 0
}
prog_stat() {	# $1 = run_time_ns | run_cnt, $2 = the link's pin name
	local id pin=$pin_dir/$2
	[ -e "$pin" ] || { echo 0; return; }
	id=$(bpftool link show pinned "$pin" | grep -oE 'prog [0-9]+' | awk '{ print $2 }')
	bpftool prog show id "$id" | grep -oE "$1 [0-9]+" | awk '{ print $2 }'
}
stat_of() { psql_q -c "SELECT value FROM cache_ext_stats() WHERE name = '$1'"; }

# knob io_workers (bpf/pg_cache_ext.h: the last of the eight __u32 of
# struct pce_knobs) := $1: with 0, the rule never looks I/O workers up, as
# before it existed; the module writes the knobs only at start and reload
knob_io_workers() {
	local bytes
	bytes=$(bpftool -j map lookup pinned "$pin_dir/knobs" key 0 0 0 0 | grep -o '"value":\[[^]]*\]' |
		grep -o '0x[0-9a-f]*' | head -28 | tr '\n' ' ')
	bpftool map update pinned "$pin_dir/knobs" key 0 0 0 0 value $bytes "0x0$1" 0 0 0
}

echo "== unmarked cold scans of a $size MiB table (pg_cache_ext.scan = off), $ROUNDS rounds of two:"
echo "   the I/O-worker rule on (knob io_workers = 1, as the module sets it) and off (= 0), order ABBA"
# The rule runs in the insertion program and in the promotion program
# (tracker_activate_link: on_file_read, which asks at every read whether
# the reader is a scan); the removal program does not use it and is left
# out.  The programs see the whole machine's page cache, not only this
# scan's: what other processes do meanwhile is counted too (an upper bound).
old_stats=$(sysctl -n kernel.bpf_stats_enabled)
sysctl -q -w kernel.bpf_stats_enabled=1
for k in 0 1; do
	: > "$DIR/scan_us.$k"; : > "$DIR/pct.$k"; : > "$DIR/ins.$k"; : > "$DIR/read.$k"
	eval "tot_ns_$k=0 tot_us_$k=0"
done
scan0=$(stat_of folios_added_scan); other0=$(stat_of folios_added_other)
one_scan() {	# $1 = knob io_workers; appends to the files of that setting
	local k=$1 us i0 c0 a0 d0 i1 c1 a1 d1
	knob_io_workers "$k"
	drop_table
	i0=$(prog_stat run_time_ns tracker_link); c0=$(prog_stat run_cnt tracker_link)
	a0=$(prog_stat run_time_ns tracker_activate_link); d0=$(prog_stat run_cnt tracker_activate_link)
	us=$(psql_q -c "SET pg_cache_ext.scan = off" -c "SELECT timed_scan()")
	i1=$(prog_stat run_time_ns tracker_link); c1=$(prog_stat run_cnt tracker_link)
	a1=$(prog_stat run_time_ns tracker_activate_link); d1=$(prog_stat run_cnt tracker_activate_link)
	us=${us%%.*}
	echo "$us" >> "$DIR/scan_us.$k"
	echo "$(calc "($i1 - $i0 + $a1 - $a0) / 1000 / $us * 100")" >> "$DIR/pct.$k"
	echo "$(calc "($i1 - $i0) / ($c1 - $c0 + ($c1 == $c0))" 1)" >> "$DIR/ins.$k"
	echo "$(calc "($a1 - $a0) / ($d1 - $d0 + ($d1 == $d0))" 1)" >> "$DIR/read.$k"
	eval "tot_ns_$k=\$((tot_ns_$k + i1 - i0 + a1 - a0)) tot_us_$k=\$((tot_us_$k + us))"
	printf '  round %d, rule %-3s: scan %.3f s; insertions %5d x %4.0f ns, reads %5d x %4.0f ns: %.3f%% of the scan\n' \
		"$r" "$([ "$k" = 1 ] && echo on || echo off)" "$(calc "$us / 1e6")" $((c1 - c0)) "$(tail -1 "$DIR/ins.$k")" \
		$((d1 - d0)) "$(tail -1 "$DIR/read.$k")" "$(tail -1 "$DIR/pct.$k")"
}
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) -eq 1 ]; then one_scan 1; one_scan 0; else one_scan 0; one_scan 1; fi
done
knob_io_workers 1
scan=$(( $(stat_of folios_added_scan) - scan0 )); other=$(( $(stat_of folios_added_other) - other0 ))
echo
echo "summary (PostgreSQL 18, io_method = worker, $workers I/O workers registered, kernel $(uname -r)):"
for k in 1 0; do
	printf '  rule %-3s: insertion + read programs %.3f%% of the unmarked scans (median round %.3f%%);\n' \
		"$([ "$k" = 1 ] && echo on || echo off)" "$(eval calc "\"\$tot_ns_$k / 1000 / \$tot_us_$k * 100\"")" \
		"$(median < "$DIR/pct.$k")"
	printf '            median %.0f ns per insertion, %.0f ns per read; median scan %.3f s\n' \
		"$(median < "$DIR/ins.$k")" "$(median < "$DIR/read.$k")" "$(calc "$(median < "$DIR/scan_us.$k") / 1e6")"
done
echo "  bound: < 1% with the rule on; $other folios inserted in all, $scan of them taken for scan folios"
