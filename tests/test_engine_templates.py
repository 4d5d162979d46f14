"""Do the workflow templates for an engine repository keep the same security rules as ours?

``ci/templates/sglang-bench-pr.yml`` runs the engine PR's code: read-only token, no
secrets, no write permission anywhere, no credentials left in the checkouts, untrusted
values only through ``env:``, a job per vendor (NVIDIA, AMD) plus a CPU job, each running
``vlmpath ci pr --engine-src`` and uploading one artifact. ``sglang-bench-comment.yml``
holds the only write token and never checks out the engine (only the pinned vlmpath),
rebuilds the comparison with ``vlmpath ci merge`` and posts through the wrapper. Each rule
is shown to catch a planted mistake; GitHub's schema is checked as for our own workflows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from test_workflows import jobs_without_timeout, load, steps, unsafe_run_lines, uses

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "ci" / "templates"
PR_T = TEMPLATES / "sglang-bench-pr.yml"
COMMENT_T = TEMPLATES / "sglang-bench-comment.yml"


def pr_violations(wf: dict[str, Any]) -> list[str]:
    """What lets PR code write, read a secret or keep a token (empty = safe)."""
    out = []
    if set(wf["on"]) != {"pull_request"}:
        out.append(f"triggers {sorted(wf['on'])}: only pull_request (never pull_request_target)")
    if wf.get("permissions") != {"contents": "read"}:
        out.append(f"workflow permissions {wf.get('permissions')!r}: must be contents: read")
    out += [f"job {j} sets its own permissions" for j, job in wf["jobs"].items() if "permissions" in job]
    values = yaml.safe_dump(wf)  # comments dropped: only what GitHub evaluates
    if "secrets." in values:
        out.append("a secret is referenced")
    for _, step in steps(wf):
        if str(step.get("uses", "")).startswith("actions/checkout") and \
                (step.get("with") or {}).get("persist-credentials") is not False:
            out.append(f"checkout {step.get('name')!r} keeps the token in .git/config")
    out += [f"untrusted expression in run: {x}" for x in unsafe_run_lines(wf)]
    return out


def comment_violations(wf: dict[str, Any]) -> list[str]:
    """What would let the write-token job run PR code (empty = safe)."""
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
    if "${{" in runs:
        out.append("an expression inside a run: script")
    if "vlmpath ci merge" not in runs or "post-comment.sh" not in runs:
        out.append("the comment must be rebuilt by `vlmpath ci merge` and posted by post-comment.sh")
    return out


@pytest.fixture(scope="module")
def pr_t() -> dict[str, Any]:
    return load(PR_T)


@pytest.fixture(scope="module")
def comment_t() -> dict[str, Any]:
    return load(COMMENT_T)


def test_pr_template_gives_pr_code_no_write_token_and_no_secret(pr_t):
    assert pr_violations(pr_t) == []
    assert jobs_without_timeout(pr_t) == []


@pytest.mark.parametrize("plant, words", [
    (lambda wf: wf.update(permissions={"contents": "read", "pull-requests": "write"}), "permissions"),
    (lambda wf: wf.update(on={"pull_request_target": None}), "pull_request_target"),
    (lambda wf: wf["jobs"]["cpu"].update(permissions={"contents": "write"}), "own permissions"),
    (lambda wf: wf["jobs"]["cpu"]["steps"][0]["with"].pop("persist-credentials"), "keeps the token"),
    (lambda wf: wf["jobs"]["cpu"]["steps"].append({"run": "echo ${{ secrets.X }}"}), "secret"),
], ids=["write-permission", "pull_request_target", "job-permissions", "credentials", "secret"])
def test_each_pr_rule_catches_a_planted_mistake(plant, words):
    wf = load(PR_T)
    plant(wf)
    assert any(words in v for v in pr_violations(wf)), pr_violations(wf)


def test_pr_template_benchmarks_the_engine_on_nvidia_amd_and_cpu(pr_t):
    gpu, cpu = pr_t["jobs"]["gpu"], pr_t["jobs"]["cpu"]
    assert {e["vendor"] for e in gpu["strategy"]["matrix"]["include"]} == {"nvidia", "amd"}
    assert cpu["runs-on"] == "ubuntu-latest"
    for job in (gpu, cpu):
        runs = "\n".join(str(s.get("run", "")) for s in job["steps"])
        assert "ci pr --engine-src" in runs and '--base "$BASE_SHA" --head "$HEAD_SHA"' in runs
        assert "engine install" in runs
        outs = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact")]
        assert len(outs) == 1 and outs[0]["with"]["name"].startswith("bench-")
        engine = next(s for s in job["steps"] if (s.get("with") or {}).get("path") == "engine")
        assert engine["with"]["fetch-depth"] == 0  # the merge-base needs the history
        assert engine["with"]["ref"] == "${{ github.event.pull_request.head.sha }}"
    assert pr_t["env"]["BASE_SHA"] == "${{ github.event.pull_request.base.sha }}"


def test_comment_template_writes_prs_and_never_checks_out_the_engine(comment_t, pr_t):
    assert comment_violations(comment_t) == []
    assert comment_t["on"]["workflow_run"]["workflows"] == [pr_t["name"]]
    perms = comment_t["permissions"]
    assert perms == {"contents": "read", "pull-requests": "write", "actions": "read"}
    (dl,) = uses(comment_t, "actions/download-artifact")
    assert dl["with"]["run-id"] == "${{ github.event.workflow_run.id }}" and dl["with"]["pattern"] == "bench-*"


@pytest.mark.parametrize("plant, words", [
    (lambda s: s["with"].update(ref="${{ github.event.workflow_run.head_sha }}"), "ref from the triggering run"),
    (lambda s: s["with"].update(repository="${{ github.repository }}"), "not the pinned vlmpath"),
    (lambda s: s["with"].pop("persist-credentials"), "keeps the write token"),
], ids=["pr-ref", "engine-repo", "credentials"])
def test_each_comment_rule_catches_a_planted_mistake(plant, words):
    wf = load(COMMENT_T)
    plant(uses(wf, "actions/checkout")[0])
    assert any(words in v for v in comment_violations(wf)), comment_violations(wf)


@pytest.mark.e2e
def test_templates_match_the_github_schema():
    from test_workflows_schema import _validate

    r = _validate(PR_T, COMMENT_T)
    assert r.returncode == 0, r.stdout + r.stderr
