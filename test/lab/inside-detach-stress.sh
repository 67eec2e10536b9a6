#!/bin/sh
# inside-detach-stress.sh: runs as root inside the cache_ext lab VM
# (test/lab/run-lab-test.sh detach-stress).  Attaches and detaches the
# policy 60 times, each time with two readers busy in the cgroup (a marked
# scan and an unmarked hot-file reader), at varying moments: the research
# kernel's teardown crashes if a folio still listed leaves the page cache
# while it frees the lists (bpf/policy.bpf.c, "Detach").  Prints how many
# folios each detach left listed, and RESULT lines: the cycles completed
# and the detaches that left folios listed.  Not part of t/090 (about 2.5
# minutes); a kernel crash ends the VM with the trace on the console.
#
# usage: inside-detach-stress.sh TOOLS_DIR
set -u
B=$1
PIN=/sys/fs/bpf/pg_cache_ext_lab/lab
CG=/sys/fs/cgroup/cache_ext_pg

. "$B/lab-common.sh"

start_watchdog 480 200	# within run-lab-test.sh's 540 s
dd if=/dev/urandom of=/mnt/hot bs=1M count=56 status=none
dd if=/dev/zero of=/mnt/scan bs=1M count=256 status=none
sync
mkdir -p "$PIN" "$CG"
echo 96M > "$CG/memory.max"
bpf_from_here_on
cycles=0 left_some=0
for round in 1 2 3 4 5 6 7 8 9 10 11 12; do
	for pause in 0.2 0.5 0.8 0.3 1.1; do
		"$B/pce_policy_tool" attach "$PIN" "$CG" >/dev/null || break 2
		in_cgroup "$CG" "$B/pce_mark_self" -p "$PIN" -n 2 read /mnt/scan &
		r1=$!
		in_cgroup "$CG" "$B/pce_mark_self" -n 4 read /mnt/hot &
		r2=$!
		sleep $pause
		out=$("$B/pce_policy_tool" detach "$PIN" 2>&1 | tail -1)
		say "cycle $cycles: $out"
		case "$out" in *"(0 folios left"*) ;; *) left_some=$((left_some + 1)) ;; esac
		wait $r1 || break 2
		wait $r2 || break 2
		cycles=$((cycles + 1))
	done
done
echo "RESULT stress_cycles=$cycles"
echo "RESULT stress_detaches_leaving_folios=$left_some"
