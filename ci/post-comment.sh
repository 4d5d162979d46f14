#!/usr/bin/env bash
# Create or update the one sticky benchmark comment on a pull request.
#
#   GITHUB_TOKEN=... ci/post-comment.sh --repo OWNER/NAME --pr NUMBER --body-file comment.md
#
# A thin wrapper over `vlmpath comment` (src/vlmpath/github/comment.py): the token comes from the
# environment only, never from a flag (flags show in process lists). The PR number is
# checked to be digits here too, because callers pass values read from artifacts.
set -euo pipefail
pr=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[i]}" in
        --pr) pr="${args[i+1]:-}" ;;
        --pr=*) pr="${args[i]#--pr=}" ;;
    esac
done
if [[ ! "$pr" =~ ^[1-9][0-9]{0,9}$ ]]; then
    echo "post-comment: --pr must be a pull request number (digits), got '${pr}'" >&2
    exit 2
fi
if command -v vlmpath >/dev/null 2>&1; then
    exec vlmpath comment "$@"
else
    exec "${PYTHON:-python3}" -m vlmpath.cli comment "$@"
fi
