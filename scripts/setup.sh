#!/usr/bin/env bash
# setup.sh - install what pg_cache_ext needs on Debian 12 or 13 (or forky),
# build it, install it, and mount bpffs.  Run as root from the source tree.
# Idempotent.
#
# The PostgreSQL major version: $PG_MAJOR, else the installed server (the
# newest if several), else the newest the archive packages (15 on Debian 12,
# 17 on Debian 13, 18 on forky).
#
#   PG_MAJOR=17         build against this version
#   PCE_NO_BENCH=1      skip what only the benchmarks and the kernel lab use
#                       (pgfincore, gnuplot, bc, valgrind, qemu)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg_versions.sh

export DEBIAN_FRONTEND=noninteractive
APT_UPDATED=""

apt_update_once() {
	[ -n "$APT_UPDATED" ] && return 0
	apt-get update -qq
	APT_UPDATED=1
}

is_installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

pick_pg_major() {
	local v
	[ -n "${PG_MAJOR:-}" ] && { echo "$PG_MAJOR"; return; }
	v=$(installed_pg_major)
	[ -n "$v" ] && { echo "$v"; return; }
	apt_update_once
	apt-cache pkgnames postgresql- | newest_major
}

# has the archive a package of this name?
is_packaged() {
	apt-cache show "$1" >/dev/null 2>&1
}

install_missing() {
	local p missing=""
	for p in "$@"; do
		is_installed "$p" || missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	echo "setup.sh: installing$missing"
	apt_update_once
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

# libFuzzer's runtime for the installed clang (the fuzz tests need it)
clang_rt_package() {
	local v
	v=$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1)
	echo "libclang-rt-$v-dev"
}

bench_packages() {
	local v=$1 p
	for p in "postgresql-$v-pgfincore" gnuplot-nox bc valgrind qemu-system-x86; do
		if is_installed "$p" || is_packaged "$p"; then
			echo "$p"
		else
			echo "setup.sh: $p is not packaged here; the benchmarks go without it" >&2
		fi
	done
}

main() {
	local v
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup.sh: run as root (it installs packages and mounts bpffs)" >&2
		exit 1
	fi
	v=$(pick_pg_major)
	[ -n "$v" ] || { echo "setup.sh: no PostgreSQL installed or packaged" >&2; exit 1; }
	echo "setup.sh: PostgreSQL $v"
	install_missing "postgresql-$v" "postgresql-server-dev-$v" libbpf-dev bpftool clang llvm \
		libelf-dev zlib1g-dev make gcc pkg-config xz-utils libipc-run-perl sudo procps xfsprogs e2fsprogs \
		btrfs-progs util-linux-extra
	install_missing "$(clang_rt_package)"
	if [ -z "${PCE_NO_BENCH:-}" ]; then
		is_installed "postgresql-$v-pgfincore" || apt_update_once
		install_missing $(bench_packages "$v")
	fi

	# bpffs for the pins; tracefs is not needed (tp_btf programs attach without it)
	if ! grep -q ' /sys/fs/bpf bpf ' /proc/mounts; then
		mount -t bpf bpf /sys/fs/bpf
	fi

	export PG_CONFIG=/usr/lib/postgresql/$v/bin/pg_config
	make -s -j2
	make -s install
	echo "setup.sh: pg_cache_ext built and installed ($($PG_CONFIG --pkglibdir)/pg_cache_ext.so," \
		"$($PG_CONFIG --bindir)/pg_cache_ext_loader)"
}

main "$@"
