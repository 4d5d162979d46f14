#!/usr/bin/env bash
# The project's images, built and run on a machine with no docker daemon and no GPU: buildah
# builds docker/*.Dockerfile from stand-in bases made here, and runs docker/compose.yaml's
# services from them (ci/local_images.py says how; docs/docker.md, "Check a Dockerfile
# change without a GPU"). Needs root, buildah and debootstrap (ci/setup.sh installs them).
#
#   ci/local-images.sh build [cuda rocm dind-nvidia] [--no-cache]
#   ci/local-images.sh run bench-cuda info            # any compose service and command
#   ci/local-images.sh base | images | clean [--bases]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
exec "$PY" ci/local_images.py "$@"
