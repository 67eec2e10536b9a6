# bench/standalone.sh - helpers for the benchmarks that make a cluster of
# their own below one directory, $DIR (overhead.sh, aio-overhead.sh,
# scale.sh).  Sourced, not run; each script defines cleanup() (what it
# undoes) before calling bench_dir_begin.

. "$(dirname "${BASH_SOURCE[0]}")/worker.sh"

# the median of the numbers on standard input, one per line
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# arithmetic on decimals (bc is not everywhere): $1 = expression, $2 = digits (3)
calc() { awk "BEGIN { printf \"%.${2:-3}f\", $1 }"; }

# stop the cluster in $DIR/data, if it runs: $1 = shutdown mode (fast, immediate)
stop_bench_cluster() {
	[ -f "$DIR/data/postmaster.pid" ] &&
		runuser -u postgres -- "$PGBIN/pg_ctl" -D "$DIR/data" -m "$1" -w stop >/dev/null 2>&1
	return 0
}

# a bpffs at /sys/fs/bpf, cleanup() at exit (and now, for what an earlier
# run left), and an empty $DIR the postgres account owns
bench_dir_begin() {
	mount | grep -q ' /sys/fs/bpf type bpf' || mount -t bpf bpf /sys/fs/bpf
	trap cleanup EXIT
	cleanup
	mkdir -p "$DIR"
	chown postgres "$DIR"
}
