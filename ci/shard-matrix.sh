#!/usr/bin/env bash
# The shard matrix of a workflow: one entry per shard, from a repository variable.
#
#   ci/shard-matrix.sh NAME COUNT
#       NAME: the variable COUNT came from (CPU_SHARDS, GPU_SHARDS), named in the error;
#       COUNT: 1 to 64. Appends `matrix=[1,2,...,COUNT]` to $GITHUB_OUTPUT, which the
#       shard jobs read with fromJSON.
#
# The one split step of bench-pr.yml, bench-main.yml and bench-gpu.yml. COUNT comes from a
# repository variable, so it is checked before it is written anywhere. Exit status: 0
# matrix written, 2 bad count or arguments.
set -euo pipefail

name=${1:-} count=${2:-}
[[ $# -eq 2 ]] || { echo "usage: ci/shard-matrix.sh NAME COUNT" >&2; exit 2; }
[[ "$name" =~ ^[A-Z][A-Z0-9_]{0,40}$ ]] || { echo "usage: ci/shard-matrix.sh NAME COUNT (NAME: a variable's name)" >&2; exit 2; }
[[ "$count" =~ ^[1-9][0-9]?$ ]] || { echo "::error::$name is not a number from 1 to 64"; exit 2; }
(( count <= 64 )) || { echo "::error::$name is over 64"; exit 2; }
[[ -n "${GITHUB_OUTPUT:-}" ]] || { echo "shard-matrix: GITHUB_OUTPUT is not set (run it as a workflow step)" >&2; exit 2; }
echo "matrix=$(seq -s, 1 "$count" | sed 's/^/[/; s/$/]/')" >> "$GITHUB_OUTPUT"
