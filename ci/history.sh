#!/usr/bin/env bash
# The trusted benchmark history kept on a git branch (used by bench-main.yml only).
#
#   ci/history.sh fetch BRANCH DIR         clone BRANCH of origin into DIR (an empty one if absent)
#   ci/history.sh append NEW_DIR RESULTS   add every artifact's asv results to RESULTS (shards merged);
#                                          an image-<vendor> artifact's digest goes to images/<vendor>.txt
#                                          and, with SHA (the commit) set, images/<vendor>/<SHA>.txt
#   ci/history.sh push DIR MESSAGE         commit DIR and push it to its branch
#   ci/history.sh publish HTML_DIR BRANCH  asv-publish RESULTS (DIR/results) into HTML_DIR, push it to BRANCH
#
# Pushes authenticate with GITHUB_TOKEN through a per-command header (never stored in
# .git/config, never on a command line that other processes can read: git reads it from
# the environment via GIT_CONFIG_*). Only the history jobs of bench-main.yml, which run
# main's code and no PR code, have a token allowed to push.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${REPO:?REPO=owner/name must be set}"
remote="${SERVER_URL:-https://github.com}/$REPO.git"

auth() {
    local basic
    basic=$(printf 'x-access-token:%s' "${GITHUB_TOKEN:?GITHUB_TOKEN must be set}" | base64 -w0)
    export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=http.extraheader GIT_CONFIG_VALUE_0="AUTHORIZATION: basic $basic"
}

cmd=${1:?usage: ci/history.sh fetch|append|push|publish ...}
shift
case "$cmd" in
    fetch)
        branch=$1 dir=$2
        auth
        if git ls-remote --exit-code --heads "$remote" "$branch" >/dev/null; then
            git clone --quiet --depth 1 --branch "$branch" "$remote" "$dir"
        else
            git init --quiet -b "$branch" "$dir"
        fi
        mkdir -p "$dir/results"
        ;;
    append)
        # Each artifact is one runner's asv results directory; the shards of one machine
        # (vlmpath run --shard K/N) become one asv results file per commit (asv's Results
        # API, not a file copy that would let the second shard overwrite the first).
        new=$1 results=$2
        shopt -s nullglob
        arts=()
        for art in "$new"/*/; do
            name=$(basename "$art")
            if [[ "$name" =~ ^image-([a-z]{1,20}(-[a-z]{1,20})?)$ ]]; then
                # Main's image digest for the PR GPU jobs (ci/image.sh pull-or-build), and the
                # NVIDIA scale sets' dind image's (image-dind-nvidia: deploy/arc).
                vendor=${BASH_REMATCH[1]}
                ref=$(head -c 400 "$art/image-ref.txt" 2>/dev/null | head -n1 || true)
                if [[ "$ref" =~ ^[a-z0-9][a-z0-9._/-]{0,200}@sha256:[0-9a-f]{64}$ ]]; then
                    mkdir -p "$results/../images"
                    printf '%s\n' "$ref" > "$results/../images/$vendor.txt"
                    # Per commit too: an engine repository pins a vlmpath commit (VLMPATH_REF)
                    # and pulls the image built at exactly that commit.
                    if [[ "${SHA:-}" =~ ^[0-9a-f]{40}$ ]]; then
                        mkdir -p "$results/../images/$vendor"
                        printf '%s\n' "$ref" > "$results/../images/$vendor/$SHA.txt"
                    fi
                else
                    echo "::warning::history: $name holds no image digest"
                fi
            else
                arts+=("$art")
            fi
        done
        if [[ ${#arts[@]} -eq 0 ]]; then echo "history: no results under $new"; exit 0; fi
        rc=0
        "${VLMPATH:-.venv/bin/vlmpath}" shards merge "${arts[@]}" --into "$results" || rc=$?
        # 3: a shard is missing; what arrived is kept (and marked so in its run-info).
        if [[ $rc -eq 3 ]]; then echo "::warning::history: a shard is missing (see above)"; elif [[ $rc -ne 0 ]]; then exit "$rc"; fi
        ;;
    push)
        dir=$1 msg=$2
        auth
        branch=$(git -C "$dir" symbolic-ref --short HEAD)
        git -C "$dir" add -A
        git -C "$dir" -c user.name=vlmpath-bench -c user.email=vlmpath-bench@users.noreply.github.com \
            commit --quiet -m "$msg" || echo "history: nothing new to commit"
        # Two history jobs (CPU, GPU; or two runs) may push at once: on a rejected push,
        # rebase onto the branch and retry. Results are files named by commit and machine,
        # so the rebase replays ours on top of theirs without losing either.
        for attempt in 1 2 3 4 5; do
            git -C "$dir" push --quiet "$remote" "HEAD:refs/heads/$branch" && break
            [[ $attempt -lt 5 ]] || { echo "history: push to $branch failed $attempt times" >&2; exit 1; }
            git -C "$dir" -c user.name=vlmpath-bench -c user.email=vlmpath-bench@users.noreply.github.com \
                pull --quiet --rebase "$remote" "$branch"
        done
        ;;
    publish)
        html=$1 branch=$2
        python3 - "$html" <<'PY'
import json, pathlib, subprocess, sys
html = pathlib.Path(sys.argv[1]).resolve()
conf = json.loads(pathlib.Path("asv.conf.json").read_text())
conf.update(results_dir=str(pathlib.Path("history/results").resolve()), html_dir=str(html), repo=".")
pathlib.Path(".asv-history.conf.json").write_text(json.dumps(conf))
subprocess.run([".venv/bin/asv", "publish", "--config", ".asv-history.conf.json"], check=True)
PY
        .venv/bin/vlmpath report --results history/results --out site-report --html "$html"
        touch "$html/.nojekyll"
        auth
        git -C "$html" init --quiet -b "$branch"
        git -C "$html" add -A
        git -C "$html" -c user.name=vlmpath-bench -c user.email=vlmpath-bench@users.noreply.github.com \
            commit --quiet -m "dashboard"
        git -C "$html" push --quiet --force "$remote" "HEAD:refs/heads/$branch"
        ;;
    *)
        echo "history: unknown command '$cmd'" >&2
        exit 2
        ;;
esac
