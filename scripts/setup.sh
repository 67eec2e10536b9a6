#!/usr/bin/env bash
# setup.sh - install what pg_cache_ext needs on Debian 12, build it, install
# it, and mount bpffs.  Run as root from the source tree.  Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
	echo "setup.sh: run as root (it installs packages and mounts bpffs)" >&2
	exit 1
fi

PKGS="postgresql-15 postgresql-server-dev-15 postgresql-contrib libbpf-dev bpftool clang llvm
      libelf-dev zlib1g-dev make gcc pkg-config xz-utils libipc-run-perl sudo procps
      postgresql-15-pgfincore gnuplot-nox bc libclang-rt-14-dev qemu-system-x86 valgrind"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "setup.sh: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq $missing >/dev/null
fi

# bpffs for the pins; tracefs is not needed (tp_btf programs attach without it)
if ! mount | grep -q ' /sys/fs/bpf type bpf'; then
	mount -t bpf bpf /sys/fs/bpf
fi

make -s -j2
make -s install
echo "setup.sh: pg_cache_ext built and installed ($(pg_config --pkglibdir)/pg_cache_ext.so," \
	"$(pg_config --bindir)/pg_cache_ext_loader)"
