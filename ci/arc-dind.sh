#!/usr/bin/env bash
# The NVIDIA runner scale sets' dind image, named by the digest main's image job pushed.
#
#   ci/arc-dind.sh pin REF_FILE [VALUES...]
#       REF_FILE holds REPOSITORY@sha256:<64 hex> (ci/image.sh push of
#       docker/dind-nvidia.Dockerfile); write it as the dind sidecar's image in each
#       VALUES file (default: deploy/arc/nvidia-gpu.yaml deploy/arc/nvidia-gpu-pr.yaml),
#       in place of `REPOSITORY@unresolved` or an older digest of the same REPOSITORY
#   ci/arc-dind.sh check [VALUES...]
#       print each file's dind image; exit 3 when one is still REPOSITORY@unresolved
#
# bench-main's image job runs `pin` after the push and hands the files back (artifact
# arc-values-dind-nvidia) to be committed, as it does the base-image lock: the job holds
# no contents: write, and a values file changes through a reviewed commit. The digest is
# checked against a strict pattern, and its repository must be the one the file already
# names: a reference to another image is refused. Exit status: 0 ok, 2 bad arguments,
# reference or file, 3 not pinned yet.
set -euo pipefail
cd "$(dirname "$0")/.."

REF_RE='^([a-z0-9][a-z0-9._/-]{0,200})@(sha256:[0-9a-f]{64})$'
DEFAULT=(deploy/arc/nvidia-gpu.yaml deploy/arc/nvidia-gpu-pr.yaml)
# The one line of a values file that names the dind image: `image: <repo>/vlmpath-dind-nvidia@...`.
LINE_RE='^([[:space:]]+image:[[:space:]]+)([a-z0-9][a-z0-9._/-]{0,200}/vlmpath-dind-nvidia)@(unresolved|sha256:[0-9a-f]{64})([[:space:]]+#.*)?$'

usage() { echo "usage: ci/arc-dind.sh pin REF_FILE [VALUES...] | check [VALUES...]" >&2; exit 2; }

image_line() {  # FILE -> its one dind image line, else refuse
    local lines
    [[ -f "$1" ]] || { echo "arc-dind: no values file $1" >&2; exit 2; }
    lines=$(grep -E "$LINE_RE" "$1" || true)
    [[ -n "$lines" && $(printf '%s\n' "$lines" | grep -c .) -eq 1 ]] \
        || { echo "arc-dind: $1 has not exactly one 'image: <repository>/vlmpath-dind-nvidia@unresolved|sha256:...' line" >&2; exit 2; }
    printf '%s\n' "$lines"
}

cmd=${1:-}
case "$cmd" in
    pin)
        [[ $# -ge 2 ]] || usage
        ref=$(head -c 400 "$2" 2>/dev/null | head -n1 || true)
        [[ "$ref" =~ $REF_RE ]] || { echo "arc-dind: $2 does not hold one REPOSITORY@sha256:<64 hex> reference" >&2; exit 2; }
        repo=${BASH_REMATCH[1]}
        shift 2
        files=("$@"); [[ ${#files[@]} -gt 0 ]] || files=("${DEFAULT[@]}")
        for f in "${files[@]}"; do  # every file checked before any is written
            line=$(image_line "$f")
            [[ "$line" =~ $LINE_RE ]]
            [[ "${BASH_REMATCH[2]}" == "$repo" ]] \
                || { echo "arc-dind: $f names ${BASH_REMATCH[2]}, the reference is of $repo: refusing another image" >&2; exit 2; }
        done
        for f in "${files[@]}"; do
            tmp=$(mktemp "$f.XXXXXX")
            sed -E "s%$LINE_RE%\\1$ref\\4%" "$f" > "$tmp"
            mv "$tmp" "$f"
            echo "arc-dind: $f: dind image $ref (commit it)"
        done
        ;;
    check)
        shift
        files=("$@"); [[ ${#files[@]} -gt 0 ]] || files=("${DEFAULT[@]}")
        rc=0
        for f in "${files[@]}"; do
            line=$(image_line "$f")
            [[ "$line" =~ $LINE_RE ]]
            if [[ "${BASH_REMATCH[3]}" == unresolved ]]; then
                echo "arc-dind: $f: ${BASH_REMATCH[2]} is not pinned by digest yet (bench-main's image job pins it)"
                rc=3
            else
                echo "arc-dind: $f: ${BASH_REMATCH[2]}@${BASH_REMATCH[3]}"
            fi
        done
        exit "$rc"
        ;;
    *)
        usage
        ;;
esac
