#!/usr/bin/env bash
# Benchmark a pull request on this machine: merge-base(BASE, HEAD) vs HEAD.
#
#   ci/pr-bench.sh --base <ref> --head <ref> [--machine NAME] [--bench REGEX] [--quick]
#                  [--out DIR] [--results-dir DIR] [--rerun-base] [--no-fail] [--instructions]
#
# A thin wrapper over `vlmpath ci pr` (src/vlmpath/pr/flow.py has the logic): it only
# picks the vlmpath executable (the console script, else ./.venv's, else the module).
# Exit status: 0 no regression, 1 regression, 2 bad input (OUT/error.txt says why).
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v vlmpath >/dev/null 2>&1; then
    exec vlmpath ci pr "$@"
elif [[ -x .venv/bin/vlmpath ]]; then
    exec .venv/bin/vlmpath ci pr "$@"
else
    exec "${PYTHON:-python3}" -m vlmpath.cli ci pr "$@"
fi
