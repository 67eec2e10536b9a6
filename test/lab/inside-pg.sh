#!/bin/sh
# inside-pg.sh: runs as root inside the cache_ext lab VM (see run-lab-test.sh).
#
# A PostgreSQL 15 cluster in a memory-limited cgroup: an unmarked backend
# reads a "hot" table repeatedly, then a backend whose PID is put into
# scan_pids (as the pg_cache_ext module does for a large SeqScan) scans a
# table several times larger than the cgroup's memory.max.  Once on the
# kernel's LRU (cgroup "baseline"), once with the policy attached (cgroup
# "cache_ext_pg").  Reports how much of the hot table's file stays in the
# page cache.  RESULT lines are parsed by t/090_cache_ext_lab.t.
#
# usage: inside-pg.sh TOOLS_DIR [MEMORY_MAX_MB]   (TOOLS_DIR/pgdata: prepared cluster)
set -u
B=$1
MAX=${2:-112}
. "$B/lab-common.sh"
PIN=/sys/fs/bpf/pg_cache_ext_lab/lab	# <pin root>/<id>, as the loader makes them
CGROOT=/sys/fs/cgroup

start_watchdog "${PCE_LAB_WATCHDOG:-280}" 60
prepare_pg_runtime
start_in() {	# start the cluster inside cgroup $1
	sh -c 'echo $$ > "$0/cgroup.procs" && exec runuser -u postgres -- "$1/pg_ctl" -D "$2" -l /mnt/pg.log -w start >/dev/null' "$1" "$PGBIN" "$DATA"
}
stop_pg() { pg "$PGBIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null; }

# The cluster (initdb + tables) is prepared on the host by run-lab-test.sh
# (initdb alone takes minutes under software emulation); copy it to the
# scratch ext4 disk so that its pages live in a real page cache.
say "copying the prepared cluster"
cp -a "$B/pgdata" "$DATA" || { echo "RESULT pg_copy_rc=1"; exit 1; }
sed -i "s|^unix_socket_directories.*|unix_socket_directories = '$SOCK'|" "$DATA/postgresql.conf"
start_in "$CGROOT" || { cat /mnt/pg.log; exit 1; }
HOT=$DATA/$(psqlc -c "SELECT pg_relation_filepath('hot')")
BIG=$DATA/$(psqlc -c "SELECT pg_relation_filepath('big')")
say "hot table $(($(stat -c %s "$HOT") / 1048576)) MiB, big table $(($(stat -c %s "$BIG") / 1048576)) MiB, memory.max ${MAX}M, shared_buffers 16MB"
stop_pg

run_case() {
	name=$1 cg=$2
	mkdir -p "$cg"
	echo "${MAX}M" > "$cg/memory.max"
	sync; echo 3 > /proc/sys/vm/drop_caches
	start_in "$cg" || { cat /mnt/pg.log; exit 1; }
	say "$name: started"
	for i in 1 2 3; do psqlc -c "SELECT count(*) FROM hot" >/dev/null; done
	before=$("$B/pce_mark_self" resident "$HOT" | cut -d' ' -f1)
	say "$name: hot warmed"
	# the scanning backend marks its own PID, as the module's executor hook would
	psqlc <<SQL >/dev/null
SELECT pg_backend_pid() AS pid \gset
\setenv PCE_PID :pid
\! $B/pce_policy_tool mark $PIN \$PCE_PID
SELECT count(*) FROM big;
\! $B/pce_policy_tool unmark $PIN \$PCE_PID
SQL
	after=$("$B/pce_mark_self" resident "$HOT" | cut -d' ' -f1)
	t0=$(date +%s%N)
	psqlc -c "SELECT count(*) FROM hot" >/dev/null
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	say "$name: hot table resident before scan ${before}%, after ${after}%; next hot query ${ms} ms"
	echo "RESULT pg_${name}_hot_before=$before"
	echo "RESULT pg_${name}_hot_after=$after"
	echo "RESULT pg_${name}_hot_query_ms=$ms"
	stop_pg
}

mkdir -p "$PIN"
# the maps must exist for marking in the baseline run too: attach to a scratch cache_ext cgroup
run_case_setup() {
	mkdir -p "$CGROOT/cache_ext_pg"
	"$B/pce_policy_tool" attach "$PIN" "$CGROOT/cache_ext_pg" | sed 's/^/LAB-TEST: /'
	"$B/pce_policy_tool" knobs "$PIN" 1 1 0
	# as the loader does: backends (user postgres) update scan_pids through group access
	chgrp postgres "$PIN"/* && chmod 660 "$PIN"/*
}
bpf_from_here_on
run_case_setup
echo "RESULT pg_attach_rc=$([ -e "$PIN/policy_link" ] && echo 0 || echo 1)"
run_case baseline "$CGROOT/baseline"
run_case policy "$CGROOT/cache_ext_pg"
"$B/pce_policy_tool" stats "$PIN" | sed 's/^/RESULT pg_stat_/; s/ /=/2'
exit 0
