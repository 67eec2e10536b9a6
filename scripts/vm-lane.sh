#!/usr/bin/env bash
# vm-lane.sh - the deployment test: pg_cache_ext installed as a user would on
# a Debian server that boots Debian's own kernel with systemd as PID 1, in a
# QEMU VM (software emulation: KVM does not work on these machines).
#
#   bash scripts/vm-lane.sh vm12     Debian 12 bookworm: kernel 6.1, PostgreSQL 15
#   bash scripts/vm-lane.sh vm13     Debian 13 trixie: kernel 6.12, PostgreSQL 17
#   bash scripts/vm-lane.sh --build vm12   only make (or check) the image's root
#
# The VM's root is a debootstrap of the suite with linux-image-amd64 (and its
# initramfs), systemd-sysv, PostgreSQL (its main cluster made by the package,
# as on any server), the build tools and what scripts/test.sh needs, made once below
# /var/tmp/pce-vms/SUITE/root and reused while its stamp (suite, package
# list, VM_LAYOUT) matches: a root whose list lacks packages gets them
# installed, any other difference builds it again.  Each run copies this
# source tree into it, builds it there (make: before boot, in a chroot),
# writes an ext4 disk image from the root (raw, sparse) and boots it twice
# with QEMU: test/vm/guest-test.sh runs at boot as a systemd unit and
# does the rest inside as a user would (make install, the drop-in, the
# configuration, systemctl), reboots the VM once, and prints TAP lines
# "PCEVM ok N - ..." on the serial console, which this script counts.
#
# Prints "N passed, N failed, N skipped" (the line lanes.sh reads).
#   PCE_VM_REBUILD=1    rebuild the root even if complete
#   PCE_VM_TIMEOUT=1800 seconds the VM may run (both boots; two VMs side by
#                       side under TCG took 14 min one day and over 20 the next)
#   PCE_VM_BREAK=pins   break the deployment on purpose (pins the server cannot
#                       reach): the run must then fail
#   PCE_VM_SUITE="t/018_sibling_scans.pl" PCE_VM_SUITE_RUNS=3
#                       only make install and these tests of scripts/test.sh,
#                       that many times (to chase a failure seen in the VM;
#                       under TCG a run of t/018 takes ~5 min: raise
#                       PCE_VM_TIMEOUT for many)
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
VMS=/var/tmp/pce-vms
VM_PKGS="linux-image-amd64 systemd-sysv udev initramfs-tools kmod util-linux util-linux-extra procps
	postgresql-@V@ postgresql-server-dev-@V@ postgresql-@V@-pgfincore libbpf-dev bpftool clang llvm libelf-dev zlib1g-dev
	make gcc pkg-config xz-utils xfsprogs
	sudo libipc-run-perl btrfs-progs e2fsprogs libclang-rt-@CLANG@-dev"
# Bump when the root changes in a way a package list does not say: a root
# with another layout is built again from scratch.
VM_LAYOUT=2
VM_MOUNTS="proc sys dev dev/pts dev/shm"

. "$SRC/scripts/lanes.sh" --functions

vm_suite() {
	case "$1" in
	vm12) echo "bookworm 15" ;;
	vm13) echo "trixie 17" ;;
	*) return 1 ;;
	esac
}

# The suite's clang (setup.sh installs its libFuzzer runtime)
suite_clang() {
	case "$1" in
	bookworm) echo 14 ;;
	trixie) echo 19 ;;
	esac
}

# VM_PKGS for a suite and its PostgreSQL
vm_pkgs() {
	local pkgs=${VM_PKGS//@V@/$2}
	echo ${pkgs//@CLANG@/$(suite_clang "$1")}
}

# What a root was built from, in its .pce-stamp: suite, layout, packages.
vm_stamp_key() {
	printf 'suite=%s\npackages=%s\nlayout=%s\n' "$1" "$(vm_pkgs "$1" "$2")" "$VM_LAYOUT" | tr -s ' \t\n' ' '
}

# The packages of the list that the stamp's list lacks, if the stamp is of
# the same suite and layout and its list is all in the new one; else fails.
vm_missing_pkgs() {
	local stamp=$1 suite=$2 v=$3 old new p missing=""
	[[ $stamp =~ ^suite=$suite\ packages=(.*)\ layout=$VM_LAYOUT\ ?$ ]] || return 1
	old=" ${BASH_REMATCH[1]} "
	new=" $(vm_pkgs "$suite" "$v") "
	for p in $new; do
		[[ $old == *" $p "* ]] || missing+=" $p"
	done
	for p in $old; do
		[[ $new == *" $p "* ]] || return 1
	done
	echo "$missing"
}

# A complete root whose list lacks packages now listed gets them installed
# (a minute, where building the root again takes 6 to 15).
top_up_vm_root() {
	local vm=$1 root=$2 key=$3 missing=$4
	echo "$vm: $root was built with an older package list: installing$missing"
	rm -f "$root/.pce-stamp" # incomplete until the packages are in
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod 0755 "$root/usr/sbin/policy-rc.d"
	vm_mount "$root"
	in_root "$root" apt-get update -qq
	in_root "$root" apt-get install -y -qq --no-install-recommends $missing >>"$root.apt.log" 2>&1 ||
		{ tail -20 "$root.apt.log"; return 1; }
	in_root "$root" apt-get clean
	rm -f "$root/usr/sbin/policy-rc.d"
	vm_umount "$root"
	echo "$key" >"$root/.pce-stamp"
}

vm_mount() {
	local root=$1 m
	for m in $VM_MOUNTS; do
		mountpoint -q "$root/$m" && continue
		mkdir -p "$root/$m"
		case "$m" in
		proc) mount -t proc proc "$root/proc" ;;
		*) mount --bind "/$m" "$root/$m" && mount --make-slave "$root/$m" ;;
		esac
	done
}

vm_umount() {
	local root=$1 m
	for m in $(echo $VM_MOUNTS | tr ' ' '\n' | tac); do
		mountpoint -q "$root/$m" || continue
		umount -R "$root/$m" 2>/dev/null || umount -R -l "$root/$m" || true
	done
}

# What makes the debootstrap root a machine: its disk, its console, no slow
# units it does not need, and the unit that runs the test at boot.
configure_vm_root() {
	local root=$1 suite=$2
	echo "pce-$suite" >"$root/etc/hostname"
	echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' >"$root/etc/fstab"
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d" # no daemons in the chroot
	chmod 0755 "$root/usr/sbin/policy-rc.d"
	cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
}

build_vm_root() {
	local vm=$1 suite=$2 v=$3 root=$4 key=$5 t0=$SECONDS
	echo "$vm: building $root (debootstrap $suite, kernel, PostgreSQL $v)"
	vm_umount "$root"
	grep -q " $root/" /proc/mounts && { echo "vm-lane.sh: $root still has mounts" >&2; return 1; }
	rm -rf --one-file-system "$root"
	mkdir -p "$root"
	debootstrap --variant=minbase "$suite" "$root" "$(mirror)" >"$root.debootstrap.log" 2>&1 ||
		{ tail -20 "$root.debootstrap.log"; return 1; }
	configure_vm_root "$root" "$suite"
	vm_mount "$root"
	in_root "$root" apt-get update -qq
	in_root "$root" apt-get install -y -qq --no-install-recommends $(vm_pkgs "$suite" "$v") >"$root.apt.log" 2>&1 ||
		{ tail -20 "$root.apt.log"; return 1; }
	in_root "$root" apt-get clean
	rm -f "$root/usr/sbin/policy-rc.d"
	vm_umount "$root"
	echo "$key" >"$root/.pce-stamp" # written last: the root is complete
	echo "$vm: root built in $(fmt_time $((SECONDS - t0)))"
}

ensure_vm_root() {
	local vm=$1 suite=$2 v=$3 root=$4 key stamp missing
	key=$(vm_stamp_key "$suite" "$v")
	stamp=$(cat "$root/.pce-stamp" 2>/dev/null || true)
	if [ -z "${PCE_VM_REBUILD:-}" ] && [ "$stamp" = "$key" ]; then
		echo "$vm: reusing $root"
		return 0
	fi
	if [ -z "${PCE_VM_REBUILD:-}" ] && [ -n "$stamp" ] && missing=$(vm_missing_pkgs "$stamp" "$suite" "$v"); then
		top_up_vm_root "$vm" "$root" "$key" "$missing" && return 0
	fi
	build_vm_root "$vm" "$suite" "$v" "$root" "$key"
}

# This tree, built in the VM's root (a chroot, before boot), and the test unit.
stage_source() {
	local root=$1 v=$2 dst=$1/root/pg_cache_ext host
	rm -rf "$dst"
	mkdir -p "$dst"
	tar -C "$SRC" --exclude=.git --exclude=tmp_check --exclude=results --exclude=./bench/out -cf - . |
		tar -C "$dst" -xf -
	vm_mount "$root"
	in_root "$root" make -s -C /root/pg_cache_ext clean >/dev/null 2>&1 || true
	in_root "$root" make -s -C /root/pg_cache_ext >"$root.make.log" 2>&1 || { tail -30 "$root.make.log"; return 1; }
	vm_umount "$root"
	# its name resolves, as on a server Debian's installer set up (sudo
	# complains on every call where it does not)
	host=$(cat "$root/etc/hostname")
	grep -qw "$host" "$root/etc/hosts" || printf '127.0.1.1\t%s\n' "$host" >>"$root/etc/hosts"
	install -m 0755 "$SRC/test/vm/guest-test.sh" "$root/root/pce-guest-test.sh"
	install -m 0644 "$SRC/test/vm/pce-guest-test.service" "$root/etc/systemd/system/pce-guest-test.service"
	ln -sf /etc/systemd/system/pce-guest-test.service "$root/etc/systemd/system/multi-user.target.wants/"
	# no login prompt on the serial console: getty's vhangup() of ttyS0 cut
	# the test's output off there (a lane saw none of it)
	ln -sf /dev/null "$root/etc/systemd/system/serial-getty@ttyS0.service"
	rm -rf "$root/var/lib/pce-guest-test"
	mkdir -p "$root/var/lib/pce-guest-test"
	printf 'PG_MAJOR=%q\nPCE_VM_BREAK=%q\nPCE_VM_SUITE=%q\nPCE_VM_SUITE_RUNS=%q\n' "$v" "${PCE_VM_BREAK:-}" \
		"${PCE_VM_SUITE:-}" "${PCE_VM_SUITE_RUNS:-1}" >"$root/var/lib/pce-guest-test/env"
}

# Boot the disk until the guest powers off (it reboots once by itself),
# and say how long it ran.  One host thread runs both vCPUs (thread=single):
# with a thread per vCPU, a vCPU could run kernel text another had just
# patched (a static key's int3) from its stale translation, and Debian 13's
# kernel died of an int3 Oops in kfree, 10 s into a boot, in two CI runs.
boot_vm() {
	local root=$1 disk=$2 log=$3 kernel initrd t0=$SECONDS
	kernel=$(ls "$root"/boot/vmlinuz-* | sort -V | tail -1)
	initrd=$(ls "$root"/boot/initrd.img-* | sort -V | tail -1)
	timeout "${PCE_VM_TIMEOUT:-1800}" qemu-system-x86_64 -accel tcg,thread=single -m 2048 -smp 2 -nographic \
		-kernel "$kernel" -initrd "$initrd" -drive file="$disk",if=virtio,format=raw \
		-append 'root=/dev/vda rw console=ttyS0 quiet' </dev/null 2>&1 |
		sed -u -e 's/\x1b\[[0-9;?]*[a-zA-Z]//g' -e 's/\r$//' >"$log" || true
	echo "$vm: VM ran $(fmt_time $((SECONDS - t0))) (console: $log)"
}

# The disk image of the VM's root: raw, sparse, written fresh for each boot.
write_disk() {
	local root=$1 disk=$2
	rm -f "$disk"
	truncate -s 8G "$disk"
	mkfs.ext4 -q -F -d "$root" "$disk"
}

# Did the guest's kernel panic before the test unit wrote anything?
panicked_before_test() {
	grep -aq 'Kernel panic' "$1" && [ -z "$(guest_file log)" ]
}

# A file of the guest's test state, read from its disk after power-off.
guest_file() {
	debugfs -R "cat /var/lib/pce-guest-test/$1" "$disk" 2>/dev/null
}

run_vm_lane() {
	local vm=$1 suite v root disk log t0 pass fail
	[[ ${PCE_VM_SUITE_RUNS:-1} =~ ^[1-9][0-9]*$ ]] ||
		{ echo "vm-lane.sh: PCE_VM_SUITE_RUNS must be a positive number" >&2; exit 2; }
	read -r suite v <<<"$(vm_suite "$vm")" || { echo "vm-lane.sh: no VM lane $vm (vm12, vm13)" >&2; exit 2; }
	root=$VMS/$suite/root
	mkdir -p "$VMS/$suite"
	command -v qemu-system-x86_64 >/dev/null ||
		apt-get install -y -qq --no-install-recommends qemu-system-x86 >/dev/null
	command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
	exec 8>"$VMS/$suite.lock"
	flock 8
	VM_ROOT=$root
	trap 'vm_umount "$VM_ROOT"' EXIT
	ensure_vm_root "$vm" "$suite" "$v" "$root"
	[ "${2:-}" = --build-only ] && return 0
	t0=$SECONDS
	stage_source "$root" "$v"
	disk=$VMS/$suite/disk.img
	write_disk "$root" "$disk"
	echo "$vm: built and disk written in $(fmt_time $((SECONDS - t0)))"
	log=$VMS/$suite/console.log
	boot_vm "$root" "$disk" "$log"
	# Under TCG, a guest kernel has panicked at boot now and then (an int3
	# Oops in the scheduler, seconds in) before any test ran: that is the
	# emulator's, not the extension's, so boot a fresh disk once more, and
	# say so.  A panic after the test started counts as a failure.
	if panicked_before_test "$log"; then
		echo "$vm: the guest kernel panicked before the test started; booting a fresh disk once more:"
		grep -a -m3 'Kernel panic\|Oops' "$log" | sed "s/^/$vm:   /"
		mv "$log" "$log.panic"
		write_disk "$root" "$disk"
		boot_vm "$root" "$disk" "$log"
	fi
	# the guest's results, from its disk (the console may lose lines)
	guest_file results >"$log.results"
	cat "$log.results"
	pass=$(grep -c '^ok ' "$log.results" || true)
	fail=$(grep -c '^not ok ' "$log.results" || true)
	if [ "$(guest_file finished)" != done ]; then
		echo "$vm: the guest test did not finish (console: $log); the end of its log:"
		guest_file log | tail -40
		fail=$((fail + 1))
	fi
	rm -f "$disk"
	echo "$pass passed, $fail failed, 0 skipped"
	[ "$fail" -eq 0 ]
}

if [ "${1:-}" = --build ]; then
	run_vm_lane "$2" --build-only
else
	run_vm_lane "${1:-}"
fi
