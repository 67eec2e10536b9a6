#!/bin/sh
# lab-common.sh: sourced by the inside-*.sh scripts inside the cache_ext lab
# VM (run-lab-test.sh copies it next to them): logging, the watchdog, and
# what the PostgreSQL scenarios share.

say() { echo "LAB-TEST: [$(cut -d" " -f1 /proc/uptime)s] $*"; }

# run a command inside cgroup $1
in_cgroup() {
	cg=$1; shift
	sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" "$@"
}

# bpf_from_here_on: said once, just before a scenario loads its first BPF
# program; t/090 runs a scenario again once when the kernel died before it
# (nothing of the project had run in the kernel yet).  Said in the kernel's
# log too, which a panic flushes to the console: a panic right after it
# must never pass for one before it.
bpf_from_here_on() {
	say "BPF from here on"
	echo "<2>pg_cache_ext lab: BPF from here on" > /dev/kmsg	# KERN_CRIT: on the console whatever its level
}

# start_watchdog SECONDS DMESG_LINES: a hung kernel becomes a diagnosable
# failure (a RESULT line, the blocked tasks and the kernel log), not a QEMU
# timeout.  An oops, a WARN, "scheduling while atomic" or an RCU stall panics the kernel at once (the VM powers
# off with the trace on the console, which t/090 prints): after an oops the
# kernel may hold a lock forever and the shell watchdog below never runs
# (seen: a GPF in a list kfunc during a policy detach, then 270 s of silence).
start_watchdog() {
	echo 5 > /proc/sys/kernel/printk	# above warnings and stack traces (quiet hides them), below the info lines
	echo 1 > /proc/sys/kernel/panic_on_oops
	echo 1 > /proc/sys/kernel/panic_on_warn	# a WARN or "scheduling while atomic" panics too (seen: one, then a hang)
	echo 1 > /proc/sys/kernel/panic_on_rcu_stall 2>/dev/null
	(
		sleep "$1"
		echo "RESULT watchdog_fired=1"
		echo 1 > /proc/sys/kernel/sysrq
		echo w > /proc/sysrq-trigger
		echo l > /proc/sysrq-trigger
		dmesg | tail -"$2" | sed 's/^/LAB-TEST: dmesg /'
		echo o > /proc/sysrq-trigger
	) &
}

# the PostgreSQL scenarios: a cluster copied to /mnt, a socket directory,
# and the /dev/shm that the VM's minimal root lacks
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
DATA=/mnt/pgdata
SOCK=/mnt/pgsock
pg() { runuser -u postgres -- "$@"; }
psqlc() { pg "$PGBIN/psql" -h "$SOCK" -p 5432 -d postgres -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }
prepare_pg_runtime() {
	mkdir -p "$SOCK" && chown postgres "$SOCK"
	mkdir -p /dev/shm && mount -t tmpfs -o mode=1777 shm /dev/shm
}
