#!/usr/bin/env bash
# Sets up everything vlmpath and its tests need, from scratch, in ./.venv:
#   - torch: reused if the system Python already has one (a GPU box or image: pip must
#     never replace it), else the CPU build torch==2.13.0 (never a bare "torch", which
#     would pull a multi-GB CUDA build);
#   - the package (editable) with its test extra, and the pinned validators;
#   - Debian's chromium for the dashboard's browser test (root + apt only; else a warning);
#   - with VLMPATH_ENGINE_INSTALL=sglang==X, that release's engine environment.
# Safe to run again: it only installs what is missing or changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
CPU_TORCH=${VLMPATH_CPU_TORCH:-torch==2.13.0}

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
  echo "setup: installing the CPU build $CPU_TORCH"
  "$VPY" -m pip install -q --disable-pip-version-check "$CPU_TORCH"
fi
# Pin whatever torch is there now so that no dependency can swap it for another build.
"$VPY" -c "import importlib.metadata as m; print('torch==' + m.version('torch'))" > .venv/torch-constraint.txt
PIP_CONSTRAINT=.venv/torch-constraint.txt "$VPY" -m pip install -q --disable-pip-version-check \
  -e ".[test]" -r ci/requirements-lint.txt

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
