# bench/lib.sh - helpers for bench/run.sh (sourced, not run).
#
# Everything the benchmark creates lives below $BENCH_DIR (a directory on a
# real disk, never tmpfs: page cache of tmpfs files is shmem, which neither the
# tracker nor posix_fadvise can drop) and in cgroups of its own: below this
# process's memory and blkio cgroups on cgroup v1, below the root of the
# unified hierarchy on cgroup v2 (a systemd host).  cleanup() undoes all of it.

. "$(dirname "${BASH_SOURCE[0]}")/worker.sh"
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/pg_versions.sh"

# The server the benchmarks run: $PG_MAJOR's, else the newest installed
# (the one scripts/setup.sh builds against); re-read after setup.sh ran.
pg_bindir() {
	local v=${PG_MAJOR:-$(installed_pg_major)}
	echo "/usr/lib/postgresql/${v:-15}/bin"
}
PGBIN=${PGBIN:-$(pg_bindir)}
PGUSER_OS=postgres

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

as_pg() { runuser -u "$PGUSER_OS" -- "$@"; }

# psql against the benchmark cluster, unaligned, tuples only
q() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$SOCK_DIR" -p "$PGPORT" -U postgres -d bench -c "$1"; }
q_db() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$SOCK_DIR" -p "$PGPORT" -U postgres -d "$1" -c "$2"; }

# ---- cgroups: v1 (memory + blkio) or v2 (memory + io, unified) ----
#
# MEMCG holds the cluster's memory limit (LIMIT_MB) and is where its
# counters are read; CLUSTER_CG is where the cluster's processes start;
# MEMCG_SCAN (below MEMCG, SCAN_CG_MB) is the scan cgroup of (e); BLKCG is
# v1's blkio cgroup (empty on v2, where MEMCG's io.max throttles).  v2 puts
# processes only in leaves, so there the cluster starts in MEMCG/main.

CG_VERSION=1
CG2_ROOT=/sys/fs/cgroup
CG2_ENABLED=""	# controllers cg2_setup enabled below the root
MEMCG="" MEMCG_SCAN="" CLUSTER_CG="" BLKCG=""	# set by cg_setup; cleanup() may run before it

cg_self_path() {	# $1 = controller name as in /proc/self/cgroup
	awk -F: -v c="$1" '{ n = split($2, a, ","); for (i = 1; i <= n; i++) if (a[i] == c) print $3 }' /proc/self/cgroup | head -1
}

# The file of each knob and counter, by version: one table.
cg_file() {	# $1 = limit | usage
	case "$CG_VERSION:$1" in
		1:limit) echo memory.limit_in_bytes ;;
		2:limit) echo memory.max ;;
		1:usage) echo memory.usage_in_bytes ;;
		2:usage) echo memory.current ;;
	esac
}

# memory.stat's key for a counter: v1's hierarchical total_ keys, v2's own
# names (hierarchical already)
cg_stat_key() {	# $1 = cache | dirty | writeback | active_file | inactive_file | workingset_refault_file | pgmajfault
	case "$CG_VERSION:$1" in
		1:*) echo "total_$1" ;;
		2:cache) echo file ;;
		2:dirty | 2:writeback) echo "file_$1" ;;
		2:*) echo "$1" ;;
	esac
}

# the memory limit of cgroup $1: $2 MB, or "max" (none)
cg_set_limit() {
	local cg=$1 v=$2
	if [ "$v" != max ]; then
		v=$((v * 1024 * 1024))
	elif [ "$CG_VERSION" = 1 ]; then
		v=-1
	fi
	echo "$v" > "$cg/$(cg_file limit)"
}

# times the cluster's cgroup hit its limit (v1 failcnt, v2 memory.events max)
cg_limit_hits() {
	if [ "$CG_VERSION" = 1 ]; then
		cat "$MEMCG/memory.failcnt"
	else
		awk '$1 == "max" { print $2 }' "$MEMCG/memory.events"
	fi
}

# process $1 (a subshell's $BASHPID) into the cgroups of $2: cluster or scan
cg_enter() {
	local pid=$1 which=$2
	local cg=$CLUSTER_CG
	[ "$which" != scan ] || cg=$MEMCG_SCAN
	echo "$pid" > "$cg/cgroup.procs" || return 1
	[ -z "$BLKCG" ] || echo "$pid" > "$BLKCG/cgroup.procs" || return 1
}

cg_setup() {
	if [ -f "$CG2_ROOT/cgroup.controllers" ]; then
		cg2_setup
	else
		cg1_setup
	fi
	cg_set_limit "$MEMCG" "$LIMIT_MB"
	cg_set_limit "$MEMCG_SCAN" "$SCAN_CG_MB"
	disk_majmin "$BENCH_DIR"
	cg_throttle
}

cg1_setup() {
	local memroot=/sys/fs/cgroup/memory blkroot=/sys/fs/cgroup/blkio
	[ -d "$memroot" ] || die "no cgroup v1 memory controller at $memroot, and no cgroup v2 at $CG2_ROOT"
	MEMCG="$memroot$(cg_self_path memory)/pce-bench-$$"
	MEMCG_SCAN="$MEMCG/scan"
	CLUSTER_CG=$MEMCG
	mkdir -p "$MEMCG" "$MEMCG_SCAN"
	BLKCG=""
	if [ -d "$blkroot" ]; then
		BLKCG="$blkroot$(cg_self_path blkio)/pce-bench-$$"
		BLKCG=${BLKCG//\/\//\/}
		mkdir -p "$BLKCG" 2>/dev/null || BLKCG=""
	fi
}

# below the root, which may enable controllers whatever its processes
cg2_setup() {
	local c
	CG_VERSION=2
	for c in memory io; do
		grep -qw "$c" "$CG2_ROOT/cgroup.controllers" || die "cgroup v2 has no $c controller here"
		grep -qw "$c" "$CG2_ROOT/cgroup.subtree_control" && continue
		# turned off again by cg_cleanup (systemd turns them on itself);
		# refused where the root holds processes, as in a container's
		# cgroup namespace
		echo "+$c" > "$CG2_ROOT/cgroup.subtree_control" ||
			die "cannot enable the $c controller below $CG2_ROOT (a container's cgroup namespace?): run the benchmark on the host"
		CG2_ENABLED="$CG2_ENABLED $c"
	done
	MEMCG="$CG2_ROOT/pce-bench-$$"
	MEMCG_SCAN="$MEMCG/scan"
	CLUSTER_CG="$MEMCG/main"
	BLKCG=""
	mkdir -p "$MEMCG"
	echo "+memory +io" > "$MEMCG/cgroup.subtree_control"
	mkdir -p "$CLUSTER_CG" "$MEMCG_SCAN"
}

# the read throttle (THROTTLE_IOPS, THROTTLE_MBPS), and on v1 the rule that
# makes blkio count the cgroup's bytes at all
cg_throttle() {
	local bps=$((1 << 40))	# a rule no disk reaches (1 TiB/s): v1 counts bytes only under a rule
	[ "${THROTTLE_MBPS:-0}" -gt 0 ] && bps=$((THROTTLE_MBPS * 1024 * 1024))
	if [ "$CG_VERSION" = 2 ]; then
		local rule="$DISK_DEV"
		[ "${THROTTLE_IOPS:-0}" -gt 0 ] && rule="$rule riops=$THROTTLE_IOPS"
		[ "${THROTTLE_MBPS:-0}" -gt 0 ] && rule="$rule rbps=$bps"
		[ "$rule" = "$DISK_DEV" ] || echo "$rule" > "$MEMCG/io.max" || die "cannot throttle reads on $DISK_DEV"
		return 0
	fi
	[ -n "$BLKCG" ] || return 0
	if [ "${THROTTLE_IOPS:-0}" -gt 0 ]; then
		echo "$DISK_DEV $THROTTLE_IOPS" > "$BLKCG/blkio.throttle.read_iops_device" ||
			die "cannot throttle read IOPS on $DISK_DEV"
	fi
	echo "$DISK_DEV $bps" > "$BLKCG/blkio.throttle.read_bps_device" ||
		die "cannot set a read bandwidth rule on $DISK_DEV"
}

# DISK_NAME and DISK_DEV (MAJ:MIN) of the whole disk holding directory $1:
# the block device stat() names, or its disk if it is a partition (df's
# source where stat names no block device, as on btrfs)
disk_majmin() {
	local sys src
	sys=$(readlink -f "/sys/dev/block/$(stat -c '%Hd:%Ld' "$1")" || true)
	if [ ! -f "$sys/dev" ]; then
		src=$(df --output=source "$1" | tail -1)
		sys=$(readlink -f "/sys/class/block/$(basename "$(readlink -f "$src")")" || true)
	fi
	[ ! -f "$sys/partition" ] || sys=$(dirname "$sys")
	DISK_NAME=$(basename "$sys")
	DISK_DEV=$(cat "$sys/dev" 2>/dev/null || echo "0:0")
}

# The disk's read-ahead window for the run (READ_AHEAD_KB, if set): the
# kernel reads that far ahead of each sequential reader, and pages being
# read in cannot be dropped, so four scanners with 8 MB windows hold tens
# of MB in flight whatever the budget.  Set before the server starts (a
# file takes the window when it is opened); the disk's own value back in
# the cleanup.  READ_AHEAD_RUN says what the run had, for params.env.
READ_AHEAD_SAVED=""
read_ahead_file() { echo "/sys/class/block/$DISK_NAME/queue/read_ahead_kb"; }

read_ahead_set() {
	local f
	f=$(read_ahead_file)
	if [ ! -w "$f" ]; then
		[ -z "${READ_AHEAD_KB:-}" ] || die "cannot set the read-ahead of $DISK_NAME ($f)"
		READ_AHEAD_RUN=unknown
		return 0
	fi
	READ_AHEAD_RUN=$(cat "$f")
	[ -n "${READ_AHEAD_KB:-}" ] && [ "$READ_AHEAD_KB" != "$READ_AHEAD_RUN" ] || return 0
	echo "$READ_AHEAD_KB" >"$f" || die "could not set $f to $READ_AHEAD_KB"
	READ_AHEAD_SAVED=$READ_AHEAD_RUN
	READ_AHEAD_RUN=$READ_AHEAD_KB
	log "read-ahead of $DISK_NAME: ${READ_AHEAD_KB} kB for the run (its own: ${READ_AHEAD_SAVED} kB)"
}

read_ahead_restore() {
	[ -n "$READ_AHEAD_SAVED" ] || return 0
	echo "$READ_AHEAD_SAVED" >"$(read_ahead_file)" || log "could not restore read_ahead_kb"
	READ_AHEAD_SAVED=""
}

# What is still in one of the run's cgroups when it ends (the cluster is
# stopped by then) is the run's own: a scanner's timeout or tar left behind
# by an interrupted phase.  It is ended, not moved out to go on reading,
# and what is left is said in the log.
cg_cleanup() {
	local cg left c
	for cg in "$MEMCG_SCAN" "$CLUSTER_CG" "$MEMCG" "$BLKCG"; do
		[ -n "$cg" ] && [ -d "$cg" ] || continue
		cg_end_procs "$cg"
		rmdir "$cg" 2>/dev/null && continue
		left=$(echo $(cg_procs "$cg"))
		log "warning: could not remove $cg${left:+ (processes $left still in it)}"
	done
	for c in $CG2_ENABLED; do
		echo "-$c" > "$CG2_ROOT/cgroup.subtree_control" 2>/dev/null ||
			log "the $c controller stays enabled below $CG2_ROOT (another cgroup uses it)"
	done
	CG2_ENABLED=""
}

cg_procs() { cat "$1/cgroup.procs" 2>/dev/null; }

cg_end_procs() {	# $1 = cgroup dir: TERM, up to 5 s, then KILL
	local cg=$1 sig pids
	pids=$(cg_procs "$cg")
	[ -n "$pids" ] || return 0
	log "ending what is left in $cg: $(echo $pids)"
	for sig in TERM TERM TERM TERM TERM KILL; do
		kill -"$sig" $pids 2>/dev/null || true
		sleep 1
		pids=$(cg_procs "$cg")
		[ -n "$pids" ] || return 0
	done
}

memstat() {	# $1 = cgroup dir, $2 = counter (cg_stat_key), its hierarchical value
	awk -v k="$(cg_stat_key "$2")" '$1 == k { print $2 }' "$1/memory.stat"
}

blk_read_bytes() {	# bytes read from the disk by the cluster's cgroup
	if [ "$CG_VERSION" = 2 ]; then
		awk -v d="$DISK_DEV" '$1 == d { for (i = 2; i <= NF; i++) if ($i ~ /^rbytes=/) { sub(/^rbytes=/, "", $i); s += $i } }
			END { printf "%.0f\n", s }' "$MEMCG/io.stat"
	elif [ -n "$BLKCG" ] && [ -r "$BLKCG/blkio.throttle.io_service_bytes" ]; then
		awk -v d="$DISK_DEV" '$1 == d && $2 == "Read" { s += $3 } END { printf "%.0f\n", s }' \
			"$BLKCG/blkio.throttle.io_service_bytes"
	else	# whole-disk counter (includes other processes' reads)
		awk '{ printf "%.0f\n", $3 * 512 }' "/sys/class/block/$DISK_NAME/stat"
	fi
}

# ---- cluster ----

pg_start() {
	# the postmaster (and so every backend) starts inside the memory and blkio cgroups
	(
		cg_enter "$BASHPID" cluster
		exec runuser -u "$PGUSER_OS" -- "$PGBIN/pg_ctl" -D "$PGDATA" -l "$BENCH_DIR/server.log" -w -t 120 start >/dev/null
	) || { tail -20 "$BENCH_DIR/server.log" >&2; die "server did not start"; }
}

pg_stop() {
	if [ -n "${PGDATA:-}" ] && [ -f "$PGDATA/postmaster.pid" ]; then
		as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -m fast -w -t 60 stop >/dev/null 2>&1 ||
			as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -m immediate -w stop >/dev/null 2>&1 || true
	fi
}

loader_load() {
	LOADER_LOADED=0
	if "$PGBIN/pg_cache_ext_loader" -D "$PGDATA" > "$BENCH_DIR/loader.log" 2>&1; then
		LOADER_LOADED=1
	else
		cat "$BENCH_DIR/loader.log" >&2
		die "pg_cache_ext_loader failed"
	fi
}

loader_unload() {
	if [ "${LOADER_LOADED:-0}" = 1 ]; then
		"$PGBIN/pg_cache_ext_loader" --unload -D "$PGDATA" >/dev/null 2>&1 || true
		LOADER_LOADED=0
	fi
}

# Drop the page cache of the cluster's relation files (clean pages only;
# the dataset is checkpointed and frozen, and the workload only reads).
evict_cluster_cache() {
	find "$PGDATA/base" -type f -size +64k -print0 |
		xargs -0 -r -n 64 sh -c 'for f; do dd if="$f" iflag=nocache count=0 status=none; done' sh
}

set_mode() {	# $1 = off | auto | stock | cache_ext
	q "ALTER SYSTEM SET pg_cache_ext.mode = '$1'" >/dev/null
	q "SELECT pg_reload_conf()" >/dev/null
	sleep 0.5
}

# Kernel has cache_ext iff its BTF has struct cache_ext_ops
kernel_has_cache_ext() {
	command -v bpftool >/dev/null 2>&1 || return 1
	bpftool btf dump file /sys/kernel/btf/vmlinux 2>/dev/null | grep -q "STRUCT 'cache_ext_ops'"
}

# DAMON kdamonds running on this machine, with their schemes' actions ("off" if none)
damon_state() {
	local d out=""
	for d in /sys/kernel/mm/damon/admin/kdamonds/[0-9]*; do
		[ -r "$d/state" ] && [ "$(cat "$d/state")" = on ] || continue
		out="$out${out:+,}kdamond$(basename "$d"):$(cat "$d"/contexts/*/operations 2>/dev/null | head -1)"
		out="$out/$(cat "$d"/contexts/*/schemes/*/action 2>/dev/null | tr '\n' '+' | sed 's/+$//')"
	done
	echo "${out:-off}"
}

# DAMON paused for a run (test/root-helper damon-pause, which lists its
# holders, so a test running meanwhile shares it) unless KEEP_DAMON=1: it
# pages out page cache that looks idle, the hot set's rarely read tail and
# pages read once, in every configuration alike, which no cache policy
# decides.  damon_resume in the cleanup.  DAMON_RUN says what was done, for
# params.env: off, paused:STATE or kept:STATE (STATE: damon_state).
DAMON_RUN=off
damon_root_helper() { bash "$(dirname "${BASH_SOURCE[0]}")/../test/root-helper" "$@"; }

damon_pause() {
	local state
	state=$(damon_state)
	# off may be a test holding it paused: the run is a holder too, or the
	# test's end would switch it on under the run
	compgen -G '/sys/kernel/mm/damon/admin/kdamonds/[0-9]*' >/dev/null || return 0
	if [ "${KEEP_DAMON:-0}" = 1 ]; then
		DAMON_RUN=kept:$state
		log "note: DAMON runs here ($state) and is kept running (KEEP_DAMON=1)"
		return 0
	fi
	damon_root_helper damon-pause $$ || die "could not pause DAMON ($state)"
	DAMON_RUN=paused:$state
	log "DAMON paused for the run ($state; KEEP_DAMON=1 keeps it running)"
}

damon_resume() {
	[ "${DAMON_RUN%%:*}" = paused ] || return 0
	damon_root_helper damon-resume $$ || log "could not resume DAMON"
	DAMON_RUN=resumed
}
