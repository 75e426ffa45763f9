#!/bin/sh
# TAP: the cgroup v2 suite, run where cgroup v2 really is the hierarchy.
#
# This machine is cgroup v1 without KVM, so the suite boots Debian's own
# kernel (linux-image-amd64, from /boot and /lib/modules) under
# qemu-system-x86_64 with TCG. The host's root filesystem is shared
# read-only over virtio-9p, so the guest runs this checkout's jupyter-agent
# and Debian's /usr/bin/python3 as they are. The initramfs is generated
# here with cpio: our static init (tests/cgroup2/init.c) and the 9p and
# virtio modules. The guest has no network (-nic none); its suite
# (tests/cgroup2/guest/limits.sh) writes TAP to the second serial port,
# which this script prints. One skip line when qemu or a kernel is missing.
#
# JA_CG2_BUDGET (seconds, default 780) caps the guest; JA_CG2_MEM (MiB,
# default 3072) and JA_CG2_SMP (default 2) size it; JA_CG2_KERNEL picks
# /boot/vmlinuz-VERSION; JA_CG2_KEEP=1 keeps the work dir (console log).
set -u
BUILD=${BUILD:-build}
BIN=${JUPYTER_AGENT_BIN:-$BUILD/jupyter-agent}
BUDGET=${JA_CG2_BUDGET:-780}
MEM=${JA_CG2_MEM:-3072}
SMP=${JA_CG2_SMP:-2}
DIR=$(cd "$(dirname "$0")/../.." && pwd)

skip() {
    echo "1..1"
    echo "ok 1 # skip cgroup v2 guest not run: $1"
    exit 0
}

QEMU=$(command -v qemu-system-x86_64) ||
    skip "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"
command -v cpio >/dev/null 2>&1 || skip "cpio is not installed"

# A Debian kernel whose modules include 9p (the -cloud flavour has none).
KVER=${JA_CG2_KERNEL:-}
if [ -z "$KVER" ]; then
    for k in $(ls /boot/vmlinuz-* 2>/dev/null | sort -V -r); do
        v=${k#/boot/vmlinuz-}
        if [ -r "$k" ] && [ -f "/lib/modules/$v/kernel/fs/9p/9p.ko" ]; then
            KVER=$v
            break
        fi
    done
fi
[ -n "$KVER" ] && [ -r "/boot/vmlinuz-$KVER" ] ||
    skip "no readable /boot/vmlinuz-* with 9p modules (apt-get install linux-image-amd64)"
MODS=/lib/modules/$KVER

BIN=$(realpath "$BIN")
INIT=$(realpath "$BUILD/cgroup2/init" 2>/dev/null || echo none)
[ -x "$BIN" ] && [ -x "$INIT" ] ||
    skip "$BUILD/jupyter-agent or $BUILD/cgroup2/init is not built (make all)"
case "$DIR$BIN" in
*" "*) skip "the checkout's path has a space (the kernel command line splits it)" ;;
esac

W=$(mktemp -d /tmp/ja-cg2-XXXXXX)
[ "${JA_CG2_KEEP:-0}" = 1 ] || trap 'rm -rf "$W"' EXIT

# The initramfs: /init, the modules 9p over virtio-pci needs, in
# dependency order (modules.dep lists each module's full closure).
mkdir -p "$W/initrd/m" "$W/initrd/dev" "$W/initrd/root"
cp "$INIT" "$W/initrd/init"
seen=" "
add_module() {
    case "$seen" in *" $1 "*) return ;; esac
    for d in $(sed -n "s|^$1: *||p" "$MODS/modules.dep"); do
        add_module "$d"
    done
    seen="$seen$1 "
    cp "$MODS/$1" "$W/initrd/m/" || exit 1
    echo "/m/$(basename "$1")" >>"$W/initrd/modules.order"
}
for m in kernel/drivers/virtio/virtio_pci.ko kernel/net/9p/9pnet_virtio.ko \
    kernel/fs/9p/9p.ko; do
    add_module "$m"
done
(cd "$W/initrd" && find . | cpio -o -H newc --quiet) >"$W/initrd.cpio" ||
    skip "cpio could not build the initramfs"

: >"$W/tap.log"
start=$(date +%s)
timeout -k 5 "$BUDGET" "$QEMU" -nodefaults -machine pc,accel=tcg -cpu max \
    -smp "$SMP" -m "$MEM" -display none -monitor none -nic none -no-reboot \
    -kernel "/boot/vmlinuz-$KVER" -initrd "$W/initrd.cpio" \
    -append "console=ttyS0 panic=-1 loglevel=4 JA_GUEST_SCRIPT=$DIR/tests/cgroup2/guest/limits.sh JA_DIR=$DIR JA_BIN=$BIN" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$DIR,mount_tag=checkout,security_model=none,readonly=on,multidevs=remap" \
    -serial "file:$W/console.log" -serial "file:$W/tap.log" \
    >"$W/qemu.out" 2>&1
rc=$?
secs=$(($(date +%s) - start))

tr -d '\r' <"$W/tap.log" >"$W/tap.txt"
cat "$W/tap.txt"
echo "# guest: Debian kernel $KVER, qemu TCG, $SMP vCPUs, $MEM MiB: $secs s (budget $BUDGET s)"
plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\)$/\1/p' "$W/tap.txt" | tail -n 1)
lines=$(grep -cE '^(not )?ok [0-9]+' "$W/tap.txt")
if [ "$rc" != 0 ] || [ -z "$plan" ] || [ "$plan" != "$lines" ]; then
    if [ "$rc" = 124 ]; then
        why="the guest ran past its budget of $BUDGET s"
    else
        why="qemu exited $rc"
    fi
    echo "not ok $((lines + 1)) - the guest suite finished within the budget ($why; plan '${plan:-none}', $lines test lines)"
    echo "# qemu:"
    sed 's/^/#   /' "$W/qemu.out" | tail -n 5
    echo "# guest console (last 30 lines):"
    tr -d '\r' <"$W/console.log" | tail -n 30 | sed 's/^/#   /'
    exit 1
fi
# Failures: the console tail shows the kernel's side (OOM reports, oopses).
if grep -q '^not ok' "$W/tap.txt"; then
    echo "# guest console (last 20 lines):"
    tr -d '\r' <"$W/console.log" | tail -n 20 | sed 's/^/#   /'
    exit 1
fi
exit 0
