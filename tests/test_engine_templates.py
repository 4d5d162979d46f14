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
