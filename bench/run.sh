#!/usr/bin/env bash
# bench/run.sh - does pg_cache_ext keep an OLTP hot set cached while big scans run?
#
#   bench/run.sh [--short|--full] [--configs a,b,c,d,e,y,z] [--fresh]
#                [--throttle-iops N] [--throttle-mbps N] [--no-throttle] [--out DIR]
#
# Builds (once, reused while its parameters match) a throwaway cluster under
# $BENCH_DIR (default /var/tmp/pce-bench) with a hot table (pgbench_accounts)
# and a scanned table several times the memory cgroup's limit, starts it
# inside a memory cgroup whose limit holds the hot set but not the scanned
# table, and runs, interleaved on the same data, one phase per configuration:
#
#   a  no extension (pg_cache_ext.mode = off)
#   b  pg_cache_ext, stock-kernel mechanism (tracker + fadvise evictor)
#   c  pg_cache_ext, cache_ext mechanism (only where the kernel has cache_ext)
#   d  pgfincore: pgfadvise_dontneed() on the scanned table after each scan
#   e  the scanning backends moved into their own small memory cgroup
#   y  as (a), scans included, with no memory limit on the cluster: nothing
#      is evicted, the physical limit of any cache policy on this CPU (the
#      gap from (y) to (z) is the scans' CPU and disk, not the cache)
#   z  OLTP alone, no scans (the reference)
#
# Every phase starts from the same cache state (cluster files evicted, hot
# table read back, a short OLTP warm-up), then runs pgbench point SELECTs
# against concurrent scans.  Results: bench/out/<run>/ (results.csv,
# results.json, report.txt, latency.png) and bench/out/latest -> that run.
# Run as root (cgroups, loader).  Cleans up on exit and on Ctrl-C.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
. "$HERE/lib.sh"

MODE=short
CONFIGS=""
FRESH=0
# Read throttle on the cluster's blkio cgroup, like a cloud SSD volume
# (gp3-class: 3000 IOPS, ~200 MB/s); the VM's virtio disk is served from the
# host's cache at ~1.8 GB/s, which no production disk does.  0 = none.
THROTTLE_IOPS=3000
THROTTLE_MBPS=200
OUT_BASE="$HERE/out"
BENCH_DIR=${BENCH_DIR:-/var/tmp/pce-bench}

while [ $# -gt 0 ]; do
	case "$1" in
		--short) MODE=short ;;
		--full) MODE=full ;;
		--configs) CONFIGS=$2; shift ;;
		--configs=*) CONFIGS=${1#*=} ;;
		--fresh) FRESH=1 ;;
		--throttle-iops) THROTTLE_IOPS=$2; shift ;;
		--throttle-mbps) THROTTLE_MBPS=$2; shift ;;
		--no-throttle) THROTTLE_IOPS=0; THROTTLE_MBPS=0 ;;
		--out) OUT_BASE=$2; shift ;;
		-h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
		*) die "unknown argument $1 (see --help)" ;;
	esac
	shift
done
[ "$(id -u)" -eq 0 ] || die "run as root (memory cgroups, BPF loader)"

# ---- parameters ----
# The regime where the kernel's LRU fails (issue 7): the hot set is well over
# half of the cgroup's file memory, so the active list (at most about half of
# the file LRU below 1 GiB) cannot hold it, and two scanners offset in time
# touch each scan page twice, promoting scan pages to the active list.
SCALE=${SCALE:-12}				# pgbench scale: 1.2M accounts, ~155 MiB heap + ~26 MiB index
SCAN_MB=${SCAN_MB:-1024}		# scanned table
LIMIT_MB=${LIMIT_MB:-320}		# memory cgroup of the whole cluster
SCAN_CG_MB=${SCAN_CG_MB:-48}	# (e): cgroup of the scanning backends
SHARED_BUFFERS=${SHARED_BUFFERS:-32MB}
SCAN_BUDGET_MB=${SCAN_BUDGET_MB:-32}
CLIENTS=${CLIENTS:-2}			# OLTP pgbench clients
if [ "$MODE" = short ]; then
	DUR=${DUR:-15}; WARM=${WARM:-2}; ROUNDS=${ROUNDS:-2}
	WORKLOADS=${WORKLOADS:-"uniform:count2"}
	[ -n "$CONFIGS" ] || CONFIGS=a,b,c,d,e,y,z
else
	DUR=${DUR:-35}; WARM=${WARM:-5}; ROUNDS=${ROUNDS:-1}
	WORKLOADS=${WORKLOADS:-"uniform:count2 zipf:count2 uniform:count uniform:vacuum uniform:dump uniform:tar"}
	[ -n "$CONFIGS" ] || CONFIGS=a,b,c,d,e,y,z
fi
SCAN_OFFSET=${SCAN_OFFSET:-3}	# seconds between the two scanners of count2
SETTLE=${SETTLE:-4}				# the report's TPS/latency skip the first SETTLE s of a phase
PGPORT=${PGPORT:-5499}
SOCK_DIR=$BENCH_DIR
PGDATA=$BENCH_DIR/data
DATASET_ID="v1 scale=$SCALE scan_mb=$SCAN_MB sb=$SHARED_BUFFERS"

RUN_ID=$(date +%Y%m%d-%H%M%S)-$MODE
OUT=$OUT_BASE/$RUN_ID
mkdir -p "$OUT"
ln -sfn "$RUN_ID" "$OUT_BASE/latest"

# ---- cleanup, also on Ctrl-C ----
BG_PIDS=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	for p in $BG_PIDS; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	pg_stop
	loader_unload
	cg_cleanup
	[ $rc -ne 0 ] && log "stopped (rc $rc); partial results in $OUT"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

T0=$(date +%s)
# ---- build and install if needed ----
if [ ! -x "$PGBIN/pg_cache_ext_loader" ] || [ ! -x "$PGBIN/pg_cache_ext_run" ] || [ ! -f "$($PGBIN/pg_config --pkglibdir)/pg_cache_ext.so" ] ||
	[ ! -f "$($PGBIN/pg_config --pkglibdir)/pgfincore.so" ]; then
	log "pg_cache_ext or pgfincore not installed: running scripts/setup.sh"
	bash "$SRC/scripts/setup.sh"
	PGBIN=$(pg_bindir)
fi
mount | grep -q ' /sys/fs/bpf type bpf' || mount -t bpf bpf /sys/fs/bpf

mkdir -p "$BENCH_DIR"
[ "$(stat -f -c %T "$BENCH_DIR")" != tmpfs ] || die "$BENCH_DIR is on tmpfs; set BENCH_DIR to a real disk"
chown "$PGUSER_OS" "$BENCH_DIR"

# stale cluster from an interrupted run?
if [ -f "$PGDATA/postmaster.pid" ]; then
	log "stopping a cluster left running in $PGDATA"
	pg_stop
fi
"$PGBIN/pg_cache_ext_loader" --unload -D "$PGDATA" >/dev/null 2>&1 || true

cg_setup
if [ "$(damon_state)" != off ]; then
	log "note: DAMON is running here ($(damon_state)): it may page out page-cache pages that look idle" \
		"(e.g. copies of blocks held in shared_buffers) in every configuration"
fi
log "mode $MODE, configs $CONFIGS, workloads: $WORKLOADS; ${DUR}s per phase"
log "cgroup v$CG_VERSION: memory cgroup $MEMCG limit ${LIMIT_MB} MiB; reads counted in ${BLKCG:-$MEMCG} (disk $DISK_NAME $DISK_DEV)" \
	"; read throttle: iops ${THROTTLE_IOPS:-0}, MB/s ${THROTTLE_MBPS:-0} (0 = none)"

# ---- dataset ----
build_dataset() {
	log "dataset: initdb + pgbench scale $SCALE + ${SCAN_MB} MiB scan table in $PGDATA"
	rm -rf "$PGDATA"
	as_pg "$PGBIN/initdb" -D "$PGDATA" -A trust -U postgres >/dev/null
	cat >> "$PGDATA/postgresql.conf" <<-EOF
	# --- pce bench ---
	shared_preload_libraries = 'pg_cache_ext'
	listen_addresses = ''
	port = $PGPORT
	unix_socket_directories = '$SOCK_DIR'
	shared_buffers = $SHARED_BUFFERS
	max_connections = 30
	autovacuum = off
	fsync = off
	synchronous_commit = off
	full_page_writes = off
	wal_level = minimal
	max_wal_senders = 0
	max_wal_size = 4GB
	checkpoint_timeout = 1h
	max_parallel_workers_per_gather = 0
	jit = off
	pg_cache_ext.scan_budget = ${SCAN_BUDGET_MB}MB
	EOF
	pg_start
	q_db postgres "CREATE DATABASE bench" >/dev/null
	"$PGBIN/pgbench" -h "$SOCK_DIR" -p "$PGPORT" -U postgres -i -q -s "$SCALE" -I dtgvp bench 2>&1 |
		grep -v '^ *[0-9]* of' >&2 || true
	local rows=$((SCAN_MB * 1024 * 1024 / 8192 * 4))
	# ~1.8 kB rows, 4 per page, below the TOAST threshold (not compressed);
	# unlogged: no WAL to write while loading, reads are the same
	q "CREATE UNLOGGED TABLE scan_t (id int, pad text) WITH (autovacuum_enabled = off)"
	q "INSERT INTO scan_t SELECT g, repeat(md5(g::text), 56) FROM generate_series(1, $rows) g"
	# the first read of fresh rows sets hint bits (dirty pages cannot be dropped): freeze now
	q "VACUUM (FREEZE, ANALYZE) scan_t"
	q "VACUUM (FREEZE, ANALYZE) pgbench_accounts"
	q "CHECKPOINT"
	q "CREATE EXTENSION pg_cache_ext"; q "CREATE EXTENSION pgfincore"; q "CREATE EXTENSION pg_prewarm"
	echo "$DATASET_ID" > "$PGDATA/pce_bench_dataset"
	pg_stop
}

if [ "$FRESH" = 1 ] || [ ! -f "$PGDATA/pce_bench_dataset" ] || [ "$(cat "$PGDATA/pce_bench_dataset")" != "$DATASET_ID" ]; then
	build_dataset
else
	log "dataset: reusing $PGDATA ($DATASET_ID)"
fi
sed -i "s/^pg_cache_ext.scan_budget = .*/pg_cache_ext.scan_budget = ${SCAN_BUDGET_MB}MB/" "$PGDATA/postgresql.conf"

loader_load
pg_start
set_mode auto
MECH=$(q "SELECT value FROM cache_ext_status() WHERE name = 'mechanism'" 2>/dev/null || echo "?")
set_mode off
HOT_MB=$(q "SELECT (pg_relation_size('pgbench_accounts') + pg_relation_size('pgbench_accounts_pkey')) >> 20")
SCANT_MB=$(q "SELECT pg_relation_size('scan_t') >> 20")
log "hot set (pgbench_accounts + pkey) ${HOT_MB} MiB, scanned table ${SCANT_MB} MiB, cgroup ${LIMIT_MB} MiB," \
	"shared_buffers $SHARED_BUFFERS; loader mechanism: $MECH"

# ---- scripts ----
NACC=$((SCALE * 100000))
cat > "$OUT/oltp_uniform.sql" <<EOF
\set aid random(1, $NACC)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
EOF
cat > "$OUT/oltp_zipf.sql" <<EOF
\set aid random_zipfian(1, $NACC, 1.01)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
EOF

pgb() { "$PGBIN/pgbench" -h "$SOCK_DIR" -p "$PGPORT" -U postgres -n "$@" bench; }

# Scanner $1 (1, 2) of kind $2 for config $3, until the deadline $4 (epoch s);
# prints the number of scans completed.  count and vacuum keep one
# connection (pgbench), so (e) can move its backend once: every scanner
# waits 1 s before its first scan, whatever the config, to leave the mover
# time.  pg_dump reconnects for every dump.
scanner() {
	local id=$1 kind=$2 cfg=$3 deadline=$4 n=0 after="" sf
	[ "$cfg" = d ] && after="SELECT count(*) FROM pgfadvise_dontneed('scan_t');"
	export PGAPPNAME=pce_scan$id
	if [ "$kind" = tar ]; then
		tar_scanner "$cfg" "$deadline"
		return
	fi
	if [ "$kind" = dump ]; then
		while [ "$(date +%s)" -lt "$deadline" ]; do
			"$PGBIN/pg_dump" -h "$SOCK_DIR" -p "$PGPORT" -U postgres -t scan_t -f /dev/null bench \
				2>/dev/null && n=$((n + 1))
			[ -n "$after" ] && { q "$after" >/dev/null 2>&1 || true; }
		done
		echo "$n"
		return
	fi
	sf=$(mktemp "$OUT/scan.XXXXXX.sql")
	{
		echo '\if :started = 0'
		echo 'SELECT pg_sleep(1);'
		echo '\set started 1'
		echo '\endif'
		case "$kind" in
			count*) echo 'SELECT count(*) FROM scan_t;' ;;
			vacuum) echo 'VACUUM (DISABLE_PAGE_SKIPPING) scan_t;' ;;
		esac
		[ -n "$after" ] && echo "$after"
	} > "$sf"
	pgb -c 1 -T $((deadline - $(date +%s))) -D started=0 -f "$sf" 2>/dev/null |
		awk '/^number of transactions actually processed/ { split($NF, a, "/"); print a[1] + 0; f = 1 } END { if (!f) print 0 }'
	rm -f "$sf"
}

# The backup variant (scan kind "tar"): a reader outside the server, a tar
# of the whole data directory (pg_wal included) run as postgres in the cluster's cgroups (a
# backup on the database host shares its memory and disk), looping until
# the deadline.  (b) and (c) wrap it in pg_cache_ext_run; (e) runs it in
# the scan cgroup instead; (a), (d) and the rest run it as it is.  timeout
# stops the one in flight at the deadline (the wrapper passes SIGTERM on).
tar_scanner() {
	local cfg=$1 deadline=$2 n=0 wrap=() cg=cluster left
	case "$cfg" in
		b | c) wrap=("$PGBIN/pg_cache_ext_run" -D "$PGDATA" --) ;;
		e) cg=scan ;;
	esac
	sleep 1
	while left=$((deadline - $(date +%s))) && [ "$left" -gt 0 ]; do
		# enter the cgroups first, then become postgres (setpriv execs: no process between)
		( cg_enter "$BASHPID" "$cg" && exec timeout "$left" setpriv --reuid postgres --regid postgres --init-groups -- \
			"${wrap[@]}" tar -cf - -C "$PGDATA" . 2>/dev/null ) | cat > /dev/null && n=$((n + 1))
	done
	echo "$n"
}

# (e): keep moving the scanning backends into the scan cgroup
mover() {
	local deadline=$1
	while [ "$(date +%s)" -lt "$deadline" ]; do
		for p in $(q "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'pce_scan%' OR application_name = 'pg_dump'" 2>/dev/null); do
			grep -qx "$p" "$MEMCG_SCAN/cgroup.procs" || echo "$p" > "$MEMCG_SCAN/cgroup.procs" 2>/dev/null || true
		done
		sleep 0.3
	done
}

hot_cached() {	# cached fraction of the hot set, percent
	q "SELECT round(100.0 * sum(cached_bytes) / sum(total_bytes), 1) FROM
	   (SELECT * FROM cache_ext_relation_cache('pgbench_accounts')
	    UNION ALL SELECT * FROM cache_ext_relation_cache('pgbench_accounts_pkey')) s"
}

stat_pce() { q "SELECT coalesce((SELECT value FROM cache_ext_stats() WHERE name = '$1'), 0)" 2>/dev/null || echo 0; }

run_phase() {	# $1 config, $2 oltp dist, $3 scan kind, $4 round
	local cfg=$1 dist=$2 kind=$3 round=$4
	local tag="$cfg-$dist-$kind-r$round" dir="$OUT/phases/$cfg-$dist-$kind-r$round"
	[ "$cfg" = z ] && kind=none && tag="z-$dist-none-r$round" && dir="$OUT/phases/$tag"
	mkdir -p "$dir"
	case "$cfg" in
		b) set_mode stock ;;
		c) set_mode cache_ext ;;
		*) set_mode off ;;
	esac
	# (y): no memory limit for this phase (restored at its end)
	[ "$cfg" = y ] && cg_set_limit "$MEMCG" max
	# same starting point: cold cache, hot set read back, OLTP warm-up
	evict_cluster_cache
	q "SELECT pg_prewarm('pgbench_accounts', 'read'), pg_prewarm('pgbench_accounts_pkey', 'read')" >/dev/null
	pgb -c "$CLIENTS" -j "$CLIENTS" -T "$WARM" -f "$OUT/oltp_$dist.sql" >/dev/null 2>&1
	local hot0 ref0 maj0 rd0 drop0 t_start deadline
	hot0=$(hot_cached)
	ref0=$(memstat "$MEMCG" workingset_refault_file); maj0=$(memstat "$MEMCG" pgmajfault)
	rd0=$(blk_read_bytes); drop0=$(stat_pce bytes_dropped)
	t_start=$(date +%s); deadline=$((t_start + DUR))
	log "phase $tag: start (hot set ${hot0}% cached after warm-up)"

	local spids="" mpid=""
	if [ "$kind" != none ]; then
		scanner 1 "$kind" "$cfg" "$deadline" > "$dir/scans1" & spids="$spids $!"
		if [ "$kind" = count2 ]; then
			( sleep "$SCAN_OFFSET"; scanner 2 "$kind" "$cfg" "$deadline" ) > "$dir/scans2" & spids="$spids $!"
		fi
		if [ "$cfg" = e ]; then mover "$deadline" & mpid=$!; fi
	fi
	# memory of the cluster's cgroup, once a second (diagnostics: mem.dat)
	( while [ "$(date +%s)" -lt "$deadline" ]; do
		echo "$(($(date +%s) - t_start)) $(cat "$MEMCG/$(cg_file usage)") $(memstat "$MEMCG" cache)" \
			"$(memstat "$MEMCG" active_file) $(memstat "$MEMCG" inactive_file) $(cg_limit_hits)" \
			"$(memstat "$MEMCG" workingset_refault_file)"
		sleep 1
	  done > "$dir/mem.dat" ) & mpid="$mpid $!"
	BG_PIDS="$spids $mpid"
	( cd "$dir" && pgb -c "$CLIENTS" -j "$CLIENTS" -T "$DUR" -P 5 -l --log-prefix=oltp \
		-f "$OUT/oltp_$dist.sql" > pgbench.out 2> pgbench.err ) &
	local opid=$!
	# progress: pgbench's 5 s progress lines, tagged
	local shown=0
	while kill -0 "$opid" 2>/dev/null; do
		sleep 1
		local lines; lines=$(grep -c '^progress' "$dir/pgbench.err" 2>/dev/null || true)
		if [ "${lines:-0}" -gt "$shown" ]; then
			grep '^progress' "$dir/pgbench.err" | sed -n "$((shown + 1)),\$p" |
				sed "s/^/    $tag: /" >&2
			shown=$lines
		fi
	done
	wait "$opid" || log "phase $tag: pgbench failed (see $dir/pgbench.err)"
	# the OLTP run is over: stop the scans now (a count in flight is cancelled)
	q "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'pce_scan%' OR application_name = 'pg_dump'" >/dev/null 2>&1 || true
	for p in $spids $mpid; do wait "$p" 2>/dev/null || true; done
	BG_PIDS=""
	local hot1 ref1 maj1 rd1 drop1
	hot1=$(hot_cached)
	ref1=$(memstat "$MEMCG" workingset_refault_file); maj1=$(memstat "$MEMCG" pgmajfault)
	rd1=$(blk_read_bytes); drop1=$(stat_pce bytes_dropped)
	# measured first: putting the limit back reclaims what (y) kept
	[ "$cfg" = y ] && cg_set_limit "$MEMCG" "$LIMIT_MB"
	local scans=0
	for f in "$dir"/scans*; do [ -f "$f" ] && scans=$((scans + $(cat "$f" 2>/dev/null || echo 0))); done
	cat > "$dir/phase.env" <<-EOF
	config=$cfg
	dist=$dist
	scan=$kind
	round=$round
	duration_s=$DUR
	t_start=$t_start
	hot_cached_start_pct=$hot0
	hot_cached_end_pct=$hot1
	refaults_file=$((ref1 - ref0))
	pgmajfault=$((maj1 - maj0))
	disk_read_bytes=$((rd1 - rd0))
	scans_done=$scans
	pce_bytes_dropped=$((drop1 - drop0))
	EOF
	log "phase $tag: done: $(grep -E '^tps' "$dir/pgbench.out" | head -1 | awk '{print $3}') TPS," \
		"hot set ${hot1}% cached, $((ref1 - ref0)) refaults, $(((rd1 - rd0) >> 20)) MiB read, $scans scans"
}

# ---- the phases, interleaved ----
IFS=, read -r -a CFG_LIST <<< "$CONFIGS"
for round in $(seq 1 "$ROUNDS"); do
	for wl in $WORKLOADS; do
		dist=${wl%%:*}; kind=${wl#*:}
		order=("${CFG_LIST[@]}")
		if [ $((round % 2)) = 0 ]; then	# ABBA: even rounds run the configs in reverse
			order=(); for ((i = ${#CFG_LIST[@]} - 1; i >= 0; i--)); do order+=("${CFG_LIST[$i]}"); done
		fi
		for cfg in "${order[@]}"; do
			case "$cfg" in
				a|b|d|e|y) run_phase "$cfg" "$dist" "$kind" "$round" ;;
				c)
					if kernel_has_cache_ext && [ "$MECH" = cache_ext ]; then
						run_phase c "$dist" "$kind" "$round"
					else
						log "config c: skipped: kernel has no cache_ext"
					fi ;;
				z)	# the reference does not depend on the scan kind: once per distribution and round
					[ -f "$OUT/phases/z-$dist-none-r$round/phase.env" ] || run_phase z "$dist" none "$round" ;;
				*) die "unknown config $cfg" ;;
			esac
		done
	done
done

cat > "$OUT/params.env" <<EOF
mode=$MODE
configs=$CONFIGS
workloads=$WORKLOADS
duration_s=$DUR
warmup_s=$WARM
rounds=$ROUNDS
clients=$CLIENTS
scale=$SCALE
hot_mb=$HOT_MB
scan_table_mb=$SCANT_MB
cgroup_limit_mb=$LIMIT_MB
scan_cgroup_mb=$SCAN_CG_MB
shared_buffers=$SHARED_BUFFERS
scan_budget_mb=$SCAN_BUDGET_MB
scan_offset_s=$SCAN_OFFSET
settle_s=$SETTLE
throttle_read_iops=$THROTTLE_IOPS
throttle_read_mbps=$THROTTLE_MBPS
disk=$DISK_NAME $DISK_DEV
kernel=$(uname -r)
cache_ext_kernel=$(kernel_has_cache_ext && echo yes || echo no)
cpus=$(nproc)
damon=$(damon_state)
EOF
perl "$HERE/report.pl" "$OUT" | tee "$OUT/report.txt"
log "done in $(( $(date +%s) - T0 ))s; results in $OUT"
