"""Is the NVIDIA runner scale sets' dind image built once on main and named by digest?

bench-main's ``image`` job builds docker/dind-nvidia.Dockerfile (from the lock's pinned base),
pushes it, writes its digest into the two NVIDIA values files (``ci/arc-dind.sh pin``) and
hands them back; the history job files the digest on bench-results. Run by bash against a
``docker`` that records what it was asked (tests/test_image_digest.py's fake), no registry.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import arc_values as arc
from test_image_digest import BASE_DIGEST, DIGEST, ROOT, _bash, _calls, _fake_docker, _filed_by_history, _job_env, _step

REPO = "ghcr.io/vlmpath/vlmpath/vlmpath-dind-nvidia"
NVIDIA_VALUES = ("deploy/arc/nvidia-gpu.yaml", "deploy/arc/nvidia-gpu-pr.yaml")


def _checkout(tmp: Path) -> Path:
    repo = tmp / "main"
    for part in ("ci", "docker", "deploy"):
        shutil.copytree(ROOT / part, repo / part)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-q",
                    "-m", "main"], check=True)
    return repo


def test_mains_image_job_builds_the_dind_image_and_names_its_digest_in_the_nvidia_values(tmp_path):
    repo = _checkout(tmp_path)
    bin_dir = _fake_docker(tmp_path)
    assert _bash("ci/arc-dind.sh check", repo, {}, bin_dir).returncode == 3  # committed: @unresolved
    env = {**_job_env("bench-main.yml", "image"), "DOCKERFILE": "docker/dind-nvidia.Dockerfile",
           "REPOSITORY": "ghcr.io/VLMpath/vlmpath/vlmpath-dind-nvidia"}
    for name in ("Pin the base image", "push it by digest"):
        r = _bash(_step("bench-main.yml", "image", name)["run"], repo, env, bin_dir)
        assert r.returncode == 0, r.stdout + r.stderr
    calls = _calls(tmp_path)
    build = next(c for c in calls if c.startswith("build "))
    assert build.startswith("build -f docker/dind-nvidia.Dockerfile") and build.endswith(" .")
    assert f"--build-arg BASE_IMAGE=ubuntu:24.04@{BASE_DIGEST} " in build  # FROM the lock's digest
    ref = (repo / "image-ref.txt").read_text().strip()
    assert ref == f"{REPO}@{DIGEST}"

    pin = _step("bench-main.yml", "image", "Name the pushed dind image")
    assert pin["if"] == "matrix.vendor == 'dind-nvidia'"
    r = _bash(pin["run"], repo, env, bin_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"+        image: {ref}" in r.stdout  # the change to commit, in the log
    for f in NVIDIA_VALUES:
        values = arc.load(repo / f)
        dind = next(c for c in values["template"]["spec"]["initContainers"] if c["name"] == "dind")
        assert dind["image"] == ref and arc.problems(values) == []
    assert _bash("ci/arc-dind.sh check", repo, {}, bin_dir).returncode == 0
    handed = _step("bench-main.yml", "image", "Hand the scale sets' values back")
    assert handed["if"] == pin["if"] and set(handed["with"]["path"].split()) == set(NVIDIA_VALUES)

    # history: the artifact image-dind-nvidia becomes bench-results' images/dind-nvidia.txt.
    history = _filed_by_history(repo, tmp_path, "image-dind-nvidia", bin_dir)
    assert (history / "images" / "dind-nvidia.txt").read_text().strip() == ref


@pytest.mark.parametrize("content, why", [
    (f"ghcr.io/someone/else/vlmpath-dind-nvidia@{DIGEST}", "refusing another image"),
    (f"{REPO}:main", "does not hold one"),  # a tag moves: never written
    (f"{REPO}@{DIGEST}\nimage: evil", None),  # only the first line is read, and checked
    (f"{REPO}@sha256:1234", "does not hold one"),
])
def test_a_reference_that_is_not_mains_dind_digest_is_refused_and_nothing_is_written(tmp_path, content, why):
    repo = _checkout(tmp_path)
    (repo / "ref.txt").write_text(content + "\n")
    before = {f: (repo / f).read_text() for f in NVIDIA_VALUES}
    r = _bash("ci/arc-dind.sh pin ref.txt", repo, {}, _fake_docker(tmp_path))
    if why is None:
        assert r.returncode == 0 and all("evil" not in (repo / f).read_text() for f in NVIDIA_VALUES)
        return
    assert r.returncode == 2 and why in r.stderr, r.stderr
    assert {f: (repo / f).read_text() for f in NVIDIA_VALUES} == before


def test_a_values_file_without_exactly_one_dind_image_line_is_refused(tmp_path):
    repo = _checkout(tmp_path)
    (repo / "ref.txt").write_text(f"{REPO}@{DIGEST}\n")
    values = repo / NVIDIA_VALUES[1]
    text = values.read_text()
    values.write_text(text.replace(f"image: {REPO}@unresolved", "image: docker:27.5.1-dind"))
    r = _bash("ci/arc-dind.sh pin ref.txt", repo, {}, _fake_docker(tmp_path))
    assert r.returncode == 2 and "has not exactly one" in r.stderr
    assert f"{REPO}@unresolved" in (repo / NVIDIA_VALUES[0]).read_text()  # every file checked first
    assert yaml.safe_load(values.read_text())  # left as it was


def test_the_dind_scripts_pass_shellcheck():
    import dockerlint

    tool = dockerlint.find_tool("shellcheck")
    assert tool, "shellcheck is not installed; run: pip install -r ci/requirements-lint.txt"
    r = subprocess.run([tool, str(ROOT / "ci/arc-dind.sh"), str(ROOT / "docker/dind-entrypoint.sh")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
