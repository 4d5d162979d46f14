"""Does a slowdown on main open exactly one issue, a recovery close it, and a rerun change nothing?

A replay of main's history: commits are filed one after another into one asv results
directory (as bench-main.yml appends them to the history branch), and after each the alert
judges the newest commit against the window and syncs issues with the loopback fake GitHub
(tests/github_fake.py, real HTTP).
"""

from __future__ import annotations

import re

import pytest
from asv_fixtures import fingerprint, sha, write_asv_run
from github_fake import TOKEN, github_fake  # noqa: F401 (fixture)

from vlmpath.compare.comparison import Verdict
from vlmpath.github import alert
from vlmpath.cli import main

MACHINE = "cpu-ci"
SPEED = "bench_embed.Embed.track_tok_per_s"
ACC = "bench_embed.Embed.track_accuracy"
REPO = "octo-org/bench"
LINKS = alert.Links("https://ci.example/run/1", "https://octo-org.github.io/bench/",
                    "https://github.com/octo-org/bench/commit/{sha}")


def file_commit(results, i: int, speed: float) -> str:
    c = sha(f"main-{i}")
    samples = [[speed * f for f in (0.99, 1.0, 1.01, 0.995, 1.005)]]
    write_asv_run(results, MACHINE, c, {SPEED: ("tok/s", [], [], [speed], samples),
                                        ACC: ("fraction", [], [], [1.0], None)},
                  fingerprint("cpu"), date=1_700_000_000_000 + i * 3_600_000)
    return c


def step(fake, results, commit):
    findings = alert.judge_latest(results, commit, window=4)
    return findings, alert.sync_issues(findings, REPO, LINKS, token=TOKEN, api_url=fake.url)


def test_a_slowdown_opens_one_issue_and_the_next_good_commit_closes_it(github_fake, tmp_path):
    results = tmp_path / "history"
    for i in range(4):
        c = file_commit(results, i, 1000.0)
        _, res = step(github_fake, results, c)
        assert res == alert.SyncResult()
    slow = file_commit(results, 4, 400.0)
    findings, res = step(github_fake, results, slow)
    assert [f.comparison.benchmark for f in findings if f.regressed] == [SPEED]
    assert len(res.opened) == 1
    (issue,) = github_fake.issues.values()
    assert issue["state"] == "open" and [x["name"] for x in issue["labels"]] == [alert.LABEL]
    assert "track_tok_per_s" in issue["title"] and MACHINE in issue["title"]
    assert re.search(r"\*\*1,?000 -> 400 tok/s \(-60\.0%\)\*\*", issue["body"]), issue["body"]
    for link in (LINKS.run_url, LINKS.dashboard_url, f"commit/{slow}", f"commit/{sha('main-3')}"):
        assert link in issue["body"]
    # Running again for the same commit: no second issue, no edit.
    _, again = step(github_fake, results, slow)
    assert again == alert.SyncResult() and len(github_fake.issues) == 1
    posts = len(github_fake.calls("POST"))
    good = file_commit(results, 5, 1000.0)
    _, res = step(github_fake, results, good)
    assert len(res.closed) == 1 and issue["number"] in github_fake.issues
    closed = github_fake.issues[issue["number"]]
    assert closed["state"] == "closed"
    (note,) = github_fake.comments[issue["number"]]
    assert note["body"].startswith(f"Recovered at [{good[:8]}]")
    assert re.search(r"baseline -> now \*\*1,?000 -> 1,?000 tok/s \(\+0\.0%\)", note["body"]), note["body"]
    # And again: nothing more (the closed issue is not reopened or commented twice).
    _, again = step(github_fake, results, good)
    assert again == alert.SyncResult() and len(github_fake.calls("POST")) == posts + 1


def test_a_lasting_regression_keeps_one_issue_with_its_first_baseline(github_fake, tmp_path):
    results = tmp_path / "history"
    for i in range(4):
        file_commit(results, i, 1000.0)
    step(github_fake, results, file_commit(results, 4, 400.0))
    _, res = step(github_fake, results, file_commit(results, 5, 390.0))
    assert res.opened == () and len(res.updated) == 1 and len(github_fake.issues) == 1
    (issue,) = github_fake.issues.values()
    assert '"before": 1000.0' in issue["body"] and issue["state"] == "open"
    # The window now holds the slow commits; a commit as slow is not a "recovery".
    for i in range(6, 9):
        _, res = step(github_fake, results, file_commit(results, i, 400.0))
        assert res.closed == ()
    assert issue["state"] == "open"


def test_a_persons_issue_with_the_label_is_left_alone(github_fake, tmp_path):
    results = tmp_path / "history"
    for i in range(4):
        file_commit(results, i, 1000.0)
    github_fake.issues[1] = {"number": 1, "title": "speed?", "body": "is it slower?", "state": "open",
                             "labels": [{"name": alert.LABEL}], "user": {"login": "octocat"}}
    github_fake.comments[1] = []
    _, res = step(github_fake, results, file_commit(results, 4, 400.0))
    assert len(res.opened) == 1 and github_fake.issues[1]["body"] == "is it slower?"


def test_cli_prints_the_regression_without_a_repo(tmp_path, capsys):
    results = tmp_path / "history"
    for i in range(3):
        file_commit(results, i, 1000.0)
    slow = file_commit(results, 3, 300.0)
    assert main(["ci", "alert", "--results", str(results), "--commit", slow, "--window", "3", "--fail"]) == 1
    out = capsys.readouterr().out
    assert "1 regressed" in out and "tok/s (-70.0%)" in out
    with pytest.raises(SystemExit):
        main(["ci", "alert", "--results", str(results)])
    assert main(["ci", "alert", "--results", str(results), "--commit", slow, "--window", "0"]) == 2


# --- only rows of the same definition are a baseline (core.helper_digest) -------------------
def _with_helpers(results, commit: str, digest: str) -> None:
    from vlmpath.runner.run_files import RunInfo, write_run_info

    write_run_info(results, MACHINE, commit, RunInfo(quick=False, scale=None, bench=None, trusted=True,
                   helpers={"bench_embed": digest}))


def _speed(findings):
    return next(f.comparison for f in findings if f.comparison.benchmark == SPEED)


@pytest.mark.parametrize("helpers", ["same", "moved"])
def test_a_commit_that_changed_a_helper_is_not_judged_against_the_old_definition(tmp_path, helpers):
    results = tmp_path / "history"
    for i in range(4):
        _with_helpers(results, file_commit(results, i, 1000.0), "A")
    slow = file_commit(results, 4, 400.0)
    _with_helpers(results, slow, "A" if helpers == "same" else "B")
    c = _speed(alert.judge_latest(results, slow, window=4))
    if helpers == "same":  # the control: the same definition, a real slowdown
        assert c.verdict is Verdict.REGRESSION
        return
    # The helper now measures another way: not "a 60% regression", nor "unchanged", but not judged.
    assert c.verdict is Verdict.NEW and c.reason == alert.DEFINITION_MOVED
    # Its history starts afresh: the next commit with the new helper is judged against this one.
    nxt = file_commit(results, 5, 400.0)
    _with_helpers(results, nxt, "B")
    c = _speed(alert.judge_latest(results, nxt, window=4))
    assert c.verdict is Verdict.UNCHANGED and c.base == pytest.approx(400.0)


def test_a_changed_asv_version_is_not_judged_against_the_old_one(tmp_path):
    import json

    results = tmp_path / "history"
    for i in range(4):
        file_commit(results, i, 1000.0)
    slow = file_commit(results, 4, 400.0)
    path = next(p for p in (results / MACHINE).glob(f"{slow[:8]}-*.json"))
    data = json.loads(path.read_text())
    cols = data["result_columns"]
    data["results"][SPEED][cols.index("version")] = "0" * 64  # the benchmark's own code changed
    path.write_text(json.dumps(data))
    findings = alert.judge_latest(results, slow, window=4)
    assert _speed(findings).verdict is Verdict.NEW and _speed(findings).reason == alert.DEFINITION_MOVED
    acc = next(f.comparison for f in findings if f.comparison.benchmark == ACC)
    assert acc.verdict is Verdict.UNCHANGED  # its definition did not move: judged as before
