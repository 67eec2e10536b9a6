#!/bin/bash
# Where each marked reader of a cluster reads, every half second, for a
# while: the tracker's scan_positions map (read through the pins with
# bpftool) beside what each process runs (pg_stat_activity).
#
#   bench/positions.sh PGDATA PORT SOCKET_DIR SECONDS [BPFFS_DIR]
#
# One line per reader and sample: seconds since the start, PID, what it
# runs (count, dump for COPY, vac for VACUUM, other), the inode of the
# file it last read (a relation's segments of 1 GB are files of their
# own), the MB of that file it last read at, and the MB where its
# statement started reading the file (a synchronized scan starts
# mid-table); with a VACUUM running, each line ends with the heap block it
# is at.  Readers at the
# same MB read together; each other place is one more stream the disk
# serves (bench/siblings.sh's POSITIONS=1 keeps this per window).  Needs
# root (the pins) and bpftool; a cluster without a read hook has no
# positions, and the output is empty.
set -euo pipefail

[ $# -ge 4 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
PGDATA=$1 PORT=$2 SOCK=$3 SECONDS_RUN=$4 BPFFS_DIR=${5:-/run/pg_cache_ext/pins}
BIN=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
PSQL=("$BIN/psql" -X -At -h "$SOCK" -p "$PORT" -U postgres -d postgres -F ' ')

# the cluster's pin directory, by the rule of bpf/pce_paths.h
sysid=$("$BIN/pg_controldata" -D "$PGDATA" | awk -F: '/Database system identifier/ { gsub(/ /, "", $2); print $2 }')
pins=$BPFFS_DIR/$sysid-$(stat -c '%d-%i' "$PGDATA")
[ -e "$pins/scan_positions" ] || { echo "no scan_positions pin in $pins" >&2; exit 1; }

t0=$(date +%s.%N)
end=$(( $(date +%s) + SECONDS_RUN ))
while [ "$(date +%s)" -lt "$end" ]; do
	kinds=$("${PSQL[@]}" -c "SELECT pid, CASE WHEN query ~* '^VACUUM' THEN 'vac' WHEN query ~* '^COPY'
		THEN 'dump' WHEN query ~* 'count' THEN 'count' ELSE 'other' END FROM pg_stat_activity
		WHERE state = 'active'" 2>/dev/null || true)
	vac=$("${PSQL[@]}" -c "SELECT string_agg(heap_blks_scanned::text, ',') FROM pg_stat_progress_vacuum" 2>/dev/null || true)
	t=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
	bpftool -j map dump pinned "$pins/scan_positions" 2>/dev/null | python3 -c '
import json, sys
t, kinds, vac = sys.argv[1], dict(l.split() for l in sys.argv[2].splitlines() if l.strip()), sys.argv[3]
try:
    entries = json.load(sys.stdin)
except ValueError:
    sys.exit(0)
for e in entries:
    f = e.get("formatted", {})
    pos = f.get("value")
    if pos is None:
        continue
    pid = str(f["key"])
    # pages of 4 kB within the file, as MB
    print(t, pid, kinds.get(pid, "other"), pos["ino"], pos["index"] // 256, pos["start_index"] // 256,
          "vacuum_block=" + vac if vac else "")
' "$t" "$kinds" "$vac"
	sleep 0.4
done
