"""Does a real ``transformers serve`` with the tiny local Qwen2.5-VL give the verdicts it should?

End to end (``-m e2e``): servers of one tiny checkpoint written offline, up at once and
measured in 6 interleaved rounds (``serving.pairs``): base, a second unchanged base (the A/A
pair) and head with a planted 2 s delay before each generate call: the delay is caught on
throughput by the paired rounds, the A/A pair stays green. Then the real ``ci pr --serve``
over two worktrees of a tiny git repo, head's tree shifting image rows by one in its
server: the across-side agreement red naming the workload (one round). A labelled
question is asked of a live server too. Then the lifecycle: a model directory that does not load and a server
that dies mid-run are one line and failure rows, bounded by the request timeout; no server
process outlives any of it. Last, vLLM's own bench client (``vllm bench serve``, when the
vLLM engine env is installed) on the same server and requests gives the same texts.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from vlmpath.compare.comparison import Verdict
from vlmpath.compare.from_serve import compare_serve_runs
from vlmpath.core.errors import VlmpathError
from vlmpath.serving import labelled
from vlmpath.serving.bench import BenchSettings, run_bench
from vlmpath.serving.launch import launched
from vlmpath.serving.pairs import LaunchSpec, interleaved
from vlmpath.serving.tiny_model import write_tiny_qwen

pytestmark = pytest.mark.e2e

DELAY_S = 2.0


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return str(write_tiny_qwen(tmp_path_factory.mktemp("serve") / "tiny"))


def _servers_left(model: str) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    return [ln for ln in ps.splitlines() if "transformers.cli.transformers serve" in ln and model in ln]


def _by(report, leaf: str) -> dict[str, Verdict]:
    return {dict(c.params)["workload"]: c.verdict for c in report.all() if c.benchmark.endswith(leaf)}


def test_delay_is_caught_on_pairs_the_aa_pair_is_green_and_a_shift_is_red(tiny, tmp_path):
    settings = BenchSettings(("video",), (1,), max_tokens=4, prompts=2, timeout_s=60.0)
    spec = lambda plant=None: LaunchSpec("transformers", tiny, plant=plant)  # noqa: E731
    files = interleaved({"base": spec(), "aa": spec(), "delay": spec(f"delay:{DELAY_S}")}, settings, 6,
                        tmp_path)
    assert _servers_left(tiny) == []
    base = [str(p) for p in files["base"]]
    doc = json.loads(files["base"][-1].read_text())
    assert doc["cases"][0]["agreement_solo"] == 1.0 and doc["cases"][0]["errors"] == 0
    assert doc["cases"][0]["early_stops"] == 0  # exactly max_tokens generated (no early stop)

    aa, _ = compare_serve_runs(base, [str(p) for p in files["aa"]])
    assert aa.regressions == [] and aa.judged > 0 and aa.exit_code() == 0

    delay, _ = compare_serve_runs(base, [str(p) for p in files["delay"]])
    slow = {c.benchmark.rsplit(".", 1)[1]: c for c in delay.regressions}
    assert {"track_serve_request_per_s", "track_serve_output_tok_per_s"} <= set(slow), delay.all()
    assert slow["track_serve_request_per_s"].method == "paired"
    assert _by(delay, "track_serve_agreement_base") == {"video": Verdict.UNCHANGED}

    # The shift (agreement exact) is test_ci_pr_serve_..._head_shifts_image_rows: real ci pr --serve.
    assert _servers_left(tiny) == []


def _one_labelled_question(srv, tmp_path):
    from PIL import Image

    (tmp_path / "set").mkdir()
    Image.new("RGB", (56, 28), (200, 30, 30)).save(tmp_path / "set" / "red.png")
    line = json.dumps({"image": "red.png", "question": "Which colour is it?", "answer": "no such answer"})
    (tmp_path / "set" / "one.jsonl").write_text(line + "\n")
    items = labelled.load_labelled(tmp_path / "set" / "one.jsonl")
    return labelled.ask_labelled(srv, items, "one", max_tokens=4, timeout_s=30.0)


def test_a_model_that_does_not_load_and_a_server_that_dies_are_one_line_and_failure_rows(tiny, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "qwen2_5_vl"}')
    with pytest.raises(VlmpathError) as err:
        with launched("transformers", str(broken), log_dir=tmp_path, startup_timeout_s=60):
            pass
    assert str(broken) in str(err.value) and "exited with code" in str(err.value)

    # Dies at its 5th generate call: one labelled question, warm-up, 2 alone, then the first of the level.
    settings = BenchSettings(("video",), (2,), max_tokens=4, prompts=4, timeout_s=30.0)
    with launched("transformers", tiny, log_dir=tmp_path, plant="exit:4") as srv:
        part = _one_labelled_question(srv, tmp_path)
        doc = run_bench(srv, settings)
    case = doc["cases"][0]
    assert case["errors"] == 4 and case["completed"] == 0 and case["error"]
    # The real server answered the labelled question (image decoded, sent, answered greedily).
    assert part["errors"] == 0 and part["outputs"][0] is not None and labelled.score(part) == (0, 1)
    assert _servers_left(tiny) == []


def test_vllms_own_client_reads_the_same_requests_and_texts_on_the_same_server(tiny, tmp_path):
    # ``vllm bench serve`` from the vLLM engine env (skipped without one), on our workload.
    from vlmpath.serving.engine_client import run_engine_client, vllm_python

    python, client = vllm_python()
    if python is None:
        pytest.skip(client)
    # Lean: no solo pass (within-run agreement is the other tests'), one request to warm up.
    settings = BenchSettings(("video",), (2,), max_tokens=4, prompts=2, timeout_s=60.0, solo=False)
    with launched("transformers", tiny, log_dir=tmp_path) as srv:
        doc = run_bench(srv, settings)
        (row,) = run_engine_client(srv, settings, doc, python=python, client=client, work=tmp_path / "client")
    assert row["not_run"] is None, row
    assert row["failed"] == 0 and row["agreement_ours"] == 1.0  # the same greedy texts, request for request
    assert row["request_per_s"] > 0 and row["output_tok_per_s"] > 0
    assert _servers_left(tiny) == []


def test_ci_pr_serve_over_two_real_trees_is_red_naming_the_workload_when_head_shifts_image_rows(tiny, tmp_path):
    # The real ``ci pr --serve`` (the suite faked as in tests/test_ci_serve.py, the servers
    # real): two worktrees of a tiny git repo, head's tree carrying a copy of the served
    # model's patch (image rows shifted by one) that its server imports from its src/.
    import os

    from test_ci_flow import MACHINE, FakeSuite, commit_value, git

    from vlmpath.pr import flow as ci_flow
    from vlmpath.pr.options import PrOptions
    from vlmpath.pr.serve import ServeOptions
    from vlmpath.serving.launch import PLANT_SITE

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    base = commit_value(repo, 1.0, "base")
    plant = (PLANT_SITE / "sitecustomize.py").read_text()
    (repo / "src" / "sitecustomize.py").write_text(plant + '\n_install("shift")\n')
    head = commit_value(repo, 1.0, "head: image rows shifted")
    serve = ServeOptions(tiny, rounds=1, workloads=("video",), concurrency=(1,), max_tokens=4)
    opts = PrOptions(base, head, out_dir=tmp_path / "out", repo=repo, machine=MACHINE, charts=False,
                     results_dir=tmp_path / "store", serve=serve)
    res = ci_flow.run_pr(opts, run_suite=FakeSuite(), env={"PATH": os.environ["PATH"]})
    assert _servers_left(tiny) == []
    assert _by(res.report, "track_serve_agreement_base") == {"video": Verdict.REGRESSION}
    assert _by(res.report, "track_serve_agreement_solo") == {"video": Verdict.UNCHANGED}  # each side self-consistent
    # The judge puts the machine in front of an artifact's own notes (pr.judge, step 8).
    assert res.exit_code == 1 and any(n.startswith(f"{MACHINE}: served outputs differ: video c=1") for n in res.notes)
    assert [dict(r.params)["workload"] for r in res.report.regressions] == ["video"]
