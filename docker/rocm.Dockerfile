# syntax=docker/dockerfile:1.7
# vlmpath benchmark image for AMD GPUs (ROCm).
#
# Build (from the repository root; compose does the same):
#   docker compose -f docker/compose.yaml --profile amd build
#   docker build -f docker/rocm.Dockerfile --build-arg BASE_IMAGE=<pinned tag> .
#
# Same recipe as cuda.Dockerfile (see the reasons there). The ROCm-specific danger is
# worse: a plain "pip install" that resolves torch from PyPI installs a CUDA build over the
# ROCm one. The constraints file pins the image's exact torch (e.g. 2.6.0+rocm6.4.1...), and
# the build fails if torch's version or torch.version.hip changed after our install.
#
# GPU access as a non-root user: /dev/kfd and /dev/dri/renderD* belong to the HOST's
# "video" and "render" groups. The image user is in "video"; the host's render GID differs
# per machine and is added at run time (compose: group_add ${RENDER_GID}, set with
#   RENDER_GID=$(getent group render | cut -d: -f3)
# ), because a group name would resolve inside the image, where "render" may not exist.

# Full tag, never "latest". The same torch (2.6.0) as the CUDA image (see there).
# The digest is docker/base-images.lock's (ci/base-images.sh resolve writes it there and
# here, as TAG@sha256:...): CI builds (ci/image.sh) pass it as --build-arg BASE_IMAGE and
# refuse a base without one. Until a job with registry access has resolved it, this
# default is the tag alone (what a local `docker compose build` uses).
ARG BASE_IMAGE=rocm/pytorch:rocm6.4.1_ubuntu24.04_py3.12_pytorch_release_2.6.0
FROM ${BASE_IMAGE}

ARG BASE_IMAGE
# Match the host user that owns the checkout (docker compose passes ${BENCH_UID:-1000}).
ARG BENCH_UID=1000

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
USER 0

# HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES are deliberately not set here: which GPUs to
# use is a run-time choice (docker compose run -e HIP_VISIBLE_DEVICES=0 ...).
ENV PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_CONSTRAINT=/opt/vlmpath/constraints.txt \
    VLMPATH_IMAGE_DIR=/opt/vlmpath \
    VLMPATH_REPO=/workspace \
    VLMPATH_RESULTS_DIR=/results/asv \
    VLMPATH_HTML_DIR=/results/html

# git: asv reads the benchmarked commits from the mounted repository.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/*

# Non-root user. -o: Ubuntu 24.04 bases already have "ubuntu" at UID 1000. Primary group
# "users" (GID 100) avoids GID clashes; "video" gives /dev/kfd on most hosts, the host's
# render GID comes from compose. /results is created so a fresh named volume inherits it.
RUN useradd --no-log-init -l -o -m -u "${BENCH_UID}" -N -g users -G video -s /bin/bash bench \
 && mkdir -p /opt/vlmpath /results/asv /results/html /workspace \
 && chown -R "${BENCH_UID}:users" /results /workspace

# Freeze the image's torch (and what is built against it) before pip runs.
COPY docker/torch_guard.py /opt/vlmpath/torch_guard.py
COPY ci/constraints.txt /opt/vlmpath/project-constraints.txt
# The image's one constraints file: its torch pins, then the repository's (ci/constraints.txt).
RUN python3 /opt/vlmpath/torch_guard.py record /opt/vlmpath \
 && cat /opt/vlmpath/project-constraints.txt >> /opt/vlmpath/constraints.txt

# Dependencies first, from pyproject.toml alone, in their own layer: a change to src/ or
# the README rebuilds only the small layer below. pip's cache is a BuildKit cache mount
# (kept between builds, never in the image). Everything installs under the torch
# constraint, and each layer proves torch intact. PIP_BREAK_SYSTEM_PACKAGES only matters
# for bases whose python is the distro's (PEP 668); the constraint is what protects torch.
COPY pyproject.toml /tmp/vlmpath-deps/pyproject.toml
RUN --mount=type=cache,target=/root/.cache/pip \
    python3 -c "import tomllib; print('\n'.join(tomllib.load(open('/tmp/vlmpath-deps/pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/vlmpath-deps/requirements.txt \
 && PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install \
        --constraint /opt/vlmpath/constraints.txt -r /tmp/vlmpath-deps/requirements.txt \
 && python3 /opt/vlmpath/torch_guard.py verify /opt/vlmpath \
 && rm -rf /tmp/vlmpath-deps

# Then the package alone (--no-deps), and the versions record.
COPY pyproject.toml README.md /tmp/vlmpath-src/
COPY src /tmp/vlmpath-src/src
RUN PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --no-cache-dir --no-deps \
        --constraint /opt/vlmpath/constraints.txt /tmp/vlmpath-src \
 && python3 /opt/vlmpath/torch_guard.py verify /opt/vlmpath \
 && python3 /opt/vlmpath/torch_guard.py versions /opt/vlmpath --base-image "${BASE_IMAGE}" \
 && sha256sum /tmp/vlmpath-src/pyproject.toml | cut -d' ' -f1 > /opt/vlmpath/pyproject.sha256 \
 && rm -rf /tmp/vlmpath-src

COPY --chmod=0755 docker/entrypoint.sh /usr/local/bin/vlmpath-entrypoint

USER ${BENCH_UID}
WORKDIR /workspace
ENTRYPOINT ["/usr/local/bin/vlmpath-entrypoint"]
CMD ["run"]
