#!/usr/bin/env bash
# Runs the container test tier (test/container/) inside a Debian 12 virtual machine whose cgroups
# are pure v2, with crun as podman's runtime and no runc and no docker command installed: the host
# kind where scripts/containers-conf.sh keeps podman's default runtime. For checking that path from
# a host that is not such a host (docs/testing.md, "A pure cgroup v2 host"). Never part of CI.
#
#   sudo bash scripts/container-tier-vm.sh [WORK_DIR]     (default .cache/cgroup2-vm)
#
# Needs root, qemu-system-x86_64 (Debian: qemu-system-x86), debootstrap, mkfs.ext4 and a host
# that has run the tier once (its stand-in images, Node 24 and Envoy in .cache/ are copied in).
# The guest is a fresh clone of HEAD with the host's node_modules. Env: SLUICE_VM_ACCEL (`tcg`,
# the default, emulates the CPU: works anywhere, about 5-10 times slower; `kvm` where the host's
# KVM runs an ordinary guest kernel), SLUICE_CONTAINER_TIME_SCALE (the tier's time bounds; default
# 4 under tcg), SLUICE_VM_TEST_ARGS (vitest arguments, e.g. `-t 'redis.yml'` for one test). Prints
# the guest's log and exits with the tier's exit code.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mkdir -p "${1:-${repo_root}/.cache/cgroup2-vm}" && cd "${1:-${repo_root}/.cache/cgroup2-vm}" && pwd)"
accel="${SLUICE_VM_ACCEL:-tcg}"
scale="${SLUICE_CONTAINER_TIME_SCALE:-$([ "${accel}" = tcg ] && echo 4 || echo 1)}"
node_dir="${repo_root}/.cache/node-24.21.0"
log() { echo "container-tier-vm: $*" >&2; }

for tool in qemu-system-x86_64 debootstrap mkfs.ext4 podman git npm; do
  command -v "${tool}" >/dev/null || { log "${tool} not found (Debian: apt-get install qemu-system-x86 debootstrap e2fsprogs podman git npm)"; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { log "run as root (debootstrap, loop mounts)"; exit 1; }
[ -x "${node_dir}/bin/node" ] && [ -d "${repo_root}/.cache/envoy" ] ||
  { log "run the container tier on this host once first (it installs Node 24 and Envoy into .cache/)"; exit 1; }

root="${work}/root"
if [ ! -f "${root}/.sluice-vm-base" ]; then
  log "debootstrap of the guest (a few minutes)"
  rm -rf "${root}"
  # podman's network stack (netavark, aardvark-dns) is a virtual dependency debootstrap does not
  # resolve: install it afterwards, with dbus (podman's systemd cgroup manager talks to it).
  debootstrap --variant=minbase --include=linux-image-amd64,systemd-sysv,udev,podman,crun,buildah,docker-compose,debootstrap,ca-certificates,curl,git,iproute2,ifupdown,isc-dhcp-client,python3,procps,kmod,netbase \
    bookworm "${root}" http://deb.debian.org/debian >"${work}/debootstrap.log" 2>&1 || true
  mount -t proc proc "${root}/proc"
  chroot "${root}" bash -c 'export DEBIAN_FRONTEND=noninteractive; apt-get -y -q --fix-broken install && apt-get install -y -q netavark aardvark-dns slirp4netns dbus dbus-user-session && dpkg --configure -a' >>"${work}/debootstrap.log" 2>&1
  umount "${root}/proc"
  chroot "${root}" sh -c '! command -v runc && ! command -v docker' >/dev/null || { log "the guest must have neither runc nor docker"; exit 1; }
  # The host's extra CA certificates (a TLS-inspecting proxy's), for npm inside the guest.
  cp /usr/local/share/ca-certificates/*.crt "${root}/usr/local/share/ca-certificates/" 2>/dev/null || true
  chroot "${root}" update-ca-certificates >/dev/null
  echo sluice-cgroup2-vm >"${root}/etc/hostname"
  echo '/dev/vda / ext4 defaults 0 1' >"${root}/etc/fstab"
  printf 'auto lo\niface lo inet loopback\nauto eth0\niface eth0 inet dhcp\n' >"${root}/etc/network/interfaces"
  # The serial console carries the run's output; a login prompt there would hang it up.
  ln -sf /dev/null "${root}/etc/systemd/system/serial-getty@ttyS0.service"
  cat >"${root}/etc/systemd/system/sluice-tier.service" <<'EOF'
[Unit]
Description=sluice's container tier, then power off
After=network-online.target
Wants=network-online.target
[Service]
Type=oneshot
ExecStart=/bin/bash -c '/root/run.sh > /dev/ttyS0 2>&1; systemctl poweroff'
[Install]
WantedBy=multi-user.target
EOF
  ln -sf /etc/systemd/system/sluice-tier.service "${root}/etc/systemd/system/multi-user.target.wants/"
  touch "${root}/.sluice-vm-base"
fi

log "the guest's checkout, Node 24, npm, Envoy and the stand-in images"
rm -rf "${root}/root/repo"
git clone -q "${repo_root}" "${root}/root/repo"
cp -a "${repo_root}/node_modules" "${root}/root/repo/"
mkdir -p "${root}/root/repo/.cache"
cp -a "${node_dir}" "${repo_root}/.cache/envoy" "${root}/root/repo/.cache/"
rm -rf "${root}/usr/local/lib/npm" && cp -a "$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")" "${root}/usr/local/lib/npm"
ln -sf ../lib/npm/bin/npm-cli.js "${root}/usr/local/bin/npm"
ln -sf ../lib/npm/bin/npx-cli.js "${root}/usr/local/bin/npx"
CONTAINERS_CONF="$(bash "${repo_root}/scripts/containers-conf.sh")" bash "${repo_root}/scripts/test-container-images.sh"
rm -f "${root}/root/images.tar"
CONTAINERS_CONF="$(bash "${repo_root}/scripts/containers-conf.sh")" podman save -q -m -o "${root}/root/images.tar" \
  docker.io/library/node:24-slim docker.io/envoyproxy/envoy:v1.40-latest docker.io/library/redis:7 \
  localhost/sluice-test/debian:bookworm >/dev/null
cat >"${root}/root/run.sh" <<EOF
#!/bin/bash
exec > >(tee /root/run.log) 2>&1
set -x
export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
uname -r
stat -fc %T /sys/fs/cgroup
cat /sys/fs/cgroup/cgroup.controllers
command -v runc docker || true
cd /root/repo
export PATH=/root/repo/.cache/node-24.21.0/bin:\$PATH CI=true SLUICE_CONTAINER_TIME_SCALE=${scale}
export CONTAINERS_CONF="\$(bash scripts/containers-conf.sh)"
echo "containers.conf: \$CONTAINERS_CONF"
podman info --format 'runtime {{.Host.OCIRuntime.Name}} {{.Host.OCIRuntime.Version}}, cgroups {{.Host.CgroupsVersion}}'
podman load -q -i /root/images.tar
unset CONTAINERS_CONF
start=\$SECONDS
npm run --silent test:container -- ${SLUICE_VM_TEST_ARGS:-}
rc=\$?
echo "container tier: exit \$rc after \$((SECONDS - start)) s"
echo \$rc > /root/rc
EOF
chmod +x "${root}/root/run.sh"
rm -f "${root}/root/rc" "${root}/root/run.log"

log "the disk image"
rm -f "${work}/disk.img"
truncate -s 24G "${work}/disk.img"
mkfs.ext4 -q -F -d "${root}" "${work}/disk.img"

log "booting (${accel}; the tier's time scale ${scale})"
kernel="$(ls "${root}"/boot/vmlinuz-* | tail -1)"
initrd="$(ls "${root}"/boot/initrd.img-* | tail -1)"
cpu=max
[ "${accel}" = kvm ] && cpu=host
accel_opt="${accel}"
[ "${accel}" = tcg ] && accel_opt="tcg,thread=multi"
start=$SECONDS
timeout 10800 qemu-system-x86_64 -accel "${accel_opt}" -cpu "${cpu}" -smp 2 -m 6G -nographic -no-reboot \
  -kernel "${kernel}" -initrd "${initrd}" \
  -append "root=/dev/vda rw console=ttyS0 net.ifnames=0 systemd.unified_cgroup_hierarchy=1" \
  -drive "file=${work}/disk.img,format=raw,if=virtio" -netdev user,id=n0 -device virtio-net-pci,netdev=n0 \
  -serial "file:${work}/serial.log" -monitor none >"${work}/qemu.log" 2>&1 || true
log "the guest ran $((SECONDS - start)) s"

mnt="${work}/mnt"
mkdir -p "${mnt}"
mount -o loop,ro "${work}/disk.img" "${mnt}"
trap 'umount "${mnt}"' EXIT
cp "${mnt}/root/run.log" "${work}/run.log" 2>/dev/null || { log "no log from the guest: see ${work}/serial.log"; exit 1; }
sed 's/\x1b\[[0-9;]*m//g' "${work}/run.log"
exit "$(cat "${mnt}/root/rc" 2>/dev/null || echo 1)"
