#!/usr/bin/env bash
# The benchmark image, built once on main and pulled by digest everywhere else.
#
#   ci/image.sh push DOCKERFILE REPOSITORY OUT_FILE
#       build DOCKERFILE from this checkout (main's: bench-main.yml only), push it to
#       REPOSITORY (e.g. ghcr.io/owner/name/vlmpath-cuda) and write its immutable
#       reference REPOSITORY@sha256:<64 hex> to OUT_FILE
#   ci/image.sh pull-or-build REF_FILE DOCKERFILE CONTEXT LOCAL_TAG
#       tag the image REF_FILE names (pulled by digest) as LOCAL_TAG; when REF_FILE is
#       missing, is not one REPOSITORY@sha256:<64 hex> line, or the pull fails, build
#       DOCKERFILE from CONTEXT instead (main's checkout, never a PR's) and say why
#
# Every build is FROM the base image's digest in docker/base-images.lock (ci/base-images.sh);
# with none there it is refused (exit 3), unless VLMPATH_RESOLVE_BASE=1 (bench-main's
# trusted jobs, which reach the registry) lets it resolve the tag first.
# A tag is never pulled: only a digest names exactly what main built. The reference is
# checked against a strict pattern before it reaches docker (it may come from the
# history branch or an artifact). Exit status: 0 image ready, 2 bad arguments, 3 the
# base image is not pinned, else docker's.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REF_RE='^[a-z0-9][a-z0-9._/-]{0,200}@sha256:[0-9a-f]{64}$'

usage() { echo "usage: ci/image.sh push DOCKERFILE REPOSITORY OUT_FILE | pull-or-build REF_FILE DOCKERFILE CONTEXT LOCAL_TAG" >&2; exit 2; }

base_ref() {  # DOCKERFILE -> TAG@DIGEST of its base (docker/base-images.lock), else refuse
    local ref rc=0
    ref=$("$HERE/base-images.sh" ref "$1") || rc=$?
    if [[ $rc -eq 3 && "${VLMPATH_RESOLVE_BASE:-}" == 1 ]]; then
        ref=$("$HERE/base-images.sh" resolve "$1" | tail -n1) || rc=$?
        [[ "$ref" == *@sha256:* ]] && rc=0
    fi
    if [[ $rc -ne 0 ]]; then
        echo "image: refusing to build $1 from a base image not pinned by digest (docker/base-images.lock)" >&2
        exit 3
    fi
    printf '%s\n' "$ref"
}

build() {  # DOCKERFILE CONTEXT TAG: always FROM the lock's TAG@DIGEST, never a bare tag
    local base
    base=$(base_ref "$1")
    docker build -f "$1" --build-arg BASE_IMAGE="$base" --build-arg BENCH_UID="$(id -u)" -t "$3" "$2"
}

cmd=${1:-}
case "$cmd" in
    push)
        [[ $# -eq 4 ]] || usage
        dockerfile=$2 repository=$3 out=$4
        [[ "$repository" =~ ^[a-z0-9][a-z0-9._/-]{0,200}$ ]] || { echo "image: repository $repository is not a lowercase registry path" >&2; exit 2; }
        tag="$repository:main-$(git rev-parse --short=12 HEAD)"
        build "$dockerfile" . "$tag"
        docker push "$tag"
        ref=$(docker inspect --format '{{range .RepoDigests}}{{println .}}{{end}}' "$tag" | grep -m1 "^$repository@" || true)
        [[ "$ref" =~ $REF_RE ]] || { echo "image: the registry gave no digest for $tag (got '$ref')" >&2; exit 1; }
        printf '%s\n' "$ref" > "$out"
        echo "image: pushed $ref"
        ;;
    pull-or-build)
        [[ $# -eq 5 ]] || usage
        ref_file=$2 dockerfile=$3 context=$4 local_tag=$5
        ref=""
        if [[ -f "$ref_file" ]]; then ref=$(head -c 400 "$ref_file" | head -n1); fi
        if [[ -z "$ref" ]]; then
            echo "image: no image digest recorded ($ref_file): building $dockerfile"
        elif [[ ! "$ref" =~ $REF_RE ]]; then
            echo "image: $ref_file does not hold one REPOSITORY@sha256:<64 hex> reference: building $dockerfile"
            ref=""
        elif docker pull "$ref"; then
            docker tag "$ref" "$local_tag"
            echo "image: using $ref (built on main) as $local_tag"
            exit 0
        else
            echo "image: pulling $ref failed: building $dockerfile"
        fi
        build "$dockerfile" "$context" "$local_tag"
        echo "image: built $local_tag locally"
        ;;
    *)
        usage
        ;;
esac
