#!/usr/bin/env bash
# Build the Debian 13 guest image the molecule scenarios boot, once, cached outside the repository
# and keyed by a hash of this recipe. Prints the path of the finished qcow2 image on stdout.
#
# Recipe: debootstrap (minbase) from the Debian package registry with sshd, python3, systemd,
# containerd, runc, grub and what the roles' tests need; an ext4 root made with mkfs.ext4 -d (no
# loop devices); one boot with the kernel given directly, in which a first-boot unit installs grub
# into the disk and powers off, so that every later boot goes through grub.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${NUMA_KUBE_CACHE:-$HOME/.cache/numa-kube}
mirror=$(bash "$here/../../../tools/debian-mirror")  # the machine's apt mirror, or NUMA_KUBE_DEBIAN_MIRROR
suite=trixie
packages=(
  systemd-sysv udev kmod dbus openssh-server sudo python3 python3-yaml python3-prometheus-client
  linux-image-amd64 initramfs-tools zstd grub-pc-bin grub2-common e2fsprogs
  containerd runc containernetworking-plugins numactl iproute2 procps ca-certificates prometheus acl
)
disk_size=6G

recipe=$( (cat "$0" "$here/numa_kube_zipcache.py"; printf '%s\n' "$suite" "${packages[@]}") | sha256sum | cut -c1-16)
out=$cache/images/$recipe
image=$out/base.qcow2
log() { echo "build-image: $*" >&2; }
# shellcheck source=../../../tools/steps.sh
source "$here/../../../tools/steps.sh"
# set -e alone would end the build without a word (CI shows no more than the output's end)
trap 'log "failed (exit $?) at line $LINENO: $BASH_COMMAND"' ERR

if [ -f "$image" ]; then
  echo "$image"
  exit 0
fi
# One build at a time: tools/run-tiers starts this build in the background while the first tiers
# run, and vm-bed's own call then waits for it here and finds the image made.
mkdir -p "$cache/images"
exec 9>"$cache/images/.build-lock"
flock 9
if [ -f "$image" ]; then
  echo "$image"
  exit 0
fi

for tool in debootstrap mkfs.ext4 sfdisk qemu-system-x86_64 qemu-img ssh-keygen; do
  command -v "$tool" >/dev/null || { log "missing $tool (make vm-deps installs it)"; exit 1; }
done

mkdir -p "$cache"
# work folders of builds that were killed outright (their EXIT trap never ran): close to a GiB each
find "$cache" -maxdepth 1 -name 'build.*' -type d -mmin +180 -exec rm -rf {} +
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/rootfs

phase "guest image: debootstrap"; log "debootstrap $suite into $root (a few minutes)"
debootstrap --variant=minbase --include="$(IFS=,; echo "${packages[*]}")" "$suite" "$root" "$mirror" \
  > "$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }

phase "guest image: configure"; log "configure the guest"
echo numa-guest > "$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 numa-guest\n' > "$root/etc/hosts"
echo 'LABEL=numaroot / ext4 defaults,errors=remount-ro 0 1' > "$root/etc/fstab"
mkdir -p "$root/etc/systemd/network" "$root/root/.ssh"
printf '[Match]\nName=en* eth*\n\n[Network]\nDHCP=ipv4\n' > "$root/etc/systemd/network/50-dhcp.network"
# the key goes into the cache folder only with the finished image: a build cut short leaves none behind
# (ssh-keygen asks before overwriting, and without a terminal that is a refusal)
ssh-keygen -q -t ed25519 -N '' -f "$work/id_ed25519" -C numa-kube-test
install -m 0600 "$work/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
chmod 0700 "$root/root/.ssh"
cat > "$root/etc/ssh/sshd_config.d/50-numa-kube.conf" <<'CONF'
PermitRootLogin prohibit-password
PasswordAuthentication no
UseDNS no
CONF
# grub: serial console, no menu wait, predictable kernel command line
cat > "$root/etc/default/grub" <<'CONF'
GRUB_DEFAULT=0
GRUB_TIMEOUT=0
GRUB_DISTRIBUTOR=Debian
GRUB_CMDLINE_LINUX_DEFAULT=""
GRUB_CMDLINE_LINUX="console=ttyS0"
GRUB_TERMINAL=serial
GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"
GRUB_DISABLE_OS_PROBER=true
CONF
# A small initramfs boots faster under TCG. It is made here, on the host, in seconds: made in the
# first boot it took 146 of that boot's 255 s of emulated CPU, beside the Go builds (docs/ci-times.md).
# The chroot is not the guest, so the modules are named (MODULES=list) rather than found (MODULES=dep
# would look at the host's root device): the guests' disks are virtio, their root ext4 (ext4 wants
# crc32c, which it names only as a soft dependency); FSTYPE names the root's type for the fsck hook,
# which cannot find the label's device here. zstd (in the packages) also unpacks faster.
sed -i 's/^MODULES=.*/MODULES=list/' "$root/etc/initramfs-tools/initramfs.conf"
echo FSTYPE=ext4 >> "$root/etc/initramfs-tools/initramfs.conf"
printf '%s\n' virtio_pci virtio_blk ext4 crc32c_generic >> "$root/etc/initramfs-tools/modules"
chroot "$root" update-initramfs -u -k all >"$work/initramfs.log" 2>&1 || { tail -n 20 "$work/initramfs.log" >&2; exit 1; }
cat > "$root/etc/systemd/system/numa-firstboot.service" <<'CONF'
[Unit]
Description=Install grub into the disk, then power off (image build only)
After=local-fs.target
ConditionPathExists=!/var/lib/numa-firstboot.done

[Service]
Type=oneshot
ExecStart=/bin/sh -c 'grub-install /dev/vda && update-grub && touch /var/lib/numa-firstboot.done && systemctl disable numa-firstboot.service'
ExecStartPost=/bin/systemctl poweroff
StandardOutput=journal+console

[Install]
WantedBy=multi-user.target
CONF
chroot "$root" systemctl enable numa-firstboot.service systemd-networkd ssh >/dev/null 2>&1
# the roles start these themselves where a scenario needs them
chroot "$root" systemctl disable prometheus containerd apt-daily.timer apt-daily-upgrade.timer >/dev/null 2>&1 || true
chroot "$root" systemctl mask prometheus-node-exporter.service >/dev/null 2>&1 || true
# test bed speed only: Ansible's modules arrive as zip files, whose imports Python compiles anew every
# task (seconds on a TCG guest); keep that bytecode (see numa_kube_zipcache.py)
site=$(ls -d "$root"/usr/lib/python3/dist-packages)
install -m 0644 "$here/numa_kube_zipcache.py" "$site/numa_kube_zipcache.py"
echo "import numa_kube_zipcache" > "$site/numa_kube_zipcache.pth"
rm -f "$root"/etc/ssh/ssh_host_*
chroot "$root" ssh-keygen -A >/dev/null
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*

phase "guest image: disk"; log "make the disk"
kernel=$(ls "$root"/boot/vmlinuz-* | sort -V | tail -n1)
initrd=$(ls "$root"/boot/initrd.img-* | sort -V | tail -n1)
cp "$kernel" "$work/vmlinuz"
cp "$initrd" "$work/initrd.img"
mkfs.ext4 -q -L numaroot -d "$root" "$work/root.ext4" "$disk_size"
truncate -s "$(( $(stat -c %s "$work/root.ext4") + 1024 * 1024 ))" "$work/disk.raw"
echo 'start=2048, type=83, bootable' | sfdisk -q "$work/disk.raw"
dd if="$work/root.ext4" of="$work/disk.raw" bs=1M seek=1 conv=notrunc,sparse status=none
rm -rf "$root" "$work/root.ext4"

phase "guest image: first boot"; log "first boot: install grub (TCG, a few minutes)"
accel=tcg,thread=single  # as numa_vm.py boots the guests, and for its reason
# (--foreground: in the caller's process group, so that a run's time guard, which ends that group, ends it too)
timeout --foreground 1200 qemu-system-x86_64 -machine q35 -accel "$accel" -cpu max -smp 2 -m 2048 -nographic \
  -drive file="$work/disk.raw",format=raw,if=virtio \
  -kernel "$work/vmlinuz" -initrd "$work/initrd.img" -append "root=LABEL=numaroot rw console=ttyS0" \
  -netdev user,id=n0 -device virtio-net-pci,netdev=n0 -no-reboot \
  > "$work/firstboot.log" 2>&1 || { tail -n 40 "$work/firstboot.log" >&2; log "first boot failed"; exit 1; }
grep -q "grub-install: info\|Installation finished" "$work/firstboot.log" || true

qemu-img convert -O qcow2 "$work/disk.raw" "$work/base.qcow2"
phase ""
mkdir -p "$out"
install -m 0600 "$work/id_ed25519" "$out/id_ed25519"
install -m 0644 "$work/id_ed25519.pub" "$out/id_ed25519.pub"
cp "$work/firstboot.log" "$out/firstboot.log"
# the image comes last: its presence is what says the build is complete
mv "$work/base.qcow2" "$image"
log "done: $image"
echo "$image"
