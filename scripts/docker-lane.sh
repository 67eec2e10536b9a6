#!/usr/bin/env bash
# docker-lane.sh - pg_cache_ext with the server in a Docker container, set
# up as the README's "Containers" section tells a user to, as root.
#
#   1. Docker: Debian's docker.io (installed if missing; dockerd started for
#      the lane if none runs, and stopped again)
#   2. the image: lane 17's trixie chroot (scripts/lanes.sh) imported once
#      as a base image, then the extension built and installed in that
#      chroot (make install DESTDIR=...) copied in, and the image's postgres
#      account moved to ids the host has neither an account nor a group
#      for (999:999, those of Docker Hub's postgres image, where free);
#      /overlay-ts, a directory in the image's own file system (overlay2),
#      for a tablespace
#   3. the cluster's data directory on the host, bind-mounted into the
#      container; the loader run on the host with --user ID --group ID
#   4. the server's container runs without capabilities (--cap-drop ALL,
#      no-new-privileges, no network) as ID:ID in its own PID namespace,
#      with the host's pin root bind-mounted read-only and Docker's own
#      default seccomp profile
#      plus the bpf syscall (the profile comes from Debian's
#      golang-github-docker-docker-dev, the same source as docker.io)
#   5. a marked scan there is tracked and dropped to the budget, an unmarked
#      one is not (the control), and a marked scan of a table in the
#      overlay's tablespace is too; then the container without the pin root,
#      and with Docker's default profile: the server says what is missing
#      (the mount; bpf(2) refused), and queries run
#   6. user namespaces: a second dockerd with --userns-remap (an account
#      with subordinate ids, made for the lane and removed again), the
#      loader given the ids the server has on the host: active there too
#
# Prints TAP lines and "N passed, N failed, N skipped" (lanes.sh's lane
# "docker"); exit 1 on any failure.  The images stay for the next run
# (pce-docker-base:<chroot stamp>, pce-docker-test; the ones they replace
# are removed).  A dockerd the lane starts runs without iptables rules or
# a bridge, and is stopped at the end.
#
#   PCE_DOCKER_WORK=/var/tmp/pce-docker   work directory (data, profile, logs)
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$SRC"
WORK=${PCE_DOCKER_WORK:-/var/tmp/pce-docker}
DATA=$WORK/data
PINS=/run/pg_cache_ext/pins         # the loader's default pin root (pg_cache_ext.bpffs_dir's)
CTR_DATA=/var/lib/postgresql/data   # the data directory in the container
CONTAINER=pce-docker-pg
TEST_IMAGE=pce-docker-test
PG_MAJOR=17
BUDGET_MB=16
BATCH_MB=2                          # EVICT_BATCH_BYTES of src/evictor.c
LOADER=$SRC/loader/pg_cache_ext_loader

HERE=$SRC
. "$SRC/scripts/lanes.sh" --functions
SRC=$HERE
set +e # lanes.sh sets -e: a failed check must not end the lane
cd "$SRC" # lanes.sh went by $0, which is not this file when it is sourced

# uid and gid of the server in the container: the first id from 999 down
# that the host has neither an account nor a group for (a host group of
# that number could use the pins: they are given to the number)
free_id() {
	local id
	for id in $(seq 999 -1 900); do
		getent passwd "$id" >/dev/null || getent group "$id" >/dev/null || { echo "$id"; return 0; }
	done
	return 1
}
CTR_ID=$(free_id) || { echo "docker-lane.sh: no free id in 900-999" >&2; exit 1; }
# what the tests act on: the daemon, the data directory, and the server's
# ids as the host sees them (the same but in a user namespace)
DOCKER=(docker)
HOST_ID=$CTR_ID

. "$SRC/scripts/tap.sh"

# ---- 1. Docker ----

# dockerd ARGS... in the background for the lane, without iptables rules
# or a bridge (the host's firewall and interfaces are left alone) and not
# holding the lane's lock; its pid into DOCKERD_PID once `docker -H
# $1` answers.  $1: its socket, "" for the default; $2: its log.
start_dockerd() {
	local host=$1 log=$2 i
	shift 2
	dockerd --iptables=false --bridge=none "$@" >"$log" 2>&1 9>&- &
	DOCKERD_PID=$!
	for i in $(seq 60); do
		docker ${host:+-H "$host"} info >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	tail -20 "$log"
	return 1
}

# stop a dockerd this lane started (pid $1, if any)
stop_dockerd() {
	[ -n "$1" ] || return 0
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

STARTED_DOCKERD=
ensure_docker() {
	if ! command -v dockerd >/dev/null || ! command -v docker >/dev/null || ! command -v jq >/dev/null; then
		apt-get install -y -qq --no-install-recommends docker.io jq >/dev/null || return 1
	fi
	docker info >/dev/null 2>&1 && return 0
	# none runs (a machine without systemd): one for the lane
	start_dockerd "" "$WORK/dockerd.log" || return 1
	STARTED_DOCKERD=$DOCKERD_PID
}

# Docker's default seccomp profile, as the installed docker.io was built
# with it, and the same with the bpf syscall allowed: what the server's
# container needs (it only opens pinned maps, which file modes govern)
make_seccomp_profile() {
	local deb dir=$WORK/docker-dev default
	default=$dir/usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json
	if [ ! -f "$default" ]; then
		rm -rf "$dir" && mkdir -p "$dir"
		(cd "$WORK" && apt-get download -q golang-github-docker-docker-dev >/dev/null) || return 1
		deb=$(ls "$WORK"/golang-github-docker-docker-dev_*.deb | tail -1)
		dpkg-deb -x "$deb" "$dir" && rm -f "$deb" || return 1
	fi
	jq '.syscalls += [{"names": ["bpf"], "action": "SCMP_ACT_ALLOW", "args": []}]' \
		"$default" >"$WORK/seccomp-bpf.json"
}

# ---- 2. the image ----

# lane 17's chroot as a base image, imported again when the chroot changes
# (the images of other stamps removed)
base_image() {
	local root=$1 tag old
	tag=pce-docker-base:$(stat -c %Y "$root/.pce-stamp")
	if ! docker image inspect "$tag" >/dev/null 2>&1; then
		tar -C "$root" --exclude=./var/tmp --exclude=./var/cache/apt/archives --exclude=./proc \
			--exclude=./sys --exclude=./dev --exclude=./run --exclude=./usr/share/doc \
			--exclude=./usr/share/man -cf - . | docker import - "$tag" >/dev/null || return 1
	fi
	for old in $(docker image ls --format '{{.Repository}}:{{.Tag}}' pce-docker-base); do
		[ "$old" = "$tag" ] || docker rmi "$old" >/dev/null 2>&1
	done
	echo "$tag"
}

# the extension built in the chroot and installed below a staging directory
build_extension() {
	local root=$1 dst=$1/var/tmp/pce-docker-src
	rm -rf "$dst" "$root/var/tmp/pce-docker-stage"
	mkdir -p "$dst"
	tar -C "$SRC" --exclude=.git --exclude=tmp_check --exclude=results --exclude=./bench/out -cf - . |
		tar -C "$dst" -xf -
	in_root "$root" make -s -C /var/tmp/pce-docker-src clean >/dev/null 2>&1 || true
	in_root "$root" make -s -C /var/tmp/pce-docker-src >"$WORK/make.log" 2>&1 &&
		in_root "$root" make -s -C /var/tmp/pce-docker-src install \
			DESTDIR=/var/tmp/pce-docker-stage >>"$WORK/make.log" 2>&1
}

build_image() {
	local root=$CHROOTS/trixie base old
	# lane 17's chroot, made (set -e there) if it is not complete
	bash "$SRC/scripts/lanes.sh" --build "$PG_MAJOR" >"$WORK/chroot.log" 2>&1 ||
		{ tail -20 "$WORK/chroot.log"; return 1; }
	exec 8>"$CHROOTS/trixie.lock" # lane 17 uses the chroot too
	flock 8
	LANE_ROOT=$root
	mount_root "$root"
	build_extension "$root" || { tail -30 "$WORK/make.log"; umount_root "$root"; return 1; }
	umount_root "$root"
	LANE_ROOT=
	base=$(base_image "$root") || return 1
	old=$(docker image inspect -f '{{.Id}}' "$TEST_IMAGE" 2>/dev/null)
	# the staged files over the base, and postgres at the free ids (the
	# data directory's files then belong to them)
	printf 'FROM %s\nRUN groupmod -g %s postgres && usermod -u %s -g %s postgres && %s\nCOPY . /\n' \
		"$base" "$CTR_ID" "$CTR_ID" "$CTR_ID" "install -d -o postgres -g postgres -m 0700 /overlay-ts" |
		docker build --network none -q -t "$TEST_IMAGE" -f - "$root/var/tmp/pce-docker-stage" \
			>"$WORK/build.log" 2>&1 || { tail -20 "$WORK/build.log"; return 1; }
	[ -z "$old" ] || [ "$old" = "$(docker image inspect -f '{{.Id}}' "$TEST_IMAGE")" ] ||
		docker rmi "$old" >/dev/null 2>&1
	return 0
}

# ---- 3. the cluster and the loader ----

pg_bin() { echo "/usr/lib/postgresql/$PG_MAJOR/bin/$1"; }

init_cluster() {
	rm -rf "$DATA"
	mkdir -p "$DATA"
	chown "$HOST_ID:$HOST_ID" "$DATA"
	chmod 0700 "$DATA"
	"${DOCKER[@]}" run --rm --network none --user "$CTR_ID:$CTR_ID" -v "$DATA:$CTR_DATA" "$TEST_IMAGE" \
		"$(pg_bin initdb)" -D "$CTR_DATA" --auth=trust >"$WORK/initdb.log" 2>&1 || return 1
	cat >>"$DATA/postgresql.conf" <<-EOF
		shared_preload_libraries = 'pg_cache_ext'
		listen_addresses = ''
		unix_socket_directories = '/tmp'
		shared_buffers = 16MB
		fsync = off
		autovacuum = off
		max_parallel_workers_per_gather = 0
		pg_cache_ext.scan_budget = '${BUDGET_MB}MB'
	EOF
}

# ---- 4. the server's container ----

# $1: the seccomp profile ("" for Docker's default); $2: "nopins" to leave
# the pin root out of the container.  The pins are mounted read-only: the
# server only opens the maps, which a read-only mount does not refuse.
start_server() {
	local i opts=(--name "$CONTAINER" --network none --user "$CTR_ID:$CTR_ID" --cap-drop ALL
		--security-opt no-new-privileges -v "$DATA:$CTR_DATA")
	[ -z "$1" ] || opts+=(--security-opt "seccomp=$1")
	[ "${2:-}" = nopins ] || opts+=(-v "$PINS:$PINS:ro")
	"${DOCKER[@]}" rm -f "$CONTAINER" >/dev/null 2>&1
	"${DOCKER[@]}" run -d "${opts[@]}" "$TEST_IMAGE" "$(pg_bin postgres)" -D "$CTR_DATA" >/dev/null || return 1
	for i in $(seq 60); do
		"${DOCKER[@]}" exec "$CONTAINER" "$(pg_bin pg_isready)" -q -h /tmp && return 0
		sleep 0.5
	done
	"${DOCKER[@]}" logs "$CONTAINER" 2>&1 | tail -20
	return 1
}

stop_server() {
	"${DOCKER[@]}" rm -f "$CONTAINER" >/dev/null 2>&1 || true
}

psql_ctr() {
	"${DOCKER[@]}" exec "$CONTAINER" "$(pg_bin psql)" -h /tmp -X -q -At -d postgres -v ON_ERROR_STOP=1 "$@"
}

status_row() { psql_ctr -c "SELECT value FROM cache_ext_status() WHERE name = '$1'"; }
stat_value() { psql_ctr -c "SELECT value FROM cache_ext_stats() WHERE name = '$1'"; }
cached_mb() { psql_ctr -c "SELECT round(cached_bytes / 1048576.0, 1) FROM cache_ext_relation_cache('$1')"; }

# the table's pages out of the page cache, in the container (a tablespace
# may be in its own file system); written back first (fsync = off): dirty
# pages stay
drop_table_cache() {
	"${DOCKER[@]}" exec -w "$CTR_DATA" "$CONTAINER" sh -c \
		'for f in "$1"*; do sync "$f" && dd if="$f" iflag=nocache count=0 status=none; done' \
		sh "$(psql_ctr -c "SELECT pg_relation_filepath('$1')")"
}

# $1: a SET for the scanning session, $2 the table (default big); prints
# the table's cache (MB) once the worker has had 10 s to bring it within
# the budget
scan_cold() {
	local i mb bound=$((BUDGET_MB + BATCH_MB)) table=${2:-big}
	drop_table_cache "$table"
	psql_ctr -c "$1" -c "SELECT count(*) FROM $table" >/dev/null || return 1
	for i in $(seq 20); do
		mb=$(cached_mb "$table")
		awk -v m="$mb" -v b="$bound" 'BEGIN { exit !(m <= b) }' && break
		sleep 0.5
	done
	echo "$mb"
}

# ---- 5. the checks ----

test_accounts_and_pins() {
	local out dir mode
	out=$("$LOADER" -D "$DATA" --user "$HOST_ID" --group "$HOST_ID" 2>&1)
	check "the loader takes the server's ids as the host sees them, $HOST_ID:$HOST_ID, which it has no names for" \
		contains "$out" "maps group $HOST_ID, mode 0660"
	dir=$(sed -n 's/.*; pins in \([^ ]*\) (maps group.*/\1/p' <<<"$out")
	[ -n "$dir" ] && [ -e "$dir/scan_pids" ] || die "the loader pinned the maps" "$out"
	mode=$(stat -c '%g %a' "$dir/scan_pids")
	check "pinned maps are group $HOST_ID, mode 0660 ($mode)" test "$mode" = "$HOST_ID 660"
}

test_marked_scan() {
	local marks_before dropped_before marked control ns_pid
	local status
	status=$("${DOCKER[@]}" exec "$CONTAINER" cat /proc/1/status) # the postmaster's
	check "the server runs as $CTR_ID" contains "$status" $'^Uid:\t'"$CTR_ID"$'\t'
	check "without capabilities" contains "$status" $'^CapEff:\t0*$'
	ns_pid=$("${DOCKER[@]}" exec "$CONTAINER" sh -c 'echo $$')
	check "in a PID namespace of its own (a process there is PID $ns_pid, the postmaster PID 1)" \
		test "$("${DOCKER[@]}" exec "$CONTAINER" cat /proc/1/comm)" = postgres
	psql_ctr -c "CREATE EXTENSION pg_cache_ext" || die "CREATE EXTENSION in the container"
	check "cache_ext_status(): active ($(status_row reason))" test "$(status_row state)" = active
	check "on the stock mechanism" test "$(status_row mechanism)" = stock
	psql_ctr -c "CREATE TABLE big AS SELECT g, repeat('x', 900) AS pad FROM generate_series(1, 100000) g" \
		-c "CHECKPOINT" || die "a 96 MB table"
	# the control first: pages a drop found in use are retried for a while,
	# and dropped again if another reader read them back meanwhile
	control=$(scan_cold "SET pg_cache_ext.scan = off")
	check "the control: an unmarked scan leaves the table cached ($control MB)" \
		awk -v m="$control" 'BEGIN { exit !(m >= 85) }'
	marks_before=$(stat_value marks_seqscan)
	dropped_before=$(stat_value bytes_dropped)
	marked=$(scan_cold "SET pg_cache_ext.scan_threshold = 0")
	check "a marked scan leaves the table within budget + one batch: $marked MB cached of ~96 (budget $BUDGET_MB MB)" \
		awk -v m="$marked" -v b=$((BUDGET_MB + BATCH_MB)) 'BEGIN { exit !(m != "" && m <= b) }'
	check "the scan was marked (marks_seqscan $marks_before -> $(stat_value marks_seqscan))" \
		test "$(stat_value marks_seqscan)" -gt "$marks_before"
	check "and its pages dropped (bytes_dropped $dropped_before -> $(stat_value bytes_dropped))" \
		test "$(stat_value bytes_dropped)" -ge $((dropped_before + 60 * 1048576))
}

# a tablespace in the container's own overlay2 file system: stat() there
# names files by the overlay's device, the kernel by the layer's below
test_overlay_tablespace() {
	local fs marked control
	fs=$("${DOCKER[@]}" exec "$CONTAINER" stat -f -c %T /overlay-ts)
	check "/overlay-ts is on the container's overlay ($fs)" test "$fs" = overlayfs
	# copied unmarked: a marked copy's written pages wait for their
	# writeback, and were they dropped once clean after the control's scan
	# read them anew, the control would measure that drop
	psql_ctr -c "CREATE TABLESPACE overlay_ts LOCATION '/overlay-ts'" \
		-c "SET pg_cache_ext.scan = off" \
		-c "CREATE TABLE big_ov TABLESPACE overlay_ts AS SELECT * FROM big" -c "CHECKPOINT" ||
		die "a 96 MB table in a tablespace on the overlay"
	control=$(scan_cold "SET pg_cache_ext.scan = off" big_ov)
	check "the control: an unmarked scan of it leaves it cached ($control MB)" \
		awk -v m="$control" 'BEGIN { exit !(m >= 85) }'
	marked=$(scan_cold "SET pg_cache_ext.scan_threshold = 0" big_ov)
	check "a marked scan of it leaves within budget + one batch: $marked MB cached" \
		awk -v m="$marked" -v b=$((BUDGET_MB + BATCH_MB)) 'BEGIN { exit !(m != "" && m <= b) }'
	check "the server log names the overlay's device and the layer's" \
		contains "$("${DOCKER[@]}" logs "$CONTAINER" 2>&1)" "the overlay file system on device .* keeps its files on device"
}

# A server that cannot use the pins: idle, the reason ($2, a pattern) says
# what is missing, and queries run.  $1: what is wrong; the rest: how
# start_server is to start it.
check_idle_server() {
	local what=$1 pattern=$2 reason
	shift 2
	start_server "$@" || die "the server starts $what"
	reason=$(status_row reason)
	check "$what: idle" test "$(status_row state)" = idle
	check "and the reason says what is missing ($reason)" contains "$reason" "$pattern"
	check "queries run" test "$(psql_ctr -c "SET pg_cache_ext.scan_threshold = 0" -c "SELECT count(*) FROM big")" = 100000
	stop_server
}

# ---- 6. a user namespace: dockerd --userns-remap ----

USERNS_SOCK=/run/pce-docker-userns.sock
REMAP_USER=pce-remap
REMAP_BASE=1000000000 # its subordinate ids: 65536 from here

# the account dockerd maps containers' ids to, made for the lane and removed
# again (with its subordinate id ranges) if it was not there
ADDED_REMAP=
add_remap_account() {
	local f
	if ! getent passwd "$REMAP_USER" >/dev/null; then
		useradd --system --no-create-home --shell /usr/sbin/nologin "$REMAP_USER" || return 1
		ADDED_REMAP=1
	fi
	for f in /etc/subuid /etc/subgid; do
		grep -q "^$REMAP_USER:" "$f" 2>/dev/null || echo "$REMAP_USER:$REMAP_BASE:65536" >>"$f"
	done
	grep -q "^$REMAP_USER:$REMAP_BASE:65536$" /etc/subuid /etc/subgid
}

remove_remap_account() {
	[ -n "$ADDED_REMAP" ] || return 0
	sed -i "/^$REMAP_USER:/d" /etc/subuid /etc/subgid
	userdel "$REMAP_USER"
}

# a second dockerd, with user namespaces, beside whatever else runs
USERNS_DOCKERD=
start_userns_dockerd() {
	start_dockerd "unix://$USERNS_SOCK" "$WORK/dockerd-userns.log" --userns-remap="$REMAP_USER" \
		--data-root "$WORK/userns-docker" --exec-root /run/pce-docker-userns \
		-H "unix://$USERNS_SOCK" --pidfile /run/pce-docker-userns.pid || return 1
	USERNS_DOCKERD=$DOCKERD_PID
}

# the test image in that daemon, copied again when it changed
copy_image_to_userns() {
	local want
	want=$(docker image inspect -f '{{.Id}}' "$TEST_IMAGE")
	[ "$("${DOCKER[@]}" image inspect -f '{{.Id}}' "$TEST_IMAGE" 2>/dev/null)" = "$want" ] && return 0
	docker save "$TEST_IMAGE" | "${DOCKER[@]}" load -q >/dev/null
}

# The server's ids in the container are mapped to REMAP_BASE + id on the
# host: the loader gets those, the rest is as without a user namespace.
test_user_namespace() {
	local map marked
	add_remap_account || die "the remap account $REMAP_USER with ids from $REMAP_BASE"
	start_userns_dockerd || die "a dockerd with --userns-remap=$REMAP_USER"
	DOCKER=(docker -H "unix://$USERNS_SOCK") DATA=$WORK/data-userns HOST_ID=$((REMAP_BASE + CTR_ID))
	copy_image_to_userns || die "the image in the user-namespace daemon"
	init_cluster || die "initdb in a user namespace" "$(tail -20 "$WORK/initdb.log")"
	test_accounts_and_pins
	start_server "$WORK/seccomp-bpf.json" || die "the server starts in a user namespace"
	map=$("${DOCKER[@]}" exec "$CONTAINER" cat /proc/self/uid_map | tr -s ' \t' ' ')
	check "in a user namespace: uid_map '$map'" test "$map" = " 0 $REMAP_BASE 65536"
	psql_ctr -c "CREATE EXTENSION pg_cache_ext" || die "CREATE EXTENSION in a user namespace"
	check "cache_ext_status(): active ($(status_row reason))" test "$(status_row state)" = active
	psql_ctr -c "CREATE TABLE big AS SELECT g, repeat('x', 900) AS pad FROM generate_series(1, 100000) g" \
		-c "CHECKPOINT" || die "a 96 MB table in a user namespace"
	marked=$(scan_cold "SET pg_cache_ext.scan_threshold = 0")
	check "a marked scan leaves the table within budget + one batch: $marked MB cached" \
		awk -v m="$marked" -v b=$((BUDGET_MB + BATCH_MB)) 'BEGIN { exit !(m != "" && m <= b) }'
	stop_server
	"$LOADER" --unload -D "$DATA" --user "$HOST_ID" >/dev/null 2>&1
}

cleanup() {
	docker rm -f "$CONTAINER" >/dev/null 2>&1
	[ -z "$USERNS_DOCKERD" ] || docker -H "unix://$USERNS_SOCK" rm -f "$CONTAINER" >/dev/null 2>&1
	stop_dockerd "$USERNS_DOCKERD"
	remove_remap_account
	[ -z "${LANE_ROOT:-}" ] || umount_root "$LANE_ROOT"
	[ -x "$LOADER" ] && [ -d "$DATA" ] && "$LOADER" --unload -D "$DATA" --user "$HOST_ID" >/dev/null 2>&1
	stop_dockerd "$STARTED_DOCKERD"
	damon_holder resume
}

# DAMON paused while the lane runs (test/root-helper damon-pause, the lane
# one holder among the tests): its pageout scheme pages out page cache read
# moments ago in regions idle for long, and the controls ask what stays
# cached (PceTest.pm's pause_damon says what was measured)
damon_holder() {
	bash "$SRC/test/root-helper" "damon-$1" $$ >/dev/null 2>&1 || true
}

main() {
	[ "$(id -u)" -eq 0 ] || { echo "docker-lane.sh: run as root" >&2; exit 1; }
	mkdir -p "$WORK"
	exec 9>"$WORK.lock"
	flock 9
	trap cleanup EXIT
	trap 'exit 1' INT TERM HUP
	damon_holder pause
	ensure_docker || die "Docker runs (docker.io; log: $WORK/dockerd.log)"
	make_seccomp_profile || die "Docker's default seccomp profile, with bpf allowed"
	make -s -C "$SRC" loader/pg_cache_ext_loader >"$WORK/loader-make.log" 2>&1 ||
		die "the loader builds on the host" "$(tail -20 "$WORK/loader-make.log")"
	build_image || die "the image: PostgreSQL $PG_MAJOR and the extension"
	ok "image $TEST_IMAGE: PostgreSQL $PG_MAJOR of Debian 13 with the extension"
	init_cluster || die "initdb in the container" "$(tail -20 "$WORK/initdb.log")"
	test_accounts_and_pins
	start_server "$WORK/seccomp-bpf.json" ||
		die "the server starts without capabilities, Docker's profile plus bpf"
	test_marked_scan
	test_overlay_tablespace
	stop_server
	check_idle_server "without the pin root mounted" \
		"in a container, bind-mount the host's pin root at $PINS" "$WORK/seccomp-bpf.json" nopins
	# Docker's own profile forbids bpf(2) to a container without CAP_SYS_ADMIN
	check_idle_server "under Docker's default seccomp profile" \
		'bpf(2) refused .*(EPERM): a seccomp profile' ""
	"$LOADER" --unload -D "$DATA" --user "$HOST_ID" >/dev/null 2>&1
	test_user_namespace
	summary
}

[ "${1:-}" = --functions ] || main
