"""Can a maintainer accept a known regression, and does a hand-closed alert stay closed?

``benchmarks/accepted.yaml`` (``vlmpath.compare.accepted``): a listed regression turns a red
comparison into "accepted: reason" (exit 0), an unlisted one stays red, and the entry is
bound to its change (another PR or commit is not covered). ``vlmpath ci alert`` does not
open an issue for an accepted change, and does not reopen one a maintainer closed until
the value moves again (``vlmpath.github.alert_hold``), on the loopback fake GitHub.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from asv_fixtures import fingerprint, sha, write_asv_run
from github_fake import TOKEN, github_fake  # noqa: F401 (fixture)

from vlmpath.github import alert
from vlmpath.cli import main
from vlmpath.compare import accepted
from vlmpath.core.errors import VlmpathError

BASE, HEAD = sha("acc-base"), sha("acc-head")
ACC = "bench_embed.Embed.track_accuracy"
SPEED = "bench_embed.Embed.track_tok_per_s"


def _pair(tmp_path: Path) -> Path:
    res = tmp_path / "res"
    write_asv_run(res, "cpu-a", BASE, {ACC: ("fraction", [], [], [1.0], None), SPEED: ("tok/s", [], [], [1000.0], None)},
                  fingerprint("cpu"))
    write_asv_run(res, "cpu-a", HEAD, {ACC: ("fraction", [], [], [0.9], None), SPEED: ("tok/s", [], [], [400.0], None)},
                  fingerprint("cpu"))
    return res


def _compare(tmp_path, res, capsys, entries: str | None):
    args = ["compare", BASE, HEAD, "--results", str(res), "--markdown", str(tmp_path / "c.md"),
            "--repo", str(tmp_path)]
    if entries is not None:
        (tmp_path / "acc.yaml").write_text(entries)
        args += ["--accepted", str(tmp_path / "acc.yaml")]
    rc = main(args)
    return rc, (tmp_path / "c.md").read_text(), capsys.readouterr().out


def test_an_accepted_regression_is_shown_and_does_not_fail_an_unlisted_one_stays_red(tmp_path, capsys):
    res = _pair(tmp_path)
    rc, md, _ = _compare(tmp_path, res, capsys, None)
    assert rc == 1 and md.splitlines()[1].startswith("**2 regressions")
    listed = (f"accepted:\n  - case: '{SPEED}'\n    backend: cpu\n    commit: '{HEAD}'\n"
              "    reason: 'trades 60% tok/s for a fix @octocat'\n")
    rc, md, out = _compare(tmp_path, res, capsys, listed)
    assert rc == 1  # the accuracy drop is not listed: still red
    assert md.splitlines()[1].startswith("**1 regression") and "(1 accepted)" in md.splitlines()[1]
    assert "✅ accepted: trades 60% tok/s for a fix &#64;octocat" in md and "accepted: trades" in out
    both = listed + f"  - case: '{ACC}'\n    commit: '{HEAD}'\n    reason: known\n"
    rc, md, _ = _compare(tmp_path, res, capsys, both)
    assert rc == 0 and "2 accepted" in md.splitlines()[1] and "No regressions" in md.splitlines()[1]
    # A PR's entry is bounded to that PR: a compare of main's commits knows no PR, so it mutes nothing.
    pr_scoped = listed + f"  - case: '{ACC}'\n    pr: 12\n    reason: known\n"
    rc, md, _ = _compare(tmp_path, res, capsys, pr_scoped)
    assert rc == 1 and md.splitlines()[1].startswith("**1 regression") and "(1 accepted)" in md.splitlines()[1]


def test_an_entry_is_bound_to_its_change_and_its_place(tmp_path, capsys):
    res = _pair(tmp_path)
    for other in (f"commit: '{BASE}'", "machine: 'gpu-*'\n    pr: 5", "backend: cuda\n    pr: 5"):
        rc, md, _ = _compare(tmp_path, res, capsys,
                             f"accepted:\n  - case: '{SPEED}'\n    {other}\n    reason: other change\n")
        assert rc == 1 and "accepted" not in md.splitlines()[1], other
    # ci merge knows the PR: an entry for another PR does not cover this one.
    from vlmpath.compare.thresholds import load_thresholds
    from vlmpath.compare.verdict import compare
    from vlmpath.compare.asv_results import load_asv

    rep = compare(load_asv(res, BASE), load_asv(res, HEAD), load_thresholds(None))
    entries = accepted.entries_from({"accepted": [{"case": c, "pr": 7, "reason": "r"} for c in (ACC, SPEED)]}, "x")
    assert len(accepted.apply(rep, entries, pr=8).regressions) == 2
    assert len(accepted.apply(rep, entries, pr=None).regressions) == 2  # no PR known: no PR's entry
    assert accepted.apply(rep, entries, pr=7).regressions == []


@pytest.mark.parametrize("bad, needle", [
    (f"accepted: [{{case: {SPEED}, reason: r}}]", "name the change"),
    (f"accepted: [{{case: {SPEED}, pr: true, reason: r}}]", "pr must be a pull request number"),
    (f"accepted: [{{case: {SPEED}, commit: zz, reason: r}}]", "commit must be the full 40-hex sha"),
    (f"accepted: [{{case: {SPEED}, pr: 1}}]", "reason must be a non-empty string"),
    (f"accepted: [{{case: {SPEED}, pr: 1, reason: r, regex: '.*'}}]",
     "keys backend, case, commit, machine, metric, pr, reason only"),
    ("accepted: {", "not valid YAML"),
    # Every case at once, or every benchmark starting with b, is no one change's acceptance.
    (f"accepted: [{{case: {SPEED}, pr: 1, reason: r}}, {{case: '*', pr: 1, reason: r}}]",
     "entry 1: case '*' must name one benchmark in full"),
    ("accepted: [{case: '*.*', pr: 1, reason: r}]", "entry 0: case '*.*' must name one benchmark in full"),
    ("accepted: [{case: ' ** (*) ', pr: 1, reason: r}]", "must name one benchmark in full"),
    ("accepted: [{case: 'b*', pr: 1, reason: tok/s noise}]", "case 'b*' must name one benchmark in full"),
    ("accepted: [{case: 'bench_embed.Embed.track_tok_per_s*', pr: 1, reason: r}]", "no wildcard in its name"),
    # A head ground to share 7 hex digits with the entry's commit inherits nothing: refused.
    (f"accepted: [{{case: {SPEED}, commit: abcdef1, reason: r}}]", "commit must be the full 40-hex sha, got 'abcdef1'"),
    # The reason speaks of tok/s, the entry accepts accuracy: refused.
    (f"accepted: [{{case: {ACC}, pr: 1, reason: tok/s noise}}]",
     "the reason speaks of GB/s/req/s/tok/s but the entry accepts accuracy"),
    (f"accepted: [{{case: {ACC}, pr: 1, metric: tok_per_s, reason: r}}]", "metric 'tok_per_s' is not the metric"),
    ("accepted: [{case: bench_embed.Embed.track_widgets, pr: 1, reason: r}]", "has no row in the metric table"),
    ("accepted: [{case: bench_embed.Emb\u0435d.track_accuracy, pr: 1, reason: r}]", "must name one benchmark"),
])
def test_a_bad_accepted_file_is_one_line(tmp_path, capsys, bad, needle):
    res = _pair(tmp_path)
    (tmp_path / "acc.yaml").write_text(bad)
    rc = main(["compare", BASE, HEAD, "--results", str(res), "--accepted", str(tmp_path / "acc.yaml")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and needle in err, err
    with pytest.raises(VlmpathError):
        accepted.load(tmp_path / "acc.yaml")


# --- ci alert -----------------------------------------------------------------------------------
REPO = "octo-org/bench"
LINKS = alert.Links()


def _file(results, i: int, speed: float) -> str:
    c = sha(f"acc-main-{i}")
    samples = [[speed * f for f in (0.99, 1.0, 1.01, 0.995, 1.005)]]
    write_asv_run(results, "cpu-ci", c, {SPEED: ("tok/s", [], [], [speed], samples)}, fingerprint("cpu"),
                  date=1_700_000_000_000 + i * 3_600_000)
    return c


def _step(fake, results, commit, entries=()):
    findings = alert.judge_latest(results, commit, window=4)
    return alert.sync_issues(findings, REPO, LINKS, token=TOKEN, api_url=fake.url, accepted=entries)


def test_an_alert_closed_by_hand_is_not_reopened_for_the_same_change(github_fake, tmp_path):
    results = tmp_path / "history"
    for i in range(4):
        _step(github_fake, results, _file(results, i, 1000.0))
    res = _step(github_fake, results, _file(results, 4, 400.0))
    assert len(res.opened) == 1
    (number,) = github_fake.issues
    github_fake.issues[number]["state"] = "closed"  # a maintainer closes it: known, wontfix
    # The next commits sit at the same slower value: still a regression against the window's
    # median, but the same change: no new issue.
    for i in (5, 6):
        res = _step(github_fake, results, _file(results, i, 401.0))
        assert res.opened == () and res.held and len(github_fake.issues) == 1
    # The value moves again (worse beyond the band): a new change, a new issue.
    res = _step(github_fake, results, _file(results, 7, 150.0))
    assert len(res.opened) == 1 and len(github_fake.issues) == 2


def test_a_recovered_alert_regressing_again_opens_a_new_issue(github_fake, tmp_path):
    results = tmp_path / "history"
    for i in range(4):
        _step(github_fake, results, _file(results, i, 1000.0))
    assert len(_step(github_fake, results, _file(results, 4, 400.0)).opened) == 1
    assert len(_step(github_fake, results, _file(results, 5, 1000.0)).closed) == 1  # recovered: closed by the alert
    assert len(_step(github_fake, results, _file(results, 6, 400.0)).opened) == 1  # not held: it was no person


def test_an_accepted_change_opens_no_issue_and_closes_an_open_one(github_fake, tmp_path):
    results = tmp_path / "history"
    for i in range(4):
        _step(github_fake, results, _file(results, i, 1000.0))
    slow = _file(results, 4, 400.0)
    assert len(_step(github_fake, results, slow).opened) == 1
    entries = accepted.entries_from({"accepted": [{"case": SPEED, "commit": slow, "reason": "known"}]}, "x")
    res = _step(github_fake, results, slow, entries)
    (issue,) = github_fake.issues.values()
    assert res.closed and issue["state"] == "closed"
    res = _step(github_fake, results, _file(results, 5, 402.0), entries)  # same change, later commit
    assert res.opened == () and len(github_fake.issues) == 1


def test_the_repositorys_own_list_is_valid():
    # A bad edit to the reviewed file fails here, not in the comment job.
    root = Path(__file__).resolve().parents[1]
    entries = accepted.load(root / accepted.ACCEPTED_FILE)
    assert all(e.reason and (e.commit or e.pr) for e in entries)


def test_ci_merge_applies_the_given_file_for_its_pr_only(tmp_path, capsys):
    import shutil

    res = _pair(tmp_path)
    art = tmp_path / "arts" / "bench-cpu"
    shutil.copytree(res, art / "results")
    (art / "run.json").write_text(json.dumps({"schema_version": 1, "base_sha": BASE, "head_sha": HEAD,
                                              "machine": "cpu-a"}))
    (art / "pr-number").write_text("7\n")
    for pr, code in ((8, 1), (7, 0)):  # an entry for another PR covers nothing
        (tmp_path / "acc.yaml").write_text("accepted:\n" + "".join(
            f"  - case: '{c}'\n    pr: {pr}\n    reason: r\n" for c in (ACC, SPEED)))
        out = tmp_path / f"m{pr}"
        # The same entry on the base branch's file: trusted.
        rc = main(["ci", "merge", str(tmp_path / "arts"), "--out", str(out), "--fail",
                   "--accepted", str(tmp_path / "acc.yaml"), "--base-accepted", str(tmp_path / "acc.yaml")])
        capsys.readouterr()
        assert rc == code, pr
        assert ("2 accepted" in (out / "comment.md").read_text()) == (code == 0)
