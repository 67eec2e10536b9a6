#!/usr/bin/env bash
# bench/siblings.sh - issue 16's workload: do scans still get their share?
#
#   bench/siblings.sh [--rounds N] [--dur S] [--scan-mb N] [--no-throttle]
#                     [--read-ahead-kb N]
#
# OLTP Zipf point reads on a hot table (pgbench_accounts) beside two
# count(*) loops (synchronize_seqscans on) and a pg_dump loop of one scanned
# table, and one VACUUM of it after 5% of its rows were updated, in a memory
# cgroup with reads throttled (blkio, like a cloud volume).  Per round and
# interleaved: (a) no extension, (b) pg_cache_ext (stock mechanism), (r) as
# (b) with the OLTP load rate-limited (pgbench -R) to the TPS (a) reached in
# that round, so both leave the scans the same CPU; and two references:
# (n) no scans and no extension at that rate, the hot set the kernel alone
# leaves cached, and (s) the scans alone,
# no extension, no OLTP, in the cgroup's memory less the hot set's size:
# how fast the scans are in the memory a cached hot set leaves them (the
# kernel's LRU shares it among them).
#
# First-class results: each scan's completion time (count(*), pg_dump,
# VACUUM; scans cut by the end of the window are not counted), the bytes
# the scanned table holds in the page cache sampled every second vs the
# budget, file refaults and bytes read, TPS, p99, hot set cached, and the
# CPU time the extension's background worker used in the window; per
# second (held.dat) the table's cache, the evictor's gauges, the disk's
# reads and writes, the cgroup's dirty pages, and some of the tracker's
# counters (gauges_and_counts), and what the VACUUM read
# in all and from disk, wrote, and how long it slept on I/O (vacuum-io.dat).
# With a VACUUM among the scans, each window's VACUUM has the same work:
# the table is loaded afresh before it (prepare_vacuum_work).
#
# Scaled down from the issue (3 GiB table, 300 MB hot table, 768 MB cgroup,
# 8 clients, 3 rounds) to fit a shared 2-core machine: by default a 1 GiB
# table, pgbench scale 12 (~180 MB hot set), a 448 MB cgroup, 2 clients,
# 60 s windows, 2 rounds.  The issue's own scale:
#   SCALE=20 LIMIT_MB=768 CLIENTS=8 SCAN_BUDGET_MB=384 bash bench/siblings.sh \
#       --rounds 3 --dur 120 --scan-mb 3072
# (about 3 minutes a window: the 3 GiB table is loaded afresh for each; the
# budget is what the 299 MB hot set leaves of the cgroup, less
# shared_buffers and some headroom: with 256 MB, pg_dump read alone,
# further than the budget behind the count(*)s, README).
# WINDOWS (default "a b r n s") runs only some
# of the windows ((r) and (n) need (a)); TRACE_REREAD=1 runs bench/reread.bt over
# each window with scans (what the scans read twice, and who dropped it in
# between), into reread.txt in its directory; POSITIONS=1 runs
# bench/positions.sh over each window with the extension on (where each
# marked reader read, every half second: positions.dat); VACUUM_STACKS=1
# keeps the VACUUM's kernel stack each time it is found in D state
# (vacuum-stacks.txt: what it waits on); CPU=1 runs bench/cpu.py over each
# window (cpu.dat: the CPU each role used every second, count(*)s, pg_dump,
# VACUUM, OLTP, the worker, how often each was waiting on the disk, and how
# long for a CPU); FINE=1 runs bench/cache_fine.py over each window with
# scans (cache-fine.dat: the table's page cache every FINE_MS ms, 100 by
# default, and its maximum in the log: a 1.3 s query once saw the table
# 6 MB above both 100 ms samples around it).  WORKER_NICE=-5 renices the
# extension's worker at each window's start (an experiment: the worker is
# what keeps the budget, and it waits for a CPU beside the OLTP; a server
# gets this only where it may lower its own nice value, RLIMIT_NICE).  DAMON, where it pages out
# idle page cache, is paused for the run (bench/lib.sh damon_pause; KEEP_DAMON=1 keeps it: then
# the Zipf tail not read for a minute goes, scans or not).  The disk's
# read-ahead is its own unless --read-ahead-kb sets it for the run (this
# machine's virtio disk has 8192 kB; the kernel's default is 128).  Run as
# root; results in bench/out/siblings-<time>.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

ROUNDS=2
DUR=60
SCAN_MB=1024
THROTTLE_IOPS=3000
THROTTLE_MBPS=200
while [ $# -gt 0 ]; do
	case "$1" in
		--rounds) ROUNDS=$2; shift ;;
		--dur) DUR=$2; shift ;;
		--scan-mb) SCAN_MB=$2; shift ;;
		--no-throttle) THROTTLE_IOPS=0; THROTTLE_MBPS=0 ;;
		--read-ahead-kb) READ_AHEAD_KB=$2; shift ;;
		-h|--help) sed -n "2,$(($(grep -n '^set -euo' "$0" | cut -d: -f1) - 1))p" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
		*) die "unknown argument $1 (see --help)" ;;
	esac
	shift
done
[ "$(id -u)" -eq 0 ] || die "run as root (memory cgroups, BPF loader)"

SCALE=${SCALE:-12}
LIMIT_MB=${LIMIT_MB:-448}
SCAN_CG_MB=48					# lib.sh makes it; unused here
SHARED_BUFFERS=${SHARED_BUFFERS:-32MB}
SCAN_BUDGET_MB=${SCAN_BUDGET_MB:-32}
CLIENTS=${CLIENTS:-2}
# the scanners of a window, each started a second after the one before
SCANS=${SCANS:-count dump count vacuum}
WARM=3
BENCH_DIR=${BENCH_DIR:-/var/tmp/pce-bench-siblings}
PGPORT=${PGPORT:-5498}
SOCK_DIR=$BENCH_DIR
PGDATA=$BENCH_DIR/data
DATASET_ID="siblings v1 scale=$SCALE scan_mb=$SCAN_MB sb=$SHARED_BUFFERS"
OUT=$HERE/out/siblings-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"

BG_PIDS=""
LAST_TPS=""	# the TPS of the latest window, for (r) and (n) after (a)
cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP
	for p in $BG_PIDS; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	damon_resume	# the machine's settings first
	read_ahead_restore
	pg_stop
	loader_unload
	cg_cleanup
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

mount | grep -q ' /sys/fs/bpf type bpf' || mount -t bpf bpf /sys/fs/bpf
mkdir -p "$BENCH_DIR"; chown "$PGUSER_OS" "$BENCH_DIR"
[ -f "$PGDATA/postmaster.pid" ] && pg_stop
"$PGBIN/pg_cache_ext_loader" --unload -D "$PGDATA" >/dev/null 2>&1 || true
cg_setup
damon_pause
read_ahead_set

# The scanned table, loaded afresh (four rows to a page, in id order) and
# frozen.
load_scan_table() {
	q "DROP TABLE IF EXISTS scan_t"
	q "CREATE TABLE scan_t (id int, pad text) WITH (autovacuum_enabled = off, fillfactor = 90)"
	q "INSERT INTO scan_t SELECT g, repeat(md5(g::text), 50) FROM generate_series(1, $((SCAN_MB * 1024 * 1024 / 8192 * 4))) g"
	q "VACUUM (FREEZE, ANALYZE) scan_t"
}

build_dataset() {
	log "dataset: pgbench scale $SCALE + a ${SCAN_MB} MiB scanned table in $PGDATA"
	rm -rf "$PGDATA"
	as_pg "$PGBIN/initdb" -D "$PGDATA" -A trust -U postgres >/dev/null
	cat >> "$PGDATA/postgresql.conf" <<-EOF
	shared_preload_libraries = 'pg_cache_ext'
	listen_addresses = ''
	port = $PGPORT
	unix_socket_directories = '$SOCK_DIR'
	shared_buffers = $SHARED_BUFFERS
	autovacuum = off
	synchronous_commit = off
	max_wal_size = 4GB
	checkpoint_timeout = 1h
	max_parallel_workers_per_gather = 0
	synchronize_seqscans = on
	jit = off
	pg_cache_ext.scan_budget = ${SCAN_BUDGET_MB}MB
	EOF
	pg_start
	q_db postgres "CREATE DATABASE bench" >/dev/null
	"$PGBIN/pgbench" -h "$SOCK_DIR" -p "$PGPORT" -U postgres -i -q -s "$SCALE" -I dtgvp bench 2>&1 |
		grep -v '^ *[0-9]* of' >&2 || true
	load_scan_table
	q "VACUUM (FREEZE, ANALYZE) pgbench_accounts"; q "CHECKPOINT"
	q "CREATE EXTENSION pg_cache_ext"; q "CREATE EXTENSION pg_prewarm"
	echo "$DATASET_ID" > "$PGDATA/pce_bench_dataset"
	pg_stop
}
[ -f "$PGDATA/pce_bench_dataset" ] && [ "$(cat "$PGDATA/pce_bench_dataset")" = "$DATASET_ID" ] || build_dataset
loader_load
pg_start
# the budget of this run (the dataset may have been built with another)
q "ALTER SYSTEM SET pg_cache_ext.scan_budget = '${SCAN_BUDGET_MB}MB'" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null

NACC=$((SCALE * 100000))
# the hot set's size (MB), for (s)
HOT_MB=$(q "SELECT (pg_relation_size('pgbench_accounts') + pg_relation_size('pgbench_accounts_pkey')) >> 20")
[ $((LIMIT_MB - HOT_MB)) -ge 128 ] ||
	die "the cgroup's ${LIMIT_MB} MB leave less than 128 MB beside the ${HOT_MB} MB hot set, for (s)"
printf '\\set aid random_zipfian(1, %d, 1.01)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n' \
	"$NACC" > "$OUT/oltp_zipf.sql"
PSQL_ARGS="$PGBIN/psql -X -At -h $SOCK_DIR -p $PGPORT -U postgres -d bench"
pgb() { "$PGBIN/pgbench" -h "$SOCK_DIR" -p "$PGPORT" -U postgres -n "$@" bench; }
now() { date +%s.%N; }
stat_pce() { q "SELECT coalesce((SELECT value FROM cache_ext_stats() WHERE name = '$1'), 0)" 2>/dev/null || echo 0; }
# the worker's CPU seconds since $1 (bench_worker_cpu_ticks), or - without a worker
worker_cpu_s() {
	local now; now=$(bench_worker_cpu_ticks "$PGDATA")
	[ "$now" != 0 ] || { echo -; return; }
	awk -v a="$1" -v b="$now" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", (b - (b >= a ? a : 0)) / hz }'
}

# The evictor's gauges (MB: waiting, tracked, held for siblings; held.dat's
# columns 3-5), then the tracker's and the worker's counters so far
# (columns 10-15, after io_mb's): records lost in a full ring, records of
# files the worker could not name, folios promoted (touched by a process
# that is not scanning), folios unmarked processes wrote into a file a scan
# reads, folios marked processes inserted, and records the worker read
# (with the first, the records still in the ring).  One query for both;
# printed as "GAUGES|COUNTS", split by held_line.
GAUGES="bytes_waiting bytes_tracked bytes_held_for_siblings"
RECORD_COUNTERS="records_lost files_not_found folios_promoted folios_added_for_scan folios_added_scan records_read"
gauges_and_counts() {
	q "SELECT string_agg(round(coalesce(s.value, 0) / 1048576.0, 1)::text, ' ' ORDER BY n.i)
	     FILTER (WHERE n.gauge) || '|' ||
	   string_agg(coalesce(s.value, 0)::text, ' ' ORDER BY n.i) FILTER (WHERE NOT n.gauge)
	   FROM (SELECT name, i, i <= $(wc -w <<<"$GAUGES") AS gauge
	         FROM unnest(string_to_array('$GAUGES $RECORD_COUNTERS', ' ')) WITH ORDINALITY u(name, i)) n
	   LEFT JOIN cache_ext_stats() s USING (name)" 2>/dev/null ||
		echo "$(sed 's/[^ ]\+/-/g' <<<"$GAUGES")|$(sed 's/[^ ]\+/-/g' <<<"$RECORD_COUNTERS")"
}
# one line of held.dat: second, the table's cache (MB), gauges, io_mb, counters
held_line() {
	local gc; gc=$(gauges_and_counts)
	echo "$1 $(cached_mb scan_t) ${gc%%|*} $(io_mb) ${gc#*|}"
}
# the largest value of column $1 of file $2 (0 for an empty file)
column_max() { awk -v c="$1" 'BEGIN { m = 0 } $c > m { m = $c } END { print m }' "$2"; }
# the scanned table's main-fork segment files (bench/cache_fine.py's)
scan_table_files() {
	local rel; rel=$PGDATA/$(q "SELECT pg_relation_filepath('scan_t')")
	ls "$rel" "$rel".[0-9]* 2>/dev/null || true
}
cached_mb() { q "SELECT round(cached_bytes / 1048576.0, 1) FROM cache_ext_relation_cache('$1')"; }
# the disk's reads and writes so far (MB, whole disk), the cgroup's dirty and
# under-writeback page cache (MB): held.dat's columns 6-9
io_mb() {
	awk '{ printf "%.0f %.0f ", $3 / 2048, $7 / 2048 }' "/sys/class/block/$DISK_NAME/stat"
	awk -v d="$(memstat "$MEMCG" dirty)" -v w="$(memstat "$MEMCG" writeback)" \
		'BEGIN { printf "%.1f %.1f\n", d / 1048576, w / 1048576 }'
}

# VACUUM's I/O so far (MB): all it read (rchar), what of it came from the
# disk (read_bytes), what it wrote (write_bytes: its ring's dirty buffers,
# which reach the disk through the page cache); nothing once it is gone.
vacuum_io() {
	awk '$1 == "rchar:" { r = $2 } $1 == "read_bytes:" { d = $2 } $1 == "write_bytes:" { w = $2 }
		END { if (NR) printf "%.0f %.0f %.0f\n", r / 1048576, d / 1048576, w / 1048576 }' \
		"/proc/$1/io" 2>/dev/null || true
}

# What the VACUUM of the window did, each second while it runs: its I/O so
# far (vacuum_io), the heap blocks it has scanned, and in how many of ten
# samples over the second it was in uninterruptible sleep (D: waiting on
# the disk or on page locks).  The last line is its totals, read within
# 0.1 s of its end, with "-" for the other two.
vacuum_reads() {
	local deadline=$1 pid="" io="" last="" blocks asleep i
	while [ "$(date +%s)" -lt "$deadline" ]; do
		[ -n "$pid" ] || pid=$(q "SELECT pid FROM pg_stat_activity WHERE query ~* '^VACUUM scan_t'" 2>/dev/null || true)
		[ -n "$pid" ] || { sleep 1; continue; }
		blocks=$(q "SELECT heap_blks_scanned FROM pg_stat_progress_vacuum WHERE pid = $pid" 2>/dev/null || true)
		asleep=0
		for i in 1 2 3 4 5 6 7 8 9 10; do
			io=$(vacuum_io "$pid")
			[ -n "$io" ] || break
			last=$io
			if [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" = D ]; then
				asleep=$((asleep + 1))
				[ -z "${STACKS:-}" ] || awk '{ sub(/\+.*/, "", $2); printf "%s;", $2 } END { print "" }' \
					"/proc/$pid/stack" >> "$STACKS" 2>/dev/null || true
			fi
			sleep 0.1
		done
		[ -n "$io" ] || break
		echo "$last ${blocks:--} $asleep"
	done
	[ -z "$last" ] || echo "$last - -"
}

# A loop of one kind of scan until $3 (epoch s): each completed scan's
# duration (s) on a line of $2.
scan_loop() {
	local kind=$1 out=$2 deadline=$3 t0
	while [ "$(date +%s)" -lt "$deadline" ]; do
		t0=$(now)
		case "$kind" in
			count) PGAPPNAME=pce_scan timeout $((deadline - $(date +%s) + 1)) \
				"$PGBIN/psql" -X -q -At -h "$SOCK_DIR" -p "$PGPORT" -U postgres -d bench \
				-c "SELECT count(*) FROM scan_t" >/dev/null 2>&1 || break ;;
			dump) timeout $((deadline - $(date +%s) + 1)) "$PGBIN/pg_dump" -h "$SOCK_DIR" -p "$PGPORT" \
				-U postgres -t scan_t -f /dev/null bench 2>/dev/null || break ;;
			vacuum) sleep 5; t0=$(now); PGAPPNAME=pce_scan timeout $((deadline - $(date +%s) + 1)) \
				"$PGBIN/psql" -X -q -h "$SOCK_DIR" -p "$PGPORT" -U postgres -d bench \
				-c "VACUUM scan_t" >/dev/null 2>&1 || break ;;
		esac
		echo "$(now) $t0" | awk '{ printf "%.1f\n", $1 - $2 }' >> "$out"
		[ "$kind" = vacuum ] && break
	done
	return 0
}

# bench/reread.bt on scan_t's segments for the window that starts in 3 s
trace_reread() {
	local rel ino1 ino2 worker
	rel=$PGDATA/$(q "SELECT pg_relation_filepath('scan_t')")
	ino1=$(stat -c %i "$rel"); ino2=$(stat -c %i "$rel.1" 2>/dev/null || echo 0)
	worker=$(bench_worker_pid "$PGDATA")
	# the filemap tracepoints are found through tracefs, which a host
	# without systemd has not mounted
	[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing ||
		die "TRACE_REREAD: tracefs could not be mounted at /sys/kernel/tracing"
	BPFTRACE_MAP_KEYS_MAX=2000000 timeout $((DUR + 30)) bpftrace "$HERE/reread.bt" \
		"$ino1" "$ino2" $((DUR + 3)) "${worker:-0}" > "$1" 2>&1 || true
}

median() { sort -n "$1" 2>/dev/null | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "-" }'; }

set_memory_limit() { cg_set_limit "$MEMCG" "$1"; }

# The same work for each window's VACUUM (outside the window, unmarked):
# the table loaded afresh, then 5% of its rows updated, one in twenty by
# id: one page in five (four rows to a page, in id order), so VACUUM reads
# every page (it skips only runs of 32 all-visible pages).  (The windows
# used to update "id % 20 = round" in the table as the window before left
# it: the second window of a round found those rows where the first one's
# UPDATE had moved them, and VACUUM read 431-1,066 MB.  Choosing rows by
# ctid fails the same way: the rows at those places move.)
prepare_vacuum_work() (
	export PGOPTIONS="-c pg_cache_ext.scan=off"
	load_scan_table
	q "UPDATE scan_t SET id = id WHERE id % 20 = 0" >/dev/null
)

# One window: $1 config (a, b, r, n, s), $2 round, $3 pgbench rate (r, n) or "".
run_phase() {
	local cfg=$1 round=$2 rate=$3 dir="$OUT/$1-r$2" t_start deadline pids=""
	# the configurations: the extension's mode, the scans, the OLTP load
	# (1: on), the cluster's memory (MB)
	local mode=stock scans=$SCANS oltp=1 limit_mb=$LIMIT_MB
	case "$cfg" in
		a) mode=off ;;
		n) mode=off; scans="" ;;
		s) mode=off; oltp=0; limit_mb=$((LIMIT_MB - HOT_MB)) ;;
	esac
	mkdir -p "$dir"
	set_mode "$mode"
	case " $scans " in *" vacuum "*) prepare_vacuum_work ;; esac
	q "CHECKPOINT" >/dev/null
	evict_cluster_cache
	[ "$limit_mb" = "$LIMIT_MB" ] || set_memory_limit "$limit_mb"
	if [ "$oltp" = 1 ]; then
		q "SELECT pg_prewarm('pgbench_accounts', 'read'), pg_prewarm('pgbench_accounts_pkey', 'read')" >/dev/null
		pgb -c "$CLIENTS" -j "$CLIENTS" -T "$WARM" -f "$OUT/oltp_zipf.sql" >/dev/null 2>&1
	fi
	local ref0 rd0 drop0 for0
	q "SELECT name, value FROM cache_ext_stats() ORDER BY name" > "$dir/stats-before.txt" 2>/dev/null || true
	ref0=$(memstat "$MEMCG" workingset_refault_file); rd0=$(blk_read_bytes)
	drop0=$(stat_pce bytes_dropped); for0=$(stat_pce folios_added_for_scan)
	local cpu0; cpu0=$(bench_worker_cpu_ticks "$PGDATA")
	[ -z "${WORKER_NICE:-}" ] || [ "$cpu0" = 0 ] ||
		renice -n "$WORKER_NICE" -p "$(bench_worker_pid "$PGDATA")" >/dev/null ||
		log "WORKER_NICE: the worker could not be reniced"
	[ "${TRACE_REREAD:-0}" != 1 ] || [ -z "$scans" ] || trace_reread "$dir/reread.txt" & pids="$pids $!"
	[ "${TRACE_REREAD:-0}" != 1 ] || sleep 3	# bpftrace attaches
	t_start=$(date +%s); deadline=$((t_start + DUR))
	log "window $cfg round $round${rate:+ (OLTP at -R $rate)}: start"
	local kind delay=0
	for kind in $scans; do
		( sleep "$delay"; scan_loop "$kind" "$dir/$kind.s" "$deadline" ) & pids="$pids $!"
		delay=$((delay + 1))
	done
	( while [ "$(date +%s)" -lt "$deadline" ]; do
		held_line "$(($(date +%s) - t_start))"; sleep 1
	  done > "$dir/held.dat" ) & pids="$pids $!"
	case " $scans " in
		*" vacuum "*) ( [ "${VACUUM_STACKS:-0}" != 1 ] || STACKS=$dir/vacuum-stacks.txt
			vacuum_reads "$deadline" > "$dir/vacuum-io.dat" ) & pids="$pids $!" ;;
	esac
	[ "${FINE:-0}" != 1 ] || [ -z "$scans" ] ||
		{ python3 "$HERE/cache_fine.py" "${FINE_MS:-100}" "$DUR" $(scan_table_files) > "$dir/cache-fine.dat" 2>&1 & pids="$pids $!"; }
	[ "${CPU:-0}" != 1 ] ||
		{ python3 "$HERE/cpu.py" "$PSQL_ARGS" "$DUR" > "$dir/cpu.dat" 2>&1 & pids="$pids $!"; }
	[ "${POSITIONS:-0}" != 1 ] || [ "$mode" = off ] || [ -z "$scans" ] ||
		{ bash "$HERE/positions.sh" "$PGDATA" "$PGPORT" "$SOCK_DIR" "$DUR" > "$dir/positions.dat" 2>&1 & pids="$pids $!"; }
	BG_PIDS=$pids
	if [ "$oltp" = 1 ]; then
		( cd "$dir" && pgb -c "$CLIENTS" -j "$CLIENTS" -T "$DUR" ${rate:+-R "$rate"} -l --log-prefix=oltp \
			-f "$OUT/oltp_zipf.sql" > pgbench.out 2> pgbench.err ) || log "pgbench failed: $dir/pgbench.err"
	else
		sleep "$DUR"
	fi
	# a scan whose psql timed out goes on in its backend: cancel them all, so
	# that none runs into the next window
	q "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid()
	   AND (application_name IN ('pce_scan', 'pg_dump') OR query ~* '^(VACUUM|COPY)')" >/dev/null 2>&1 || true
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	BG_PIDS=""
	# every counter at the window's end, beside those at its start
	q "SELECT name, value FROM cache_ext_stats() ORDER BY name" > "$dir/stats-after.txt" 2>/dev/null || true
	local tps p99 ref rd hot held_max scan_end
	tps=$(awk '/^tps/ { printf "%.0f", $3; exit }' "$dir/pgbench.out" 2>/dev/null || true)
	p99=$({ cat "$dir"/oltp.* 2>/dev/null || true; } | awk '{ print $3 }' | sort -n |
		awk '{ a[NR] = $1 } END { if (NR) printf "%.2f", a[int(NR * 0.99)] / 1000; else print "-" }')
	ref=$(($(memstat "$MEMCG" workingset_refault_file) - ref0)); rd=$((($(blk_read_bytes) - rd0) >> 20))
	hot=$(q "SELECT round(100.0 * sum(cached_bytes) / sum(total_bytes), 1) FROM
		(SELECT * FROM cache_ext_relation_cache('pgbench_accounts')
		 UNION ALL SELECT * FROM cache_ext_relation_cache('pgbench_accounts_pkey')) s")
	[ "$oltp" = 1 ] || { tps=-; hot=-; }
	held_max=$(column_max 2 "$dir/held.dat")
	scan_end=$(cached_mb scan_t)
	[ ! -s "$dir/cache-fine.dat" ] ||
		log "window $cfg round $round: the table at $(column_max 2 "$dir/cache-fine.dat") MB at most," \
			"sampled every ${FINE_MS:-100} ms (cache-fine.dat)"
	# the whole limit again, once the window's scans are over and measured
	[ "$limit_mb" = "$LIMIT_MB" ] || set_memory_limit "$LIMIT_MB"
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s/%s\t%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$cfg" "$round" "$tps" "$p99" "$hot" \
		"$(median "$dir/count.s")" "$(median "$dir/dump.s")" "$(cat "$dir/dump.s" 2>/dev/null | wc -l)" \
		"$(cat "$dir/vacuum.s" 2>/dev/null || echo -)" "$(cat "$dir/count.s" 2>/dev/null | wc -l)" \
		"$(awk 'END { print (NR ? $1 : "-") }' "$dir/vacuum-io.dat" 2>/dev/null || echo -)" "$held_max" "$scan_end" "$ref" "$rd" \
		"$((($(stat_pce bytes_dropped) - drop0) >> 20))" "$(($(stat_pce folios_added_for_scan) - for0))" \
		"$(worker_cpu_s "$cpu0")" \
		| tee -a "$OUT/results.tsv"
	LAST_TPS=$tps
}

printf 'cfg\tround\tTPS\tp99_ms\thot_%%\tcount_s(median)\tdump_s(median)/n\tvacuum_s/counts_n\tvacuum_read_MB\tscan_MB_max\tscan_MB_end\trefaults\tread_MB\tdropped_MB\tfor_scan_folios\tworker_cpu_s\n' \
	| tee "$OUT/results.tsv"
WINDOWS=" ${WINDOWS:-a b r n s} "
case "$WINDOWS" in *" r "*|*" n "*) [[ "$WINDOWS" == *" a "* ]] || die "WINDOWS: (r) and (n) need (a)" ;; esac
window() { [[ "$WINDOWS" != *" $1 "* ]] || run_phase "$@"; }
for round in $(seq 1 "$ROUNDS"); do
	if [ $((round % 2)) = 1 ]; then
		window a "$round" ""; A_TPS=$LAST_TPS; window b "$round" ""
	else
		window b "$round" ""; window a "$round" ""; A_TPS=$LAST_TPS
	fi
	window r "$round" "$A_TPS"
	window n "$round" "$A_TPS"
	window s "$round" ""
done
cat > "$OUT/params.env" <<EOF
rounds=$ROUNDS duration_s=$DUR clients=$CLIENTS scale=$SCALE scan_table_mb=$SCAN_MB
cgroup_limit_mb=$LIMIT_MB shared_buffers=$SHARED_BUFFERS scan_budget_mb=$SCAN_BUDGET_MB hot_mb=$HOT_MB
throttle_read_iops=$THROTTLE_IOPS throttle_read_mbps=$THROTTLE_MBPS kernel=$(uname -r) cpus=$(nproc)
damon=$DAMON_RUN read_ahead_kb=$READ_AHEAD_RUN
EOF
log "results: $OUT/results.tsv"
