#!/usr/bin/env bash
# xfs-large-folio.sh - does the stock-kernel tracker record a large folio's
# real size on the running kernel?
#
# Run as root on a machine (or VM) where pg_cache_ext is built and its loader
# installed; needs mkfs.xfs (xfsprogs) and loop devices.  It touches no
# cluster: the loader runs for a pin directory of the check's own
# (--cluster-id, below /sys/fs/bpf/pce-xfs-check), nothing else reads its
# records, and only the check's own file is dropped from the cache.
#
# XFS caches file data in large folios (several pages per folio).  The
# tracker reads a folio's order from struct folio, whose layout changed in
# 6.6 (bpf/tracker.bpf.c, large_folio_order()); read from the wrong field, a
# large folio is recorded as one page and dropping the record leaves most of
# it cached.  So: make an XFS image, write a file, remount (cold), read it
# as a marked process (test/pce_mark_self), then drop exactly the folios the
# tracker recorded.  The recorded sizes must add up to what the read cached,
# some folio must be larger than a page (else the check proves nothing), and
# after the drop nothing of the file may be left.
#
#   PCE_LOADER     the loader (default: pg_cache_ext_loader in pg_config --bindir, or in PATH)
#   PCE_MARK_SELF  test/pce_mark_self built in the source tree (default: beside this script's test/)
#   PCE_FILE_MB    size of the file read (default 64)
#   PCE_USER       the account the file is given to, as the loader's --user
#                  (default postgres): only its files are ever a scan's
#
# Prints one line per check and "xfs-large-folio: PASS" or "... FAIL"; exits 0, 1
# (a check failed) or 2 (could not run).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
loader=${PCE_LOADER:-}
if [ -z "$loader" ]; then
	if command -v pg_config >/dev/null && [ -x "$(pg_config --bindir)/pg_cache_ext_loader" ]; then
		loader="$(pg_config --bindir)/pg_cache_ext_loader"
	else
		loader=$(command -v pg_cache_ext_loader || true)
	fi
fi
mark=${PCE_MARK_SELF:-$here/../pce_mark_self}
file_mb=${PCE_FILE_MB:-64}
owner=${PCE_USER:-postgres}
work=/var/tmp/pce-xfs-check
pin_root=/sys/fs/bpf/pce-xfs-check
id=xfs-check

cannot() { echo "xfs-large-folio: cannot run: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || cannot "must be run as root"
[ -x "$loader" ] || cannot "no pg_cache_ext_loader (set PCE_LOADER)"
[ -x "$mark" ] || cannot "no $mark (run make in the source tree, or set PCE_MARK_SELF)"
command -v mkfs.xfs >/dev/null || cannot "mkfs.xfs missing (apt-get install xfsprogs)"

cleanup() {
	mountpoint -q "$work/mnt" 2>/dev/null && umount "$work/mnt"
	"$loader" --unload --cluster-id "$id" --bpffs-dir "$pin_root" >/dev/null 2>&1 || true
	rmdir "$pin_root" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
cleanup
mkdir -p "$work/mnt"
truncate -s 512M "$work/xfs.img"
mkfs.xfs -q -f "$work/xfs.img"
mount -o loop "$work/xfs.img" "$work/mnt"
dd if=/dev/urandom of="$work/mnt/data" bs=1M count="$file_mb" conv=fsync status=none
chown "$owner" "$work/mnt/data"    # as a cluster's file: another account's is no scan's
umount "$work/mnt"
mount -o loop "$work/xfs.img" "$work/mnt"    # nothing of the file cached now

"$loader" --cluster-id "$id" --user "$owner" --bpffs-dir "$pin_root" --mode stock >/dev/null ||
	cannot "the loader failed for $pin_root/$id"
echo "kernel $(uname -r); tracker loaded in $pin_root/$id"

"$mark" -p "$pin_root/$id" read "$work/mnt/data"
read -r _ cached pages < <("$mark" resident "$work/mnt/data")
read -r _ records _ recorded _ largest < <("$mark" drain "$pin_root/$id" "$work/mnt/data")
read -r _ left _ < <("$mark" resident "$work/mnt/data")
echo "file: $pages pages, $cached cached after the marked read"
echo "tracker: $records records, $recorded pages in all, the largest folio $largest pages"
echo "after dropping what was recorded: $left pages cached"

fail=0
check() {
	if eval "$2"; then echo "ok: $1"; else echo "FAILED: $1"; fail=1; fi
}
check "the marked read cached the file ($cached of $pages pages)" "[ $cached -ge $((pages * 99 / 100)) ]"
check "large folios were made (largest $largest pages; with none this check proves nothing)" "[ $largest -gt 1 ]"
check "the recorded sizes add up to what the read cached ($recorded of $cached pages)" \
	"[ $recorded -ge $((cached * 99 / 100)) ] && [ $recorded -le $pages ]"
check "dropping the recorded folios dropped the file wholly ($left pages left)" "[ $left -le $((pages / 100)) ]"
if [ $fail = 0 ]; then echo "xfs-large-folio: PASS"; else echo "xfs-large-folio: FAIL"; fi
exit $fail
