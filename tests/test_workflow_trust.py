"""Can untrusted code use the workflows to reach a GPU box, a write token, a secret or the history?

The trust rules of docs/ci-security.md, read from the YAML (what GitHub evaluates):

- a job that checks out or runs PR code has no write permission and no secret, and runs
  on a self-hosted (persistent) runner only behind the approval gate: an ``environment``
  (required reviewers), in a workflow whose file PRs cannot change (not ``pull_request*``);
- only bench-main.yml writes history or baselines (``--trusted``, the trusted results
  volume mounted writable, the history branch, ``contents: write``);
- a write token sits only in the environment of the steps that post, push, file issues or
  ask the API (never a job's env, never an install or merge step);
- an acceptance is never the PR's own: every ``ci merge --accepted`` (the PR head's list)
  comes with ``--base-accepted`` read from the trusted checkout, never from the PR head's
  checkout or an artifact, and the label is read by ``ci label-grant`` in the same job;
- every action is pinned by a full commit SHA with its version in a comment, on a major
  that runs on Node 24; zizmor (offline, default persona, medium and up) finds nothing in
  .github/workflows/ nor in the engine templates of ci/templates/.

Each rule is shown to catch a planted mistake, and the real files stay green.
"""

from __future__ import annotations

import copy
import fnmatch
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_workflows import ALL_WF, COMMENT_WF, GPU_WF, MAIN_WF, PR_WF, load

HOSTED = re.compile(r"^(ubuntu|windows|macos)-[\w.-]+$")
PR_TRIGGERS = {"pull_request", "pull_request_target"}
# Node 24 majors (older majors of these run on Node 20, which runners no longer carry).
MIN_MAJOR = {"actions/checkout": 5, "actions/setup-python": 6, "actions/upload-artifact": 5,
             "actions/download-artifact": 6}
_PIN = re.compile(r"uses:\s*([\w.-]+/[\w./-]+)@(\S+)(?:\s*#\s*v(\d+)[\w.]*)?")


def _runs_pr_code(wf: dict[str, Any], job: dict[str, Any]) -> bool:
    """Checks out or runs a PR's code: any job of a pull_request workflow (its checkout is the
    PR), or a checkout of a ref that names the PR head or a dispatch input."""
    if PR_TRIGGERS & set(wf["on"]) and any("uses" in s or "run" in s for s in job.get("steps", [])):
        return True
    for s in job.get("steps", []):
        ref = str((s.get("with") or {}).get("ref", ""))
        if str(s.get("uses", "")).startswith("actions/checkout@") and re.search(
                r"pull_request\.head|inputs\.|head_sha|head_ref", ref) and not data_only_checkout(s):
            return True
    return False


#: Files of a PR head a privileged job may read as data (validated by vlmpath, never run).
PR_DATA_FILES = {"benchmarks/accepted.yaml"}


def data_only_checkout(step: dict[str, Any]) -> bool:
    """A checkout of exactly one reviewed data file of the PR head (no cone: no directory,
    no code), without credentials: reading it runs nothing of the PR."""
    w = step.get("with") or {}
    return (str(w.get("sparse-checkout", "")).strip() in PR_DATA_FILES
            and w.get("sparse-checkout-cone-mode") is False and w.get("persist-credentials") is False)


def trust_violations(wf: dict[str, Any]) -> list[str]:
    out = []
    for jid, job in wf["jobs"].items():
        if not _runs_pr_code(wf, job):
            continue
        perms = job.get("permissions", wf.get("permissions", "write-all"))
        if not isinstance(perms, dict) or any(v == "write" for v in perms.values()):
            out.append(f"{jid}: runs PR code with write permissions {perms!r}")
        if "secrets." in yaml.safe_dump(job):
            out.append(f"{jid}: runs PR code with a secret")
        runner = str(job.get("runs-on", ""))
        labels = [runner] if "${{" not in runner else [
            str(e.get("runner", "")) for e in job.get("strategy", {}).get("matrix", {}).get("include", [])]
        if not all(HOSTED.match(lb) for lb in labels):
            gated = bool(job.get("environment")) and not (PR_TRIGGERS & set(wf["on"]))
            if not gated:
                out.append(f"{jid}: runs PR code on self-hosted {labels} without the approval gate")
    return out


def history_writes(text: str, wf: dict[str, Any]) -> list[str]:
    """What in this workflow writes trusted history or baselines."""
    found = []
    if re.search(r"\brun\b[^\n]*--trusted\b", text) or re.search(r'"\$IMAGE" run --trusted', text):
        found.append("vlmpath run --trusted")
    if re.search(r"(?:vlmpath-trusted-results-[^\s:\"]*|trusted[\w/]*):/trusted(?!:ro)[\"\s]", text):
        found.append("trusted results mounted writable")
    if re.search(r"ci/history\.sh (?:push|publish)|git push", text):
        found.append("history branch")
    for jid, job in wf["jobs"].items():
        if (job.get("permissions") or {}).get("contents") == "write":
            found.append(f"{jid}: contents: write")
    return found


_TOKEN = re.compile(r"\$\{\{\s*(?:github\.token|secrets\.GITHUB_TOKEN)\s*\}\}")
# What a step with a token may run: post a comment, file issues, fetch/push history, ask the API
# (`gh api`, or `vlmpath ci label-grant`: who applied the acceptance label, nothing written),
# log in to the container registry (bench-main's image job, which then pushes main's image).
_POSTS = re.compile(r"post-comment\.sh|vlmpath ci alert|ci/history\.sh|\bgh api\b|docker login ghcr\.io"
                    r"|vlmpath ci label-grant")


def token_outside_posting_steps(wf: dict[str, Any]) -> list[str]:
    """A token where code that posts nothing runs with it: a job env (every step gets it)
    of a job with write permissions, or a step that does not post."""
    out = []
    for jid, job in wf["jobs"].items():
        perms = job.get("permissions", wf.get("permissions")) or {}
        writes = not isinstance(perms, dict) or any(v == "write" for v in perms.values())
        if writes and _TOKEN.search(yaml.safe_dump(job.get("env") or {})):
            out.append(f"{jid}: a token in the job's env (every step of a job that may write gets it)")
        for step in job.get("steps", []):
            if _TOKEN.search(yaml.safe_dump(step.get("env") or {})) and not _POSTS.search(str(step.get("run", ""))):
                out.append(f"{jid}: step {step.get('name')!r} has a token and posts nothing")
    return out


@pytest.mark.parametrize("path", ALL_WF, ids=lambda p: p.name)
def test_no_job_running_pr_code_has_write_secrets_or_an_ungated_self_hosted_runner(path):
    assert trust_violations(load(path)) == []


def test_the_trust_rule_sees_each_planted_mistake():
    pr, gpu = load(PR_WF), load(GPU_WF)
    bad = copy.deepcopy(pr)
    bad["jobs"]["cpu"]["permissions"] = {"contents": "write"}
    bad["jobs"]["cpu"]["env"]["T"] = "${{ secrets.NPM_TOKEN }}"
    bad["jobs"]["cpu"]["runs-on"] = "nvidia-gpu"
    assert len(trust_violations(bad)) == 3
    ungated = copy.deepcopy(gpu)
    del ungated["jobs"]["gpu"]["environment"]
    (v,) = trust_violations(ungated)
    assert v.startswith("gpu: runs PR code on self-hosted") and "nvidia-gpu-pr" in v and v.endswith("approval gate")
    # The gate written into a pull_request workflow is no gate: the PR edits that file.
    in_pr_file = copy.deepcopy(gpu)
    in_pr_file["on"] = {"pull_request": None}
    assert any("without the approval gate" in v for v in trust_violations(in_pr_file))
    no_perms = copy.deepcopy(gpu)
    del no_perms["permissions"]
    del no_perms["jobs"]["gpu"]["permissions"]
    assert any("write permissions" in v for v in trust_violations(no_perms))


def test_only_the_main_workflow_writes_history():
    writers = {p.name: history_writes(p.read_text(encoding="utf-8"), load(p)) for p in ALL_WF}
    assert {n for n, w in writers.items() if w} == {MAIN_WF.name}
    assert set(writers[MAIN_WF.name]) >= {"vlmpath run --trusted", "history branch",
                                          "history-cpu: contents: write", "history-gpu: contents: write"}
    main = load(MAIN_WF)
    assert set(main["on"]) == {"push", "schedule"} and main["on"]["push"]["branches"] == ["main"]
    # A PR job mounting the trusted store writable, or stamping its results trusted, is seen.
    gpu_text = GPU_WF.read_text(encoding="utf-8")
    assert '"$PWD/trusted/results:/trusted:ro"' in gpu_text
    planted = gpu_text.replace(":/trusted:ro", ":/trusted").replace("ci pr --base", "run --trusted --base")
    assert len(history_writes(planted, load(GPU_WF))) == 2


def test_gpu_base_reuse_reads_the_history_branch_read_only():
    gpu = load(GPU_WF)["jobs"]["gpu"]
    (trusted,) = [s for s in gpu["steps"] if (s.get("with") or {}).get("ref") == "bench-results"]
    assert trusted["with"]["path"] == "trusted" and trusted["with"]["persist-credentials"] is False
    assert trusted.get("continue-on-error") is True  # before main's first run there is no branch
    bench = next(s for s in gpu["steps"] if "--trusted-results /trusted" in str(s.get("run", "")))
    assert '-v "$PWD/trusted/results:/trusted:ro"' in bench["run"]
    assert not re.search(r"-v \"?[\w.-]+:/", bench["run"])  # no host-local named volume


def _artifact_globs(pattern: str) -> set[str]:
    """download-artifact's pattern with its braces expanded (minimatch: nested braces too)."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if m is None:
        return {pattern}
    return {g for alt in m.group(1).split(",") for g in _artifact_globs(pattern[:m.start()] + alt + pattern[m.end():])}


def test_cpu_history_does_not_wait_for_gpu_runners():
    main = load(MAIN_WF)
    jobs = main["jobs"]
    assert jobs["history-cpu"]["needs"] == ["cpu"] and jobs["history-gpu"]["needs"] == ["gpu"]
    assert "concurrency" not in main  # a run waiting for GPU runners blocks no later run
    assert all(isinstance(j.get("timeout-minutes"), int) for j in jobs.values())
    assert jobs["history-cpu"]["env"]["ARTIFACTS"] == "main-cpu"
    # The GPU shards and the image digests (the dind image's too), never the CPU's results.
    wanted = _artifact_globs(jobs["history-gpu"]["env"]["ARTIFACTS"])
    assert wanted == {"main-nvidia*", "main-amd*", "image-nvidia*", "image-amd*", "image-dind-nvidia*"}
    uploaded = {"main-nvidia-shard-1", "main-amd-shard-2", "image-nvidia", "image-amd", "image-dind-nvidia"}
    assert {n for n in uploaded | {"main-cpu", "base-images-nvidia", "arc-values-dind-nvidia"}
            if any(fnmatch.fnmatchcase(n, g) for g in wanted)} == uploaded
    assert jobs["history-gpu"]["steps"] == jobs["history-cpu"]["steps"]


@pytest.mark.parametrize("path", ALL_WF, ids=lambda p: p.name)
def test_write_tokens_only_in_the_steps_that_post(path):
    assert token_outside_posting_steps(load(path)) == []


def test_the_token_rule_sees_a_job_env_token_and_a_merge_step_with_one():
    main = copy.deepcopy(load(MAIN_WF))
    main["jobs"]["history-cpu"]["env"]["GITHUB_TOKEN"] = "${{ github.token }}"
    gpu = copy.deepcopy(load(GPU_WF))
    merge = next(s for s in gpu["jobs"]["comment"]["steps"] if "ci merge" in str(s.get("run", "")))
    merge["env"] = {"GH_TOKEN": "${{ github.token }}"}
    assert [v.split(":")[0] for v in token_outside_posting_steps(main)] == ["history-cpu"]
    (v,) = token_outside_posting_steps(gpu)
    assert "posts nothing" in v


def test_pr_gpu_run_names_the_approved_sha_and_checks_the_pr_head():
    gpu = load(GPU_WF)
    assert set(gpu["on"]) == {"workflow_dispatch"} and gpu["permissions"] == {}
    verify = gpu["jobs"]["verify"]
    assert verify["permissions"] == {"pull-requests": "read"}
    script = verify["steps"][0]["run"]
    assert "^[0-9a-f]{40}$" in script and '[[ "$head" == "$HEAD_SHA" ]]' in script
    (pr_co,) = [s for s in gpu["jobs"]["gpu"]["steps"] if (s.get("with") or {}).get("path") == "pr"]
    assert pr_co["with"]["ref"] == "${{ inputs.sha }}" and pr_co["with"]["persist-credentials"] is False


def pins(text: str) -> list[tuple[str, str, int | None]]:
    return [(m.group(1), m.group(2), int(m.group(3)) if m.group(3) else None) for m in _PIN.finditer(text)]


def pin_problems(text: str) -> list[str]:
    out = []
    for action, ref, major in pins(text):
        if not re.fullmatch(r"[0-9a-f]{40}", ref):
            out.append(f"{action}@{ref}: not pinned by a full commit SHA")
        elif major is None:
            out.append(f"{action}@{ref[:8]}: no '# vN' comment naming the version")
        elif major < MIN_MAJOR.get(action, 0):
            out.append(f"{action} v{major}: runs on Node 20")
    return out


@pytest.mark.parametrize("path", ALL_WF, ids=lambda p: p.name)
def test_actions_are_pinned_by_sha_on_node24_majors(path):
    text = path.read_text(encoding="utf-8")
    assert pins(text) and pin_problems(text) == []


def test_the_pin_rule_sees_tags_missing_versions_and_node20_majors():
    text = ("- uses: actions/checkout@v4\n- uses: actions/setup-python@" + "a" * 40 + "\n"
            "- uses: actions/upload-artifact@" + "b" * 40 + " # v4.6.2\n"
            "- uses: actions/checkout@" + "c" * 40 + " # v7.0.1\n")
    assert len(pin_problems(text)) == 3


def _zizmor() -> str:
    tool = shutil.which("zizmor", path=str(Path(sys.executable).parent)) or shutil.which("zizmor")
    if tool is None:
        pytest.fail("zizmor is not installed; run: pip install -r ci/requirements-lint.txt")
    return tool


TEMPLATES = sorted((Path(__file__).resolve().parents[1] / "ci" / "templates").glob("*.yml"))


def _audit(*paths: Path) -> subprocess.CompletedProcess:
    # --offline: no GitHub API (the online audits need a token and the network); files are
    # named one by one, as zizmor collects only .github/workflows/ from a directory.
    return subprocess.run([_zizmor(), "--offline", "--no-progress", "--min-severity", "medium",
                           *map(str, paths)], capture_output=True, text=True, timeout=120)


def test_zizmor_finds_nothing_in_the_workflows_and_the_engine_templates():
    assert len(TEMPLATES) >= 6
    r = _audit(*ALL_WF, *TEMPLATES)
    assert r.returncode == 0, r.stdout + r.stderr
    for p in [*ALL_WF, *TEMPLATES]:
        assert f"completed {p.relative_to(p.parents[2])}" in r.stderr or p.name in r.stderr, p.name


def test_zizmor_flags_the_engine_template_as_it_was(tmp_path):
    """The old sglang template's shape: tag-pinned actions, label gate, pull_request on GPUs."""
    bad = tmp_path / "old-bench-pr.yml"
    bad.write_text("name: old\non:\n  pull_request:\n    types: [opened, labeled]\npermissions:\n  contents: read\n"
                   "jobs:\n  gpu:\n    if: contains(github.event.pull_request.labels.*.name, 'gpu-bench')\n"
                   "    runs-on: nvidia-gpu\n    timeout-minutes: 5\n    steps:\n"
                   "      - uses: actions/checkout@v4\n        with:\n          persist-credentials: false\n"
                   "      - run: docker run -v vlmpath-engine-envs:/engines img\n")
    r = _audit(bad)
    assert r.returncode != 0 and "unpinned-uses" in r.stdout + r.stderr


def test_every_zizmor_ignore_says_why():
    for p in [*ALL_WF, *TEMPLATES]:
        for line in p.read_text(encoding="utf-8").splitlines():
            if "zizmor: ignore[" in line:
                assert re.search(r"zizmor: ignore\[[\w-]+\]\s+--\s+\S", line), f"{p.name}: {line.strip()}"


def test_zizmor_flags_a_planted_pull_request_target_checkout(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("name: bad\non:\n  pull_request_target:\npermissions:\n  contents: write\njobs:\n"
                   "  x:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n"
                   "        with:\n          ref: ${{ github.event.pull_request.head.sha }}\n"
                   "      - run: make\n")
    r = _audit(bad)
    assert r.returncode != 0 and "dangerous-triggers" in r.stdout + r.stderr


def test_only_the_reviewed_data_file_of_the_pr_head_may_be_read_by_a_privileged_job():
    """The comment jobs read the measured commit's benchmarks/accepted.yaml; widening that
    checkout to code (another file, a directory, credentials kept) is PR code again."""
    for wf in (load(COMMENT_WF), load(GPU_WF)):
        assert trust_violations(wf) == []
        for jid, job in wf["jobs"].items():
            for s in job.get("steps", []):
                if not data_only_checkout(s):
                    continue
                for key, value in (("sparse-checkout", "benchmarks/"), ("sparse-checkout", "src/vlmpath/cli/__init__.py"),
                                   ("sparse-checkout-cone-mode", True), ("persist-credentials", True)):
                    planted = copy.deepcopy(wf)
                    step = next(x for x in planted["jobs"][jid]["steps"] if x.get("with") == s.get("with"))
                    step["with"][key] = value
                    perms = planted["jobs"][jid].get("permissions", planted.get("permissions"))
                    assert any(v == "write" for v in perms.values())
                    assert trust_violations(planted), (jid, key, value)


def acceptance_problems(wf: dict[str, Any]) -> list[str]:
    """Where a privileged merge could take an acceptance from the PR: ``--accepted`` without
    ``--base-accepted``, a base list read from a PR-head checkout or an artifact, a grant
    that no ``ci label-grant`` step of the job wrote."""
    out = []
    for jid, job in wf["jobs"].items():
        steps = job.get("steps", [])
        untrusted = [str((s.get("with") or {}).get("path", ".")) for s in steps
                     if str(s.get("uses", "")).startswith(("actions/download-artifact@", "actions/checkout@"))
                     and ("download-artifact" in str(s.get("uses")) or "ref" in (s.get("with") or {}))]
        runs = [str(s.get("run", "")) for s in steps]
        for run in runs:
            if "vlmpath ci merge" not in run or "--accepted" not in run:
                continue
            base = re.findall(r"--base-accepted\s+(\S+)", run)
            if not base:
                out.append(f"{jid}: ci merge --accepted without --base-accepted: the PR's own entries would count")
            for b in base:
                if any(b.startswith(u.rstrip("/") + "/") for u in untrusted if u != "."):
                    out.append(f"{jid}: --base-accepted {b} is read from the PR's checkout or an artifact")
            if "--grant" in run and not any("vlmpath ci label-grant" in r for r in runs):
                out.append(f"{jid}: ci merge --grant, but no step of the job reads the label")
    return out


@pytest.mark.parametrize("path", [COMMENT_WF, GPU_WF], ids=lambda p: p.name)
def test_privileged_merges_take_acceptance_from_the_base_branch_or_a_label(path):
    assert acceptance_problems(load(path)) == []


def test_the_acceptance_rule_sees_a_pr_granting_itself():
    wf = load(COMMENT_WF)
    merge = next(s for s in wf["jobs"]["comment"]["steps"] if "vlmpath ci merge" in str(s.get("run", "")))
    assert "--base-accepted benchmarks/accepted.yaml" in merge["run"] and "--fail" in merge["run"]
    for old, new in (("accepted=(--base-accepted benchmarks/accepted.yaml)", "accepted=()"),
                     ("--base-accepted benchmarks/", "--base-accepted pr-head/benchmarks/"),
                     ("--base-accepted benchmarks/", "--base-accepted artifacts/bench-cpu/")):
        planted = copy.deepcopy(wf)
        step = next(s for s in planted["jobs"]["comment"]["steps"] if s.get("id") == "merge")
        step["run"] = step["run"].replace(old, new)
        assert len(acceptance_problems(planted)) == 1, new
    no_label = copy.deepcopy(wf)
    no_label["jobs"]["comment"]["steps"] = [s for s in no_label["jobs"]["comment"]["steps"]
                                            if "label-grant" not in str(s.get("run", ""))]
    assert any("no step of the job reads the label" in p for p in acceptance_problems(no_label))


def test_the_label_is_read_for_the_measured_push_and_the_verdict_posted_on_its_head():
    job = load(COMMENT_WF)["jobs"]["comment"]
    assert job["env"]["RUN_CREATED_AT"] == "${{ github.event.workflow_run.created_at }}"
    (grant,) = [s for s in job["steps"] if "vlmpath ci label-grant" in str(s.get("run", ""))]
    assert '--since "$RUN_CREATED_AT"' in grant["run"] and '--head-sha "$RUN_HEAD_SHA"' in grant["run"]
    assert grant.get("continue-on-error") is True  # no grant file: the PR's own entries stay red
    names = [s.get("name") for s in job["steps"]]
    assert names.index(grant["name"]) < names.index(next(s["name"] for s in job["steps"] if s.get("id") == "merge"))
    # The status is posted in the step that first checked the PR's head is the measured sha.
    post = next(s for s in job["steps"] if "post-comment.sh" in str(s.get("run", "")))
    run = post["run"]
    assert run.index('[[ "$pr_head" != "$RUN_HEAD_SHA" ]]') < run.index("statuses/$RUN_HEAD_SHA")
    assert "context=vlmpath/bench" in run and post["env"]["VERDICT"] == "${{ steps.merge.outputs.verdict }}"
    assert load(COMMENT_WF)["permissions"]["statuses"] == "write"
