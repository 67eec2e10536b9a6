#!/bin/sh
# inside-loader.sh: runs as root inside the cache_ext lab VM (see run-lab-test.sh).
#
# The whole product on the cache_ext kernel, with nothing hand-made: the
# real loader attaches the policy to the cluster's cgroup, the server runs
# with pg_cache_ext preloaded, and the module's executor hook marks the
# backend that scans a table larger than the cgroup's memory.max.  Reports
# what cache_ext_status() says and how much of the hot table stays cached.
# RESULT lines are parsed by t/090_cache_ext_lab.t.
#
# usage: inside-loader.sh WORK_DIR [MEMORY_MAX_MB]   (WORK_DIR/pgdata: prepared cluster)
set -u
W=$1
MAX=${2:-112}
. "$W/lab-common.sh"
LOADER=$PGBIN/pg_cache_ext_loader
CG=/sys/fs/cgroup/cache_ext_pg
status() { psqlc -c "SELECT value FROM cache_ext_status() WHERE name = '$1'"; }
stat() { psqlc -c "SELECT value FROM cache_ext_stats() WHERE name = '$1'"; }
resident() { psqlc -c "SELECT round(100 * cached_fraction) FROM cache_ext_relation_cache('$1')"; }

start_watchdog "${PCE_LAB_WATCHDOG:-250}" 40
# the loader mounts its bpffs at /run/pg_cache_ext only in a directory no one
# but root may write: /run as on a real host (the lab mounts its tmpfs 1777)
chmod 0755 /run
prepare_pg_runtime
cp -a "$W/pgdata" "$DATA" || { echo "RESULT loader_copy_rc=1"; exit 1; }
cat >> "$DATA/postgresql.conf" <<CONF
unix_socket_directories = '$SOCK'
shared_preload_libraries = 'pg_cache_ext'
CONF

# the cluster's cgroup: cache_ext runs policies only on cgroups named cache_ext*
mkdir -p "$CG"
echo "${MAX}M" > "$CG/memory.max"

# a cgroup named through a symlink (named cache_ext* as the kernel wants)
# that is swapped while the loader runs,
# between the cluster's cgroup and another cache_ext one: refused every
# time, and no policy on either (the loader opens the cgroup once, by fd,
# following no symlink); one from postgresql.auto.conf is refused too
OTHER=/sys/fs/cgroup/cache_ext_other
mkdir -p "$OTHER"
echo 77M > "$OTHER/memory.max"
ln -sfn "$CG" /tmp/cache_ext_link
( while :; do ln -sfn "$OTHER" /tmp/cache_ext_link.new && mv -T /tmp/cache_ext_link.new /tmp/cache_ext_link;
	ln -sfn "$CG" /tmp/cache_ext_link.new && mv -T /tmp/cache_ext_link.new /tmp/cache_ext_link; done ) &
swapper=$!
attached=0
bpf_from_here_on
for i in 1 2 3 4 5 6 7 8 9 10; do
	"$LOADER" -D "$DATA" --mode cache_ext --cgroup /tmp/cache_ext_link >/dev/null 2>&1
	[ -e /run/pg_cache_ext/pins/*/policy_link ] && attached=$((attached + 1))
	"$LOADER" -D "$DATA" --unload >/dev/null 2>&1
done
kill "$swapper"; wait "$swapper" 2>/dev/null
echo "RESULT loader_swapped_cgroup_attached=$attached"
echo "RESULT loader_other_memory_max=$(cat "$OTHER/memory.max")"
echo "pg_cache_ext.cgroup = '$OTHER'" >> "$DATA/postgresql.auto.conf"
"$LOADER" -D "$DATA" --mode cache_ext 2>&1 | sed 's/^/LAB-TEST: auto.conf cgroup: /'
echo "RESULT loader_autoconf_cgroup_attached=$([ -e /run/pg_cache_ext/pins/*/policy_link ] && echo 1 || echo 0)"
sed -i '/^pg_cache_ext.cgroup/d' "$DATA/postgresql.auto.conf"
"$LOADER" -D "$DATA" --unload >/dev/null 2>&1
rmdir "$OTHER" /tmp/cache_ext_link 2>/dev/null; rm -f /tmp/cache_ext_link

"$LOADER" -D "$DATA" --cgroup "$CG" 2>&1 | sed 's/^/LAB-TEST: /'
echo "RESULT loader_rc=$([ -e /run/pg_cache_ext/pins/*/policy_link ] && echo 0 || echo 1)"

sync; echo 3 > /proc/sys/vm/drop_caches
sh -c 'echo $$ > "$0/cgroup.procs" && exec runuser -u postgres -- "$1/pg_ctl" -D "$2" -l /mnt/pg.log -w start >/dev/null' \
	"$CG" "$PGBIN" "$DATA" || { cat /mnt/pg.log; exit 1; }
psqlc -c "CREATE EXTENSION pg_cache_ext"
echo "RESULT loader_state=$(status state)"
echo "RESULT loader_mechanism=$(status mechanism)"
say "status: $(status reason)"

# warm the hot table without marking (it is above the scan threshold too)
for i in 1 2 3; do psqlc -c "SET pg_cache_ext.scan = off; SELECT count(*) FROM hot" >/dev/null; done
echo "RESULT loader_hot_before=$(resident hot)"
# an ordinary query: the module marks this backend by itself
psqlc -c "SELECT count(*) FROM big" >/dev/null
echo "RESULT loader_hot_after=$(resident hot)"
echo "RESULT loader_marks_seqscan=$(stat marks_seqscan)"
echo "RESULT loader_folios_added_scan=$(stat folios_added_scan)"
echo "RESULT loader_folios_evicted_scan=$(stat folios_evicted_scan)"
echo "RESULT loader_folios_evicted_main=$(stat folios_evicted_main)"
echo "RESULT loader_map_entries_after=$(status kernel_map_entries)"
say "hot $(resident hot)% cached after the scan; big $(resident big)%"

# only files of the cluster's account are a scan's (file_reader() in
# maps.bpf.h): two files alike, one root's and one postgres's, each read
# cold by a marked session; folios_added_scan grows for the second only
head -c 8M /dev/urandom > /mnt/root.dat
cp /mnt/root.dat /mnt/own.dat && chown postgres /mnt/own.dat
chmod 0644 /mnt/root.dat /mnt/own.dat
# how much folios_added_scan grows while "$@" runs, the caches dropped first
scan_folios_added() {
	sync; echo 1 > /proc/sys/vm/drop_caches
	before=$(stat folios_added_scan)
	"$@" >/dev/null
	echo $(($(stat folios_added_scan) - before))
}
marked_read() {
	scan_folios_added psqlc -c "SET pg_cache_ext.scan = on" -c "SELECT length(pg_read_binary_file('$1'))"
}
own=$(marked_read /mnt/own.dat)
theirs=$(marked_read /mnt/root.dat)
echo "RESULT loader_own_file_scan=$own"
echo "RESULT loader_root_file_scan=$theirs"
say "a marked read of postgres's file: $own scan folios; of root's: $theirs"

# readers outside the server: pg_cache_ext_run marks itself and forks its
# command (here sh, which forks cat: a grandchild), and the tracker's
# program on process fork copies the mark to each; so cat's folios are the
# scan's.  The same sh and cat without the wrapper add none.  (In the
# cluster's cgroup: the policy sees only the folios charged to it.)
tree_read() {
	scan_folios_added sh -c 'echo $$ > "$0/cgroup.procs" && exec runuser -u postgres -- "$@" sh -c "cat /mnt/own.dat; true"' \
		"$CG" "$@"
}
wrapped=$(tree_read "$PGBIN/pg_cache_ext_run" --require -q -D "$DATA" --)
bare=$(tree_read)
echo "RESULT loader_run_tree_scan=$wrapped"
echo "RESULT loader_bare_tree_scan=$bare"
say "the same file read by cat under sh: $wrapped scan folios under pg_cache_ext_run, $bare without it"

# the same with pg_cache_ext.mode = off: the policy stays attached but no
# backend is marked, so every folio is on the main list (plain LRU)
psqlc -c "ALTER SYSTEM SET pg_cache_ext.mode = off" -c "SELECT pg_reload_conf()" >/dev/null
sleep 1
sync; echo 3 > /proc/sys/vm/drop_caches
for i in 1 2 3; do psqlc -c "SELECT count(*) FROM hot" >/dev/null; done
echo "RESULT loader_off_hot_before=$(resident hot)"
psqlc -c "SELECT count(*) FROM big" >/dev/null
echo "RESULT loader_off_hot_after=$(resident hot)"
say "mode off: hot $(resident hot)% cached after the scan"
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
dmesg | grep -qiE 'BUG:|Oops|general protection' && echo "RESULT loader_kernel_oops=1" || echo "RESULT loader_kernel_oops=0"
exit 0
