"""Does the engine's own bench client get our exact workload, and is its disagreement flagged?

No server and no vLLM here (the real ``vllm bench serve`` run is in tests/test_serve_e2e.py):
the plan sends our requests in our order with the no-early-stop fields the server accepts
(``generation_config`` for ``transformers serve``, never ``ignore_eos``); a value outside our
spread is flagged and one inside is not; differing texts read below 1; a hostile result
file is believed only in shape; a client that hangs is killed at its budget and is one
"not run" line; a fake client that writes results gives one row per case through the CLI's
own path.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap

from vlmpath.serving.bench import BenchSettings
from vlmpath.serving.chat_requests import chat_requests
from vlmpath.serving.engine_client import plan, read_result, run_engine_client, side_by_side, within_spread
from vlmpath.serving.launch import Server


def _case(req_s=(1.0, 1.2), outputs=("ab", "cd"), rids=(0, 1, 0)):
    return {"workload": "video", "concurrency": 2, "request_per_s": sum(req_s) / len(req_s),
            "output_tok_per_s": 8 * sum(req_s) / len(req_s), "rids": list(rids),
            "samples": {"request_per_s": list(req_s), "output_tok_per_s": [8 * x for x in req_s]},
            "outputs": list(outputs)}


def _server(tmp_path, kind="transformers"):
    return Server(url="http://127.0.0.1:9", kind=kind, model=None, model_dir=str(tmp_path / "m"))


def test_the_plan_sends_our_requests_in_our_order_with_fields_the_server_accepts(tmp_path):
    settings = BenchSettings(("video",), (2,), max_tokens=5)
    doc = {"cases": [_case(rids=(1, 0, 1))]}
    run, = plan(_server(tmp_path), settings, doc, tmp_path / "w")
    argv = run["argv"]
    opt = lambda k: argv[argv.index(k) + 1]  # noqa: E731
    lines = [json.loads(ln) for ln in open(opt("--dataset-path"), encoding="utf-8")]
    reqs = chat_requests("video")
    assert [ln["content"] for ln in lines] == [list(reqs[r].content) for r in (1, 0, 1)]
    assert "--disable-shuffle" in argv and opt("--num-prompts") == "3" and opt("--max-concurrency") == "2"
    assert opt("--custom-output-len") == "5" and opt("--dataset-name") == "custom_image"
    assert "--ignore-eos" not in argv  # transformers serve refuses the field (422)
    gen = json.loads(json.loads(opt("--extra-body"))["generation_config"])
    assert gen["min_new_tokens"] == gen["max_new_tokens"] == 5
    vllm_run, = plan(_server(tmp_path, "vllm"), settings, doc, tmp_path / "v")
    assert "--ignore-eos" in vllm_run["argv"] and "--extra-body" not in vllm_run["argv"]


def test_a_client_beyond_our_spread_is_flagged_one_inside_is_not():
    assert within_spread(1.25, [1.0, 1.2], 0.10) is True
    assert within_spread(1.4, [1.0, 1.2], 0.10) is False and within_spread(0.85, [1.0, 1.2], 0.10) is False
    same = {"request_per_s": 1.1, "output_tok_per_s": 8.8, "input_tok_per_s": 100.0, "failed": 0,
            "texts": ["ab", "cd"]}
    row = side_by_side(_case(), same, "vllm bench serve 0.33.0", 0.10)
    assert row["flag"] is None and row["agreement_ours"] == 1.0
    far = side_by_side(_case(), {**same, "request_per_s": 2.0, "texts": ["ab", "cX"]}, "c", 0.10)
    assert "request/s outside" in far["flag"] and "output tok" not in far["flag"]
    assert far["agreement_ours"] == 0.5
    failed = side_by_side(_case(), {**same, "failed": 2}, "c", 0.10)
    assert failed["flag"] == "2 requests failed"


def test_a_hostile_result_is_believed_only_in_shape(tmp_path):
    p = tmp_path / "r.json"
    p.write_text('{"request_throughput": "fast", "output_throughput": -3, "duration": 2, '
                 '"total_input_tokens": 10, "completed": 2, "generated_texts": ["a", 7]}')
    got = read_result(p)
    assert got["request_per_s"] is None and got["output_tok_per_s"] is None and got["input_tok_per_s"] == 5.0
    assert got["texts"] == ["a", None]
    (tmp_path / "e.json.error").write_text("RuntimeError: boom")
    assert read_result(tmp_path / "e.json") == {"error": "RuntimeError: boom"}
    assert read_result(tmp_path / "none.json") == {"error": "no result written"}


def _fake_python(tmp_path, body: str):
    exe = tmp_path / "fake-python"
    exe.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(exe)


def test_a_hanging_client_is_killed_at_its_budget_and_is_one_not_run_line(tmp_path):
    hang = _fake_python(tmp_path, "import time\ntime.sleep(60)\n")
    rows = run_engine_client(_server(tmp_path), BenchSettings(("video",), (2,)), {"cases": [_case()]},
                             python=hang, client="vllm bench serve X", work=tmp_path / "w", budget_s=1.0)
    assert len(rows) == 1 and rows[0]["not_run"].startswith("not run: vllm bench serve X took over 1 s")


def test_a_client_that_writes_results_gives_one_row_per_case(tmp_path):
    # Stands in for the env's interpreter: reads the plan as vllm_bench_entry would, writes
    # what vLLM saves (the second run fails: its row says so, the first is still judged).
    fake = _fake_python(tmp_path, """
        import json, sys
        plan = json.load(open(sys.argv[3]))
        for i, run in enumerate(plan["runs"]):
            if i == 1:
                open(run["result"] + ".error", "w").write("ValueError: refused")
                continue
            json.dump({"request_throughput": 1.1, "output_throughput": 8.8, "duration": 1.0,
                       "total_input_tokens": 50, "completed": 3, "failed": 0,
                       "generated_texts": ["ab", "cd"]}, open(run["result"], "w"))
    """)
    doc = {"cases": [_case(), {**_case(), "concurrency": 4}]}
    rows = run_engine_client(_server(tmp_path), BenchSettings(("video",), (2, 4)), doc, python=fake,
                             client="vllm bench serve X", work=tmp_path / "w", budget_s=30.0)
    assert [r["concurrency"] for r in rows] == [2, 4]
    assert rows[0]["request_per_s"] == 1.1 and rows[0]["flag"] is None and rows[0]["not_run"] is None
    assert rows[1]["not_run"] == "not run: vllm bench serve X failed: ValueError: refused"
    assert os.path.isfile(tmp_path / "w" / "plan.json")


def test_the_table_shows_both_clients_and_each_not_run_line():
    from vlmpath.render.serve_table import engine_client_table

    row = side_by_side(_case(), {"request_per_s": 2.0, "output_tok_per_s": 8.8, "input_tok_per_s": 1.0,
                                 "failed": 0, "texts": ["ab", "cd"]}, "vllm bench serve 0.33.0", 0.10)
    out = engine_client_table([row, {"client": "sglang.benchmark.serving", "not_run": "not run: \x1b[31mwhy"}])
    line = next(ln for ln in out.splitlines() if ln.startswith("video"))
    assert "1.1" in line and "2" in line.split() and "request/s outside our spread" in line
    assert "sglang.benchmark.serving: not run:" in out and "\x1b" not in out
    assert engine_client_table([]) == ""


def test_asking_for_a_client_that_is_not_installed_is_one_line_before_measuring(tmp_path, capsys):
    from vlmpath.cli import main

    # Port 9 answers nothing: reaching the server would be a different error.
    code = main(["serve-bench", "--server", "http://127.0.0.1:9", "--engine-client", "vllm",
                 "--engine-home", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "--engine-client vllm: no complete vllm engine env (`vlmpath engine install vllm==" in err
    assert "no OpenAI-compatible server" not in err  # refused before the server was asked
