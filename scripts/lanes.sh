#!/usr/bin/env bash
# lanes.sh - run the test suite of pg_cache_ext on every PostgreSQL it
# supports, one "lane" per major version, as root.
#
#   lane 15 (Debian 12 bookworm), 17 (Debian 13 trixie), 18 (Debian forky)
#   lane pkg: scripts/package-test.sh on the host, last: the Debian packages
#             built from the tree, installed, tested, and purged again;
#             pkg-17, pkg-18: the same in a chroot lane's chroot
#   lane docker: scripts/docker-lane.sh: the server in an unprivileged Docker
#             container (an image made from lane 17's chroot), the loader
#             on the host
#   lane vm12, vm13: the deployment test in QEMU VMs that boot Debian 12's and
#   13's own kernels (6.1, 6.12) with systemd and PostgreSQL 15, 17
#   (scripts/vm-lane.sh; images built once below /var/tmp/pce-vms)
#
# The lane whose Debian release is the host's runs scripts/test.sh on the
# host: the whole suite, kernel lab included.  Every other lane runs in a
# debootstrap chroot below /var/tmp/pce-chroots/SUITE (built once, reused
# while its stamp matches the package list): build, install, pg_regress and
# the TAP tests that do not need the kernel lab (t/0[0-8]*).  The chroot
# shares this kernel, so BPF, cgroups and the page cache are real; /proc,
# /sys, /dev, /dev/pts, /dev/shm, /sys/fs/cgroup and /sys/fs/bpf are mounted
# in for the lane and unmounted when it ends, also on failure.
#
# Lanes run one after the other (t/010 and t/015 drop the machine's page
# cache), but the VM lanes side by side (run_vm_lanes).
#
# Each lane prints "lane NN (...): N passed, N failed, N skipped, TIME"; the
# last line sums them all: "N passed, N failed, N skipped".  Exit 1 on any
# failure.
#
#   PCE_LANES="15"        only these lanes (default "15 17 18"; with
#                         PCE_TESTS set, only the host's lane)
#   PCE_LANE_REBUILD=1    rebuild the chroots even if complete
#   PCE_LANE_TESTS="t/001_foundation.pl"   TAP tests of the chroot lanes
#   PCE_IO_METHODS="worker"   io_method values the tests of reads loop over
#                         on 18+ (default: sync io_uring worker; t/PceTest.pm)
#   scripts/lanes.sh --build 17            only make the chroot of a lane
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
CHROOTS=/var/tmp/pce-chroots
# every lane, by PostgreSQL major version (suite_of gives each its Debian
# suite), then Docker (scripts/docker-lane.sh), the VM lanes
# (scripts/vm-lane.sh), then pkg (the host's Debian packages)
ALL_LANES="15 17 18 docker vm12 vm13 pkg"
# packages a chroot lane needs; libclang-rt for the installed clang is added
LANE_PKGS="postgresql-@V@ postgresql-server-dev-@V@ libbpf-dev bpftool clang llvm libelf-dev
	zlib1g-dev make gcc pkg-config libipc-run-perl sudo procps xz-utils"
LANE_MOUNTS="proc sys dev dev/pts dev/shm sys/fs/cgroup sys/fs/bpf"
# file system tools some tests make loop images with (t/019 XFS, t/023
# btrfs, t/022 ext4), and fincore (t/038; in util-linux-extra from
# trixie on): installed into a complete chroot when missing, without a
# rebuild
LANE_TOOLS="xfsprogs btrfs-progs e2fsprogs util-linux-extra"

suite_of() {
	case "$1" in
	15) echo bookworm ;;
	17) echo trixie ;;
	18) echo forky ;;
	pkg) host_suite ;;
	pkg-*) suite_of "${1#pkg-}" ;;
	docker) suite_of 17 ;;
	vm12) echo "bookworm VM" ;;
	vm13) echo "trixie VM" ;;
	*) return 1 ;;
	esac
}

host_suite() {
	. /etc/os-release && echo "${VERSION_CODENAME:-unknown}"
}

mirror() {
	local uri
	uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
	[ -n "$uri" ] || uri=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
	echo "${uri:-http://deb.debian.org/debian}"
}

# ---- the chroot ----

stamp_key() {
	printf 'suite=%s\npackages=%s libclang-rt-for-clang\n' "$2" "${LANE_PKGS//@V@/$1}" | tr -s ' \t\n' ' '
}

chroot_complete() {
	local root=$1 key=$2
	[ -z "${PCE_LANE_REBUILD:-}" ] && [ -f "$root/.pce-stamp" ] && [ "$(cat "$root/.pce-stamp")" = "$key" ]
}

in_root() {
	local root=$1
	shift
	chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
		DEBIAN_FRONTEND=noninteractive "$@"
}

debootstrap_root() {
	local root=$1 suite=$2 script=""
	[ "$suite" = forky ] && script=/usr/share/debootstrap/scripts/sid
	command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
	umount_root "$root"
	if grep -q " $root/" /proc/mounts; then
		echo "lanes.sh: $root still has mounts, not removing it" >&2
		return 1
	fi
	rm -rf --one-file-system "$root"
	mkdir -p "$root"
	debootstrap --variant=minbase "$suite" "$root" "$(mirror)" $script >"$root.debootstrap.log" 2>&1 ||
		{ tail -20 "$root.debootstrap.log"; return 1; }
}

configure_root() {
	local root=$1 suite=$2
	if [ "$suite" = forky ]; then
		# forky's Release file may be past its Valid-Until: in this chroot only
		echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99no-valid-until"
	fi
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod 0755 "$root/usr/sbin/policy-rc.d"
	mkdir -p "$root/etc/postgresql-common/createcluster.d"
	echo 'create_main_cluster = false' >"$root/etc/postgresql-common/createcluster.d/pce.conf"
	cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
}

install_packages() {
	local root=$1 v=$2 clang_v
	in_root "$root" apt-get update -qq
	in_root "$root" apt-get install -y -qq --no-install-recommends ${LANE_PKGS//@V@/$v} >/dev/null
	clang_v=$(in_root "$root" clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1)
	in_root "$root" apt-get install -y -qq --no-install-recommends "libclang-rt-$clang_v-dev" >/dev/null
}

# the LANE_TOOLS a chroot lacks, installed (a few MB; no rebuild for them)
ensure_lane_tools() {
	local root=$1 p missing=""
	for p in $LANE_TOOLS; do
		in_root "$root" dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
	done
	[ -n "$missing" ] || return 0
	mount_root "$root"
	in_root "$root" apt-get update -qq &&
		in_root "$root" apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
		echo "lanes.sh: could not install$missing in $root" >&2
	umount_root "$root"
}

# build the chroot of lane V unless a complete one is there
ensure_chroot() {
	local v=$1 suite=$2 root=$3 key t0
	key=$(stamp_key "$v" "$suite")
	if chroot_complete "$root" "$key"; then
		echo "lane $v: reusing $root"
		ensure_lane_tools "$root"
		return 0
	fi
	t0=$SECONDS
	echo "lane $v: building $root (debootstrap $suite)"
	debootstrap_root "$root" "$suite"
	configure_root "$root" "$suite"
	mount_root "$root"
	install_packages "$root" "$v"
	umount_root "$root"
	ensure_lane_tools "$root"
	echo "$key" >"$root/.pce-stamp" # written last: the chroot is complete
	echo "lane $v: chroot built in $(fmt_time $((SECONDS - t0)))"
}

# The machine's name resolves in the chroot as on the host: sudo (the tests'
# root door) looks it up on every call, and where /etc/hosts lacks it the
# lookup goes to DNS, which on a machine without internet can take 5 s (a
# test of the loader's promptness failed on it).  Done on every run: a
# chroot is reused on machines of other names.
name_host_in_root() {
	local root=$1 name
	name=$(hostname)
	grep -qw -- "$name" "$root/etc/hosts" 2>/dev/null && return 0
	printf '127.0.1.1\t%s\n' "$name" >>"$root/etc/hosts"
}

# ---- mounts ----

mount_one() {
	local root=$1 m=$2
	mountpoint -q "$root/$m" && return 0
	mkdir -p "$root/$m"
	case "$m" in
	proc) mount -t proc proc "$root/proc" ;;
	sys/fs/cgroup) mount --rbind "/$m" "$root/$m" && mount --make-rslave "$root/$m" ;;
	*) mount --bind "/$m" "$root/$m" && mount --make-slave "$root/$m" ;;
	esac
}

mount_root() {
	local root=$1 m
	for m in $LANE_MOUNTS; do
		mount_one "$root" "$m"
	done
}

# unmount in reverse order; recursive for the rbind, lazy if busy; first the
# bpffs the loader mounted in the chroot (its pins go with it)
umount_root() {
	local root=$1 m
	! mountpoint -q "$root/run/pg_cache_ext" || umount -l "$root/run/pg_cache_ext" || true
	for m in $(echo $LANE_MOUNTS | tr ' ' '\n' | tac); do
		mountpoint -q "$root/$m" || continue
		umount -R "$root/$m" 2>/dev/null || umount -R -l "$root/$m" || true
	done
}

# ---- running a lane ----

# Why a chroot lane cannot run here, if it cannot: only what the machine
# lacks (a chroot that is already complete needs no archive).
lane_unavailable() {
	local v=${1#pkg-} suite host
	[ "$v" = docker ] && v=17 # its image is made from lane 17's chroot
	suite=$(suite_of "$v")
	if [[ $v == vm* ]]; then
		command -v qemu-system-x86_64 >/dev/null || command -v apt-get >/dev/null ||
			{ echo "no qemu-system-x86_64 and no apt-get to install it"; return 0; }
		[ -f "/var/tmp/pce-vms/${suite% VM}/root/.pce-stamp" ] && return 1
	fi
	[ -d /sys/fs/bpf ] || { echo "no /sys/fs/bpf on this kernel"; return 0; }
	chroot_complete "$CHROOTS/$suite" "$(stamp_key "$v" "$suite")" && return 1
	command -v debootstrap >/dev/null || command -v apt-get >/dev/null ||
		{ echo "no debootstrap and no apt-get to install it"; return 0; }
	host=$(mirror | sed -E 's|^[a-z]+://([^/:]+).*|\1|')
	timeout 10 bash -c "exec 3<>/dev/tcp/$host/80" 2>/dev/null ||
		{ echo "Debian's archive ($host) is not reachable to build the $suite chroot"; return 0; }
	return 1
}

fmt_time() {
	printf '%dm%02ds' $(($1 / 60)) $(($1 % 60))
}

# the summary line of a lane's log, or a failure if it has none
lane_counts() {
	local line
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -1 || true)
	echo "${line:-0 passed, 1 failed, 0 skipped}"
}

# one lane, in its own process so that errors stop it (set -e)
run_lane() {
	local lane=$1 v=${1#pkg-} suite root dst
	suite=$(suite_of "$v")
	[ "$lane" = pkg ] && exec bash "$SRC/scripts/package-test.sh"
	[ "$lane" = docker ] && exec bash "$SRC/scripts/docker-lane.sh"
	[[ $v == vm* ]] && exec bash "$SRC/scripts/vm-lane.sh" "$v"
	if [ "$suite" = "$(host_suite)" ]; then
		exec env PCE_IN_LANE=1 bash "$SRC/scripts/test.sh"
	fi
	root=$CHROOTS/$suite
	mkdir -p "$CHROOTS"
	exec 9>"$CHROOTS/$suite.lock"
	flock 9
	LANE_ROOT=$root
	trap 'umount_root "$LANE_ROOT"' EXIT
	trap 'exit 1' INT TERM HUP
	ensure_chroot "$v" "$suite" "$root"
	name_host_in_root "$root"
	mount_root "$root"
	dst=$root/var/tmp/pce-lane-src
	rm -rf "$dst"
	mkdir -p "$dst"
	tar -C "$SRC" --exclude=.git --exclude=tmp_check --exclude=results -cf - . | tar -C "$dst" -xf -
	in_root "$root" make -s -C /var/tmp/pce-lane-src clean >/dev/null 2>&1 || true
	if [ "$lane" != "$v" ]; then # pkg-NN: the packages, built and tested in the chroot
		in_root "$root" env PCE_PKG_WORK="/var/tmp/pce-pkg-$v" PCE_PKG_PORT=$((55500 + v)) \
			PCE_PKG_EXPORTER_PORT=$((55600 + v)) bash /var/tmp/pce-lane-src/scripts/package-test.sh
		return
	fi
	in_root "$root" env PCE_IN_LANE=1 PCE_NO_BENCH=1 PG_MAJOR="$v" \
		PCE_WORK="/var/tmp/pce-lane-$v" PCE_PORT=$((55400 + v)) \
		${PCE_FUZZ_SECONDS:+PCE_FUZZ_SECONDS=$PCE_FUZZ_SECONDS} \
		${PCE_IO_METHODS:+PCE_IO_METHODS="$PCE_IO_METHODS"} \
		PCE_TESTS="${PCE_LANE_TESTS:-$(cd "$SRC" && echo t/0[0-8]*)}" \
		bash /var/tmp/pce-lane-src/scripts/test.sh
}

# every lane; with PCE_TESTS (a subset of the TAP tests) only the host's
default_lanes() {
	local v
	if [ -n "${PCE_TESTS:-}" ]; then
		for v in $ALL_LANES; do
			[ "$v" != pkg ] && [ "$v" != docker ] && [ "$(suite_of "$v")" = "$(host_suite)" ] && echo "$v"
		done
	else
		echo "$ALL_LANES"
	fi
}

# where lane $1 runs, for its line
lane_where() {
	local v=$1 suite
	suite=$(suite_of "$v")
	case "$v" in
	pkg) echo "host, Debian packages" ;;
	pkg-*) echo "$suite chroot, Debian packages" ;;
	docker) echo "Docker, $suite image" ;;
	vm*) echo "$suite" ;;
	*) [ "$suite" = "$(host_suite)" ] && echo host || echo "$suite chroot" ;;
	esac
}

# lane $1 into the log $2, shown as it runs unless $3 is "quiet" (lanes run
# side by side); its counts and time into $2.line
run_logged() {
	local v=$1 log=$2 t0=$SECONDS
	if [ -n "${3:-}" ]; then
		bash "$0" --lane "$v" >"$log" 2>&1 || true
	else
		bash "$0" --lane "$v" 2>&1 | tee "$log" || true
	fi
	echo "$(lane_counts "$log"), $(fmt_time $((SECONDS - t0)))" >"$log.line"
}

# the lane's line, printed and added to the run's counts
count_lane() {
	local v=$1 log=$2 lp lf ls
	LANE_LINES+=("lane $v ($(lane_where "$v")): $(cat "$log.line")")
	echo "${LANE_LINES[-1]}"
	read -r lp _ lf _ ls _ <<<"$(tr -d ',' <"$log.line")"
	PASSED=$((PASSED + lp)) FAILED=$((FAILED + lf)) SKIPPED=$((SKIPPED + ${ls:-0}))
}

# The VM lanes run side by side: each guest has its own page cache and
# disk, and each QEMU one host thread (thread=single), so neither disturbs
# the other's checks, and the run is a lane's length shorter.
run_vm_lanes() {
	local logs=$1 v
	shift
	[ $# -gt 0 ] || return 0
	if [ $# -eq 1 ]; then
		run_logged "$1" "$logs/lane-$1.log"
		count_lane "$1" "$logs/lane-$1.log"
		return
	fi
	echo "lanes $* run side by side; their logs follow when all have ended"
	for v in "$@"; do run_logged "$v" "$logs/lane-$v.log" quiet & done
	wait
	for v in "$@"; do
		cat "$logs/lane-$v.log"
		count_lane "$v" "$logs/lane-$v.log"
	done
}

main() {
	local lanes logs v why vms=()
	[ "$(id -u)" -eq 0 ] || { echo "lanes.sh: run as root" >&2; exit 1; }
	lanes=$(echo "${PCE_LANES:-$(default_lanes)}" | tr ',' ' ')
	# one directory of lane logs per run: runs may overlap
	logs=/var/tmp/pce-lanes/$(date +%Y%m%d-%H%M%S)-$$
	mkdir -p "$logs"
	for v in $lanes; do
		suite_of "$v" >/dev/null || { echo "lanes.sh: no lane for PostgreSQL $v (lanes: $ALL_LANES)" >&2; exit 1; }
		if [ "$(lane_where "$v")" != host ] && why=$(lane_unavailable "$v"); then
			LANE_LINES+=("lane $v ($(lane_where "$v")): SKIP: $why")
			echo "${LANE_LINES[-1]}"
			SKIPPED=$((SKIPPED + 1))
			continue
		fi
		if [[ $v == vm* ]]; then
			vms+=("$v")
			continue
		fi
		run_vm_lanes "$logs" "${vms[@]}"
		vms=()
		run_logged "$v" "$logs/lane-$v.log"
		count_lane "$v" "$logs/lane-$v.log"
	done
	run_vm_lanes "$logs" "${vms[@]}"
	echo
	printf '%s\n' "${LANE_LINES[@]}"
	echo "lane logs: $logs"
	echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
	[ "$FAILED" -eq 0 ]
}

LANE_LINES=()
PASSED=0 FAILED=0 SKIPPED=0
if [ "${1:-}" = "--functions" ]; then
	return 0 # sourced by vm-lane.sh for its helpers
elif [ "${1:-}" = "--lane" ]; then
	run_lane "$2"
elif [ "${1:-}" = "--build" ]; then
	# only make (or check) the chroot of lane $2
	LANE_ROOT=$CHROOTS/$(suite_of "$2")
	trap 'umount_root "$LANE_ROOT"' EXIT
	ensure_chroot "$2" "$(suite_of "$2")" "$CHROOTS/$(suite_of "$2")"
else
	main
fi
