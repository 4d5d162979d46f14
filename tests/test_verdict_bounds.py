"""Bounds that fit the job (issue 39): one deadline per GitHub call, comment ids validated,
the merge's budget below the privileged job's timeout."""

from __future__ import annotations

import re
import socket
import threading
import time
from pathlib import Path

import pytest

from vlmpath.core.budget import COMMENT_JOB_TIMEOUT_S, MAX_RUN_SECONDS, RunBudget, merge_budget_s
from vlmpath.core.errors import VlmpathError
from vlmpath.github.rest import GitHubError, make_client

ROOT = Path(__file__).resolve().parents[1]


class Trickle:
    """A real TCP server answering every request byte by byte, ``gap`` seconds apart."""

    def __init__(self, answer: bytes, gap: float):
        self.answer, self.gap = answer, gap
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn) -> None:
        with conn:
            conn.recv(65536)
            for b in self.answer:
                if self.stop.is_set():
                    return
                try:
                    conn.sendall(bytes([b]))
                except OSError:
                    return
                time.sleep(self.gap)

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n" + b" " * 10000,
    b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 10000 + b"\r\n\r\n[]",  # the headers themselves trickle
])
def test_a_trickling_server_cannot_hold_a_call_past_its_deadline(answer):
    server = Trickle(answer, gap=0.05)  # each byte well inside the per-read timeout
    try:
        client = make_client(server.url, "t0ken", max_retries=3)
        client.deadline_s = 1.0
        t0 = time.monotonic()
        with pytest.raises(GitHubError, match=r"no whole answer within 1 s") as err:
            client.request("GET", client.url("/repos/o/r/issues/1/comments"))
        took = time.monotonic() - t0
        assert took < 2.5, took  # one deadline, no retries of a trickle
        assert "\n" not in str(err.value) and "t0ken" not in str(err.value)
    finally:
        server.close()


@pytest.mark.parametrize("bad", ["12 OR 1", 1.5, True, -3, 0, "../../x", None])
def test_a_comment_id_that_is_not_a_positive_integer_is_one_line(bad):
    from vlmpath.github.comment import _result, comment_id

    with pytest.raises(GitHubError, match="is not a positive integer"):
        _result("created", {"id": bad})
    assert comment_id(42, "x") == 42


def test_the_merge_budget_is_derived_from_the_comment_jobs_timeout_and_below_it():
    text = (ROOT / ".github/workflows/bench-comment.yml").read_text(encoding="utf-8")
    job = text.split("\n  comment:\n", 1)[1]
    minutes = int(re.search(r"^    timeout-minutes: (\d+)$", job, re.M).group(1))
    assert minutes * 60 == COMMENT_JOB_TIMEOUT_S  # the constant is the workflow's
    assert MAX_RUN_SECONDS == merge_budget_s(COMMENT_JOB_TIMEOUT_S) < COMMENT_JOB_TIMEOUT_S
    assert merge_budget_s(600) < 600 and merge_budget_s(60) == 60.0


def test_the_merge_refuses_in_one_line_before_the_jobs_timeout():
    now = [0.0]
    budget = RunBudget(clock=lambda: now[0])
    for i in range(60_000):  # 60k small files, each read in an instant ...
        now[0] += 0.01
        try:
            budget.charge(100, f"arts/bench-cpu/results/f{i}.json")
        except VlmpathError as exc:  # ... the time check ends the read well before the job's timeout
            assert now[0] < COMMENT_JOB_TIMEOUT_S and "\n" not in str(exc) and "over the limit" in str(exc)
            break
    else:
        pytest.fail("the budget never refused")


def test_output_never_crashes_on_an_ascii_terminal(tmp_path):
    import os
    import subprocess
    import sys

    from asv_fixtures import sha, write_asv_run

    base, head = sha("ascii-base"), sha("ascii-head")
    res = tmp_path / "res"
    for c in (base, head):  # an unchanged pair: its change column is "±0%"
        write_asv_run(res, "cpu-a", c, {"bench_embed.Embed.track_accuracy": ("fraction", [], [], [1.0], None)})
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "PYTHONPATH": str(ROOT / "src"), "LANG": "C", "LC_ALL": "C"}
    r = subprocess.run([sys.executable, "-m", "vlmpath.cli", "compare", base, head, "--results", str(res)],
                       capture_output=True, env=env)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-800:]
    assert b"Traceback" not in r.stderr and b" ?0 " in r.stdout  # "±0" as the terminal can show it
