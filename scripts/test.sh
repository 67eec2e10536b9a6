#!/usr/bin/env bash
# test.sh - run the whole test suite of pg_cache_ext, as root, on Debian 12.
#
#   1. scripts/setup.sh: packages, bpffs, build, install
#   2. a copy of the tree owned by postgres (PostgreSQL refuses to run as
#      root, so the tests run as postgres), and a sudo rule that lets
#      postgres run test/root-helper -- and nothing else -- as root
#   3. pg_regress (sql/, expected/) against a cluster with the loader run
#   4. the TAP tests (t/*.pl, t/*.t) through PGXS's prove_installcheck as
#      postgres, and the kernel-lab tests (t/09*) as root
#   5. the sudo rule and the root helper are removed (also on any other
#      exit: trap), and a last test checks that postgres has no root door left
#   6. a summary line "N passed, N failed, N skipped"; exit 1 on any failure
#
# PCE_TESTS="t/001_foundation.pl ..." runs only those TAP tests.
#
# Run by hand (or by .ci/run), it runs every lane through scripts/lanes.sh:
# this suite on the host's PostgreSQL, and PostgreSQL 17 and 18 in chroots
# (PCE_LANES="15" for the host alone); lanes.sh runs it again per lane.
set -uo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
[ -n "${PCE_IN_LANE:-}" ] || exec bash scripts/lanes.sh

if [ "$(id -u)" -ne 0 ]; then
	echo "test.sh: run as root (the loader and the memory cgroups need it)" >&2
	exit 1
fi
bash scripts/setup.sh || { echo "test.sh: setup failed"; echo "0 passed, 1 failed"; exit 1; }

BINDIR=$(pg_config --bindir)
WORK=${PCE_WORK:-/var/tmp/pce-test}
PORT=${PCE_PORT:-55432}
HELPER=/usr/local/libexec/pg_cache_ext-test-root-helper
FAKE_IO_WORKER=/usr/local/libexec/pg_cache_ext-test-fake-io-worker	# run by the helper as root
LOG=$WORK/regress-output.log
TAPLOG=$WORK/tap-output.log

cleanup() {
	if [ -f "$WORK/regress-data/postmaster.pid" ]; then
		runuser -u postgres -- "$BINDIR/pg_ctl" -D "$WORK/regress-data" -m immediate -w stop >/dev/null 2>&1
	fi
	[ -d "$WORK/regress-data" ] && "$BINDIR/pg_cache_ext_loader" --unload -D "$WORK/regress-data" >/dev/null 2>&1
	# clusters the TAP tests left running after a failure
	pkill -u postgres -f "postgres -D $WORK/tree/tmp_check" 2>/dev/null || true
	# DAMON back on if a test killed before its resume held it paused
	[ -x "$HELPER" ] && { "$HELPER" damon-resume >/dev/null 2>&1 || true; }
	rm -f /etc/sudoers.d/pg_cache_ext_test "$HELPER" "$FAKE_IO_WORKER"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

cleanup
rm -rf "$WORK"
mkdir -p "$WORK"
tar -C "$SRC" --exclude=.git --exclude=tmp_check --exclude=results -cf - . | tar -C "$WORK" -xf - --one-top-level=tree
chown -R postgres:postgres "$WORK"

install -D -m 0755 -o root -g root test/root-helper "$HELPER"
install -D -m 0755 -o root -g root test/pce_fake_io_worker "$FAKE_IO_WORKER"
echo "postgres ALL=(root) NOPASSWD: $HELPER" > /etc/sudoers.d/pg_cache_ext_test
chmod 0440 /etc/sudoers.d/pg_cache_ext_test

# ---- pg_regress against a cluster with the extension and the loader ----
as_pg() { runuser -u postgres -- "$@"; }
as_pg "$BINDIR/initdb" -D "$WORK/regress-data" -A trust >/dev/null
cat >> "$WORK/regress-data/postgresql.conf" <<CONF
shared_preload_libraries = 'pg_cache_ext'
port = $PORT
unix_socket_directories = '$WORK'
listen_addresses = ''
shared_buffers = 32MB
CONF
"$BINDIR/pg_cache_ext_loader" -D "$WORK/regress-data" || { echo "0 passed, 1 failed"; exit 1; }
as_pg "$BINDIR/pg_ctl" -D "$WORK/regress-data" -l "$WORK/regress.log" -w start >/dev/null

cd "$WORK/tree"
as_pg make -s installcheck TAP_TESTS= PGHOST="$WORK" PGPORT="$PORT" 2>&1 | tee "$LOG"
make_rc=${PIPESTATUS[0]}
[ "$make_rc" -ne 0 ] && cat regression.diffs 2>/dev/null | head -100
# t/09x tests boot the cache_ext kernel under QEMU and need root; the rest
# run as postgres
all_tests=${PCE_TESTS:-$(ls t/*.pl t/*.t 2>/dev/null | sort)}
pg_tests=$(printf '%s\n' $all_tests | grep -v '^t/09' || true)
root_tests=$(printf '%s\n' $all_tests | grep '^t/09' || true)
: > "$TAPLOG"
if [ -n "$pg_tests" ]; then
	as_pg make -s prove-installcheck PROVE_FLAGS="--verbose" PROVE_TESTS="$(echo $pg_tests)" 2>&1 | tee -a "$TAPLOG"
	[ "${PIPESTATUS[0]}" -ne 0 ] && make_rc=1
fi
if [ -n "$root_tests" ]; then
	# the lab sits beside the source checkout, not beside this copy
	if [ -z "${PCE_KERNEL_LAB:-}" ] && [ -x "$SRC/../shared/kernel-lab/run-in-vm" ]; then
		export PCE_KERNEL_LAB=$(cd "$SRC/../shared/kernel-lab" && pwd)
	fi
	prove --verbose -I t $root_tests 2>&1 | tee -a "$TAPLOG"
	[ "${PIPESTATUS[0]}" -ne 0 ] && make_rc=1
fi

# ---- no root door left: the rule and the helper go, postgres cannot sudo ----
cleanup
if [ ! -e /etc/sudoers.d/pg_cache_ext_test ] && [ ! -e "$HELPER" ] && [ ! -e "$FAKE_IO_WORKER" ] &&
	! sudo -n -l -U postgres 2>/dev/null | grep -q pg_cache_ext; then
	echo "ok 1 - no sudo rule remains" | tee -a "$TAPLOG"
else
	echo "not ok 1 - no sudo rule remains: $(ls /etc/sudoers.d/pg_cache_ext_test "$HELPER" 2>&1)" | tee -a "$TAPLOG"
	make_rc=1
fi

# ---- summary ----
# pg_regress prints "test x ... ok" up to 15, "ok 1 - x" from 16 on
regress_ok=$(grep -cE ' \.\.\. ok |^ok [0-9]+ ' "$LOG" || true)
regress_failed=$(grep -cE ' \.\.\. FAILED|^not ok [0-9]+ ' "$LOG" || true)
tap_ok=$(grep -cE '^ *ok [0-9]+( - |$)' "$TAPLOG" || true)
tap_skipped=$(grep -ciE '^ *ok [0-9]+ # skip|^t/.* skipped: ' "$TAPLOG" || true)
tap_failed=$(grep -cE '^ *not ok [0-9]+' "$TAPLOG" || true)
bad_files=$(grep -oE 'Failed [0-9]+/[0-9]+ test programs' "$TAPLOG" | grep -oE '^Failed [0-9]+' | grep -oE '[0-9]+' || true)
passed=$((regress_ok + tap_ok))
failed=$((regress_failed + tap_failed))
if [ "$make_rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
	failed=${bad_files:-1}
fi
echo
echo "$passed passed, $failed failed, $tap_skipped skipped"
[ "$make_rc" -eq 0 ] && [ "$failed" -eq 0 ]
