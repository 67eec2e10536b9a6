#!/bin/sh
# bench/lab-inside.sh: runs as root inside the cache_ext lab VM (bench/lab.sh).
# One phase per configuration and workload; prints one PHASE line each.
#
# usage: lab-inside.sh WORK_DIR   (WORK_DIR/pgdata: the prepared cluster)
set -u
W=$1
. "$W/lab-common.sh"
LOADER=$W/pg_cache_ext_loader
CG=/sys/fs/cgroup/cache_ext_bench	# cache_ext runs policies only on cgroups named cache_ext*
LIMIT_MB=${LIMIT_MB:-112} DUR=${DUR:-20} WARM=${WARM:-5} CLIENTS=${CLIENTS:-2}

start_watchdog 1750 60
prepare_pg_runtime
# this build's module and SQL over the installed ones (the host's root is read-only here)
for f in "$W"/ext/*; do
	case "$f" in
		*.so) dest=$("$PGBIN/pg_config" --pkglibdir)/${f##*/} ;;
		*) dest=$("$PGBIN/pg_config" --sharedir)/extension/${f##*/} ;;
	esac
	[ -e "$dest" ] && mount --bind "$f" "$dest"
done
say "copying the prepared cluster"
cp -a "$W/pgdata" "$DATA" || exit 1
sed -i "s|^unix_socket_directories.*|unix_socket_directories = '$SOCK'|" "$DATA/postgresql.conf"
mkdir -p "$CG"

pg_start() {
	sh -c 'echo $$ > "$0/cgroup.procs" && exec runuser -u postgres -- "$1/pg_ctl" -D "$2" -l /mnt/pg.log -w start >/dev/null' \
		"$CG" "$PGBIN" "$DATA" || { tail -20 /mnt/pg.log; exit 1; }
}
pg_stop() { pg "$PGBIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1; }
pce_stat() { psqlc -c "SELECT coalesce((SELECT value FROM cache_ext_stats() WHERE name = '$1'), 0)" 2>/dev/null || echo 0; }
memstat() { awk -v k="$1" '$1 == k { print $2 }' "$CG/memory.stat"; }
relfile() { echo "$DATA/$(psqlc -c "SELECT pg_relation_filepath('$1')")"; }
resident_pages() { "$W/pce_mark_self" resident "$1" | cut -d' ' -f2,3; }

# hot set residency (pgbench_accounts and its primary key), percent
hot_pct() {
	set -- $(resident_pages "$HOT_HEAP") $(resident_pages "$HOT_PKEY")
	echo "$1 $2 $3 $4" | awk '{ printf "%.1f", 100 * ($1 + $3) / ($2 + $4) }'
}

# $1: configuration; puts the loader and the settings in place
configure() {
	"$LOADER" -D "$DATA" --unload >/dev/null 2>&1
	mode=off
	case "$1" in
		b) mode=stock ;;
		c) mode=cache_ext ;;
	esac
	sed -i "s/^pg_cache_ext.mode.*/pg_cache_ext.mode = $mode/" "$DATA/postgresql.conf"
	if [ "$1" = y ]; then echo max > "$CG/memory.max"; else echo "${LIMIT_MB}M" > "$CG/memory.max"; fi
	if [ "$mode" != off ]; then
		"$LOADER" -D "$DATA" --mode "$mode" --cgroup "$CG" 2>&1 | sed "s/^/LAB-TEST: loader: /"
	fi
}

scanner() {	# $1 SQL, $2 deadline (epoch s): loop the scan, print how many finished
	n=0
	while [ "$(date +%s)" -lt "$2" ]; do
		PGAPPNAME=pce_scan psqlc -c "$1" >/dev/null 2>&1 && n=$((n + 1))
	done
	echo "$n" > /tmp/scans
}

# p99 of the per-transaction latencies (us, field 3) in pgbench's logs, ms
p99_ms() {
	cat "$1"/pgbench_log.* | awk '{ print $3 }' | sort -n |
		awk '{ v[NR] = $1 } END { i = int(0.99 * NR); if (i < 1) i = 1; printf "%.2f", v[i] / 1000 }'
}

phase() {	# $1 config, $2 workload (count | vacuum)
	cfg=$1 kind=$2
	case "$kind" in
		count) sql="SELECT count(*) FROM scan_t" ;;
		vacuum) sql="VACUUM (DISABLE_PAGE_SKIPPING) scan_t" ;;
	esac
	configure "$cfg"
	sync; echo 3 > /proc/sys/vm/drop_caches
	pg_start
	psqlc -c "SELECT pg_prewarm('pgbench_accounts'), pg_prewarm('pgbench_accounts_pkey')" >/dev/null
	pg "$PGBIN/pgbench" -h "$SOCK" -n -S -c "$CLIENTS" -j "$CLIENTS" -T "$WARM" postgres >/dev/null 2>&1
	ref0=$(memstat workingset_refault_file)
	deadline=$(( $(date +%s) + DUR ))
	scanner "$sql" "$deadline" &
	spid=$!
	dir=/mnt/phase-$cfg-$kind; mkdir -p "$dir"; chown postgres "$dir"
	out=$(cd "$dir" && pg "$PGBIN/pgbench" -h "$SOCK" -n -S -c "$CLIENTS" -j "$CLIENTS" -T "$DUR" -l postgres 2>&1)
	psqlc -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'pce_scan'" >/dev/null
	wait $spid
	tps=$(echo "$out" | awk '/^tps/ { print $3; exit }')
	echo "PHASE cfg=$cfg kind=$kind tps=$tps p99_ms=$(p99_ms "$dir") hot_pct=$(hot_pct)" \
		"refaults=$(( $(memstat workingset_refault_file) - ref0 )) scans=$(cat /tmp/scans)" \
		"evicted_scan=$(pce_stat folios_evicted_scan) marks=$(pce_stat marks) dropped_mb=$(( $(pce_stat bytes_dropped) >> 20 ))" \
		"state=$(psqlc -c "SELECT value FROM cache_ext_status() WHERE name = 'state'" 2>/dev/null)"
	say "$cfg/$kind: $(psqlc -c "SELECT value FROM cache_ext_status() WHERE name = 'reason'" 2>/dev/null)"
	pg_stop
	rm -rf "$dir"
}

pg_start
psqlc -c "CREATE EXTENSION IF NOT EXISTS pg_cache_ext" -c "CREATE EXTENSION IF NOT EXISTS pg_prewarm" >/dev/null
HOT_HEAP=$(relfile pgbench_accounts)
HOT_PKEY=$(relfile pgbench_accounts_pkey)
say "hot set $(( ($(stat -c %s "$HOT_HEAP") + $(stat -c %s "$HOT_PKEY")) >> 20 )) MiB," \
	"scan table $(( $(stat -c %s "$(relfile scan_t)") >> 20 )) MiB, memory.max ${LIMIT_MB} MiB"
pg_stop

# interleaved, the second workload in reverse order
for p in ${PHASES:-a:count b:count c:count y:count y:vacuum c:vacuum b:vacuum a:vacuum}; do
	phase "${p%%:*}" "${p#*:}"
done
"$LOADER" -D "$DATA" --unload >/dev/null 2>&1
exit 0
