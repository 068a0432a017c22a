#!/usr/bin/env bash
# Finds (building or installing it when missing) envoyproxy/ratelimit's service_cmd, "the
# reference" that the differential tier, .ci/run and the bench compare sluice with, and says which
# one it is. Prints two lines on stdout: the binary's path, then the reference's commit; and one
# line on stderr naming both and where they came from.
#
# - The reference as its users run it today: when ../shared/reference/build.sh exists (relative to
#   the repo root, or to the main checkout of a git worktree; SLUICE_SHARED_REFERENCE overrides the
#   folder), its source snapshot built into .cache/reference (Go >= 1.26.4, dependencies from the
#   Go module proxy).
# - Otherwise the pinned pseudo-version, the newest the Go module proxy serves, `go install`ed into
#   .cache/go-bin (Go >= 1.25.6).
# Exits non-zero, saying why on stderr, when neither can be had.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
shared="${SLUICE_SHARED_REFERENCE:-../shared/reference}"
# A git worktree elsewhere looks beside its main checkout, the repo root the folder is known by.
if [ -z "${SLUICE_SHARED_REFERENCE:-}" ] && [ ! -d "${shared}" ]; then
  common="$(git rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)"
  [ -n "${common}" ] && [ -d "${common}/../../shared/reference" ] &&
    shared="$(cd "${common}/../../shared/reference" && pwd)"
fi
pin_version="v1.4.1-0.20260122083618-3fb702589d36"
pin_module="github.com/envoyproxy/ratelimit/src/service_cmd@${pin_version}"

if [ -f "${shared}/build.sh" ]; then
  mkdir -p .cache
  if ! bin="$(bash "${shared}/build.sh" .cache/reference 2>.cache/build-reference.log)"; then
    echo "reference: building ${shared} failed; see .cache/build-reference.log" >&2
    exit 1
  fi
  # The full commit is named in the build script's header.
  commit="$(grep -oE '[0-9a-f]{40}' "${shared}/build.sh" | head -n 1 || true)"
  [ -n "${commit}" ] || commit="$(cat .cache/reference/.source 2>/dev/null || echo unknown)"
  echo "reference: envoyproxy/ratelimit ${commit} (master, built from ${shared}) at ${bin}" >&2
else
  bin="${root}/.cache/go-bin/service_cmd"
  if ! { [ -x "${bin}" ] && go version -m "${bin}" 2>/dev/null | grep -q "${pin_version}"; }; then
    mkdir -p .cache
    if ! GOBIN="${root}/.cache/go-bin" go install "${pin_module}" >.cache/go-install-reference.log 2>&1; then
      echo "reference: go install ${pin_module} failed; see .cache/go-install-reference.log" >&2
      exit 1
    fi
  fi
  commit="${pin_version##*-}"
  echo "reference: envoyproxy/ratelimit ${commit} (pinned ${pin_version}, go install; ${shared} not found) at ${bin}" >&2
fi
echo "${bin}"
echo "${commit}"
