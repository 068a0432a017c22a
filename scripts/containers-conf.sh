#!/usr/bin/env bash
# Prints the path of the containers.conf the container test tier runs podman with (podman reads it
# through CONTAINERS_CONF), choosing the OCI runtime this host can use:
#
# - on a pure cgroup v2 host (/sys/fs/cgroup is cgroup2fs): test/container/containers.conf as it
#   is, and podman's own default runtime (crun when installed);
# - on a hybrid or v1 host (v1 controllers, with or without a `unified` v2 mount): crun 1.8
#   (Debian bookworm's) refuses to create containers ("cgroups in hybrid mode not supported, drop
#   all controllers from cgroupv2") while runc works, so a copy of that file with
#   `[engine] runtime = "runc"` is written to .cache/containers.conf and its path printed.
#
# Exits non-zero, saying what to install, when runc is needed and missing. A user on such a host
# does the same for their own podman: `runtime = "runc"` under `[engine]` in
# /etc/containers/containers.conf (or `podman --runtime runc ...`); see README.md, "podman".
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
base="${repo_root}/test/container/containers.conf"

if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null || true)" = "cgroup2fs" ]; then
  echo "${base}"
  exit 0
fi

if ! command -v runc >/dev/null 2>&1; then
  echo "containers-conf: this host's cgroups are hybrid or v1, where crun cannot run containers; install runc (Debian: apt-get install runc)" >&2
  exit 1
fi
mkdir -p "${repo_root}/.cache"
conf="${repo_root}/.cache/containers.conf"
{
  cat "${base}"
  printf '\n# Added by scripts/containers-conf.sh: this host mounts cgroups in hybrid or v1 mode.\n'
  printf '[engine]\nruntime = "runc"\n'
} >"${conf}.tmp"
mv "${conf}.tmp" "${conf}"
echo "${conf}"
