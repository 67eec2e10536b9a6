#!/bin/sh
# lab-common.sh: sourced by the inside-*.sh scripts inside the cache_ext lab
# VM (run-lab-test.sh copies it next to them): logging, the watchdog, and
# what the PostgreSQL scenarios share.

say() { echo "LAB-TEST: [$(cut -d" " -f1 /proc/uptime)s] $*"; }

# start_watchdog SECONDS DMESG_LINES: a hung kernel becomes a diagnosable
# failure (a RESULT line, the blocked tasks and the kernel log), not a QEMU
# timeout
start_watchdog() {
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
