#!/usr/bin/env bash
# Prints the bin directory of a Go new enough to build envoyproxy/ratelimit, the master snapshot in
# ../shared/reference (its go.mod says go 1.26.4; the pinned fallback needs 1.25.6): the `go` on
# PATH when it is, else the official toolchain that Go's own
# toolchain switching would fetch (the module golang.org/toolchain on the Go module proxy),
# downloaded once into the git-ignored .cache/go-toolchain. Debian 12's golang-go (1.19) predates
# toolchain switching, so it cannot fetch it itself. Everything but the directory goes to stderr.
#
# Env: GO_TOOLCHAIN_VERSION (default 1.26.4), GOPROXY_URL (default https://proxy.golang.org).
set -euo pipefail

need_major=1
need_minor=26
need_patch=4
version="${GO_TOOLCHAIN_VERSION:-1.26.4}"
proxy="${GOPROXY_URL:-https://proxy.golang.org}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Whether `$1 version` reports a Go at least need_major.need_minor.need_patch.
new_enough() {
  local text major minor patch
  text="$("$1" version 2>/dev/null)" || return 1
  [[ "${text}" =~ go([0-9]+)\.([0-9]+)(\.([0-9]+))? ]] || return 1
  major="${BASH_REMATCH[1]}" minor="${BASH_REMATCH[2]}" patch="${BASH_REMATCH[4]:-0}"
  ((major > need_major)) && return 0
  ((major == need_major && minor > need_minor)) && return 0
  ((major == need_major && minor == need_minor && patch >= need_patch))
}

if command -v go >/dev/null 2>&1 && new_enough go; then
  dirname "$(command -v go)"
  exit 0
fi

case "$(uname -m)" in
  x86_64 | amd64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *)
    echo "install-go: no Go toolchain for $(uname -m); install Go ${need_major}.${need_minor}.${need_patch}+ from https://go.dev/dl/" >&2
    exit 1
    ;;
esac
module="v0.0.1-go${version}.linux-${arch}"
dest="${repo_root}/.cache/go-toolchain"
bin="${dest}/golang.org/toolchain@${module}/bin"
if [ ! -x "${bin}/go" ] || ! new_enough "${bin}/go"; then
  mkdir -p "${dest}"
  zip="${dest}/${module}.zip"
  echo "install-go: fetching Go ${version} (${proxy}/golang.org/toolchain/@v/${module}.zip)" >&2
  curl -fsSL --retry 3 -o "${zip}" "${proxy}/golang.org/toolchain/@v/${module}.zip"
  python3 -m zipfile -e "${zip}" "${dest}"
  rm -f "${zip}"
  # zipfile does not keep the executable bits.
  chmod +x "${bin}"/* "${dest}/golang.org/toolchain@${module}/pkg/tool/"*/* 2>/dev/null || true
fi
new_enough "${bin}/go" || {
  echo "install-go: ${bin}/go does not run as Go ${version}" >&2
  exit 1
}
echo "${bin}"
