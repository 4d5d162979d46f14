"""Do the benchmark workflows keep the security and CI rules the schema cannot see?

tests/test_workflows_schema.py checks GitHub's schema; these are the project's rules:
untrusted values reach shell only through ``env:``, the PR workflow (which runs PR code)
has a read-only token and no secrets, only the comment workflow may write to PRs and it
never checks out PR code, every job has a timeout, and the matrix covers NVIDIA, AMD and
CPU. Each rule is also shown to catch a deliberately broken workflow.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
PR_WF = WORKFLOWS / "bench-pr.yml"
COMMENT_WF = WORKFLOWS / "bench-comment.yml"
GPU_WF = WORKFLOWS / "bench-gpu.yml"
MAIN_WF = WORKFLOWS / "bench-main.yml"
ALL_WF = [PR_WF, COMMENT_WF, GPU_WF, MAIN_WF]

# Expressions that must never be pasted into a shell script: event payloads (titles,
# branch names: attacker-controlled) and step outputs (may carry artifact contents).
_UNSAFE_IN_RUN = re.compile(r"\$\{\{[^}]*\b(github\.event\.|steps\.[^}]*\.outputs\.|github\.head_ref)")


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    # PyYAML (YAML 1.1) reads the key "on" as the boolean True.
    if True in data:
        data["on"] = data.pop(True)
    return data


def steps(wf: dict[str, Any]):
    for job_id, job in wf["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, step


def unsafe_run_lines(wf: dict[str, Any]) -> list[str]:
    return [f"{job}: {line.strip()}" for job, step in steps(wf)
            for line in str(step.get("run", "")).splitlines() if _UNSAFE_IN_RUN.search(line)]


def jobs_without_timeout(wf: dict[str, Any]) -> list[str]:
    return [j for j, job in wf["jobs"].items() if not isinstance(job.get("timeout-minutes"), int)]


def uses(wf: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for _, s in steps(wf) if str(s.get("uses", "")).split("@")[0] == action]


@pytest.fixture(scope="module")
def pr_wf() -> dict[str, Any]:
    return load(PR_WF)


@pytest.fixture(scope="module")
def comment_wf() -> dict[str, Any]:
    return load(COMMENT_WF)


@pytest.fixture(scope="module")
def gpu_wf() -> dict[str, Any]:
    return load(GPU_WF)


@pytest.mark.parametrize("path", ALL_WF, ids=lambda p: p.name)
def test_no_untrusted_expression_inside_a_run_script(path):
    assert unsafe_run_lines(load(path)) == []


def test_the_unsafe_expression_check_catches_an_injection(pr_wf):
    bad = {"jobs": {"x": {"steps": [{"run": 'echo "${{ github.event.pull_request.title }}"'},
                                    {"run": "echo ${{ steps.pr.outputs.number }}"},
                                    {"run": "echo $TITLE", "env": {"TITLE": "${{ github.event.pull_request.title }}"}}]}}}
    assert len(unsafe_run_lines(bad)) == 2


@pytest.mark.parametrize("path", ALL_WF, ids=lambda p: p.name)
def test_every_job_has_a_timeout(path):
    wf = load(path)
    assert wf["jobs"] and jobs_without_timeout(wf) == []
    assert jobs_without_timeout({"jobs": {"a": {"runs-on": "x"}}}) == ["a"]


def test_pr_workflow_is_read_only_and_has_no_secrets(pr_wf):
    assert set(pr_wf["on"]) == {"pull_request"}
    assert pr_wf["permissions"] == {"contents": "read"}
    assert all("permissions" not in job for job in pr_wf["jobs"].values())
    values = yaml.safe_dump(pr_wf)  # comments dropped: only what GitHub evaluates
    assert "secrets." not in values and "pull-requests" not in values
    assert "secrets." in yaml.safe_dump({"env": {"T": "${{ secrets.TOKEN }}"}})


def test_comment_workflow_writes_prs_and_never_runs_pr_code(comment_wf):
    on = comment_wf["on"]
    assert list(on) == ["workflow_run"]
    assert on["workflow_run"]["workflows"] == ["bench-pr"] and on["workflow_run"]["types"] == ["completed"]
    perms = comment_wf["permissions"]
    assert perms["pull-requests"] == "write" and perms["actions"] == "read"
    assert set(perms.values()) <= {"read", "write"} and "contents" not in perms or perms["contents"] == "read"
    from test_workflow_trust import data_only_checkout

    for step in uses(comment_wf, "actions/checkout"):
        # Default ref = the default branch; a "ref:" here could check out the PR's head, except
        # the one reviewed data file (benchmarks/accepted.yaml) read at the measured sha.
        w = step.get("with") or {}
        assert "repository" not in w and w.get("persist-credentials") is False
        assert "ref" not in w or (data_only_checkout(step) and w["ref"] == "${{ github.event.workflow_run.head_sha }}")
    text = COMMENT_WF.read_text(encoding="utf-8")
    assert "head_branch" not in text and "pull_request.head" not in text
    # It posts with our own client, through the wrapper that re-validates the PR number.
    assert "ci/post-comment.sh" in text and "vlmpath ci merge" in text


def test_comment_workflow_downloads_the_triggering_runs_artifacts(comment_wf):
    (dl,) = uses(comment_wf, "actions/download-artifact")
    assert re.fullmatch(r"actions/download-artifact@[0-9a-f]{40}", dl["uses"])
    w = dl["with"]
    assert w["run-id"] == "${{ github.event.workflow_run.id }}"
    assert w["github-token"] == "${{ github.token }}"
    assert w["pattern"] == "bench-*" and "merge-multiple" not in w  # one directory per machine


def test_pr_number_and_shas_reach_the_shell_only_through_env_and_are_validated(pr_wf, comment_wf):
    for wf in (pr_wf, comment_wf):
        runs = "\n".join(str(s.get("run", "")) for _, s in steps(wf))
        assert "${{" not in runs, "no expressions at all inside run: scripts"
    for job in _bench_jobs(pr_wf).values():
        assert job["env"]["PR_NUMBER"] == "${{ github.event.pull_request.number }}"
        rec = next(s for s in job["steps"] if "pr-number" in str(s.get("run", "")))
        assert '[[ "$PR_NUMBER" =~ ^[0-9]+$ ]]' in rec["run"]
    post = next(s for _, s in steps(comment_wf) if "post-comment.sh" in str(s.get("run", "")))
    assert "=~ ^[1-9][0-9]{0,9}$ ]]" in post["run"]
    assert "RUN_HEAD_SHA" in post["run"] and "gh api" in post["run"]  # PR head must be what was measured


def test_gpu_matrix_covers_nvidia_amd_and_the_pr_workflow_a_hosted_cpu_job(pr_wf, gpu_wf):
    gpu = gpu_wf["jobs"]["gpu"]
    include = {e["vendor"]: e for e in gpu["strategy"]["matrix"]["include"]}
    assert set(include) == {"nvidia", "amd"}
    assert gpu["strategy"]["fail-fast"] is False
    assert gpu["runs-on"] == "${{ matrix.runner }}"
    assert include["nvidia"]["runner"].startswith("${{ vars.NVIDIA_PR_RUNNER_LABEL")
    assert include["amd"]["runner"].startswith("${{ vars.AMD_PR_RUNNER_LABEL")
    assert include["nvidia"]["dockerfile"] == "docker/cuda.Dockerfile"
    assert include["amd"]["dockerfile"] == "docker/rocm.Dockerfile"
    for e in include.values():
        assert (ROOT / e["dockerfile"]).is_file()
    assert "--gpus all" in include["nvidia"]["gpu_flags"] and "/dev/kfd" not in include["nvidia"]["gpu_flags"]
    amd = include["amd"]["gpu_flags"]
    for flag in ("--device /dev/kfd", "--device /dev/dri", "--group-add video",
                 "--security-opt seccomp=unconfined", "--ipc host"):
        assert flag in amd
    assert "--gpus" not in amd
    # PR code reaches the self-hosted GPU boxes only through the approval environment.
    assert gpu["environment"] == "gpu-bench" and gpu["needs"] == ["verify", "plan"]
    assert set(pr_wf["jobs"]) == {"shards", "cpu"}
    cpu = pr_wf["jobs"]["cpu"]
    assert cpu["runs-on"] == "ubuntu-latest" and cpu["env"]["VLMPATH_SCALE"] == "tiny"
    cpu_runs = "\n".join(str(s.get("run", "")) for s in cpu["steps"])
    assert "ci/setup.sh" in cpu_runs and "ci/pr-bench.sh" in cpu_runs and "--scale tiny" in cpu_runs


def test_pr_jobs_fetch_history_and_upload_one_artifact_per_machine(pr_wf):
    names = []
    for job_id, job in _bench_jobs(pr_wf).items():
        (co,) = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")]
        assert re.fullmatch(r"actions/checkout@[0-9a-f]{40}", co["uses"])
        assert co["with"]["fetch-depth"] == 0 and co["with"]["persist-credentials"] is False
        assert co["with"]["ref"] == "${{ github.event.pull_request.head.sha }}"
        (up,) = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
        assert re.fullmatch(r"actions/upload-artifact@[0-9a-f]{40}", up["uses"]) and up["if"] == "always()"
        assert up["with"]["path"] == "bench-out/"
        names.append(up["with"]["name"])
        runs = "\n".join(str(s.get("run", "")) for s in job["steps"])
        assert "bench-out/pr-number" in runs and "--out" in runs
        for s in job["steps"]:
            if "run" in s and s.get("if") != "always()" and "timeout-minutes" not in s:
                assert len(str(s["run"]).splitlines()) <= 4, f"{job_id}: long step without a timeout"
    assert names == ["bench-cpu-shard-${{ matrix.shard }}"]


def _bench_jobs(pr_wf) -> dict[str, Any]:
    """The jobs that check out and benchmark the PR (not the one that splits it into shards)."""
    return {k: v for k, v in pr_wf["jobs"].items() if k != "shards"}


def _render(text: str, values: dict[str, str]) -> str:
    """The two expression shapes the shard matrix uses: ``${{ a }}`` and ``${{ a || 'b' }}``."""
    def one(m: re.Match) -> str:
        name, _, default = (x.strip() for x in m.group(1).partition("||"))
        return values.get(name) or default.strip("'")
    return re.sub(r"\$\{\{(.*?)\}\}", one, text)


@pytest.mark.parametrize("shards", [None, "1", "5"])
def test_the_cpu_shard_matrix_runs_and_each_entry_is_a_shard_the_cli_takes(pr_wf, tmp_path, shards):
    """The split step's own script, run by bash; each matrix entry's --shard, rendered as
    GitHub would, through the real CLI parser and Shard.parse: together, 1..N of N."""
    import json
    import os
    import subprocess

    from vlmpath.cli import build_parser
    from vlmpath.runner.shards import Shard

    job = pr_wf["jobs"]["shards"]
    step = _split_step(job)
    values = {"vars.CPU_SHARDS": shards} if shards else {}
    out = tmp_path / "output"
    env = {**os.environ, "CPU_SHARDS": _render(job["env"]["CPU_SHARDS"], values), "GITHUB_OUTPUT": str(out)}
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", step["run"]], env=env, capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    key, _, matrix = out.read_text().strip().partition("=")
    entries = json.loads(matrix)
    n = int(shards or 3)
    assert key == "matrix" and entries == list(range(1, n + 1))
    cpu = pr_wf["jobs"]["cpu"]
    assert cpu["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.shards.outputs.matrix) }}"
    assert cpu["strategy"]["fail-fast"] is False  # one shard's failure must not cancel the others
    got = []
    for k in entries:
        shard = _render(cpu["env"]["SHARD"], {**values, "matrix.shard": str(k)})
        a = build_parser().parse_args(["ci", "pr", "--base", "b", "--head", "h", "--shard", shard])
        got.append(Shard.parse(a.shard))
    assert [(s.k, s.n) for s in got] == [(k, n) for k in range(1, n + 1)]
    bench = next(s for s in cpu["steps"] if "ci/pr-bench.sh" in str(s.get("run", "")))
    assert '--shard "$SHARD"' in bench["run"]


@pytest.mark.parametrize("bad", ["0", "65", "3;id", "x"])
def test_the_shard_split_refuses_a_bad_count(pr_wf, tmp_path, bad):
    import os
    import subprocess

    step = _split_step(pr_wf["jobs"]["shards"])
    env = {**os.environ, "CPU_SHARDS": bad, "GITHUB_OUTPUT": str(tmp_path / "o")}
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", step["run"]], env=env, capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 2 and "::error::CPU_SHARDS" in r.stdout
    assert not (tmp_path / "o").exists()  # nothing written for the matrix to read


def _split_step(job: dict[str, Any]) -> dict[str, Any]:
    (step,) = [s for s in job["steps"] if s.get("id") == "split"]
    return step


@pytest.mark.parametrize("wf_path, job_id, var, default", [
    (PR_WF, "shards", "CPU_SHARDS", 3), (MAIN_WF, "plan", "GPU_SHARDS", 1), (GPU_WF, "plan", "GPU_SHARDS", 1)])
def test_every_workflow_splits_through_the_one_shard_script(wf_path, job_id, var, default, tmp_path):
    """The three split jobs run ci/shard-matrix.sh, checked out (only it, no credentials) in
    the job: no copy of the split logic in a workflow. Run as GitHub would render the step."""
    import json
    import os
    import subprocess

    job = load(wf_path)["jobs"][job_id]
    step = _split_step(job)
    assert step["run"] == f'ci/shard-matrix.sh {var} "${var}"'
    (co,) = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")]
    assert co["with"]["persist-credentials"] is False and co["with"]["sparse-checkout"] == "ci/shard-matrix.sh"
    assert job["steps"].index(co) < job["steps"].index(step)
    assert "permissions" not in job or job["permissions"] in ({}, {"contents": "read"})
    out = tmp_path / "o"
    env = {**os.environ, var: _render(job["env"][var], {}), "GITHUB_OUTPUT": str(out)}
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", step["run"]], env=env, capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(out.read_text().strip().partition("=")[2]) == list(range(1, default + 1))
    env[var] = "0"
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", step["run"]], env=env, capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 2 and f"::error::{var} is not a number" in r.stdout


def test_pr_gpu_job_runs_the_flow_inside_an_image_built_from_main(gpu_wf):
    job = gpu_wf["jobs"]["gpu"]
    runs = "\n".join(str(s.get("run", "")) for s in job["steps"])
    # main's image by digest, else built from main's Dockerfile (tests/test_image_digest.py runs it)
    assert 'tool/ci/image.sh pull-or-build "trusted/images/$VENDOR.txt" "tool/$DOCKERFILE" tool "$IMAGE"' in runs
    assert "docker build" not in runs
    assert re.search(r'docker run --rm "\$\{gpu_flags\[@\]\}"', runs)
    assert '"$IMAGE" ci pr --base "$BASE_SHA" --head "$HEAD_SHA" --machine "$MACHINE"' in runs
    assert '--scale "$SCALE"' in runs and job["env"]["SCALE"].endswith("'full' }}")
    assert job["env"]["BASE_SHA"] == "${{ needs.verify.outputs.base }}"
    assert job["env"]["HEAD_SHA"] == "${{ inputs.sha }}"


def test_concurrency_is_per_pull_request(pr_wf):
    group = pr_wf["concurrency"]["group"]
    assert "github.event.pull_request.number" in group and pr_wf["concurrency"]["cancel-in-progress"] is True


def test_wrappers_call_the_cli():
    pr = (ROOT / "ci" / "pr-bench.sh").read_text()
    post = (ROOT / "ci" / "post-comment.sh").read_text()
    assert "ci pr \"$@\"" in pr and "comment \"$@\"" in post
    for p in ("pr-bench.sh", "post-comment.sh"):
        assert (ROOT / "ci" / p).stat().st_mode & 0o111


def test_post_comment_wrapper_refuses_a_non_numeric_pr(tmp_path):
    import subprocess

    r = subprocess.run(["bash", str(ROOT / "ci" / "post-comment.sh"), "--repo", "o/n", "--pr", "1;id",
                        "--body-file", "x", "--dry-run"], capture_output=True, text=True)
    assert r.returncode == 2 and "must be a pull request number" in r.stderr
