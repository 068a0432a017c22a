#!/usr/bin/env bash
# Installs the pinned Envoy Gateway for the end-to-end test that runs it in standalone mode
# (test/e2e/envoy-gateway.test.ts): `go install` into the git-ignored .cache/go-bin. A big build
# (several minutes on a fresh module cache). Idempotent: when the pinned version is already there
# (read from the binary with `go version -m`), nothing is built. Prints the binary's absolute path
# on stdout; everything else goes to stderr.
#
# Env: ENVOY_GATEWAY_VERSION overrides the pin (default v1.9.1), GO the go command (go).
set -euo pipefail

version="${ENVOY_GATEWAY_VERSION:-v1.9.1}"
go="${GO:-go}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="${repo_root}/.cache/go-bin"
binary="${bin_dir}/envoy-gateway"

if ! command -v "${go}" >/dev/null 2>&1; then
  echo "install-envoy-gateway: ${go} not found; install Go first (scripts/install-go.sh)" >&2
  exit 1
fi

if [ -x "${binary}" ] &&
  "${go}" version -m "${binary}" 2>/dev/null |
  grep -Eq "^[[:space:]]+mod[[:space:]]+github.com/envoyproxy/gateway[[:space:]]+${version}([[:space:]]|$)"; then
  echo "install-envoy-gateway: Envoy Gateway ${version} already in ${bin_dir}" >&2
else
  echo "install-envoy-gateway: go install github.com/envoyproxy/gateway/cmd/envoy-gateway@${version} into ${bin_dir}" >&2
  mkdir -p "${bin_dir}"
  GOBIN="${bin_dir}" GOFLAGS="${GOFLAGS:-} -buildvcs=false" \
    "${go}" install "github.com/envoyproxy/gateway/cmd/envoy-gateway@${version}" >&2
fi

echo "${binary}"
