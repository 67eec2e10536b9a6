# bench/lib.sh - helpers for bench/run.sh (sourced, not run).
#
# Everything the benchmark creates lives below $BENCH_DIR (a directory on a
# real disk, never tmpfs: page cache of tmpfs files is shmem, which neither the
# tracker nor posix_fadvise can drop) and in two cgroups made below this
# process's own memory and blkio cgroups.  cleanup() undoes all of it.

. "$(dirname "${BASH_SOURCE[0]}")/worker.sh"

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PGUSER_OS=postgres

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

as_pg() { runuser -u "$PGUSER_OS" -- "$@"; }

# psql against the benchmark cluster, unaligned, tuples only
q() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$SOCK_DIR" -p "$PGPORT" -U postgres -d bench -c "$1"; }
q_db() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$SOCK_DIR" -p "$PGPORT" -U postgres -d "$1" -c "$2"; }

# ---- cgroups (v1 memory + blkio) ----

cg_self_path() {	# $1 = controller name as in /proc/self/cgroup
	awk -F: -v c="$1" '{ n = split($2, a, ","); for (i = 1; i <= n; i++) if (a[i] == c) print $3 }' /proc/self/cgroup | head -1
}

cg_setup() {
	local memroot=/sys/fs/cgroup/memory blkroot=/sys/fs/cgroup/blkio
	[ -d "$memroot" ] || die "no cgroup v1 memory controller at $memroot"
	MEMCG="$memroot$(cg_self_path memory)/pce-bench-$$"
	MEMCG_SCAN="$MEMCG/scan"
	mkdir -p "$MEMCG" "$MEMCG_SCAN"
	echo $((LIMIT_MB * 1024 * 1024)) > "$MEMCG/memory.limit_in_bytes"
	echo $((SCAN_CG_MB * 1024 * 1024)) > "$MEMCG_SCAN/memory.limit_in_bytes"
	BLKCG=""
	if [ -d "$blkroot" ]; then
		BLKCG="$blkroot$(cg_self_path blkio)/pce-bench-$$"
		BLKCG=${BLKCG//\/\//\/}
		mkdir -p "$BLKCG" 2>/dev/null || BLKCG=""
	fi
	disk_majmin "$BENCH_DIR"
	if [ -n "$BLKCG" ] && [ "${THROTTLE_IOPS:-0}" -gt 0 ]; then
		echo "$DISK_DEV $THROTTLE_IOPS" > "$BLKCG/blkio.throttle.read_iops_device" ||
			die "cannot throttle read IOPS on $DISK_DEV"
	fi
	if [ -n "$BLKCG" ]; then
		# blk-throttle counts bytes only for cgroups with a rule: without a
		# throttle, set a rule no disk reaches (1 TiB/s) to get the counter
		local bps=$((1 << 40))
		[ "${THROTTLE_MBPS:-0}" -gt 0 ] && bps=$((THROTTLE_MBPS * 1024 * 1024))
		echo "$DISK_DEV $bps" > "$BLKCG/blkio.throttle.read_bps_device" ||
			die "cannot set a read bandwidth rule on $DISK_DEV"
	fi
}

# DISK_NAME and DISK_DEV (MAJ:MIN) of the whole disk holding directory $1
disk_majmin() {
	local src name parent
	src=$(df --output=source "$1" | tail -1)
	name=$(basename "$(readlink -f "$src")")
	parent=$(lsblk -no PKNAME "/dev/$name" 2>/dev/null | head -1)
	[ -n "$parent" ] && name=$parent
	DISK_NAME=$name
	DISK_DEV=$(cat "/sys/class/block/$name/dev" 2>/dev/null || echo "0:0")
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

cg_cleanup() {
	local cg
	for cg in "$MEMCG_SCAN" "$MEMCG" "$BLKCG"; do
		[ -n "$cg" ] && [ -d "$cg" ] || continue
		# move stragglers (there should be none) to the parent, then remove
		while read -r p; do echo "$p" > "$(dirname "$cg")/cgroup.procs" 2>/dev/null || true; done < "$cg/cgroup.procs"
		rmdir "$cg" 2>/dev/null || true
	done
}

memstat() {	# $1 = cgroup dir, $2 = key (hierarchical total_ value)
	awk -v k="total_$2" '$1 == k { print $2 }' "$1/memory.stat"
}

blk_read_bytes() {	# bytes read from the disk by the cluster's blkio cgroup
	if [ -n "$BLKCG" ] && [ -r "$BLKCG/blkio.throttle.io_service_bytes" ]; then
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
		echo "$BASHPID" > "$MEMCG/cgroup.procs"
		[ -n "$BLKCG" ] && echo "$BASHPID" > "$BLKCG/cgroup.procs"
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
