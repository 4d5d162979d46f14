"""Does everything that varies by engine come from its registry entry, for a plug-in too?

The toy plug-in (``tests/toy_engine.py``: one module, put on the path; nothing in vlmpath
names it) declares an option, a bench client and the files its CI templates watch, and:

- its option ``rows`` is offered by the CLI (``--engine-option rows=...`` and its own flag
  ``--toy-rows``), reaches its adapter as the mapping the entry declares (the adapter refuses
  anything else), changes what the adapter does (``reversed``: a misplacement the accuracy
  shows) and is recorded in every case record; a value not among its choices, or an option
  it does not declare, is refused in one line naming the option and the choices, at the CLI
  of ``measure`` and of ``ci pr --engine-src`` (before any checkout);
- its bench client is a ``serve-bench --engine-client`` choice and runs in its engine env
  against its own server; asked for without an env, one line; ``auto`` asks every entry's
  client, and an entry's client that never runs is its entry's reason;
- ``vlmpath ci templates --engine toy --out DIR`` renders its three workflows, each valid
  YAML watching its ``ci_paths``; the CPU workflow's own install and check steps, run as
  written, install the toy release and judge a toy repository's PR (red on a misplacement).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from toy_engine import toy, write_toyeng  # noqa: F401 - toy: the fixture (tests/toy_engine.py)

from vlmpath.cli import main

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = "many_small_images"  # several items per step: reversed rows land in the wrong places


def _measure(tree: Path, out: Path, *flags: str) -> dict:
    assert main(["measure", "--engine", "toy", "--engine-src", str(tree), "--engine-python", sys.executable,
                 "--workload", WORKLOAD, "--repeat", "1", "--no-syncs", "--json", str(out), *flags]) == 0
    (rec,) = [json.loads(ln) for ln in out.read_text().splitlines()]
    return rec


# --- options -------------------------------------------------------------------------------
def test_a_plugins_option_reaches_its_adapter_untouched_and_is_recorded(toy, tmp_path):
    tree = write_toyeng(tmp_path / "checkout" / "src")
    plain = _measure(tree, tmp_path / "plain.jsonl")
    assert plain["error"] is None and plain["accuracy"] == 1.0
    assert plain["engine_options"] == {"rows": "in_order"} and plain["engine_seams"]["rows"] == "in_order"
    rec = _measure(tree, tmp_path / "reversed.jsonl", "--engine-option", "rows=reversed")
    assert rec["error"] is None, rec["error"]  # the adapter took the mapping (it refuses any other)
    assert rec["engine_options"] == {"rows": "reversed"} and rec["engine_seams"]["rows"] == "reversed"
    assert rec["accuracy"] < 1.0 and rec["items"] > 1  # read by the adapter: the rows went in reversed
    # Its own flag, made from the entry, is the same pair (what the handler above received).
    from vlmpath.cli import build_parser

    parsed = build_parser().parse_args(["measure", "--toy-rows", "reversed"])
    assert parsed.engine_option == [("rows", "reversed")]


@pytest.mark.parametrize("flags, line", [
    (["--engine-option", "rows=sideways"],
     "--engine-option rows=sideways: engine toy's option 'rows' is one of in_order, reversed"),
    (["--engine-option", "rows=reversd"],
     "--engine-option rows=reversd: engine toy's option 'rows' is one of in_order, reversed "
     "(did you mean 'reversed'?)"),
    (["--engine-option", "runner=v1"],
     "--engine-option runner=v1: engine toy==1.0 has no option 'runner' (its options are rows); leave it out"),
    (["--toy-rows", "sideways"], "--toy-rows 'sideways': choose one of in_order, reversed"),
    (["--engine-option", "rows=reversed", "--toy-rows", "in_order"],
     "--engine-option rows is given twice (reversed, in_order): give it once"),
])
def test_a_bad_value_or_an_option_the_engine_does_not_declare_is_one_line(toy, flags, line, capsys):
    assert main(["measure", "--engine", "toy==1.0", "--workload", WORKLOAD, *flags]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"vlmpath measure: error: {line}"]


def test_the_engine_pr_refuses_an_undeclared_option_before_any_checkout(toy, tmp_path, capsys):
    repo = tmp_path / "toyeng-repo"
    write_toyeng(repo / "src")
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "as released")
    out = tmp_path / "out"
    code = main(["ci", "pr", "--engine-src", str(repo), "--base", "main", "--head", "main", "--out", str(out),
                 "--engine-option", "rows=sideways"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["vlmpath ci: error: --engine-option rows=sideways: engine toy's option 'rows' "
                                 "is one of in_order, reversed"], err
    assert "rows=sideways" in (out / "error.txt").read_text()
    assert not (out / "records").exists()  # refused before a side was checked out or measured


# --- bench client ----------------------------------------------------------------------------
def test_a_plugins_bench_client_is_a_choice_and_runs_in_its_env(toy, tmp_path, monkeypatch, capsys):
    home = tmp_path / "engines"
    model = tmp_path / "model"
    assert main(["serve-bench", "--write-tiny-model", str(model)]) == 0
    capsys.readouterr()
    args = ["serve-bench", "--launch", "toy", "--model", str(model), "--workload", WORKLOAD, "--concurrency", "1",
            "--max-tokens", "2", "--engine-client", "toy", "--engine-home", str(home),
            "--log-dir", str(tmp_path / "logs"), "--out", str(tmp_path / "run.json")]
    assert main(args) == 2  # not installed: one line, before a server starts
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["vlmpath serve-bench: error: --engine-client toy: no complete toy engine env "
                   "(`vlmpath engine install toy==1.0`, or pass --engine-home)"]
    assert not (tmp_path / "logs").exists()
    monkeypatch.setenv("VLMPATH_ENGINE_HOME", str(home))
    assert main(["engine", "install", "toy==1.0"]) == 0
    assert main(args) == 0
    out = capsys.readouterr().out
    (row,) = json.loads((tmp_path / "run.json").read_text())["engine_client"]
    assert row["client"] == "toy bench 1.0" and row["toyeng_in_env"] == "1.0"  # ran in the toy env's python
    assert row["agreement_ours"] == 1.0 and row["flag"] is None and "toy bench 1.0" in out
    with pytest.raises(SystemExit):
        main(["serve-bench", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--engine-client {auto,toy,vllm,none}" in help_text  # only engines whose client runs


def test_auto_asks_every_entrys_client_and_says_why_one_does_not_run(toy, tmp_path):
    from vlmpath.engines import registry
    from vlmpath.serving.bench_clients import chosen

    clients, never = chosen("auto", str(tmp_path))  # an engine home with no env at all
    assert [(c.engine, c.python, c.run) for c in clients] == [("toy", None, None), ("vllm", None, None)]
    assert clients[0].label == ("not run: no complete toy engine env (`vlmpath engine install toy==1.0`, "
                                "or pass --engine-home)")
    # an entry whose client is never run: its own reason, from its entry
    assert never == [{"client": "sglang.benchmark.serving", "not_run": registry.get("sglang").bench_client.not_run}]
    assert chosen("none", str(tmp_path)) == ([], [])


# --- CI templates ----------------------------------------------------------------------------
def _render_toy(out: Path) -> dict[str, dict]:
    assert main(["ci", "templates", "--root", str(ROOT), "--engine", "toy", "--out", str(out), "--write"]) == 0
    assert main(["ci", "templates", "--root", str(ROOT), "--engine", "toy", "--out", str(out), "--check"]) == 0
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(out.glob("*.yml"))}


def test_a_plugins_templates_render_as_yaml_watching_its_paths(toy, tmp_path, capsys):
    docs = _render_toy(tmp_path / "wf")
    assert sorted(docs) == ["toy-bench-comment.yml", "toy-bench-gpu.yml", "toy-bench-pr.yml"]
    pr = docs["toy-bench-pr.yml"]
    assert pr["name"] == "toy-bench-pr"
    assert pr[True]["pull_request"]["paths"] == ["src/toyeng/**", ".github/workflows/toy-bench-pr.yml"]
    assert pr["env"]["ENGINE_RELEASE"] == "${{ vars.TOY_ENV_RELEASE || '1.0' }}"
    (tmp_path / "wf" / "toy-bench-gpu.yml").write_text("stale\n")
    assert main(["ci", "templates", "--root", str(ROOT), "--engine", "toy", "--out", str(tmp_path / "wf"),
                 "--check"]) == 1
    assert "stale: " in capsys.readouterr().err
    assert main(["ci", "templates", "--root", str(ROOT), "--engine", "sglang", "--engine", "toy",
                 "--out", str(tmp_path / "two"), "--write"]) == 0
    assert len(list((tmp_path / "two").glob("*.yml"))) == 6


def _step(doc: dict, starts: str) -> str:
    (run,) = [s["run"] for s in doc["jobs"]["cpu"]["steps"] if s.get("name", "").startswith(starts)]
    return run


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.e2e
def test_a_plugins_cpu_workflow_steps_install_it_and_judge_its_pr(toy, tmp_path):
    """The rendered toy-bench-pr.yml's install and check steps, run by bash as written in a
    workspace laid out as the job's (``engine/`` the PR checkout, ``vlmpath/`` this vlmpath)."""
    pr = _render_toy(tmp_path / "wf")["toy-bench-pr.yml"]
    ws = tmp_path / "ws"
    (ws / "vlmpath" / ".venv" / "bin").mkdir(parents=True)
    (ws / "vlmpath" / "ci").mkdir()
    (ws / "vlmpath" / "ci" / "setup.sh").write_text("#!/bin/sh\nexit 0\n")  # this venv is set up already
    (ws / "vlmpath" / "ci" / "setup.sh").chmod(0o755)
    (ws / "vlmpath" / ".venv" / "bin" / "vlmpath").symlink_to(Path(sys.executable).parent / "vlmpath")
    repo = ws / "engine"
    write_toyeng(repo / "src")
    _git(ws, "init", "-q", "-b", "main", str(repo))
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "as released")
    base = _git(repo, "rev-parse", "HEAD")
    init = repo / "src" / "toyeng" / "__init__.py"
    init.write_text(init.read_text().replace("rows.to(embeds.dtype)", "rows.flip(0).to(embeds.dtype)"))
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "merge: rows newest first")
    head = _git(repo, "rev-parse", "HEAD")
    env = {**os.environ, "VLMPATH_ENGINE_HOME": str(tmp_path / "engines"), "ENGINE_RELEASE": "1.0",
           "BENCH_WORKLOADS": WORKLOAD, "BASE_SHA": base, "HEAD_SHA": head}
    for name in ("Install vlmpath", "Merge-base vs head"):
        proc = subprocess.run(["bash", "-e", "-c", _step(pr, name)], cwd=ws, env=env, capture_output=True,
                              text=True, timeout=900)
        if name.startswith("Install"):
            assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.returncode == 1, proc.stderr[-2000:]  # the misplacement in toyeng's own merge: red
    comparison = json.loads((ws / "bench-out" / "comparison.json").read_text())
    run = json.loads((ws / "bench-out" / "run.json").read_text())
    assert run["engine_subdir"] == "src" and run["engines"]["head"][0].startswith("toy@src:")
    rows = [r for m in comparison["machines"] for r in m["comparisons"]]
    regressed = {(r["benchmark"].rsplit(".", 1)[1], dict(r["params"])["workload"]) for r in rows
                 if r["verdict"] == "regression"}
    assert ("track_accuracy", WORKLOAD) in regressed, regressed
