#!/usr/bin/env bash
# `npm run test:differential -- [--seed N] [--configs C] [--budget-ms M]`: the differential tier
# (test/differential/) against the reference: scripts/reference.sh finds it (the master build from
# ../shared/reference when that folder exists, else the pinned `go install`) and says which commit
# it is, unless SLUICE_REFERENCE_BIN names a binary already. The options become DIFF_SEED,
# DIFF_CONFIGS and DIFF_BUDGET_MS for the test (which may also be set directly). Defaults: seed 1,
# 200 configs, 600000 ms. Exits with vitest's status.
set -euo pipefail
cd "$(dirname "$0")/.."
while [ $# -gt 0 ]; do
  case "$1" in
    --seed | --configs | --budget-ms)
      [ $# -ge 2 ] || { echo "$1 needs a value" >&2; exit 2; }
      [[ "$2" =~ ^[0-9]+$ ]] || { echo "$1 must be a whole number, not '$2'" >&2; exit 2; }
      case "$1" in
        --seed) export DIFF_SEED="$2" ;;
        --configs) export DIFF_CONFIGS="$2" ;;
        --budget-ms) export DIFF_BUDGET_MS="$2" ;;
      esac
      shift 2
      ;;
    *)
      echo "unknown option '$1' (use --seed N, --configs C, --budget-ms M)" >&2
      exit 2
      ;;
  esac
done
if [ -z "${SLUICE_REFERENCE_BIN:-}" ]; then
  # Without a reference the test skips (and fails under CI) naming what is missing.
  if resolved="$(bash scripts/reference.sh)"; then
    SLUICE_REFERENCE_BIN="$(sed -n 1p <<<"${resolved}")"
    SLUICE_REFERENCE_COMMIT="$(sed -n 2p <<<"${resolved}")"
    export SLUICE_REFERENCE_BIN SLUICE_REFERENCE_COMMIT
  fi
fi
SLUICE_DIFFERENTIAL=1 exec npx vitest run --project differential
