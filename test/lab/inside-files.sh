#!/bin/sh
# inside-files.sh: runs as root inside the cache_ext lab VM (see run-lab-test.sh).
#
# A hot file is read repeatedly by an unmarked process, then a marked
# process scans a file much larger than the cgroup's memory.max.  Once in a
# cgroup without policy (the kernel's LRU) and once in a cgroup with the
# pg_cache_ext policy attached; prints how much of the hot file is still
# resident after the scan.  Output lines starting with RESULT are parsed by
# t/090_cache_ext_lab.t.
#
# usage: inside-files.sh TOOLS_DIR [MEMORY_MAX_MB HOT_MB SCAN_MB]
set -u
B=$1
MAX=${2:-96} HOT=${3:-56} SCAN=${4:-256}
PIN=/sys/fs/bpf/pg_cache_ext_lab/lab	# <pin root>/<id>, as the loader makes them
CGROOT=/sys/fs/cgroup

. "$B/lab-common.sh"

resident() { "$B/pce_mark_self" resident "$1" | cut -d' ' -f1; }

start_watchdog "${PCE_LAB_WATCHDOG:-480}" 200

say "memory.max ${MAX}M, hot file ${HOT}M, scan file ${SCAN}M"
echo "RESULT max_bytes=$((MAX * 1048576))"
dd if=/dev/urandom of=/mnt/hot bs=1M count="$HOT" status=none
dd if=/dev/zero of=/mnt/scan bs=1M count="$SCAN" status=none
sync

run_case() {
	name=$1 cg=$2 mark=$3
	mkdir -p "$cg"
	echo "${MAX}M" > "$cg/memory.max"
	sync; echo 3 > /proc/sys/vm/drop_caches
	in_cgroup "$cg" "$B/pce_mark_self" -n 3 read /mnt/hot
	before=$(resident /mnt/hot)
	in_cgroup "$cg" "$B/pce_mark_self" $mark read /mnt/scan
	after=$(resident /mnt/hot)
	scan=$(resident /mnt/scan)
	say "$name: hot resident before scan ${before}%, after ${after}%; scan file resident ${scan}%"
	echo "RESULT ${name}_hot_before=$before"
	echo "RESULT ${name}_hot_after=$after"
	echo "RESULT ${name}_scan_resident=$scan"
}

mkdir -p "$PIN"

# 1. the kernel's own LRU (no policy on this cgroup)
run_case baseline "$CGROOT/baseline" ""

# 2. the pg_cache_ext policy
bpf_from_here_on
mkdir -p "$CGROOT/cache_ext_pg"
echo "${MAX}M" > "$CGROOT/cache_ext_pg/memory.max"
out=$("$B/pce_policy_tool" attach "$PIN" "$CGROOT/cache_ext_pg" 2>&1)
rc=$?
say "$out"
echo "RESULT attach_rc=$rc"
[ $rc -eq 0 ] || exit 1
"$B/pce_policy_tool" knobs "$PIN" 1 1 0 || exit 1
ls -l "$PIN" | sed 's/^/LAB-TEST: pin /'
run_case policy "$CGROOT/cache_ext_pg" "-p $PIN"
"$B/pce_policy_tool" stats "$PIN" | sed 's/^/RESULT stat_/; s/ /=/2'

# a second policy on the same cgroup is refused
out=$("$B/pce_policy_tool" attach "$PIN" "$CGROOT/cache_ext_pg" 2>&1)
echo "RESULT second_attach_rc=$?"
say "second attach: $out"

# 3. promotion: a file scanned by a marked process, then read by an unmarked one
dd if=/dev/zero of=/mnt/small bs=1M count=8 status=none
sync; echo 3 > /proc/sys/vm/drop_caches
in_cgroup "$CGROOT/cache_ext_pg" "$B/pce_mark_self" -p "$PIN" read /mnt/small
in_cgroup "$CGROOT/cache_ext_pg" "$B/pce_mark_self" read /mnt/small
"$B/pce_policy_tool" stats "$PIN" | grep promoted | sed 's/^/RESULT after_reread_/; s/ /=/2'

# 4. detach while a reader is busy in the cgroup (the research kernel's
#    teardown races with page-cache removals; loader/policy.c drains the
#    lists first), read again, re-attach.  PCE_LAB_DETACH=0 skips this.
if [ "${PCE_LAB_DETACH:-1}" = 1 ]; then
	in_cgroup "$CGROOT/cache_ext_pg" "$B/pce_mark_self" -n 2 read /mnt/scan &
	reader=$!
	sleep 1
	{ "$B/pce_policy_tool" detach "$PIN"; echo $? > /tmp/detach.rc; } 2>&1 | sed "s/^/LAB-TEST: /"
	echo "RESULT detach_rc=$(cat /tmp/detach.rc)"
	wait $reader
	echo "RESULT detach_concurrent_reader_rc=$?"
	[ -e "$PIN/policy_link" ] && echo "RESULT detach_link_pin_left=1" || echo "RESULT detach_link_pin_left=0"
	in_cgroup "$CGROOT/cache_ext_pg" "$B/pce_mark_self" read /mnt/scan /mnt/hot
	echo "RESULT after_detach_read_rc=$?"
	{ "$B/pce_policy_tool" attach "$PIN" "$CGROOT/cache_ext_pg"; echo $? > /tmp/reattach.rc; } 2>&1 | sed "s/^/LAB-TEST: re/"
	echo "RESULT reattach_rc=$(cat /tmp/reattach.rc)"
	echo "RESULT detach_memory_max=$(cat "$CGROOT/cache_ext_pg/memory.max")"

	# 5. the loader killed during a detach, with the cgroup's limits lifted
	#    for the teardown: the next loader run puts them back
	PCE_TEST_KILL_DURING_DETACH=1 "$B/pce_policy_tool" detach "$PIN" >/dev/null 2>&1
	echo "RESULT killed_detach_rc=$?"
	echo "RESULT killed_detach_memory_max=$(cat "$CGROOT/cache_ext_pg/memory.max")"
	"$B/pce_policy_tool" resume "$PIN" 2>&1 | sed "s/^/LAB-TEST: /"
	echo "RESULT resumed_memory_max=$(cat "$CGROOT/cache_ext_pg/memory.max")"
	{ "$B/pce_policy_tool" detach "$PIN"; echo $? > /tmp/detach2.rc; } 2>&1 | sed "s/^/LAB-TEST: /"
	echo "RESULT final_detach_rc=$(cat /tmp/detach2.rc)"

	# 6. attach / two busy readers / detach, a few times, at varying moments
	#    (before the policy's detach phases, the second cycle oopsed here)
	cycles=0
	for pause in 0.2 0.5 0.8 0.3 1.1 0.6 0.4 1.0; do
		"$B/pce_policy_tool" attach "$PIN" "$CGROOT/cache_ext_pg" >/dev/null || break
		in_cgroup "$CGROOT/cache_ext_pg" "$B/pce_mark_self" -p "$PIN" -n 2 read /mnt/scan &
		r1=$!
		in_cgroup "$CGROOT/cache_ext_pg" "$B/pce_mark_self" -n 4 read /mnt/hot &
		r2=$!
		sleep $pause
		"$B/pce_policy_tool" detach "$PIN" 2>&1 | sed "s/^/LAB-TEST: cycle $cycles: /"
		wait $r1 $r2 || break
		cycles=$((cycles + 1))
	done
	echo "RESULT detach_cycles=$cycles"
	echo "RESULT cycles_memory_max=$(cat "$CGROOT/cache_ext_pg/memory.max")"

	# 6b. a teardown slower than the loader's wait (another process holds the
	#     struct_ops map, as a kernel still freeing a large folio index
	#     would): the run fails, the limits stay lifted with their record;
	#     a run meanwhile neither restores them nor attaches (to another
	#     cgroup: the record is not overwritten); once the map is freed, the
	#     next run puts the limits back
	PG=$CGROOT/cache_ext_pg
	mkdir -p "$CGROOT/cache_ext_other"
	echo 50M > "$CGROOT/cache_ext_other/memory.max"
	"$B/pce_policy_tool" attach "$PIN" "$PG" >/dev/null
	"$B/pce_policy_tool" hold "$PIN" 600 &
	holder=$!
	sleep 1
	{ PCE_TEARDOWN_WAIT_SECONDS=2 "$B/pce_policy_tool" detach "$PIN"; echo $? > /tmp/slow.rc; } 2>&1 | sed "s/^/LAB-TEST: slow teardown: /"
	echo "RESULT slow_detach_rc=$(cat /tmp/slow.rc)"
	echo "RESULT slow_detach_memory_max=$(cat "$PG/memory.max")"
	PCE_TEARDOWN_WAIT_SECONDS=1 "$B/pce_policy_tool" resume "$PIN" >/dev/null 2>&1
	echo "RESULT slow_resume_early_rc=$?"
	echo "RESULT slow_resume_early_memory_max=$(cat "$PG/memory.max")"
	{ PCE_TEARDOWN_WAIT_SECONDS=1 "$B/pce_policy_tool" attach "$PIN" "$CGROOT/cache_ext_other"; echo $? > /tmp/slow.rc; } 2>&1 | sed "s/^/LAB-TEST: attach during a slow teardown: /"
	echo "RESULT slow_attach_other_rc=$(cat /tmp/slow.rc)"
	[ -e "$PIN/policy_link" ] && echo "RESULT slow_attach_other_link=1" || echo "RESULT slow_attach_other_link=0"
	kill "$holder"; wait "$holder" 2>/dev/null
	{ "$B/pce_policy_tool" resume "$PIN"; echo $? > /tmp/slow.rc; } 2>&1 | sed "s/^/LAB-TEST: slow teardown, map freed: /"
	echo "RESULT slow_resume_rc=$(cat /tmp/slow.rc)"
	echo "RESULT slow_resumed_memory_max=$(cat "$PG/memory.max")"
	echo "RESULT slow_other_memory_max=$(cat "$CGROOT/cache_ext_other/memory.max")"

	# 6c. the struct_ops map's unpin fails after the link's: the teardown
	#     cannot end (the pin holds the map), so the limits stay lifted; the
	#     next run removes the pin, waits for the map, restores the limits
	"$B/pce_policy_tool" attach "$PIN" "$PG" >/dev/null
	{ PCE_TEST_FAIL_UNPIN=policy_ops "$B/pce_policy_tool" detach "$PIN"; echo $? > /tmp/unpin.rc; } 2>&1 | sed "s/^/LAB-TEST: failed unpin: /"
	echo "RESULT unpin_fail_rc=$(cat /tmp/unpin.rc)"
	echo "RESULT unpin_fail_memory_max=$(cat "$PG/memory.max")"
	[ -e "$PIN/policy_ops" ] && echo "RESULT unpin_fail_map_pin=1" || echo "RESULT unpin_fail_map_pin=0"
	{ "$B/pce_policy_tool" resume "$PIN"; echo $? > /tmp/unpin.rc; } 2>&1 | sed "s/^/LAB-TEST: after a failed unpin: /"
	echo "RESULT unpin_resume_rc=$(cat /tmp/unpin.rc)"
	[ -e "$PIN/policy_ops" ] && echo "RESULT unpin_resume_map_pin=1" || echo "RESULT unpin_resume_map_pin=0"
	[ -e "$PIN/policy_state" ] && echo "RESULT unpin_resume_state_pin=1" || echo "RESULT unpin_resume_state_pin=0"
	echo "RESULT unpin_resumed_memory_max=$(cat "$PG/memory.max")"
	"$B/pce_policy_tool" attach "$PIN" "$PG" >/dev/null && "$B/pce_policy_tool" detach "$PIN" >/dev/null 2>&1
	echo "RESULT unpin_after_cycle_rc=$?"
fi

stat_of() { "$B/pce_policy_tool" stats "$PIN" | awk -v n="$1" '$1 == n { print $2 }'; }
[ -e "$PIN/policy_link" ] && "$B/pce_policy_tool" detach "$PIN" >/dev/null 2>&1
CG="$CGROOT/cache_ext_pg"

# 7. a dirty-heavy scan: the marked process writes back what it reads in
#    the first 32 MiB (as VACUUM or hint bits do), and the flusher is held
#    back, so the scan list's head is 8192 dirty folios, more than one list
#    iteration visits.  The policy must still evict scan folios, not the hot
#    set.
echo 60 > /proc/sys/vm/dirty_ratio
echo 50 > /proc/sys/vm/dirty_background_ratio
echo 360000 > /proc/sys/vm/dirty_expire_centisecs
dd if=/dev/urandom of=/mnt/hot2 bs=1M count=24 status=none
sync
"$B/pce_policy_tool" attach "$PIN" "$CG" >/dev/null && "$B/pce_policy_tool" knobs "$PIN" 1 1 0
sync; echo 3 > /proc/sys/vm/drop_caches
in_cgroup "$CG" "$B/pce_mark_self" -n 3 read /mnt/hot2
echo "RESULT dirty_hot_before=$(resident /mnt/hot2)"
main0=$(stat_of folios_evicted_main)
scan0=$(stat_of folios_evicted_scan)
in_cgroup "$CG" "$B/pce_mark_self" -p "$PIN" -w 32 read /mnt/scan
echo "RESULT dirty_scan_rc=$?"
echo "RESULT dirty_hot_after=$(resident /mnt/hot2)"
echo "RESULT dirty_evicted_main=$(( $(stat_of folios_evicted_main) - main0 ))"
echo "RESULT dirty_evicted_scan=$(( $(stat_of folios_evicted_scan) - scan0 ))"
say "dirty-heavy scan: $(grep -E '^(Dirty|Writeback):' /proc/meminfo | tr -s ' ' | tr '\n' ' ')"
echo "RESULT dirty_oom_kills=$(awk '$1 == "oom_kill" { print $2 }' "$CG/memory.events")"
"$B/pce_policy_tool" detach "$PIN" >/dev/null 2>&1
sync
echo 20 > /proc/sys/vm/dirty_ratio
echo 10 > /proc/sys/vm/dirty_background_ratio
echo 3000 > /proc/sys/vm/dirty_expire_centisecs

# 8. more folios than the policy can hold (PCE_POLICY_MAX_FOLIOS=1024):
#    the rest is counted as untracked and left to the kernel's LRU
PCE_POLICY_MAX_FOLIOS=1024 "$B/pce_policy_tool" attach "$PIN" "$CG" >/dev/null
u0=$(stat_of folios_untracked)
sync; echo 3 > /proc/sys/vm/drop_caches
in_cgroup "$CG" "$B/pce_mark_self" read /mnt/hot
echo "RESULT untracked_read_rc=$?"
echo "RESULT untracked_added=$(( $(stat_of folios_untracked) - u0 ))"
"$B/pce_policy_tool" detach "$PIN" >/dev/null 2>&1

# 9. MGLRU on (this kernel has none: a file saying what lru_gen/enabled
#    says when it is on): the attach is refused with the reason
echo 0x0007 > /tmp/lru_gen_enabled
out=$(PCE_LRU_GEN_FILE=/tmp/lru_gen_enabled "$B/pce_policy_tool" attach "$PIN" "$CG" 2>&1)
echo "RESULT mglru_attach_rc=$?"
say "with MGLRU: $out"
echo "$out" | grep -q "MGLRU is enabled" && echo "RESULT mglru_reason=1" || echo "RESULT mglru_reason=0"
[ -e "$PIN/policy_link" ] && echo "RESULT mglru_link=1" || echo "RESULT mglru_link=0"

# 10. OOM: a cgroup full of active clean cache (a file read twice: the
#     kernel's inactive file list is empty) under a memory.max just above
#     its usage, then an anonymous allocation (dd's 16 MiB buffer; the VM has
#     no swap), then, the cache made active again, a marked scan: with the
#     kernel's LRU (cgroup lru_oom, no policy) and with the policy (cgroup
#     cache_ext_oom), in the same run.  memory.events oom_kill must stay 0
#     wherever the kernel's LRU has it 0.
dd if=/dev/urandom of=/mnt/active bs=1M count=40 status=none
sync
kills_of() { awk '$1 == "oom_kill" { print $2 }' "$1/memory.events"; }
evicted_total() { echo $(( $(stat_of folios_evicted_scan) + $(stat_of folios_evicted_main) )); }
make_active() {
	echo 512M > "$1/memory.max"
	in_cgroup "$1" "$B/pce_mark_self" -n 2 read /mnt/active
	cur=$(cat "$1/memory.current")
	echo $((cur + 2097152)) > "$1/memory.max"
	say "$2: $(grep -E '^(active_file|inactive_file) ' "$1/memory.stat" | tr '\n' ' ')memory.max $((cur + 2097152))"
}
oom_case() {
	name=$1 cg=$2 mark=$3
	sync; echo 3 > /proc/sys/vm/drop_caches
	make_active "$cg" "$name, before the allocation"
	ev0=$(evicted_total)
	in_cgroup "$cg" dd if=/dev/zero of=/dev/null bs=16M count=4 status=none
	echo "RESULT oom_${name}_anon_rc=$?"
	echo "RESULT oom_${name}_anon_kills=$(kills_of "$cg")"
	echo "RESULT oom_${name}_anon_policy_evicted=$(( $(evicted_total) - ev0 ))"
	say "$name, after the allocation: $(grep -E '^(anon|active_file|inactive_file) ' "$cg/memory.stat" | tr '\n' ' ')"
	make_active "$cg" "$name, before the scan"
	ev0=$(evicted_total)
	in_cgroup "$cg" "$B/pce_mark_self" $mark read /mnt/scan
	echo "RESULT oom_${name}_scan_rc=$?"
	echo "RESULT oom_${name}_scan_policy_evicted=$(( $(evicted_total) - ev0 ))"
	echo "RESULT oom_${name}_kills=$(kills_of "$cg")"
	say "$name: $(tr '\n' ' ' < "$cg/memory.events")"
}
mkdir -p "$CGROOT/lru_oom" "$CGROOT/cache_ext_oom"
oom_case lru "$CGROOT/lru_oom" ""
"$B/pce_policy_tool" attach "$PIN" "$CGROOT/cache_ext_oom" >/dev/null && "$B/pce_policy_tool" knobs "$PIN" 1 1 0
echo "RESULT oom_policy_attach_rc=$?"
oom_case policy "$CGROOT/cache_ext_oom" "-p $PIN"
"$B/pce_policy_tool" stats "$PIN" | grep -E 'evicted|unfilled' | sed 's/^/LAB-TEST: oom stats: /'
"$B/pce_policy_tool" detach "$PIN" >/dev/null 2>&1

if [ "${PCE_LAB_DETACH:-1}" = 1 ]; then
	if dmesg | grep -q -E "Oops|BUG:|general protection|WARNING:"; then
		dmesg | grep -A30 -E "Oops|BUG:|general protection|WARNING:" | head -40 | sed 's/^/LAB-TEST: dmesg /'
		echo "RESULT kernel_oops=1"
	else
		echo "RESULT kernel_oops=0"
	fi
fi
exit 0
