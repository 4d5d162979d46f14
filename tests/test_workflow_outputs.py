"""Can a string a pull request controls reach a new step output, env key or workflow command?

Every write of the workflows' shell steps to ``$GITHUB_OUTPUT``, ``$GITHUB_ENV`` or
``$GITHUB_STEP_SUMMARY``, and every workflow command they echo (``::error::`` ...), is
audited two ways:

- statically: the only output keys are the four known ones (``WRITES``), nothing writes
  ``$GITHUB_ENV`` or uses ``::set-output``, a job summary is only ever what
  ``vlmpath ci summary`` printed (``pr.step_summary``: the Markdown sink's escaping), and a
  variable echoed into a workflow command was first validated by an anchored regex in the
  same script;
- by running the step scripts themselves (bash, as the runner does: ``-eo pipefail``) with
  hostile values wherever the PR, an artifact or an API answer reaches them (newlines, ``::``,
  ``%0A``, ``##[``, ``EOF``/``ghadelimiter`` delimiter guesses), through stubs for ``gh``,
  ``vlmpath``, ``docker`` and ``ci/post-comment.sh``. ``commands`` reads the log as the
  runner does (``::stop-commands::TOKEN`` ... ``::TOKEN::`` pauses it) and no command it would
  act on carries the hostile marker; the output file holds only the known keys with clean
  values.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_workflows import ALL_WF, COMMENT_WF, GPU_WF, PR_WF, load, steps

ROOT = Path(__file__).resolve().parents[1]
MARK = "PWNED"
HOSTILE = (f"x\n::error::{MARK}\nready=false\nverdict=0\n%0A::warning::{MARK}%0D%0A\n##[error]{MARK}\n"
           f"EOF\nghadelimiter_{MARK}\n::set-output name=verdict::0\n::add-mask::{MARK}\n"
           f"<img src=x onerror=alert(1)>@octocat [{MARK}](https://evil.example) \u202e{MARK}\x1b[31m\n")
SHA_A, SHA_B = "a" * 40, "b" * 40
#: (workflow file, output key) -> what its value may be.
WRITES = {
    ("bench-comment.yml", "verdict"): r"[013]",
    ("bench-comment.yml", "ready"): r"true",
    ("bench-gpu.yml", "base"): r"[0-9a-f]{40}",
    ("shard-matrix.sh", "matrix"): r"\[[0-9,]+\]",  # the one split step of the three workflows
}
SHELL_SCRIPTS = sorted((ROOT / "ci").glob("*.sh"))
#: The engine repositories' workflows (rendered by ``vlmpath ci templates``): the same rules.
TEMPLATES = sorted((ROOT / "ci" / "templates").glob("*.yml"))


def _family(name: str) -> str:
    """``sglang-bench-gpu.yml`` -> ``bench-gpu.yml``: a template writes what its workflow may."""
    return re.sub(r"^(sglang|vllm)-", "", name)


def _scripts():
    for path in [*ALL_WF, *TEMPLATES]:
        for job, step in steps(load(path)):
            if "run" in step:
                yield path.name, job, step
    for path in SHELL_SCRIPTS:
        yield path.name, "-", {"name": path.name, "run": path.read_text(encoding="utf-8")}


def _step(path: Path, name_part: str) -> tuple[dict, dict]:
    wf = load(path)
    for job_id, step in steps(wf):
        if name_part in str(step.get("name", "")):
            return wf["jobs"][job_id], step
    raise AssertionError(f"{path.name}: no step named like {name_part!r}")


# --- statically --------------------------------------------------------------------------------
_WRITE = re.compile(r'echo "([a-z_]+)=(.*)" >> "\$GITHUB_OUTPUT"$')
_COMMAND_ECHO = re.compile(r'echo "(::[a-z-]+::[^"]*)"')


def test_every_output_write_is_a_known_key_and_nothing_writes_env_or_set_output():
    found = set()
    for wf, job, step in _scripts():
        for line in step["run"].splitlines():
            if line.strip().startswith("#"):
                continue
            if "GITHUB_ENV" in line or "set-output" in line or "save-state" in line:
                pytest.fail(f"{wf} {job}: {line.strip()}")
            if re.search(r'(>>?|tee( -a)?)\s*"?\$\{?GITHUB_OUTPUT', line):  # a write, not a guard
                m = _WRITE.search(line.strip())
                assert m, f"{wf} {job}: output written in another shape: {line.strip()}"
                found.add((_family(wf), m.group(1)))
    assert found == set(WRITES) and len(TEMPLATES) >= 6


def test_a_job_summary_is_only_what_vlmpath_ci_summary_printed():
    writes = [(wf, line.strip()) for wf, _, step in _scripts() for line in step["run"].splitlines()
              if "GITHUB_STEP_SUMMARY" in line]
    assert len(writes) >= 2
    for wf, line in writes:
        assert re.search(r"(vlmpath|-m vlmpath\.cli) ci summary .*>> \"\$GITHUB_STEP_SUMMARY\"", line), (wf, line)
        assert "cat " not in line


def _validated(script_before: str, var: str) -> bool:
    return re.search(r'\[\[ !? ?"\$' + re.escape(var) + r'" =~ \^[^$]*\$ \]\]', script_before) is not None


def test_every_variable_in_a_workflow_command_was_validated_first():
    checked = 0
    for wf, job, step in _scripts():
        text = step["run"]
        for m in _COMMAND_ECHO.finditer(text):
            for var in re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", m.group(1)):
                checked += 1
                assert _validated(text[:m.start()], var), f"{wf} {job}: ${var} in {m.group(1)!r} is not validated"
    assert checked >= 8


def test_the_static_check_catches_an_unvalidated_echo():
    text = 'head=$(gh api x)\necho "::error::head is $head"\n'
    m = _COMMAND_ECHO.search(text)
    assert not _validated(text[:m.start()], "head")
    assert _validated('[[ "$head" =~ ^[0-9a-f]{40}$ ]] || exit 1\n', "head")


# --- by running the steps ---------------------------------------------------------------------
def commands(log: str) -> list[str]:
    """The lines of ``log`` the runner would act on as workflow commands (GitHub's rules:
    ``::name ...::`` at the start of a line, after whitespace, or ``##[name]`` anywhere),
    skipping what stands between ``::stop-commands::TOKEN`` and ``::TOKEN::``."""
    out, stop = [], None
    for line in log.splitlines():
        s = line.strip()
        if stop is not None:
            if s == f"::{stop}::":
                stop = None
            continue
        m = re.match(r"::stop-commands::(.+)$", s)
        if m:
            stop = m.group(1)
            continue
        if s.startswith("::") or "##[" in s:
            out.append(s)
    return out


def test_the_log_reader_follows_stop_commands():
    log = f"::stop-commands::t0k\n::error::{MARK}\n::t0k::\n::error::after\n  ##[error]x\n"
    assert commands(log) == ["::error::after", "##[error]x"]


_STUB = """#!/usr/bin/env python3
import os, sys
name = os.path.basename(sys.argv[0])
with open(os.environ["STUB_LOG"], "a") as fh:
    fh.write(repr((name, sys.argv[1:], {k: v for k, v in os.environ.items() if k.startswith("GITHUB_")})) + "\\n")
if name == "docker" and "summary" in sys.argv:
    vol = next(a for a in sys.argv if a.endswith(":/out:ro")).rsplit(":", 2)[0]
    args = sys.argv[sys.argv.index("-m") + 1:]
    os.execv(os.environ["STUB_PYTHON"], [os.environ["STUB_PYTHON"], "-m", *[vol if a == "/out" else a for a in args]])
if name in ("vlmpath", "docker"):
    print(os.environ["HOSTILE"])
    print(os.environ["HOSTILE"], file=sys.stderr)
if name == "gh":
    print(os.environ.get("GH_ANSWER", ""))
sys.exit(int(os.environ.get("STUB_RC", "0")))
"""


def _run(tmp_path: Path, step: dict, job_env: dict, env: dict, files: dict[str, str] = ()) -> tuple:
    """(exit status, log, $GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY) of one step script; the log
    is stdout and stderr in one stream, in order, as the runner records them."""
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir(parents=True, exist_ok=True)
    work.mkdir(exist_ok=True)
    for name in ("gh", "vlmpath", "docker"):
        (bin_dir / name).write_text(_STUB)
        (bin_dir / name).chmod(0o755)
    for rel, text in dict(files).items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
        if "/bin/" in rel:
            (work / rel).chmod(0o755)
    (work / "ci").mkdir(exist_ok=True)
    (work / "ci" / "post-comment.sh").write_text("#!/bin/sh\nexit 0\n")
    (work / "ci" / "post-comment.sh").chmod(0o755)
    out, summary = tmp_path / "output", tmp_path / "summary"
    for f in (out, summary):
        f.write_text("")
    full = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "GITHUB_OUTPUT": str(out),
            "GITHUB_STEP_SUMMARY": str(summary), "STUB_LOG": str(tmp_path / "stub.log"), "HOSTILE": HOSTILE,
            "STUB_PYTHON": sys.executable, "PYTHONPATH": str(ROOT / "src"),
            **{k: HOSTILE for k in job_env}, **env}
    r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=work,
                       env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    return r.returncode, r.stdout, out.read_text(), summary.read_text()


def _clean(log: str, output: str, wf: str) -> None:
    assert not [c for c in commands(log) if MARK in c or "%0A" in c], log
    for line in output.splitlines():
        key, _, value = line.partition("=")
        assert (wf, key) in WRITES and re.fullmatch(WRITES[(wf, key)], value), output


def _env_of(path: Path, job: dict) -> dict:
    return {**load(path).get("env", {}), **job.get("env", {})}


@pytest.mark.parametrize("answer,ok", [(HOSTILE, False), (SHA_B, False), (SHA_A, True)])
def test_gpu_verify_writes_only_a_validated_base(tmp_path, answer, ok):
    job, step = _step(GPU_WF, "The PR's head must be the SHA")
    rc, log, output, _ = _run(tmp_path, step, _env_of(GPU_WF, job),
                              {"PR_NUMBER": "12", "HEAD_SHA": SHA_A, "GH_ANSWER": answer})
    _clean(log, output, "bench-gpu.yml")
    assert (rc, output) == ((0, f"base={SHA_A}\n") if ok else (1, ""))


@pytest.mark.parametrize("field", ["PR_NUMBER", "HEAD_SHA"])
def test_gpu_verify_refuses_a_hostile_input_without_echoing_it(tmp_path, field):
    job, step = _step(GPU_WF, "The PR's head must be the SHA")
    env = {"PR_NUMBER": "12", "HEAD_SHA": SHA_A, "GH_ANSWER": SHA_A, field: HOSTILE}
    rc, log, output, _ = _run(tmp_path, step, _env_of(GPU_WF, job), env)
    assert rc == 1 and output == "" and MARK not in log


@pytest.mark.parametrize("rc_in,expected", [(0, "verdict=0\nready=true\n"), (1, "verdict=1\nready=true\n"),
                                            (3, "verdict=3\nready=true\n"), (7, "")])
def test_comment_merge_writes_only_its_verdict_whatever_vlmpath_prints(tmp_path, rc_in, expected):
    job, step = _step(COMMENT_WF, "Merge all machines")
    rc, log, output, _ = _run(tmp_path, step, _env_of(COMMENT_WF, job),
                              {"RUN_HEAD_SHA": SHA_A, "STUB_RC": str(rc_in)}, {"artifacts/a/run.json": "{}"})
    assert output == expected and rc == (7 if rc_in == 7 else 0)
    # vlmpath's own log is its business (ci merge prints inside stop-commands); the script adds nothing.
    assert log.count(MARK) == HOSTILE.count(MARK) * 2


@pytest.mark.parametrize("case", ["hostile pr-number", "hostile head", "moved head", "hostile verdict",
                                  "hostile run sha", "posted"])
def test_comment_post_echoes_nothing_it_did_not_validate(tmp_path, case):
    job, step = _step(COMMENT_WF, "Post or update the comment")
    env = {"RUN_HEAD_SHA": SHA_A, "GH_ANSWER": SHA_A, "VERDICT": "0", "REPO": "o/r"}
    pr = "12\n"
    if case == "hostile pr-number":
        pr = HOSTILE
    elif case == "hostile head":
        env["GH_ANSWER"] = HOSTILE
    elif case == "moved head":
        env["GH_ANSWER"] = SHA_B
    elif case == "hostile verdict":
        env["VERDICT"] = HOSTILE
    elif case == "hostile run sha":
        env["RUN_HEAD_SHA"] = HOSTILE
    rc, log, output, _ = _run(tmp_path, step, _env_of(COMMENT_WF, job), env, {"merged/pr-number": pr})
    _clean(log, output, "bench-comment.yml")
    assert MARK not in log
    assert rc == {"hostile pr-number": 1, "hostile verdict": 1, "hostile run sha": 1}.get(case, 0)
    if case == "moved head":
        assert any(c.startswith("::warning::PR #12 head is " + SHA_B) for c in commands(log))


@pytest.mark.parametrize("answer", [HOSTILE, SHA_B])
def test_gpu_post_echoes_no_api_answer_it_did_not_validate(tmp_path, answer):
    job, step = _step(GPU_WF, "Post (only if the PR head")
    rc, log, output, _ = _run(tmp_path, step, _env_of(GPU_WF, job),
                              {"PR_NUMBER": "12", "HEAD_SHA": SHA_A, "GH_ANSWER": answer, "REPO": "o/r"})
    assert rc == 0 and MARK not in log and output == ""


@pytest.mark.parametrize("wf,name", [(GPU_WF, "Benchmark merge-base vs head"),
                                     (ROOT / "ci" / "templates" / "sglang-bench-gpu.yml", "merge-base vs head")])
def test_the_gpu_container_output_is_inside_stop_commands_with_a_token_it_never_saw(tmp_path, wf, name):
    job, step = _step(wf, name)
    env = {"GPU_FLAGS": "--gpus all", "VENDOR": "nvidia", "BENCH_REGEX": "", "PR_NUMBER": "12",
           "BASE_SHA": SHA_B, "HEAD_SHA": SHA_A, "SHARD": "1/1", "MACHINE": "cuda-ci", "SCALE": "tiny",
           "IMAGE": "vlmpath:cuda-pr", "BENCH_WORKLOADS": "video", "ENGINE_RELEASE": "0.5.0"}
    rc, log, output, _ = _run(tmp_path, step, _env_of(wf, job), env)
    assert rc == 0 and MARK in log  # the container printed its hostile lines ...
    assert commands(log) == []  # ... and the runner would act on none of them
    token = re.search(r"::stop-commands::([0-9a-f]{32})", log).group(1)
    assert token not in (tmp_path / "stub.log").read_text()  # docker's argv and env never held it
    # A failing container still ends the pause and keeps its exit status.
    rc, log, _, _ = _run(tmp_path / "f", step, _env_of(wf, job), {**env, "STUB_RC": "5"})
    assert rc == 5 and commands(log) == []


@pytest.mark.parametrize("wf,name", [(PR_WF, "Job summary"), (GPU_WF, "Job summary")])
def test_a_job_summary_of_hostile_files_is_escaped(tmp_path, wf, name):
    job, step = _step(wf, name)
    table = "| case | verdict |\n|---|---|\n"
    # The CPU job's comment.md is its own vlmpath's rendering; the GPU job's, the container's (PR code).
    files = {"bench-out/error.txt": HOSTILE, "bench-out/comment.md": table + ("" if wf == PR_WF else HOSTILE)}
    if wf == PR_WF:  # its own vlmpath: the real CLI, where the step calls it
        files[".venv/bin/vlmpath"] = f"#!/bin/sh\nexec {sys.executable} -m vlmpath.cli \"$@\"\n"
    rc, log, output, summary = _run(tmp_path, step, _env_of(wf, job), {"IMAGE": "vlmpath:cuda-pr"}, files)
    assert rc == 0 and output == "" and MARK in summary, log
    raw = summary.replace("<br>", "")
    assert "<" not in raw and "@octocat" not in raw and "\u202e" not in raw and "\x1b" not in raw
    assert "](" not in raw and not re.search(r"^\s*(::|#)", raw, re.M)
    if wf == PR_WF:  # this job's own rendering stays a table
        assert "| case | verdict |" in summary
    else:  # written in the container: escaped too
        assert "| case | verdict |" not in summary and "\\| case \\| verdict \\|" in summary


def _serve_env(tmp_path: Path, **over) -> dict:
    model = tmp_path / "model"
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text("{}")
    return {"GPU_FLAGS": "--gpus all", "VENDOR": "nvidia", "IMAGE": "vlmpath:cuda-pr", "SERVE_MODEL": str(model),
            "SERVE_LAUNCH": "sglang", **over}


def test_the_gpu_serve_step_is_opt_in_and_runs_mains_script_in_the_container_inside_stop_commands(tmp_path):
    job, step = _step(GPU_WF, "Serve the PR head")
    assert "vars.VLMPATH_SERVE_MODEL != ''" in step["if"] and "matrix.shard == 1" in step["if"]
    assert step["env"]["SERVE_MODEL"] == "${{ vars.VLMPATH_SERVE_MODEL }}"
    rc, log, output, _ = _run(tmp_path, step, _env_of(GPU_WF, job), _serve_env(tmp_path))
    assert rc == 0 and output == "" and MARK in log and commands(log) == []  # the container's lines: inert
    token = re.search(r"::stop-commands::([0-9a-f]{32})", log).group(1)
    calls = [eval(ln) for ln in (tmp_path / "stub.log").read_text().splitlines()]  # noqa: S307 - our stub's repr
    (name, argv, _), = calls
    assert name == "docker" and token not in repr(argv)
    # The model read-only, main's script read-only, the PR head only inside the container.
    assert f"{tmp_path / 'model'}:/model:ro" in argv and any(a.endswith("tool/ci/gpu-serve.sh:/opt/vlmpath-ci/"
                                                                      "gpu-serve.sh:ro") for a in argv)
    assert argv[argv.index("vlmpath:cuda-pr"):] == ["vlmpath:cuda-pr", "bash", "/opt/vlmpath-ci/gpu-serve.sh",
                                                    "/out/gpu-serve", "/model", "sglang", "python3"]
    rc, log, _, _ = _run(tmp_path / "f", step, _env_of(GPU_WF, job), {**_serve_env(tmp_path), "STUB_RC": "4"})
    assert rc == 4 and commands(log) == []


@pytest.mark.parametrize("field,value", [("SERVE_MODEL", HOSTILE), ("SERVE_MODEL", "/models/../etc"),
                                         ("SERVE_MODEL", "relative/model"), ("SERVE_LAUNCH", HOSTILE),
                                         ("SERVE_MODEL", "/no/such/model")])
def test_the_gpu_serve_step_refuses_a_bad_variable_without_echoing_it_or_running_docker(tmp_path, field, value):
    job, step = _step(GPU_WF, "Serve the PR head")
    rc, log, output, _ = _run(tmp_path, step, _env_of(GPU_WF, job), _serve_env(tmp_path, **{field: value}))
    assert rc == 1 and output == "" and MARK not in log and commands(log)[0].startswith("::error::")
    assert not (tmp_path / "stub.log").exists()  # nothing ran


# --- the engine templates gate too (issue 39) ------------------------------------------------
@pytest.mark.parametrize("template", [p for p in TEMPLATES if p.name.endswith("-bench-comment.yml")],
                         ids=lambda p: p.name)
@pytest.mark.parametrize("rc_in, state", [(0, "success"), (3, "failure")])
def test_an_engine_comment_template_merges_with_fail_and_posts_the_status_from_its_job(tmp_path, template,
                                                                                       rc_in, state):
    import ast

    job, merge = _step(template, "Merge all machines")
    assert job["permissions"].get("statuses") == "write"
    rc, log, output, _ = _run(tmp_path / "m", merge, _env_of(template, job),
                              {"RUN_HEAD_SHA": SHA_A, "STUB_RC": str(rc_in)}, {"artifacts/a/run.json": "{}"})
    calls = [ast.literal_eval(x) for x in (tmp_path / "m" / "stub.log").read_text().splitlines()]
    assert rc == 0 and output == f"verdict={rc_in}\nready=true\n"
    assert [c[1] for c in calls if c[0] == "vlmpath"] == [["ci", "merge", "artifacts", "--out", "merged",
                                                          "--head-sha", SHA_A, "--fail"]]
    _, post = _step(template, "Post or update the comment")
    poster = tmp_path / "p" / "work" / "vlmpath" / "ci" / "post-comment.sh"  # the pinned vlmpath's
    poster.parent.mkdir(parents=True)
    poster.write_text("#!/bin/sh\nexit 0\n")
    poster.chmod(0o755)
    rc, log, output, _ = _run(tmp_path / "p", post, _env_of(template, job),
                              {"RUN_HEAD_SHA": SHA_A, "GH_ANSWER": SHA_A, "VERDICT": str(rc_in), "REPO": "o/r"},
                              {"merged/pr-number": "12\n"})
    calls = [ast.literal_eval(x) for x in (tmp_path / "p" / "stub.log").read_text().splitlines()]
    status = [c[1] for c in calls if c[0] == "gh" and c[1][:2] == ["api", f"repos/o/r/statuses/{SHA_A}"]]
    assert rc == 0 and status and status[0][2:6] == ["-f", f"state={state}", "-f", "context=vlmpath/bench"], log
