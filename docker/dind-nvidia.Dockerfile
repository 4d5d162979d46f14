# syntax=docker/dockerfile:1.7
# The Docker daemon of the NVIDIA runner scale sets (deploy/arc/nvidia-gpu*.yaml): the
# privileged `dind` sidecar whose `dockerd` runs the jobs' `docker run --gpus all`.
#
# Built once per main commit by bench-main.yml's `image` job (ci/image.sh push, on a
# hosted runner: building it needs no GPU), pushed to ghcr.io/<repo>/vlmpath-dind-nvidia
# and filed by digest on bench-results (images/dind-nvidia.txt); the two NVIDIA values
# files name that digest once a maintainer has committed it (ci/arc-dind.sh pin).
#
# Why not FROM docker:dind: that image is Alpine (musl), and NVIDIA ships the Container
# Toolkit (libnvidia-container, nvidia-ctk) only as deb and rpm packages built against
# glibc. So this is Ubuntu with the Docker Engine from Docker's apt repository and the
# toolkit from NVIDIA's, both at pinned versions; the engine's major version is the one
# the AMD scale sets run (docker:27-dind: the AMD GPU needs no runtime, /dev/kfd and
# /dev/dri reach `docker run --device` because the sidecar is privileged).
#
# The node's NVIDIA runtime (runtimeClassName: nvidia, the GPU Operator) puts the driver
# libraries and the GPUs into this container; the toolkit installed here hands them on to
# the containers this dockerd starts (`--gpus all`), through the `nvidia` runtime that
# `nvidia-ctk runtime configure` writes into /etc/docker/daemon.json.
#
# It runs as root on purpose: a Docker daemon needs it (and the pod makes it privileged).
# Nothing of this repository's code is in the image: only dind-entrypoint.sh.

# The digest is docker/base-images.lock's, as for cuda.Dockerfile and rocm.Dockerfile
# (ci/base-images.sh resolve writes it there and here); ci/image.sh refuses a base without one.
ARG BASE_IMAGE=ubuntu:24.04
FROM ${BASE_IMAGE}

# Docker Engine 27.5 (Docker's apt version for Ubuntu 24.04 "noble") and the NVIDIA
# Container Toolkit 1.17.6: a bump is a reviewed change here, never a floating install
# (containerd.io follows docker-ce's own dependency range).
ARG DOCKER_VERSION=5:27.5.1-1~ubuntu.24.04~noble
ARG NVIDIA_TOOLKIT_VERSION=1.17.6-1

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# What the vendors' repositories need from Ubuntu's own (and dockerd's iptables): its own
# step, so that a machine that cannot reach the vendors (ci/local-images.sh builds this
# image with no registry) still builds everything but the next two.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl gnupg iptables \
 && rm -rf /var/lib/apt/lists/*

# The two vendors' apt repositories, each trusted through its own signing key only
# (signed-by), never a key added to the global keyring.
RUN install -m 0755 -d /etc/apt/keyrings \
 && curl -fsSL https://download.docker.com/linux/ubuntu/gpg -o /etc/apt/keyrings/docker.asc \
 && echo "deb [arch=$(dpkg --print-architecture) signed-by=/etc/apt/keyrings/docker.asc] https://download.docker.com/linux/ubuntu noble stable" \
        > /etc/apt/sources.list.d/docker.list \
 && curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey \
        | gpg --dearmor -o /etc/apt/keyrings/nvidia-container-toolkit.gpg \
 && echo "deb [signed-by=/etc/apt/keyrings/nvidia-container-toolkit.gpg] https://nvidia.github.io/libnvidia-container/stable/deb/\$(ARCH) /" \
        > /etc/apt/sources.list.d/nvidia-container-toolkit.list \
 && apt-get update \
 && apt-get install -y --no-install-recommends \
        "docker-ce=${DOCKER_VERSION}" "docker-ce-cli=${DOCKER_VERSION}" containerd.io \
        "nvidia-container-toolkit=${NVIDIA_TOOLKIT_VERSION}" "nvidia-container-toolkit-base=${NVIDIA_TOOLKIT_VERSION}" \
        "libnvidia-container-tools=${NVIDIA_TOOLKIT_VERSION}" "libnvidia-container1=${NVIDIA_TOOLKIT_VERSION}" \
 && rm -rf /var/lib/apt/lists/*

# The `nvidia` runtime in dockerd's daemon.json (what `--gpus all` and `--runtime nvidia`
# use); the default runtime stays runc, so a job without --gpus gets no GPU.
RUN nvidia-ctk runtime configure --runtime=docker --config=/etc/docker/daemon.json \
 && grep -q '"nvidia"' /etc/docker/daemon.json

COPY --chmod=0755 docker/dind-entrypoint.sh /usr/local/bin/dind-entrypoint

# The scale sets' args start dockerd itself (`dockerd --host=unix:///var/run/docker.sock
# --group=...`); the entrypoint prepares the nested cgroup first, as docker:dind's does.
VOLUME /var/lib/docker
ENTRYPOINT ["/usr/local/bin/dind-entrypoint"]
CMD ["dockerd", "--host=unix:///var/run/docker.sock"]
