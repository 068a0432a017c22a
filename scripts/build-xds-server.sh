#!/usr/bin/env bash
# Builds the test xDS management server (test/tools/xds-server: go-control-plane v0.14.0's ADS
# server and snapshot cache serving the reference's RateLimitConfig resources) into the
# git-ignored .cache/go-bin. Used by the xDS tests (test/integration/xds*.test.ts) and the
# Envoy Gateway end-to-end test's helpers. Idempotent: go's build cache makes a rebuild of
# unchanged sources take a second. Prints the absolute path of the binary on stdout (the rest
# goes to stderr). Needs Go 1.24 or later (test/tools/xds-server/go.mod).
#
# Env: GO the go command (go).
set -euo pipefail

go="${GO:-go}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="${repo_root}/.cache/go-bin"
binary="${bin_dir}/xds-server"

if ! command -v "${go}" >/dev/null 2>&1; then
  echo "build-xds-server: ${go} not found; install Go 1.24 or later (scripts/install-go.sh)" >&2
  exit 1
fi
mkdir -p "${bin_dir}"
(cd "${repo_root}/test/tools/xds-server" &&
  GOFLAGS="${GOFLAGS:-} -buildvcs=false" "${go}" build -o "${binary}" . >&2)
echo "${binary}"
