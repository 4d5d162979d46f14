#!/usr/bin/env bash
# The base images of the Dockerfiles, pinned by digest (docker/base-images.lock).
#
#   ci/base-images.sh ref DOCKERFILE
#       print TAG@sha256:<64 hex>, the base DOCKERFILE is built from; exit 3 when the lock
#       holds no digest for it yet (unresolved)
#   ci/base-images.sh resolve DOCKERFILE
#       when unresolved, ask the registry for TAG's digest (docker buildx imagetools
#       inspect) and write it to the lock and to DOCKERFILE's `ARG BASE_IMAGE=` default;
#       a digest already in the lock is kept (a lock is changed by a reviewed commit)
#   ci/base-images.sh check DOCKERFILE
#       the Dockerfile's ARG BASE_IMAGE default is the lock's TAG, or TAG@DIGEST once
#       resolved: the two never drift
#
# The lock is docker/base-images.lock beside the Dockerfile, keyed by its file name. Every
# value read from it or from the registry is checked against a strict pattern before use.
# Exit status: 0 ok, 2 bad arguments or lock, 3 not pinned, else docker's.
set -euo pipefail

TAG_RE='^[a-z0-9][a-z0-9._/-]{0,200}:[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$'
DIGEST_RE='^sha256:[0-9a-f]{64}$'

usage() { echo "usage: ci/base-images.sh ref|resolve|check DOCKERFILE" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
cmd=$1 dockerfile=$2
[[ -f "$dockerfile" ]] || { echo "base-images: no Dockerfile $dockerfile" >&2; exit 2; }
lock="$(dirname "$dockerfile")/base-images.lock"
key=$(basename "$dockerfile")
[[ -f "$lock" ]] || { echo "base-images: no lock $lock: add a line '$key TAG unresolved'" >&2; exit 2; }

entry() {  # -> "TAG DIGEST" of $key, checked
    local lines
    lines=$(grep -v '^[[:space:]]*\(#\|$\)' "$lock" | awk -v k="$key" '$1 == k')
    [[ $(printf '%s\n' "$lines" | grep -c .) -eq 1 ]] || { echo "base-images: $lock has not exactly one line for $key" >&2; exit 2; }
    read -r _ tag digest extra <<< "$lines"
    [[ -z "${extra:-}" && "$tag" =~ $TAG_RE ]] || { echo "base-images: $lock: '$lines' is not '$key TAG DIGEST' with a full tag" >&2; exit 2; }
    [[ "$digest" == unresolved || "$digest" =~ $DIGEST_RE ]] || { echo "base-images: $lock: $key's digest '$digest' is not sha256:<64 hex> or unresolved" >&2; exit 2; }
    printf '%s %s\n' "$tag" "$digest"
}

arg_default() { sed -n 's/^ARG BASE_IMAGE=//p' "$dockerfile" | head -n1; }

line=$(entry) || exit $?
read -r tag digest <<< "$line"
case "$cmd" in
    ref)
        [[ "$digest" != unresolved ]] || { echo "base-images: $key's base $tag is not pinned by digest ($lock: unresolved; ci/base-images.sh resolve needs registry access)" >&2; exit 3; }
        printf '%s@%s\n' "$tag" "$digest"
        ;;
    resolve)
        if [[ "$digest" == unresolved ]]; then
            digest=$(docker buildx imagetools inspect "$tag" --format '{{json .Manifest}}' \
                | python3 -c 'import json, sys; print(json.load(sys.stdin).get("digest", ""))')
            [[ "$digest" =~ $DIGEST_RE ]] || { echo "base-images: the registry gave no digest for $tag (got '$digest')" >&2; exit 1; }
            tmp=$(mktemp "$lock.XXXXXX")
            awk -v k="$key" -v d="$digest" '!/^[[:space:]]*#/ && $1 == k { $3 = d } { print }' "$lock" > "$tmp"
            mv "$tmp" "$lock"
            tmp=$(mktemp "$dockerfile.XXXXXX")
            sed "s|^ARG BASE_IMAGE=.*|ARG BASE_IMAGE=$tag@$digest|" "$dockerfile" > "$tmp"
            mv "$tmp" "$dockerfile"
            # Not a workflow command: only the anchored-regex-checked tag and digest, to stderr.
            echo "base-images: pinned $tag@$digest for $key: commit $lock and $dockerfile" >&2
        fi
        printf '%s@%s\n' "$tag" "$digest"
        ;;
    check)
        want=$tag; [[ "$digest" == unresolved ]] || want="$tag@$digest"
        got=$(arg_default)
        [[ "$got" == "$want" ]] || { echo "base-images: $dockerfile's ARG BASE_IMAGE default is '$got', the lock says '$want'" >&2; exit 2; }
        if [[ "$digest" == unresolved ]]; then echo "base-images: $key: $want (not pinned by digest yet)"; else echo "base-images: $key: $want"; fi
        ;;
    *)
        usage
        ;;
esac
