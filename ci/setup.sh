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
#   - Debian's buildah and debootstrap for the local image builds (ci/local-images.sh; root +
#     apt only; else a warning);
#   - Debian's valgrind for the instruction-count gate (`vlmpath ci pr --instructions`,
#     `vlmpath instructions`, `vlmpath trust --instructions`: callgrind; root + apt only;
#     else a warning);
#   - with VLMPATH_ENGINE_INSTALL="sglang==X vllm==Y" (one or more releases, space
#     separated), each release's engine environment; with VLMPATH_SERVE_ENGINE=vllm==X+cpu
#     the server env of vLLM's own OpenAI server on a CPU.
# Safe to run again: it only installs what is missing or changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
SETUP_T0=$SECONDS
step() {  # a progress line with the seconds so far: the pip steps print nothing for minutes
  echo "setup: [$((SECONDS - SETUP_T0)) s] $*"
}
CPU_TORCH=${VLMPATH_CPU_TORCH:-torch==2.13.0}
CPU_INDEX=https://download.pytorch.org/whl/cpu

# The pip arguments that install the CPU torch (see the header).
torch_install_args() {
  local pip_py=$1 index=${VLMPATH_TORCH_INDEX:-}
  if [ -z "$index" ]; then
    if "$pip_py" -m pip install -q --disable-pip-version-check -c ci/constraints.txt --dry-run --no-deps --no-index \
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
step "1/4 pip in .venv"
"$VPY" -m pip install -q --disable-pip-version-check -c ci/constraints.txt --upgrade pip
step "2/4 torch"
if ! "$VPY" -c "import torch" 2>/dev/null; then
  read -r -a torch_args <<< "$(torch_install_args "$VPY")"
  echo "setup: installing the CPU build: pip install ${torch_args[*]}"
  "$VPY" -m pip install -q --disable-pip-version-check -c ci/constraints.txt "${torch_args[@]}"
fi
# Pin whatever torch is there now so that no dependency can swap it for another build.
"$VPY" -c "import importlib.metadata as m; print('torch==' + m.version('torch'))" > .venv/torch-constraint.txt
step "3/4 vlmpath and its test and lint tools (pip, the longest step: about 2 minutes)"
PIP_CONSTRAINT=.venv/torch-constraint.txt "$VPY" -m pip install -q --disable-pip-version-check \
  -c ci/constraints.txt -e ".[test,serve]" -r ci/requirements-lint.txt

# Debian packages some tests need (root + apt only; else a warning naming what fails).
apt_install() {  # PACKAGE WHY-IT-IS-NEEDED WHAT-FAILS-WITHOUT-IT
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian's $1 for $2"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null) \
      || echo "setup: warning: $1 could not be installed; $3" >&2
  else
    echo "setup: warning: no $1 and no root apt-get; install $1 ($3)" >&2
  fi
}
step "4/4 Debian packages (valgrind, chromium, buildah, debootstrap) if missing"
if ! command -v valgrind >/dev/null 2>&1; then
  apt_install valgrind "the instruction-count gate" "instruction counts are unavailable"
fi
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  apt_install chromium "the dashboard browser test" "the browser test will fail"
fi
# images (issue 40): buildah builds docker/*.Dockerfile and runs compose's services from them,
# debootstrap makes their stand-in base (ci/local-images.sh; tests/test_images.py, marker images).
for pkg in buildah debootstrap; do
  if ! command -v "$pkg" >/dev/null 2>&1; then
    apt_install "$pkg" "the local image builds (ci/local-images.sh)" "the image tests (-m images) will fail"
  fi
done
if [ -n "${VLMPATH_ENGINE_INSTALL:-}" ]; then
  for release in $VLMPATH_ENGINE_INSTALL; do
    .venv/bin/vlmpath engine install "$release"
  done
fi
# vllm-server (issue 41): VLMPATH_SERVE_ENGINE=vllm==X+cpu, the server env of vLLM's own
# OpenAI server on a CPU (tests/test_serve_vllm_e2e.py; docs/serving.md).
if [ -n "${VLMPATH_SERVE_ENGINE:-}" ]; then
  .venv/bin/vlmpath engine install "$VLMPATH_SERVE_ENGINE"
fi
echo "setup: [$((SECONDS - SETUP_T0)) s] ready ($("$VPY" -c 'import torch, vlmpath; print("torch", torch.__version__, "vlmpath", vlmpath.__version__)'))"
