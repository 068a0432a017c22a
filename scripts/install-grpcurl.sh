#!/usr/bin/env bash
# Installs the pinned grpcurl used by the reflection tests (test/integration/grpcurl.test.ts) and
# handy for poking at a running sluice: `go install` into the git-ignored folder .cache/go-bin of
# this repository. Idempotent: when the pinned version is already there, nothing is built. Prints
# the absolute path of the binary on stdout (everything else goes to stderr), so
# `GRPCURL=$(bash scripts/install-grpcurl.sh)` works.
#
# The pin is the newest grpcurl that still builds with the Go of Debian 12 (1.19, `apt-get install
# golang-go`); newer releases need Go 1.21 or later.
#
# Env: GRPCURL_VERSION overrides the pin (default v1.8.9), GO the go command (go).
set -euo pipefail

version="${GRPCURL_VERSION:-v1.8.9}"
go="${GO:-go}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="${repo_root}/.cache/go-bin"
binary="${bin_dir}/grpcurl"

if ! command -v "${go}" >/dev/null 2>&1; then
  echo "install-grpcurl: ${go} not found; install Go 1.19 or later first (Debian/Ubuntu: apt-get install golang-go; others: https://go.dev/dl/)" >&2
  exit 1
fi

# `go version -m` reads the module version the binary was built from.
if [ -x "${binary}" ] &&
  "${go}" version -m "${binary}" 2>/dev/null |
  grep -Eq "^[[:space:]]+mod[[:space:]]+github.com/fullstorydev/grpcurl[[:space:]]+${version}([[:space:]]|$)"; then
  echo "install-grpcurl: grpcurl ${version} already in ${bin_dir}" >&2
else
  echo "install-grpcurl: go install github.com/fullstorydev/grpcurl/cmd/grpcurl@${version} into ${bin_dir}" >&2
  mkdir -p "${bin_dir}"
  GOBIN="${bin_dir}" GOFLAGS="${GOFLAGS:-} -buildvcs=false" \
    "${go}" install "github.com/fullstorydev/grpcurl/cmd/grpcurl@${version}" >&2
fi

echo "${binary}"
