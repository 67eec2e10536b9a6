#!/usr/bin/env bash
# demo.sh - what pg_cache_ext saves, in a few minutes, on a fresh Debian 12
# machine.  Run as root from the source tree:
#
#     sudo scripts/demo.sh
#
# Installs and builds (scripts/setup.sh), then runs the benchmark's short mode
# with three configurations on the same data, interleaved:
#   (a) no extension, (b) pg_cache_ext with the stock-kernel mechanism,
#   (z) the OLTP load alone, without scans,
# and says in plain words what the extension changed.  Extra arguments go to
# bench/run.sh (e.g. --no-throttle).  Details: bench/out/latest/.
# The backup variant (a tar of the data directory outside the server, under
# pg_cache_ext_run in (b)):  WORKLOADS=uniform:tar sudo scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
	echo "demo.sh: run as root (it installs packages, loads BPF programs and makes cgroups)" >&2
	exit 1
fi

echo "== 1/3 install and build (scripts/setup.sh)"
bash scripts/setup.sh

echo
echo "== 2/3 benchmark, short mode: (a) no extension, (b) pg_cache_ext, (z) no scans"
bash bench/run.sh --short --configs a,b,z "$@"

out=bench/out/latest
echo
echo "== 3/3 what pg_cache_ext saved"
if [ -s "$out/summary.txt" ]; then
	fold -s -w 100 "$out/summary.txt"
else
	echo "(no summary: see $out)"
fi
perl -ne 'print "  $_" if /^targets for|^note:|^      contention/' "$out/report.txt" 2>/dev/null || true
echo
echo "Table: $out/report.txt   plot: $out/latency.png   data: $out/results.csv, $out/results.json"
