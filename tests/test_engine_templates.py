"""Do the engine repositories' workflow templates follow our own trust model, for every engine?

``ci/templates/<engine>-bench-{pr,gpu,comment}.yml`` are rendered from one source per
workflow (``ci/templates/source/``) and the engine table of ``vlmpath.render.ci_templates``;
the checked-in files must equal a fresh render. On each rendered file, the rules of
docs/ci-security.md:

- ``-bench-pr`` (``pull_request``: the file comes from the PR) runs on hosted runners
  only, read-only, no secret, no label gate (a gate in a PR-controlled file is none);
- ``-bench-gpu`` runs PR code on self-hosted GPUs only from ``workflow_dispatch`` behind
  an environment approval, after checking the PR head is the named SHA, on runner labels
  distinct from the trusted runners' (``bench-main.yml``), with no docker volume that
  outlives the job;
- ``-bench-comment`` never checks out the engine, rebuilds the comparison with
  ``vlmpath ci merge`` and posts through the wrapper;
- in every file: write tokens only in steps that post, SHA-pinned actions on Node 24
  majors, untrusted values only through ``env:``, a timeout per job.

Each rule is shown to catch a planted mistake. zizmor over the templates runs in
tests/test_workflow_trust.py, the schema check (e2e) here.
"""

from __future__ import annotations

import copy
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_workflow_trust import pin_problems, token_outside_posting_steps, trust_violations
from test_workflows import MAIN_WF, jobs_without_timeout, load, steps, unsafe_run_lines, uses

from vlmpath.cli import main
from vlmpath.render import ci_templates

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "ci" / "templates"
ENGINES = [e.name for e in ci_templates.engines()]
HOSTED = re.compile(r"^(ubuntu|windows|macos)-[\w.-]+$")
# A docker volume by name (not a path or $PWD): it outlives the job on that host.
_NAMED_VOLUME = re.compile(r"""(?:-v|--volume|--mount)[ =]["']?(?![/$.~])[\w.$-]+:/""")


def template(engine: str, kind: str) -> Path:
    return TEMPLATES / f"{engine}-bench-{kind}.yml"


ALL_T = [template(e, k) for e in ENGINES for k in ("pr", "gpu", "comment")]


def _labels(job: dict[str, Any]) -> list[str]:
    runner = str(job.get("runs-on", ""))
    if "${{" not in runner:
        return [runner]
    return [str(e.get("runner", "")) for e in job.get("strategy", {}).get("matrix", {}).get("include", [])]


def _label_defaults(labels: list[str]) -> set[str]:
    """'nvidia-gpu-pr' from "${{ vars.X || 'nvidia-gpu-pr' }}", and the variable name X."""
    out = set()
    for lb in labels:
        out.update(re.findall(r"'([\w.-]+)'", lb) + re.findall(r"vars\.(\w+)", lb))
        if "${{" not in lb:
            out.add(lb)
    return out


def _trusted_labels() -> set[str]:
    main = load(MAIN_WF)
    return _label_defaults(_labels(main["jobs"]["gpu"]))


def pr_violations(wf: dict[str, Any]) -> list[str]:
    """What lets PR code (its own workflow file) reach a GPU, a write token or a secret."""
    out = []
    if set(wf["on"]) != {"pull_request"}:
        out.append(f"triggers {sorted(wf['on'])}: only pull_request (never pull_request_target)")
    if "labeled" in (wf["on"]["pull_request"] or {}).get("types", []):
        out.append("runs on 'labeled': a label gate in the PR's own file")
    if wf.get("permissions") != {"contents": "read"}:
        out.append(f"workflow permissions {wf.get('permissions')!r}: must be contents: read")
    for jid, job in wf["jobs"].items():
        if "permissions" in job:
            out.append(f"job {jid} sets its own permissions")
        if not all(HOSTED.match(lb) for lb in _labels(job)):
            out.append(f"job {jid} runs PR code on self-hosted {_labels(job)}")
        if "label" in str(job.get("if", "")):
            out.append(f"job {jid} is gated on a label in the PR's own file")
    if "secrets." in yaml.safe_dump(wf):
        out.append("a secret is referenced")
    for _, step in steps(wf):
        if str(step.get("uses", "")).startswith("actions/checkout") and \
                (step.get("with") or {}).get("persist-credentials") is not False:
            out.append(f"checkout {step.get('name')!r} keeps the token in .git/config")
    return out


def gpu_violations(wf: dict[str, Any], trusted: set[str]) -> list[str]:
    """What lets PR code onto a GPU box without approval, or persist there."""
    out = list(trust_violations(wf))
    if set(wf["on"]) != {"workflow_dispatch"}:
        out.append(f"triggers {sorted(wf['on'])}: only workflow_dispatch (a maintainer names PR and SHA)")
    verify = wf["jobs"].get("verify", {})
    script = "\n".join(str(s.get("run", "")) for s in verify.get("steps", []))
    if '[[ "$head" == "$HEAD_SHA" ]]' not in script:
        out.append("no verify job checking that the PR head is the named SHA")
    for jid, job in wf["jobs"].items():
        labels = _labels(job)
        if all(HOSTED.match(lb) for lb in labels):
            continue
        if not job.get("environment"):
            out.append(f"{jid}: self-hosted without an environment approval")
        if "verify" not in (job.get("needs") or []) and job.get("needs") != "verify":
            out.append(f"{jid}: does not wait for the verify job")
        shared = _label_defaults(labels) & trusted
        if shared:
            out.append(f"{jid}: runner labels {sorted(shared)} are the trusted runners'")
        for step in job.get("steps", []):
            for m in _NAMED_VOLUME.finditer(str(step.get("run", ""))):
                out.append(f"{jid}: mounts a named docker volume ({m.group(0)}) into PR code")
    return out


def comment_violations(wf: dict[str, Any]) -> list[str]:
    """What would let a write-token job run PR code."""
    out = []
    if list(wf["on"]) != ["workflow_run"]:
        out.append("the comment workflow must run on workflow_run only")
    for step in uses(wf, "actions/checkout"):
        w = step.get("with") or {}
        if "VLMPATH_REPOSITORY" not in str(w.get("repository", "")):
            out.append(f"checkout {step.get('name')!r} is not the pinned vlmpath")
        if any(k in str(w.get("ref", "")) for k in ("workflow_run", "pull_request", "head")):
            out.append(f"checkout {step.get('name')!r} takes a ref from the triggering run")
        if w.get("persist-credentials") is not False:
            out.append(f"checkout {step.get('name')!r} keeps the write token in .git/config")
    runs = "\n".join(str(s.get("run", "")) for _, s in steps(wf))
    if "vlmpath ci merge" not in runs or "post-comment.sh" not in runs:
        out.append("the comment must be rebuilt by `vlmpath ci merge` and posted by post-comment.sh")
    return out


# --- one source ----------------------------------------------------------------------
def test_the_checked_in_templates_are_the_render_of_the_one_source():
    assert ci_templates.stale(ROOT) == []
    assert {p.name for p in TEMPLATES.glob("*.yml")} == {p.name for p in ALL_T}
    assert {"sglang", "vllm"} <= set(ENGINES)


def test_a_hand_edited_or_stray_template_is_stale(tmp_path):
    shutil.copytree(ROOT / "ci" / "templates", tmp_path / "ci" / "templates")
    edited = tmp_path / "ci" / "templates" / "vllm-bench-gpu.yml"
    edited.write_text(edited.read_text().replace("environment: vlmpath-gpu-bench\n", ""))
    (tmp_path / "ci" / "templates" / "old-bench.yml").write_text("name: old\n")
    assert ci_templates.stale(tmp_path) == ["old-bench.yml", "vllm-bench-gpu.yml"]
    assert main(["ci", "templates", "--root", str(tmp_path), "--check"]) == 1
    assert main(["ci", "templates", "--root", str(tmp_path), "--write"]) == 0
    assert ci_templates.stale(tmp_path) == ["old-bench.yml"]  # a stray is reported, never deleted


def test_each_engine_gets_its_own_name_release_and_paths():
    for e in ci_templates.engines():
        pr = load(template(e.name, "pr"))
        assert pr["name"] == f"{e.name}-bench-pr"
        assert pr["on"]["pull_request"]["paths"] == [*e.paths, f".github/workflows/{e.name}-bench-pr.yml"]
        assert pr["env"]["ENGINE_RELEASE"] == f"${{{{ vars.{e.name.upper()}_ENV_RELEASE || '{e.release}' }}}}"
        assert load(template(e.name, "comment"))["on"]["workflow_run"]["workflows"] == [pr["name"]]
        for kind in ("pr", "gpu"):
            text = template(e.name, kind).read_text()
            assert f'engine install "{e.name}==$ENGINE_RELEASE"' in text
            assert not re.search(r"@[A-Z_]+@", text)  # every placeholder filled


def test_render_refuses_an_unknown_placeholder():
    with pytest.raises(KeyError, match="@NOPE@"):
        ci_templates.render("name: @NOPE@\n", ci_templates.engines()[0], "x.yml")


# --- the trust model, per rendered file ----------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
def test_pr_template_is_hosted_read_only_and_ungated(engine):
    wf = load(template(engine, "pr"))
    assert pr_violations(wf) == []
    gpu, cpu = (wf["jobs"].get("gpu"), wf["jobs"]["cpu"])
    assert gpu is None and cpu["runs-on"] == "ubuntu-latest"
    runs = "\n".join(str(s.get("run", "")) for s in cpu["steps"])
    assert "ci pr --engine-src" in runs and '--base "$BASE_SHA" --head "$HEAD_SHA"' in runs


@pytest.mark.parametrize("engine", ENGINES)
def test_gpu_template_is_dispatched_approved_ephemeral_and_volume_free(engine):
    wf = load(template(engine, "gpu"))
    assert gpu_violations(wf, _trusted_labels()) == []
    gpu = wf["jobs"]["gpu"]
    assert {e["vendor"] for e in gpu["strategy"]["matrix"]["include"]} == {"nvidia", "amd"}
    (pr_co,) = [s for s in gpu["steps"] if (s.get("with") or {}).get("path") == "engine"]
    assert pr_co["with"]["ref"] == "${{ inputs.sha }}" and pr_co["with"]["fetch-depth"] == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_comment_template_never_checks_out_the_engine(engine):
    wf = load(template(engine, "comment"))
    assert comment_violations(wf) == []
    (dl,) = uses(wf, "actions/download-artifact")
    assert dl["with"]["run-id"] == "${{ github.event.workflow_run.id }}" and dl["with"]["pattern"] == "bench-*"


@pytest.mark.parametrize("path", ALL_T, ids=lambda p: p.name)
def test_every_template_pins_actions_keeps_tokens_in_posting_steps_and_times_out(path):
    wf = load(path)
    text = path.read_text(encoding="utf-8")
    assert pin_problems(text) == []
    assert token_outside_posting_steps(wf) == []
    assert unsafe_run_lines(wf) == [] and jobs_without_timeout(wf) == []


def _plant(kind: str, mutate) -> dict[str, Any]:
    wf = copy.deepcopy(load(template(ENGINES[0], kind)))
    mutate(wf)
    return wf


@pytest.mark.parametrize("kind, mutate, words", [
    ("pr", lambda wf: wf["on"]["pull_request"]["types"].append("labeled"), "label gate"),
    ("pr", lambda wf: wf["jobs"]["cpu"].update({"if": "contains(github.event.pull_request.labels.*.name, 'gpu')"}),
     "gated on a label"),
    ("pr", lambda wf: wf["jobs"]["cpu"].update({"runs-on": "nvidia-gpu"}), "self-hosted"),
    ("pr", lambda wf: wf["jobs"]["cpu"]["steps"][0]["with"].pop("persist-credentials"), "keeps the token"),
    ("gpu", lambda wf: wf["jobs"]["gpu"].pop("environment"), "without an environment approval"),
    ("gpu", lambda wf: wf["jobs"]["gpu"]["strategy"]["matrix"]["include"][0].update(
        runner="${{ vars.NVIDIA_RUNNER_LABEL || 'nvidia-gpu' }}"), "are the trusted runners'"),
    ("gpu", lambda wf: wf.update(on={"pull_request": None}), "only workflow_dispatch"),
    ("gpu", lambda wf: wf["jobs"]["gpu"]["steps"][-3].update(
        run='docker run --rm -v "vlmpath-engine-envs-$VENDOR:/engines" "$IMAGE" engine list'), "named docker volume"),
    ("gpu", lambda wf: wf["jobs"]["verify"]["steps"][0].update(run="echo ok"), "named SHA"),
    ("comment", lambda wf: uses(wf, "actions/checkout")[0]["with"].update(
        ref="${{ github.event.workflow_run.head_sha }}"), "ref from the triggering run"),
], ids=["labeled", "label-if", "self-hosted-pr", "credentials", "no-environment", "trusted-label",
        "pull_request", "named-volume", "no-verify", "comment-pr-ref"])
def test_each_rule_catches_a_planted_mistake(kind, mutate, words):
    wf = _plant(kind, mutate)
    found = {"pr": pr_violations, "gpu": lambda w: gpu_violations(w, _trusted_labels()),
             "comment": comment_violations}[kind](wf)
    assert any(words in v for v in found), found


@pytest.mark.e2e
def test_templates_match_the_github_schema():
    from test_workflows_schema import _validate

    r = _validate(*ALL_T)
    assert r.returncode == 0, r.stdout + r.stderr


def test_template_engines_are_engines_vlmpath_drives():
    registry = pytest.importorskip("vlmpath.engines.registry",
                                   reason="the engine registry is not merged into this branch yet")
    assert {e.name for e in ci_templates.engines()} == set(registry.names())


# --- the image: the pinned vlmpath's, by digest ------------------------------------------------
def _image_step(engine: str) -> dict[str, Any]:
    gpu = load(template(engine, "gpu"))["jobs"]["gpu"]
    return next(s for s in gpu["steps"] if "image by digest" in s.get("name", ""))


@pytest.mark.parametrize("engine", ENGINES)
def test_gpu_template_pulls_the_pinned_vlmpaths_image_by_digest_never_a_tag_build(engine):
    """The same digest flow as bench-gpu.yml: no `docker build` of its own, the digests from
    vlmpath's bench-results read-only, and no licence to resolve a base image's tag."""
    gpu = load(template(engine, "gpu"))["jobs"]["gpu"]
    runs = "\n".join(str(s.get("run", "")) for s in gpu["steps"])
    assert "docker build" not in runs and "docker pull" not in runs  # only ci/image.sh, which pins
    assert "VLMPATH_RESOLVE_BASE" not in yaml.safe_dump(gpu)
    (images,) = [s for s in gpu["steps"] if (s.get("with") or {}).get("path") == "vlmpath-images"]
    assert images["with"] == {"repository": "${{ env.VLMPATH_REPOSITORY }}", "ref": "bench-results",
                              "path": "vlmpath-images", "sparse-checkout": "images", "persist-credentials": False}
    assert images.get("continue-on-error") is True
    step = _image_step(engine)
    assert gpu["steps"].index(images) < gpu["steps"].index(step)
    assert 'vlmpath/ci/image.sh pull-or-build "vlmpath-images/images/$VENDOR/$commit.txt"' in step["run"]


def _job_dir(tmp: Path, *, pinned: bool, digest_for: str | None) -> tuple[Path, str]:
    """The gpu job's directory: vlmpath/ (the pinned checkout) and vlmpath-images/ (bench-results)."""
    import subprocess

    from test_image_digest import DIGEST, _pin

    job = tmp / "job"
    shutil.copytree(ROOT / "ci", job / "vlmpath" / "ci")
    shutil.copytree(ROOT / "docker", job / "vlmpath" / "docker")
    if pinned:
        _pin(job / "vlmpath" / "docker")
    git = ["git", "-C", str(job / "vlmpath")]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "pinned"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    ref = f"ghcr.io/vlmpath/vlmpath/vlmpath-nvidia@{DIGEST}"
    if digest_for is not None:
        (job / "vlmpath-images/images/nvidia").mkdir(parents=True)
        (job / "vlmpath-images/images/nvidia" / f"{digest_for or commit}.txt").write_text(ref + "\n")
        (job / "vlmpath-images/images/nvidia.txt").write_text(ref + "\n")  # main's latest: not this one's
    return job, ref


@pytest.mark.parametrize("case", ["digest-of-the-pinned-commit", "only-another-commits", "none", "unpinned-base"])
def test_gpu_templates_image_step_pulls_the_pinned_commits_digest_else_builds_from_the_pinned_base(tmp_path, case):
    from test_image_digest import BASE_DIGEST, CUDA_BASE, _bash, _calls, _fake_docker

    job, ref = _job_dir(tmp_path, pinned=case != "unpinned-base",
                        digest_for={"digest-of-the-pinned-commit": "", "only-another-commits": "f" * 40}.get(case))
    bin_dir = _fake_docker(tmp_path)
    r = _bash(_image_step(ENGINES[0])["run"], job, {"VENDOR": "nvidia", "DOCKERFILE": "docker/cuda.Dockerfile",
                                                    "IMAGE": "vlmpath:cuda-engine-pr"}, bin_dir)
    calls = _calls(tmp_path)
    if case == "digest-of-the-pinned-commit":
        assert r.returncode == 0, r.stderr
        assert calls == [f"pull {ref}", f"tag {ref} vlmpath:cuda-engine-pr"]
    elif case == "unpinned-base":  # the lock has no digest: nothing is built from a tag
        assert r.returncode == 3 and "not pinned by digest" in r.stderr
        assert not [c for c in calls if c.startswith(("build", "pull"))]
    else:  # main's latest image is not the pinned vlmpath: built from the pinned checkout
        assert r.returncode == 0, r.stderr
        assert "no image digest recorded" in r.stdout and not [c for c in calls if c.startswith("pull")]
        (build,) = [c for c in calls if c.startswith("build ")]
        assert build.startswith("build -f vlmpath/docker/cuda.Dockerfile") and build.endswith(" vlmpath")
        assert f"--build-arg BASE_IMAGE={CUDA_BASE}@{BASE_DIGEST} " in build


def test_the_history_files_each_image_digest_per_commit_for_the_engine_templates(tmp_path):
    from test_image_digest import DIGEST, _bash, _fake_docker

    new, results = tmp_path / "new", tmp_path / "history" / "results"
    (new / "image-amd").mkdir(parents=True)
    results.mkdir(parents=True)
    ref = f"ghcr.io/o/n/vlmpath-amd@{DIGEST}"
    (new / "image-amd" / "image-ref.txt").write_text(ref + "\n")
    sha = "a" * 40
    r = _bash(f"ci/history.sh append {new} {results}", ROOT, {"REPO": "o/n", "SHA": sha}, _fake_docker(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    images = tmp_path / "history" / "images"
    assert (images / "amd.txt").read_text() == (images / "amd" / f"{sha}.txt").read_text() == ref + "\n"
    r = _bash(f"ci/history.sh append {new} {results}", ROOT, {"REPO": "o/n", "SHA": "../../x"}, _fake_docker(tmp_path))
    assert r.returncode == 0 and sorted(p.name for p in (images / "amd").iterdir()) == [f"{sha}.txt"]
