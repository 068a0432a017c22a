#!/usr/bin/env bash
# Installs the real telemetry receivers the telemetry suites talk to, into the git-ignored
# .cache/go-bin of this repository: prom/statsd_exporter (statsd and DogStatsD in, Prometheus out;
# test/integration/telemetry-metrics.test.ts) and Jaeger v2 (OTLP in, query API out;
# test/integration/telemetry-tracing.test.ts). Idempotent: a binary already built from the pinned
# version is kept.
#
# Jaeger's go.mod has replace directives, so `go install module@version` refuses it; its module
# is downloaded from the module proxy and built as the main module instead.
#
# Env: STATSD_EXPORTER_VERSION (default v0.31.0), JAEGER_VERSION (default v1.76.0), GO (go).
set -euo pipefail

statsd_version="${STATSD_EXPORTER_VERSION:-v0.31.0}"
jaeger_version="${JAEGER_VERSION:-v1.76.0}"
go="${GO:-go}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="${repo_root}/.cache/go-bin"
mkdir -p "${bin_dir}"

if ! command -v "${go}" >/dev/null 2>&1; then
  echo "install-telemetry-tools: ${go} not found; install Go 1.25 or later first" >&2
  exit 1
fi

built_from() { # binary module version
  [ -x "$1" ] && "${go}" version -m "$1" 2>/dev/null |
    grep -Eq "^[[:space:]]+mod[[:space:]]+$2[[:space:]]+$3([[:space:]]|$)"
}

if built_from "${bin_dir}/statsd_exporter" github.com/prometheus/statsd_exporter "${statsd_version}"; then
  echo "install-telemetry-tools: statsd_exporter ${statsd_version} already in ${bin_dir}" >&2
else
  echo "install-telemetry-tools: go install statsd_exporter@${statsd_version}" >&2
  GOBIN="${bin_dir}" "${go}" install "github.com/prometheus/statsd_exporter@${statsd_version}" >&2
fi

# A source build records no module version; a marker file beside the binary names it.
jaeger_marker="${bin_dir}/.jaeger-version"
if [ -x "${bin_dir}/jaeger" ] && [ "$(cat "${jaeger_marker}" 2>/dev/null)" = "${jaeger_version}" ]; then
  echo "install-telemetry-tools: jaeger ${jaeger_version} already in ${bin_dir}" >&2
else
  echo "install-telemetry-tools: building jaeger ${jaeger_version} (a large build)" >&2
  src="$(GOFLAGS=-mod=mod "${go}" mod download -json "github.com/jaegertracing/jaeger@${jaeger_version}" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  work="$(mktemp -d)"
  trap 'chmod -R u+w "${work}"; rm -rf "${work}"' EXIT
  cp -r "${src}/." "${work}/"
  chmod -R u+w "${work}"
  (cd "${work}" && GOFLAGS="${GOFLAGS:-} -buildvcs=false" "${go}" build -o "${bin_dir}/jaeger" ./cmd/jaeger) >&2
  echo "${jaeger_version}" >"${jaeger_marker}"
fi
