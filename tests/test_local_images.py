"""Does ci/local_images.py read the compose file and the Dockerfiles as compose and buildah would?

The cheap half of the local image checks (no buildah, no image): compose's variable
substitution, each service resolved from docker/compose.yaml itself (volumes against the
project directory, named volumes, environment, ulimits, healthcheck, what a chroot run
cannot exercise), the stand-in chosen for each Dockerfile's base, the stand-in's key moving
with each of its inputs, and the dind Dockerfile's vendor steps found and cut. Each rule is
also fed a bad input. The builds and runs themselves are tests/test_images.py's (e2e).
"""

from __future__ import annotations

import importlib.util
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("local_images", ROOT / "ci" / "local_images.py")
li = importlib.util.module_from_spec(_spec)
sys.modules["local_images"] = li  # dataclasses look their module up there
_spec.loader.exec_module(li)


@pytest.mark.parametrize("text, env, want", [
    ("vlmpath:${VLMPATH_BACKEND:-cuda}", {}, "vlmpath:cuda"),
    ("vlmpath:${VLMPATH_BACKEND:-cuda}", {"VLMPATH_BACKEND": "rocm"}, "vlmpath:rocm"),
    ("${X:-a}", {"X": ""}, "a"),          # :- also replaces an empty value
    ("${X-a}", {"X": ""}, ""),            # - only an unset one
    ("$$HOME and $X", {"X": "1"}, "$HOME and 1"),
    ("127.0.0.1:${VLMPATH_DASHBOARD_PORT:-8080}:8080", {}, "127.0.0.1:8080:8080"),
])
def test_compose_variable_substitution(text, env, want):
    assert li.interpolate(text, env) == want


def test_a_required_variable_that_is_unset_is_a_one_line_error():
    with pytest.raises(li.ImagesError, match="X is required: set it"):
        li.interpolate("${X:?set it}", {})


def test_bench_cuda_is_read_from_the_compose_file(tmp_path):
    svc = li.service("bench-cuda", env={}, volumes_dir=tmp_path)
    assert svc.image == "vlmpath:cuda" and svc.working_dir == "/workspace"
    assert svc.environment["VLMPATH_REPO"] == "/workspace"
    assert svc.environment["VLMPATH_MACHINE"] == "cuda-local"  # ${VLMPATH_MACHINE:-cuda-local}
    (checkout, results) = svc.mounts
    assert (checkout.source, checkout.target, checkout.read_only) == (ROOT, "/workspace", False)
    assert results.volume == "vlmpath-results" and results.source == tmp_path / "vlmpath-results"
    assert svc.ulimits["memlock"] == (resource.RLIM_INFINITY,) * 2 and svc.ulimits["stack"] == (67108864,) * 2
    assert svc.command is None and svc.entrypoint is None  # the image's
    # The one thing a chroot run cannot give this service: the GPU reservation.
    assert set(svc.not_exercised()) == {"deploy"}
    assert svc.hostname == "vlmpath-cuda"  # set in a UTS namespace of its own
    assert li.compose_build_args("cuda", env={}) == {"BENCH_UID": "1000"}
    assert li.compose_build_args("cuda", env={"BENCH_UID": "1234"}) == {"BENCH_UID": "1234"}


def test_the_dashboard_service_is_read_only_and_healthchecked(tmp_path):
    svc = li.service("dashboard", env={"VLMPATH_BACKEND": "rocm"}, volumes_dir=tmp_path)
    assert svc.image == "vlmpath:rocm"
    assert svc.command == ["serve", "--bind", "0.0.0.0", "--port", "8080"]
    assert all(m.read_only for m in svc.mounts)
    assert svc.healthcheck[:2] == ["python3", "-c"] and "127.0.0.1:8080" in svc.healthcheck[2]
    assert set(svc.not_exercised()) == {"ports"}


def test_a_project_directory_moves_the_bind_mounts(tmp_path):
    (tmp_path / "docker").mkdir()
    svc = li.service("bench-rocm", env={}, volumes_dir=tmp_path, project_dir=tmp_path / "docker")
    assert svc.mounts[0].source == tmp_path
    # AMD's device nodes and groups are the GPU part of this service.
    assert set(svc.not_exercised()) == {"devices", "group_add", "cap_add", "security_opt"}


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["services"].pop("dashboard"), "has no service 'dashboard'"),
    (lambda d: d["services"]["dashboard"].pop("image"), "names no image"),
    (lambda d: d["services"]["dashboard"]["volumes"].append({"type": "tmpfs", "target": "/x"}),
     "volume type 'tmpfs' is not handled"),
    (lambda d: d["services"]["dashboard"].__setitem__("ulimits", {"rtprio": 1}), "ulimit rtprio is not handled"),
])
def test_a_compose_file_the_runner_cannot_honour_is_refused(tmp_path, mutate, message):
    doc = yaml.safe_load(li.COMPOSE.read_text())
    mutate(doc)
    bad = tmp_path / "docker" / "compose.yaml"
    bad.parent.mkdir()
    bad.write_text(yaml.safe_dump(doc))
    with pytest.raises(li.ImagesError, match=message):
        li.service("dashboard", bad, env={}, volumes_dir=tmp_path)


def test_each_dockerfile_has_a_standin_for_its_base():
    got = {df.stem: li.standin_for(df).flavor for df in sorted(li.DOCKER.glob("*.Dockerfile"))}
    assert got == {"cuda": "conda", "rocm": "venv", "dind-nvidia": "ubuntu"}
    assert li.standin_for(li.DOCKER / "cuda.Dockerfile").py_prefix == "/opt/conda"
    assert li.standin_for(li.DOCKER / "rocm.Dockerfile").py_prefix == "/opt/venv"


def test_a_base_with_no_standin_is_named(tmp_path):
    df = tmp_path / "x.Dockerfile"
    df.write_text("ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:24.05-py3\nFROM ${BASE_IMAGE}\n")
    with pytest.raises(li.ImagesError, match="no stand-in for base image 'nvcr.io/nvidia/pytorch:24.05-py3'"):
        li.standin_for(df)
    df.write_text("FROM debian:12\n")
    with pytest.raises(li.ImagesError, match="has no 'ARG BASE_IMAGE=' line"):
        li.standin_for(df)


def test_the_standin_key_moves_with_each_input():
    conda = li.STANDINS["pytorch/pytorch"]
    k = conda.key("a" * 64, "lock")
    assert k == conda.key("a" * 64, "lock")  # stable: a second run finds the same image
    assert k != conda.key("b" * 64, "lock")  # another wheel
    assert k != conda.key("a" * 64, "lock2")  # another lock
    assert k != li.STANDINS["rocm/pytorch"].key("a" * 64, "lock")  # another python location
    other = li.Rootfs("debian-bookworm", "bookworm", "http://deb.debian.org/debian", include=("python3-venv", "git"))
    assert li.dataclasses.replace(conda, rootfs=other).key("a" * 64, "lock") != k  # another rootfs


def test_the_dind_vendor_steps_are_cut_and_the_rest_kept(tmp_path):
    src = li.DOCKER / "dind-nvidia.Dockerfile"
    out = li.without_vendor_steps(src, tmp_path)
    text = out.read_text()
    steps = "".join(ln for ln in text.splitlines(keepends=True) if not ln.lstrip().startswith("#"))
    assert not any(m in steps for m in li.VENDOR_STEP_MARKERS)
    assert steps.count("RUN ") == 1
    for kept in ("FROM ${BASE_IMAGE}", "COPY --chmod=0755 docker/dind-entrypoint.sh", "ENTRYPOINT", "CMD"):
        assert kept in text
    assert "apt-get install -y --no-install-recommends ca-certificates curl gnupg iptables" in text
    plain = tmp_path / "plain.Dockerfile"
    plain.write_text("FROM x\nRUN true\n")
    with pytest.raises(li.ImagesError, match="has no step that needs"):
        li.without_vendor_steps(plain, tmp_path / "..")


def test_a_vendor_failure_is_told_from_another_failure():
    assert li.vendor_failure("curl: (6) Could not resolve host: download.docker.com") == "download.docker.com"
    assert li.vendor_failure("E: Unable to locate package git") is None
    assert li.vendor_failure("download.docker.com mentioned, but the step failed on a typo") is None


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash")
def test_the_wrapper_script_passes_shellcheck():
    import dockerlint

    tool = dockerlint.find_tool("shellcheck")
    assert tool, "shellcheck is not installed; run: pip install -r ci/requirements-lint.txt"
    r = subprocess.run([tool, str(ROOT / "ci" / "local-images.sh")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


@pytest.mark.parametrize("size, want", [("1.66 GB", 1_660_000_000), ("272 MB", 272_000_000), ("4.1 kB", 4100),
                                        (1234, 1234), ("weird", 0)])
def test_buildah_sizes_are_read_in_either_form(size, want):
    assert li._bytes(size) == want
