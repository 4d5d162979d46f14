#!/usr/bin/env bash
# Entrypoint of the vlmpath CUDA and ROCm images (docker/*.Dockerfile).
#
#   entrypoint.sh                  -> vlmpath run --results-dir ... --html-dir ... [--machine ...]
#   entrypoint.sh --quick          -> the same, with --quick (options alone mean "run")
#   entrypoint.sh compare A B      -> vlmpath compare A B   (any vlmpath subcommand)
#   entrypoint.sh vlmpath info     -> vlmpath info
#   entrypoint.sh bash|sh|python|python3 ...   -> exec'd as given (debugging)
#
# Before the command it: marks the mounted repository git-safe for its own processes (its
# owner is the host user, not the container's; no git config file is written), puts the
# mounted checkout's src/ first on PYTHONPATH and ASV_PYTHONPATH (asv drops plain
# PYTHONPATH), reinstalls the checkout only if its
# pyproject.toml differs from the one built into the image (torch held by the image's
# constraints), creates the results and html directories, and prints the platform
# fingerprint. Every path is an environment variable, so the script also runs on a CPU
# host (tests/test_entrypoint.py runs it in a temporary directory).
#
# Environment (defaults are the container's):
#   VLMPATH_REPO         mounted repository                  (/workspace)
#   VLMPATH_RESULTS_DIR  asv results, on the results volume   (/results/asv)
#   VLMPATH_HTML_DIR     asv dashboard, on the results volume (/results/html)
#   VLMPATH_MACHINE      stable asv machine name (container hostnames change per run)
#   VLMPATH_IMAGE_DIR    image metadata: constraints.txt, pyproject.sha256, versions.json,
#                        torch_guard.py                        (/opt/vlmpath)
#   VLMPATH_INSTALL      auto | always | never: reinstall the mounted checkout (auto)
#   VLMPATH_PYTHON       python used for installs and the module fallback (python3)
#   VLMPATH_BIN          vlmpath executable (vlmpath on PATH, else "$VLMPATH_PYTHON -m vlmpath.cli")
set -euo pipefail

repo="${VLMPATH_REPO:-/workspace}"
image_dir="${VLMPATH_IMAGE_DIR:-/opt/vlmpath}"
py="${VLMPATH_PYTHON:-python3}"
export VLMPATH_RESULTS_DIR="${VLMPATH_RESULTS_DIR:-/results/asv}"
export VLMPATH_HTML_DIR="${VLMPATH_HTML_DIR:-/results/html}"

say() { printf 'vlmpath-entrypoint: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 2; }

# -- the vlmpath command: an explicit binary, the console script, or the module ----------
if [[ -n "${VLMPATH_BIN:-}" ]]; then
    vlmpath_cmd=("$VLMPATH_BIN")
elif command -v vlmpath >/dev/null 2>&1; then
    vlmpath_cmd=(vlmpath)
else
    vlmpath_cmd=("$py" -m vlmpath.cli)
fi

# -- git: asv reads history from the bind mount, owned by another UID than ours ----------
# Through the environment (GIT_CONFIG_COUNT, git >= 2.31: command-line scope, which git
# honours for safe.directory), never `git config --global`: run on a host, that would
# write into the user's own ~/.gitconfig.
mark_safe() {
    command -v git >/dev/null 2>&1 || { say "git not found; asv cannot read $repo"; return 0; }
    local n="${GIT_CONFIG_COUNT:-0}" i
    for ((i = 0; i < n; i++)); do
        local k="GIT_CONFIG_KEY_$i" v="GIT_CONFIG_VALUE_$i"
        [[ "${!k:-}" == safe.directory && "${!v:-}" == "$repo" ]] && return 0
    done
    export "GIT_CONFIG_KEY_$n=safe.directory" "GIT_CONFIG_VALUE_$n=$repo"
    export GIT_CONFIG_COUNT=$((n + 1))
}

# -- code under test: the mounted checkout, ahead of the image's build-time copy ---------
use_checkout() {
    [[ -d "$repo/src/vlmpath" ]] || return 0
    export PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}"
    # asv discards PYTHONPATH in the benchmark processes unless ASV_PYTHONPATH is set.
    export ASV_PYTHONPATH="$repo/src${ASV_PYTHONPATH:+:$ASV_PYTHONPATH}"
}

# -- reinstall only when the checkout's dependencies may differ from the image's ---------
maybe_install() {
    local mode="${VLMPATH_INSTALL:-auto}" stamp="$image_dir/pyproject.sha256"
    local constraint="${PIP_CONSTRAINT:-$image_dir/constraints.txt}"
    case "$mode" in
        never) return 0 ;;
        auto|always) ;;
        *) die "VLMPATH_INSTALL=$mode: use auto, always or never" ;;
    esac
    [[ -f "$repo/pyproject.toml" ]] || return 0
    if [[ "$mode" == auto ]]; then
        # No stamp: not one of our images (a host run); the environment is the user's.
        [[ -f "$stamp" ]] || return 0
        [[ "$(sha256sum "$repo/pyproject.toml" | cut -d' ' -f1)" != "$(cat "$stamp")" ]] || return 0
        say "$repo/pyproject.toml differs from the image's; reinstalling (torch held by $constraint)"
    fi
    [[ -f "$constraint" ]] || die "no torch constraint at $constraint; refusing to run pip (it could replace torch)"
    local user_flag=() writable=1
    "$py" -c 'import os, sys, sysconfig; sys.exit(not os.access(sysconfig.get_paths()["purelib"], os.W_OK))' \
        || writable=0
    if "$py" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
        # A virtual environment (recent rocm/pytorch images keep Python in one): pip
        # refuses --user there ("user site-packages are not visible"); install into it.
        [[ $writable == 1 ]] || die "the image's virtual environment ($("$py" -c 'import sys; print(sys.prefix)')) is not writable by uid $(id -u); rebuild the image (docker compose -f docker/compose.yaml --profile <nvidia|amd> build) or set VLMPATH_INSTALL=never"
    elif [[ $writable == 0 ]]; then
        # Non-root cannot write the image's site-packages; the user site is ahead of it.
        user_flag=(--user)
    fi
    PIP_CONSTRAINT="$constraint" "$py" -m pip install --no-cache-dir --quiet "${user_flag[@]}" \
        --constraint "$constraint" "$repo" \
        || die "could not install $repo into the image; rebuild it: docker compose -f docker/compose.yaml --profile <nvidia|amd> build"
    if [[ -f "$image_dir/torch_guard.py" ]]; then
        "$py" "$image_dir/torch_guard.py" verify "$image_dir" \
            || die "installing $repo changed torch; rebuild the image"
    fi
}

# -- AMD: a GPU node we cannot open is almost always a missing render group --------------
check_amd_devices() {
    local kfd="${VLMPATH_KFD:-/dev/kfd}"
    [[ -e "$kfd" ]] || return 0
    if [[ ! -r "$kfd" || ! -w "$kfd" ]]; then
        say "warning: $kfd is not read/writable by uid $(id -u) (groups: $(id -G));" \
            "pass the host's render group: RENDER_GID=\$(getent group render | cut -d: -f3)"
    fi
}

fingerprint() {
    say "platform fingerprint:"
    "${vlmpath_cmd[@]}" info >&2 || die "'vlmpath info' failed; the image or the checkout is broken"
    if [[ -f "$image_dir/versions.json" ]]; then
        say "image versions ($image_dir/versions.json): $(tr -d '\n' < "$image_dir/versions.json")"
    fi
}

# -- decide what to run -----------------------------------------------------------------
args=("$@")
if [[ ${#args[@]} -eq 0 || "${args[0]}" == -* && "${args[0]}" != -h && "${args[0]}" != --help ]]; then
    args=(run "${args[@]}")
elif [[ "${args[0]}" == vlmpath ]]; then
    args=("${args[@]:1}")
    [[ ${#args[@]} -gt 0 ]] || args=(run)
fi

case "${args[0]}" in
    bash|sh|python|python3)
        mark_safe; use_checkout
        exec "${args[@]}" ;;
esac

mark_safe
use_checkout
maybe_install
check_amd_devices

if [[ "${args[0]}" == run ]]; then
    mkdir -p "$VLMPATH_RESULTS_DIR" "$VLMPATH_HTML_DIR" \
        || die "cannot create $VLMPATH_RESULTS_DIR / $VLMPATH_HTML_DIR (is the results volume mounted and writable by uid $(id -u)?)"
    has() { local a; for a in "${args[@]}"; do [[ "$a" == "$1" || "$a" == "$1="* ]] && return 0; done; return 1; }
    has --results-dir || args+=(--results-dir "$VLMPATH_RESULTS_DIR")
    has --html-dir || args+=(--html-dir "$VLMPATH_HTML_DIR")
    if [[ -n "${VLMPATH_MACHINE:-}" ]] && ! has --machine; then
        args+=(--machine "$VLMPATH_MACHINE")
    fi
fi

# The fingerprint goes first, to stderr, so stdout stays the command's own output.
# "info" is the fingerprint itself; "serve" measures nothing.
case "${args[0]}" in
    info|serve|-h|--help) ;;
    *) fingerprint ;;
esac

exec "${vlmpath_cmd[@]}" "${args[@]}"
