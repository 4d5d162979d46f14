#!/usr/bin/env bash
# Sets up everything vlmpath and its tests need, from scratch, in ./.venv:
#   - torch: reused if the system Python already has one (a GPU box or image: pip must
#     never replace it), else the CPU build torch==2.13.0: from a local build when the
#     configured find-links/index hold one (pip resolves it with --no-index), otherwise
#     from the PyTorch CPU wheel index (a bare "torch" from PyPI is the multi-GB CUDA
#     build). VLMPATH_TORCH_INDEX=URL forces an index, =local forces the configured one;
#   - VLMPATH_SETUP_DRY_RUN=1 prints the torch install command it would run, and stops;
#   - the package (editable) with its test extra, and the pinned validators;
#   - Debian's chromium for the dashboard's browser test (root + apt only; else a warning);
#   - Debian's valgrind for the instruction-count gate (`vlmpath trust --instructions`,
#     callgrind; root + apt only; else a warning);
#   - with VLMPATH_ENGINE_INSTALL=sglang==X, that release's engine environment.
# Safe to run again: it only installs what is missing or changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
CPU_TORCH=${VLMPATH_CPU_TORCH:-torch==2.13.0}
CPU_INDEX=https://download.pytorch.org/whl/cpu

# The pip arguments that install the CPU torch (see the header).
torch_install_args() {
  local pip_py=$1 index=${VLMPATH_TORCH_INDEX:-}
  if [ -z "$index" ]; then
    if "$pip_py" -m pip install -q --disable-pip-version-check --dry-run --no-deps --no-index \
        "$CPU_TORCH" >/dev/null 2>&1; then
      index=local
    else
      index=$CPU_INDEX
    fi
  fi
  if [ "$index" = local ]; then
    echo "$CPU_TORCH"
  else
    echo "--index-url $index $CPU_TORCH"
  fi
}

if [ -n "${VLMPATH_SETUP_DRY_RUN:-}" ]; then
  if "$PY" -c "import torch" 2>/dev/null; then
    echo "setup: would reuse the system torch"
  else
    echo "setup: would run: pip install $(torch_install_args "$PY")"
  fi
  exit 0
fi

if [ ! -x .venv/bin/python ]; then
  if "$PY" -c "import torch" 2>/dev/null; then
    echo "setup: reusing the system torch ($("$PY" -c 'import torch; print(torch.__version__)'))"
    "$PY" -m venv --system-site-packages .venv
  else
    "$PY" -m venv .venv
  fi
fi
VPY=.venv/bin/python
"$VPY" -m pip install -q --disable-pip-version-check --upgrade pip
if ! "$VPY" -c "import torch" 2>/dev/null; then
  read -r -a torch_args <<< "$(torch_install_args "$VPY")"
  echo "setup: installing the CPU build: pip install ${torch_args[*]}"
  "$VPY" -m pip install -q --disable-pip-version-check "${torch_args[@]}"
fi
# Pin whatever torch is there now so that no dependency can swap it for another build.
"$VPY" -c "import importlib.metadata as m; print('torch==' + m.version('torch'))" > .venv/torch-constraint.txt
PIP_CONSTRAINT=.venv/torch-constraint.txt "$VPY" -m pip install -q --disable-pip-version-check \
  -e ".[test]" -r ci/requirements-lint.txt

if ! command -v valgrind >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian's valgrind for the instruction-count gate"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null) \
      || echo "setup: warning: valgrind could not be installed; instruction counts are unavailable" >&2
  else
    echo "setup: warning: no valgrind and no root apt-get; install valgrind for instruction counts" >&2
  fi
fi
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian's chromium for the dashboard browser test"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "setup: warning: chromium could not be installed; the browser test will fail" >&2
  else
    echo "setup: warning: no chromium and no root apt-get; install chromium for the browser test" >&2
  fi
fi
# An sglang engine environment (issue 11), only when asked: VLMPATH_ENGINE_INSTALL=sglang==X
# builds the cached engine env (`vlmpath engine install`: CPU torch 2.13 + torchvision
# --no-deps, or this machine's GPU torch; sglang --no-deps and its import chain; ~2.5 GB,
# ~2.5 min) so that the adapter tests (marker `engine`) run on it instead of skipping.
if [ -n "${VLMPATH_ENGINE_INSTALL:-}" ]; then
  .venv/bin/vlmpath engine install "$VLMPATH_ENGINE_INSTALL"
fi
echo "setup: ready ($("$VPY" -c 'import torch, vlmpath; print("torch", torch.__version__, "vlmpath", vlmpath.__version__)'))"
