#!/bin/sh
# run-lab-test.sh: run the pg_cache_ext cache_ext policy test in the
# cache_ext research kernel under QEMU (shared/kernel-lab/run-in-vm).
#
# usage: test/lab/run-lab-test.sh [files|pg|loader|detach-stress]
#
# Environment:
#   PCE_BUILD_DIR   build tree with bpf/policy.skel.h (default: this repo)
#   PCE_KERNEL_LAB  kernel-lab directory (default: ../shared/kernel-lab
#                   relative to the repo, then /work/shared/kernel-lab)
#   PCE_LAB_DETACH  1: also detach the policy at the end (see README note)
#
# Exit status: 0 ran (results on stdout, RESULT lines), 77 lab unavailable,
# anything else: failure.  The verdict is t/090_cache_ext_lab.t's.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${PCE_BUILD_DIR:-$repo}
scenario=${1:-files}
[ -f "$here/inside-$scenario.sh" ] || { echo "run-lab-test.sh: no scenario $scenario (files, pg, loader, detach-stress)" >&2; exit 2; }

lab=${PCE_KERNEL_LAB:-}
if [ -z "$lab" ]; then
	for d in "$repo/../shared/kernel-lab" /work/shared/kernel-lab; do
		[ -x "$d/run-in-vm" ] && { lab=$d; break; }
	done
fi
if [ -z "$lab" ] || [ ! -x "$lab/run-in-vm" ]; then
	echo "SKIP: no kernel lab (set PCE_KERNEL_LAB)"; exit 77
fi
command -v qemu-system-x86_64 >/dev/null || { echo "SKIP: qemu-system-x86_64 not installed"; exit 77; }

# The VM mounts its working directory read-write at the same path; /tmp
# inside the VM is a fresh tmpfs, so work below /var/tmp.
work=$(mktemp -d /var/tmp/pce-lab.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"

cflags="-O2 -g -Wall -I$build/bpf -I$repo/bpf -I$repo/loader"
if [ ! -f "$build/bpf/policy.skel.h" ]; then
	make -s -C "$build" bpf/policy.skel.h >&2
fi
cc $cflags -o "$work/pce_policy_tool" "$repo/test/pce_policy_tool.c" "$repo/loader/policy.c" "$repo/loader/pins.c" "$repo/loader/bpffs_mount.c" "$repo/loader/safe_open.c" -lbpf -lelf -lz
cc $cflags -o "$work/pce_mark_self" "$repo/test/pce_mark_self.c" -lbpf -lelf -lz
cp "$here/inside-$scenario.sh" "$work/inside.sh"
cp "$here/lab-common.sh" "$work/lab-common.sh"

if [ "$scenario" = pg ] || [ "$scenario" = loader ]; then
	# prepare the cluster on the host: initdb takes minutes under TCG
	pgbin=${PGBIN:-/usr/lib/postgresql/15/bin}
	[ -x "$pgbin/initdb" ] || { echo "SKIP: no PostgreSQL 15 in $pgbin"; exit 77; }
	hot_rows=${PCE_LAB_HOT_ROWS:-24000} big_rows=${PCE_LAB_BIG_ROWS:-90000}
	chown postgres "$work"
	runuser -u postgres -- "$pgbin/initdb" -D "$work/pgdata" -A trust -U postgres -N >/dev/null
	cat >> "$work/pgdata/postgresql.conf" <<CONF
shared_buffers = 16MB
listen_addresses = ''
unix_socket_directories = '$work'
max_connections = 10
fsync = off
synchronous_commit = off
autovacuum = off
max_parallel_workers_per_gather = 0
CONF
	runuser -u postgres -- "$pgbin/pg_ctl" -D "$work/pgdata" -l "$work/pg-host.log" -w start >/dev/null
	runuser -u postgres -- "$pgbin/psql" -h "$work" -d postgres -X -q -v ON_ERROR_STOP=1 \
		-c "CREATE TABLE hot AS SELECT g AS id, md5(g::text) || repeat('h', 1900) AS pad FROM generate_series(1, $hot_rows) g" \
		-c "CREATE TABLE big AS SELECT g AS id, repeat('b', 1900) AS pad FROM generate_series(1, $big_rows) g" \
		-c "CHECKPOINT"
	if [ "$scenario" = loader ]; then
		# frozen, so that scans do not dirty pages (dirty pages cannot be evicted)
		runuser -u postgres -- "$pgbin/psql" -h "$work" -d postgres -X -q -c "VACUUM FREEZE" -c "CHECKPOINT"
	fi
	runuser -u postgres -- "$pgbin/pg_ctl" -D "$work/pgdata" -m fast -w stop >/dev/null
fi

"$lab/run-in-vm" -m 2048 -d 4 -C "$work" -t "${PCE_LAB_TIMEOUT:-540}" -- env PCE_LAB_DETACH="${PCE_LAB_DETACH:-1}" \
	sh "$work/inside.sh" "$work"
