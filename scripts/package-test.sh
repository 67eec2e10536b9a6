#!/usr/bin/env bash
# package-test.sh - build pg_cache_ext's Debian packages from a clean copy of
# the tree, install them, and test the installed files, as root.
#
#   1. dpkg-buildpackage -us -uc -b in a copy of the tree's files (git
#      ls-files: what a fresh clone has), and lintian: no errors
#   2. under /var/tmp/pce-host.lock (unless a caller holds it): what make
#      install put into the system PostgreSQL is saved, the packages are
#      installed over it
#   3. a cluster of that PostgreSQL loads the installed module, the packaged
#      loader (/usr/sbin) is run for it, and pg_regress runs the tree's
#      regression tests (REGRESS of the Makefile) against it: pg_buildext
#      installcheck's job, with the loader run as root first
#   4. prometheus-postgres-exporter, with monitoring/'s queries file as the
#      package installs it, scrapes that cluster on loopback: every counter
#      has its metric with help text, the extension is active, and the
#      counters move after a marked scan
#   5. the packages are purged and the saved files put back (also on failure)
#
# Prints TAP lines and "N passed, N failed, N skipped" (lanes.sh's lane
# "pkg"); exit 1 on any failure.
#
#   PCE_PKG_WORK=/var/tmp/pce-pkg   work directory (build, cluster, logs)
#   PCE_PKG_PORT=55490              the cluster's port (unix socket only)
#   PCE_PKG_EXPORTER_PORT=55491     the exporter's port on 127.0.0.1
#   PCE_PKG_REUSE_BUILD=1           test the packages of the last build again
set -uo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
WORK=${PCE_PKG_WORK:-/var/tmp/pce-pkg}
PORT=${PCE_PKG_PORT:-55490}
EXPORTER_PORT=${PCE_PKG_EXPORTER_PORT:-55491}
HOST_LOCK=/var/tmp/pce-host.lock
BUILD_PKGS="dpkg-dev debhelper fakeroot postgresql-server-dev-all lintian"
TEST_PKGS="prometheus-postgres-exporter curl"

. "$SRC/scripts/tap.sh"

# ---- 1. build ----

install_missing() {
	local p missing=""
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	echo "package-test.sh: installing$missing"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

# the tree as a fresh clone has it (tracked and new files, nothing ignored)
copy_tree() {
	rm -rf "$WORK/build"
	mkdir -p "$WORK/build/src"
	if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
		git -C "$SRC" ls-files -z -co --exclude-standard | (cd "$SRC" && tar --null -cf - -T -) |
			tar -C "$WORK/build/src" -xf -
	else
		tar -C "$SRC" --exclude=.git --exclude=tmp_check --exclude=results -cf - . | tar -C "$WORK/build/src" -xf -
		make -s -C "$WORK/build/src" clean >/dev/null 2>&1 || true
	fi
}

# debian/control names the packages of the PostgreSQL versions this release
# supports (pg_buildext updatecontrol): another release than the one it was
# generated on (a chroot lane) gets its own, in the copy
prepare_control() {
	(cd "$WORK/build/src" && pg_buildext checkcontrol >/dev/null 2>&1) && return 0
	echo "# debian/control regenerated for PostgreSQL $(cd "$WORK/build/src" && pg_buildext supported-versions | xargs)"
	(cd "$WORK/build/src" && pg_buildext updatecontrol)
}

# what dpkg-checkbuilddeps misses, first alternatives, without versions
install_build_deps() {
	local unmet
	unmet=$(cd "$WORK/build/src" && dpkg-checkbuilddeps 2>&1 | sed -n 's/.*[Uu]nmet build dependencies: //p')
	[ -z "$unmet" ] && return 0
	install_missing $(echo "$unmet" | sed -E 's/\([^)]*\)//g; s/\| *[^ ]+//g; s/:native//g')
}

build_packages() {
	local t0=$SECONDS lint
	if [ -n "${PCE_PKG_REUSE_BUILD:-}" ] && ls "$WORK"/build/*.deb >/dev/null 2>&1; then
		echo "# PCE_PKG_REUSE_BUILD: the packages of the last build"
		return 0
	fi
	copy_tree
	prepare_control
	install_build_deps
	(cd "$WORK/build/src" && dpkg-buildpackage -us -uc -b) >"$WORK/build.log" 2>&1 ||
		die "dpkg-buildpackage -us -uc -b builds the packages" "$(tail -30 "$WORK/build.log")"
	ok "dpkg-buildpackage -us -uc -b builds the packages ($((SECONDS - t0)) s): $(cd "$WORK/build" && echo *.deb)"
	lint=$(lintian --tag-display-limit 0 "$WORK"/build/*.changes 2>&1 | grep -v 'running with root privileges')
	echo "$lint" | sed 's/^/# lintian: /'
	if echo "$lint" | grep -q '^E: '; then
		not_ok "lintian: no errors" "$(echo "$lint" | grep '^E: ')"
	else
		ok "lintian: no errors ($(echo "$lint" | grep -c '^W: ') warnings)"
	fi
}

# ---- 2. install over the system PostgreSQL, and back ----

# Is the host lock held by one of our ancestors (flock ... bash .ci/run)?
# Taking it again would wait for ourselves.
ancestor_holds_lock() {
	local ino holder p
	[ -e "$HOST_LOCK" ] || return 1
	ino=$(stat -c %i "$HOST_LOCK")
	for holder in $(awk -v ino="$ino" '$2 == "FLOCK" { split($6, d, ":"); if (d[3] == ino) print $5 }' /proc/locks); do
		p=$$
		while [ -n "$p" ] && [ "$p" -gt 1 ]; do
			[ "$p" = "$holder" ] && return 0
			p=$(ps -o ppid= -p "$p" | tr -d ' ')
		done
	done
	return 1
}

take_host_lock() {
	ancestor_holds_lock && { echo "# host lock held by a caller"; return 0; }
	exec 8>>"$HOST_LOCK"
	echo "# waiting for $HOST_LOCK"
	flock 8
}

# what make install put into the system PostgreSQL (the host lane's build)
system_files() {
	local pc=$1
	ls -d "$($pc --pkglibdir)"/pg_cache_ext.so "$($pc --pkglibdir)"/bitcode/pg_cache_ext* \
		"$($pc --sharedir)"/extension/pg_cache_ext* "$($pc --bindir)"/pg_cache_ext_loader 2>/dev/null
}

save_system_files() {
	local files
	files=$(system_files "$PG_CONFIG")
	rm -f "$WORK/saved.tar"
	[ -n "$files" ] && tar -cPf "$WORK/saved.tar" $files
	return 0
}

restore_system_files() {
	local pkgs
	pkgs=$(dpkg-query -W -f='${Package} ${Status}\n' 'postgresql-*-cache-ext' pg-cache-ext-loader 2>/dev/null |
		awk '/ installed$/ || / config-files$/ || / half-/ {print $1}')
	[ -n "$pkgs" ] && dpkg --purge $pkgs >/dev/null
	[ -f "$WORK/saved.tar" ] && tar -xPf "$WORK/saved.tar"
	rm -f "$WORK/saved.tar"
}

install_packages() {
	local debs
	debs=$(ls "$WORK"/build/*.deb | grep -v -- '-dbgsym_')
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $debs >"$WORK/install.log" 2>&1 ||
		die "the packages install" "$(tail -20 "$WORK/install.log")"
	ok "the packages install: $(dpkg-query -W -f='${Package} ${Version}, ' 'postgresql-*-cache-ext' pg-cache-ext-loader)"
	check "the module, the extension's files and the loader are the packages' files" \
		dpkg -S "$($PG_CONFIG --pkglibdir)/pg_cache_ext.so" "$($PG_CONFIG --sharedir)/extension/pg_cache_ext.control" \
		"$($PG_CONFIG --sharedir)/extension/pg_cache_ext--1.0--1.1.sql" \
		"$($PG_CONFIG --sharedir)/extension/pg_cache_ext--1.1--1.2.sql" /usr/sbin/pg_cache_ext_loader \
		"$($PG_CONFIG --bindir)/pg_cache_ext_loader"
	check "the postgresql@.service drop-in and the exporter's queries file are installed" \
		test -f "$(dpkg -L pg-cache-ext-loader | grep 'postgresql@.service.d/.*\.conf$' | head -1)" -a \
		-f /usr/share/pg-cache-ext/prometheus-postgres-exporter.yaml
}

# ---- 3. a cluster with the installed files, and pg_regress ----

as_pg() { runuser -u postgres -- "$@"; }
psql_pg() { as_pg "$BINDIR/psql" -X -q -At -h "$WORK" -p "$PORT" -d postgres -v ON_ERROR_STOP=1 "$@"; }

stop_cluster() {
	[ -f "$WORK/data/postmaster.pid" ] &&
		as_pg "$BINDIR/pg_ctl" -D "$WORK/data" -m immediate -w stop >/dev/null 2>&1
	[ -d "$WORK/data" ] && /usr/sbin/pg_cache_ext_loader --unload -D "$WORK/data" >/dev/null 2>&1
	return 0
}

start_cluster() {
	chown postgres: "$WORK"
	as_pg "$BINDIR/initdb" -D "$WORK/data" -A trust >/dev/null || die "initdb"
	cat >>"$WORK/data/postgresql.conf" <<-CONF
		shared_preload_libraries = 'pg_cache_ext'
		port = $PORT
		unix_socket_directories = '$WORK'
		listen_addresses = ''
		shared_buffers = 32MB
	CONF
	# from 18 on, I/O workers would read the marked scan's pages (README, Requirements)
	[ "$($PG_CONFIG --version | sed -E 's/^[^0-9]*([0-9]+).*/\1/')" -ge 18 ] &&
		echo "io_method = sync" >>"$WORK/data/postgresql.conf"
	/usr/sbin/pg_cache_ext_loader -D "$WORK/data" >"$WORK/loader.log" 2>&1 ||
		die "the packaged loader runs for the cluster" "$(cat "$WORK/loader.log")"
	as_pg "$BINDIR/pg_ctl" -D "$WORK/data" -l "$WORK/server.log" -w start >/dev/null ||
		die "the cluster starts with the installed module" "$(tail -20 "$WORK/server.log")"
}

run_regress() {
	local tests pg_regress
	tests=$(sed -n 's/^REGRESS = //p' "$SRC/Makefile")
	pg_regress=$($PG_CONFIG --pkglibdir)/pgxs/src/test/regress/pg_regress
	rm -rf "$WORK/regress"
	mkdir -p "$WORK/regress"
	cp -r "$SRC/sql" "$SRC/expected" "$WORK/regress/"
	chown -R postgres: "$WORK/regress"
	(cd "$WORK/regress" && as_pg "$pg_regress" --inputdir=. --outputdir=. --bindir="$BINDIR" \
		--host="$WORK" --port="$PORT" --dbname=contrib_regression $tests) >"$WORK/regress.log" 2>&1
	local rc=$?
	sed 's/^/# /' "$WORK/regress.log"
	if [ "$rc" -eq 0 ]; then
		ok "pg_regress against the installed extension: $tests"
	else
		not_ok "pg_regress against the installed extension: $tests" "$(head -60 "$WORK/regress/regression.diffs")"
	fi
}

# ---- 4. the exporter ----

scrape() { curl -sf "http://127.0.0.1:$EXPORTER_PORT/metrics"; }

# the value of a metric in a scrape, of its first series that has the label
# given (the exporter adds its own, server="...")
metric() { awk -v name="$2" -v label="${3:-}" 'index($0, name "{") == 1 && index($0, label) {print $NF; exit}' "$1"; }

start_exporter() {
	local i
	# setpriv execs: $! is the exporter itself
	DATA_SOURCE_NAME="host=$WORK port=$PORT user=postgres dbname=postgres sslmode=disable" \
		setpriv --reuid=postgres --regid=postgres --init-groups prometheus-postgres-exporter --web.listen-address="127.0.0.1:$EXPORTER_PORT" \
		--extend.query-path=/usr/share/pg-cache-ext/prometheus-postgres-exporter.yaml \
		--disable-settings-metrics --log.level=warn >"$WORK/exporter.log" 2>&1 &
	EXPORTER_PID=$!
	for i in $(seq 1 50); do
		scrape >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	die "the exporter answers on 127.0.0.1:$EXPORTER_PORT" "$(cat "$WORK/exporter.log")"
}

stop_exporter() {
	[ -n "${EXPORTER_PID:-}" ] && kill "$EXPORTER_PID" 2>/dev/null && wait "$EXPORTER_PID" 2>/dev/null
	EXPORTER_PID=""
	return 0
}

# every counter of cache_ext_stats() has a metric with its own help text
check_metric_names() {
	local scrape=$1 name missing=""
	for name in $(psql_pg -c "SELECT name FROM cache_ext_stats()"); do
		case "$name" in
		marks_*)
			grep -q "^pg_cache_ext_reason_marks{.*reason=\"${name#marks_}\"" "$scrape" || missing="$missing $name" ;;
		*)
			grep -q "^# HELP pg_cache_ext_$name " "$scrape" && ! grep -q "^# HELP pg_cache_ext_$name Unknown metric" "$scrape" ||
				missing="$missing $name" ;;
		esac
	done
	if [ -z "$missing" ]; then
		ok "every counter of cache_ext_stats() is a metric with help text"
	else
		not_ok "every counter of cache_ext_stats() is a metric with help text" \
			"no metric (or no help text) in monitoring/prometheus-postgres-exporter.yaml for:$missing"
	fi
}

# a table read once with its pages out of the page cache, by a marked session
marked_cold_scan() {
	local file
	psql_pg -c "CREATE TABLE pce_exporter AS SELECT g, repeat('x', 200) AS pad FROM generate_series(1, 40000) g" \
		-c "CHECKPOINT" >/dev/null
	for file in "$WORK/data/$(psql_pg -c "SELECT pg_relation_filepath('pce_exporter')")"*; do
		dd if="$file" iflag=nocache count=0 status=none # drops the file's clean pages
	done
	psql_pg -c "SET pg_cache_ext.scan = on" -c "SELECT count(*) FROM pce_exporter" >/dev/null
}

test_exporter() {
	local before=$WORK/metrics.before after=$WORK/metrics.after m b a
	psql_pg -c "CREATE EXTENSION pg_cache_ext" >/dev/null
	start_exporter
	scrape >"$before"
	check_metric_names "$before"
	check "pg_cache_ext_status_active is 1 and the loader is reachable" \
		test "$(metric "$before" pg_cache_ext_status_active)/$(metric "$before" pg_cache_ext_status_loader_reachable)" = 1/1
	marked_cold_scan
	sleep 0.5
	scrape >"$after"
	for m in pg_cache_ext_marks pg_cache_ext_folios_added_scan 'pg_cache_ext_reason_marks reason="session"'; do
		b=$(metric "$before" $m) a=$(metric "$after" $m)
		check "after a marked scan, $m moves ($b -> $a)" awk -v b="${b:-x}" -v a="${a:-x}" \
			'BEGIN { exit !(a != "x" && b != "x" && a + 0 > b + 0) }'
	done
	stop_exporter
}

# ---- main ----

purged() {
	! dpkg-query -W -f='${Status}\n' 'postgresql-*-cache-ext' pg-cache-ext-loader 2>/dev/null | grep -q 'installed' &&
		[ ! -e /usr/sbin/pg_cache_ext_loader ] && [ -z "$(ls /lib/systemd/system/postgresql@.service.d/pg_cache_ext* 2>/dev/null)" ] &&
		{ [ -z "${SAVED_FILES:-}" ] || [ "$(system_files "$PG_CONFIG")" = "$SAVED_FILES" ]; }
}

cleanup() {
	stop_exporter
	stop_cluster
	restore_system_files
}

main() {
	[ "$(id -u)" -eq 0 ] || { echo "package-test.sh: run as root" >&2; exit 1; }
	mkdir -p "$WORK"
	install_missing $BUILD_PKGS $TEST_PKGS || die "the build and test packages install"
	build_packages
	take_host_lock
	PG_CONFIG=/usr/lib/postgresql/$(cd "$WORK/build/src" && pg_buildext supported-versions | tail -1)/bin/pg_config
	[ -x "$PG_CONFIG" ] || PG_CONFIG=$(command -v pg_config)
	BINDIR=$($PG_CONFIG --bindir)
	trap cleanup EXIT
	trap 'exit 1' INT TERM HUP
	stop_cluster
	rm -rf "$WORK/data"
	save_system_files
	SAVED_FILES=$(system_files "$PG_CONFIG")
	install_packages
	start_cluster
	run_regress
	test_exporter
	cleanup
	trap - EXIT
	check "purged: no file of the packages is left, what make install had put there is back" \
		purged
	summary
}

main "$@"
