# bench/worker.sh - the extension's background worker, as the benchmarks
# see it from outside the server.  Sourced by bench/lib.sh and
# bench/standalone.sh, not run.
#
# The worker is not in pg_stat_activity (it connects to no database): it is
# found as the child of the cluster's postmaster named 'pg_cache_ext worker'.

# the worker's PID in the cluster of data directory $1, or nothing
bench_worker_pid() {
	local postmaster
	postmaster=$(head -1 "$1/postmaster.pid" 2>/dev/null || true)
	[ -n "$postmaster" ] || return 0
	pgrep -P "$postmaster" -f 'pg_cache_ext worker' 2>/dev/null | head -1 || true
}

# its CPU time so far (user + system, clock ticks: getconf CLK_TCK a
# second), 0 when it does not run (no extension)
bench_worker_cpu_ticks() {
	local pid
	pid=$(bench_worker_pid "$1")
	[ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || { echo 0; return 0; }
	# fields 14 and 15; after the command name, which may hold spaces, 12 and 13
	sed 's/^.*) //' "/proc/$pid/stat" | awk '{ print $12 + $13 }'
}
