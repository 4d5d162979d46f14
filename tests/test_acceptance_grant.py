"""Who may accept a regression: the base branch or a maintainer, never the pull request itself?

docs/acceptance.md. A PR that adds its own entry to ``benchmarks/accepted.yaml`` keeps a red
check that says why ("accepted by this PR's own change, awaiting review", exit 1); the same
entry already on the base branch accepts (exit 0). In the privileged comment job a maintainer's
label accepts it and names who (``vlmpath ci label-grant`` against the loopback fake GitHub,
then ``vlmpath ci merge --grant``); the label of a non-maintainer, of the PR's author, of a
bot, one removed again or one applied before the measured push does not. A PR's entry never
mutes ``ci alert`` on main.
"""

from __future__ import annotations

import html
import json
import os
import shutil
from pathlib import Path

import pytest
from asv_fixtures import fingerprint, sha, write_asv_run
from github_fake import TOKEN, github_fake  # noqa: F401 (fixture)
from log_scan import content_lines
from test_ci_flow import BENCH, FakeSuite, commit_value, git, repo, run  # noqa: F401 (fixture)

from vlmpath.cli import main
from vlmpath.compare import accepted
from vlmpath.core.errors import VlmpathError
from vlmpath.github import alert

def said(md: str) -> str:
    """The comment's text as read (Markdown escapes and HTML entities undone)."""
    return html.unescape(md.replace("\\", ""))


ENTRY = f"accepted:\n  - case: '{BENCH}'\n    pr: 7\n    reason: 'exact rows cost accuracy here'\n"


def _accept_file(repo: Path, text: str | None) -> None:
    path = repo / accepted.ACCEPTED_FILE
    path.parent.mkdir(exist_ok=True)
    if text is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(text)


def _pr(repo: Path, tmp_path: Path, *, on_base: bool, pr: int | None = 7):
    """Base measures 1.0, head 0.6 and lists the drop: on base already, or only in the PR."""
    _accept_file(repo, ENTRY if on_base else None)
    good = commit_value(repo, 1.0, "good")
    git(repo, "branch", "-f", "base")
    _accept_file(repo, ENTRY)
    bad = commit_value(repo, 0.6, "bad")
    return run(repo, tmp_path, "base", bad, FakeSuite(), pr=pr), good, bad


def test_an_entry_the_pr_adds_for_itself_keeps_the_check_red_and_says_why(repo, tmp_path):
    res, _, _ = _pr(repo, tmp_path, on_base=False)
    assert res.exit_code == 1
    (c,) = res.report.regressions
    assert c.benchmark == BENCH and c.accepted is None and c.awaiting_review == "exact rows cost accuracy here"
    comment = (tmp_path / "out" / "comment.md").read_text()
    headline = comment.splitlines()[1]
    assert headline.startswith("**1 regression") and "(1 accepted by this PR's own change, awaiting review)" in headline
    assert "⏳ accepted by this PR's own change, awaiting review: exact rows cost accuracy here" in comment
    assert "not on the base branch, so they still fail" in comment  # and how to accept it
    summary = (tmp_path / "out" / "summary.txt").read_text()
    assert "exit 1" in summary and "awaiting review: still failing" in summary
    assert json.loads((tmp_path / "out" / "run.json").read_text())["exit_code"] == 1


def test_the_same_entry_already_on_the_base_branch_accepts(repo, tmp_path):
    res, _, _ = _pr(repo, tmp_path, on_base=True)
    assert res.exit_code == 0 and res.report.regressions == [] and len(res.report.accepted) == 1
    comment = (tmp_path / "out" / "comment.md").read_text()
    assert "✅ accepted: exact rows cost accuracy here" in comment and "awaiting review" not in comment


def test_an_entry_landed_on_base_after_the_pr_branched_accepts(repo, tmp_path):
    commit_value(repo, 1.0, "good")
    git(repo, "checkout", "-q", "-b", "feature")
    bad = commit_value(repo, 0.6, "bad")  # the PR's branch has no accepted.yaml at all
    git(repo, "checkout", "-q", "main")
    _accept_file(repo, ENTRY)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "accept #7's accuracy cost")
    res = run(repo, tmp_path, "main", bad, FakeSuite(), pr=7)
    assert res.exit_code == 0 and res.base_sha != bad and len(res.report.accepted) == 1
    # Unchanged pair: the same flow for PR 8 is red.
    assert run(repo, tmp_path, "main", bad, FakeSuite(), pr=8).exit_code == 1


def test_a_widened_base_entry_is_the_prs_own_and_the_checkouts_file_is_not_the_base(repo, tmp_path):
    gpu_only = ENTRY.replace("    pr: 7\n", "    machine: 'gpu-*'\n    pr: 7\n")
    _accept_file(repo, gpu_only)
    commit_value(repo, 1.0, "good")
    git(repo, "branch", "-f", "base")
    _accept_file(repo, ENTRY.replace("exact rows cost accuracy here", "widened by the PR"))  # every machine
    bad = commit_value(repo, 0.6, "bad")
    # The checkout (head) holds the widened entry: the base's list is read from the base commit.
    res = run(repo, tmp_path, "base", bad, FakeSuite(), pr=7)
    assert res.exit_code == 1 and res.report.regressions[0].awaiting_review == "widened by the PR"
    # Unchanged pair: base's own entry, on a machine it names, accepts.
    git(repo, "checkout", "-q", "base")
    _accept_file(repo, gpu_only.replace("gpu-*", "cpu-*"))
    git(repo, "commit", "-qam", "base entry for cpu")
    git(repo, "checkout", "-q", "main")
    res = run(repo, tmp_path, "base", bad, FakeSuite(), pr=7)
    assert res.exit_code == 0 and res.base_sha != bad and len(res.report.accepted) == 1


def test_a_pr_entry_covers_no_other_pr_and_no_flow_that_knows_no_pr(repo, tmp_path):
    for pr in (8, None):
        res, _, _ = _pr(repo, tmp_path, on_base=True, pr=pr)
        (c,) = res.report.regressions
        assert res.exit_code == 1 and c.accepted is None and c.awaiting_review is None, pr


# --- the privileged job: the label, read through the API ---------------------------------------------
REPO = "octo-org/bench"
BASE, HEAD = sha("grant-base"), sha("grant-head")
ACC = "bench_embed.Embed.track_accuracy"


def _artifacts(tmp_path: Path) -> Path:
    if (tmp_path / "arts").exists():
        return tmp_path / "arts"
    res = tmp_path / "res"
    write_asv_run(res, "cpu-a", BASE, {ACC: ("fraction", [], [], [1.0], None)}, fingerprint("cpu"))
    write_asv_run(res, "cpu-a", HEAD, {ACC: ("fraction", [], [], [0.9], None)}, fingerprint("cpu"))
    art = tmp_path / "arts" / "bench-cpu"
    shutil.copytree(res, art / "results")
    (art / "run.json").write_text(json.dumps({"schema_version": 1, "base_sha": BASE, "head_sha": HEAD,
                                              "machine": "cpu-a"}))
    (art / "pr-number").write_text("7\n")
    (tmp_path / "head-acc.yaml").write_text(f"accepted:\n  - case: '{ACC}'\n    pr: 7\n    reason: known cost\n")
    (tmp_path / "base-acc.yaml").write_text("accepted: []\n")
    return tmp_path / "arts"


@pytest.fixture
def api(github_fake, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", github_fake.url)
    github_fake.open_pull(7, HEAD, author="contributor")
    github_fake.collaborators.update({"maintainer": "maintain", "owner": "admin", "reader": "read",
                                      "triager": "triage", "contributor": "write"})
    return github_fake


def _grant_and_merge(tmp_path: Path, capsys, *extra: str, since: str | None = None):
    arts = _artifacts(tmp_path)
    grant = tmp_path / "grant.json"
    args = ["ci", "label-grant", "--artifacts", str(arts), "--repo", REPO, "--head-sha", HEAD, "--out", str(grant)]
    assert main(args + (["--since", since] if since else [])) == 0
    out = tmp_path / "merged"
    rc = main(["ci", "merge", str(arts), "--out", str(out), "--fail", "--head-sha", HEAD,
               "--accepted", str(tmp_path / "head-acc.yaml"), "--base-accepted", str(tmp_path / "base-acc.yaml"),
               "--grant", str(grant), *extra])
    capsys.readouterr()
    return rc, (out / "comment.md").read_text(), json.loads(grant.read_text())


def test_without_the_label_the_prs_own_entry_stays_red_in_the_privileged_merge(api, tmp_path, capsys):
    rc, md, g = _grant_and_merge(tmp_path, capsys)
    assert rc == 1 and g["granted_by"] is None and "awaiting review" in md
    assert "label vlmpath-accept-regression: not on PR #7; a maintainer applies it" in said(md)


def test_a_maintainers_label_accepts_and_names_who(api, tmp_path, capsys):
    api.label(7, "vlmpath-accept-regression", "maintainer")
    rc, md, g = _grant_and_merge(tmp_path, capsys)
    assert rc == 0 and g["granted_by"] == "maintainer" and g["permission"] == "maintain"
    assert "✅ accepted: known cost (accepted by @maintainer (maintain) with the label vlmpath-accept-regression)" in said(md)
    assert "&#64;maintainer" in md  # named, not pinged
    assert "awaiting review" not in md
    # The API was asked who applied it and what that person may do, with the PR's head checked.
    paths = [r.path for r in api.calls("GET")]
    assert paths == ["/repos/octo-org/bench/pulls/7", "/repos/octo-org/bench/issues/7/events",
                     "/repos/octo-org/bench/collaborators/maintainer/permission",
                     "/repos/octo-org/bench/pulls/7/files"]  # and what the PR changed (issue 39)


@pytest.mark.parametrize("changed, rc_want", [("src/vlmpath/paths/encode.py", 0),
                                              ("src/vlmpath/measure/syncs.py", 3), (".github/workflows/bench-pr.yml", 3)])
def test_the_privileged_job_reads_the_yardstick_itself_and_a_moved_one_is_never_green(api, tmp_path, capsys,
                                                                                      changed, rc_want):
    api.label(7, "vlmpath-accept-regression", "maintainer")  # all else green
    api.files[7] = [{"filename": changed, "status": "modified"}]
    rc, md, g = _grant_and_merge(tmp_path, capsys)
    assert rc == rc_want and (g["yardstick"] == [changed]) == (rc_want == 3)
    if rc_want == 3:
        from vlmpath.render.escape import md_escape

        assert "yardstick changed, needs a maintainer" in md and md_escape(changed.rsplit("/", 1)[-1]) in md


@pytest.mark.parametrize("who, how, why", [
    ("reader", {}, "whose permission is read"),
    ("triager", {}, "whose permission is triage"),
    ("stranger", {}, "whose permission is none"),  # not a collaborator: 404
    ("contributor", {}, "the PR's author"),  # write permission, but the change is theirs
    ("ci-bot", {"kind": "Bot"}, "not a person's account"),
    ("maintainer", {"at": "2024-12-31T23:00:00Z"}, "before the measured head was pushed"),
])
def test_a_label_that_is_not_a_maintainers_review_of_this_head_does_not_accept(api, tmp_path, capsys, who, how, why):
    api.label(7, "vlmpath-accept-regression", who, **how)
    rc, md, g = _grant_and_merge(tmp_path, capsys, since="2025-01-01T00:00:00Z")
    assert rc == 1 and g["granted_by"] is None and why in g["why"] and "awaiting review" in md
    assert why in said(md)  # the comment says why the label did not count


def test_a_removed_label_another_label_or_a_moved_head_does_not_accept(api, tmp_path, capsys):
    api.label(7, "vlmpath-accept-regression", "maintainer")
    api.unlabel(7, "vlmpath-accept-regression", "maintainer")
    api.label(7, "lgtm", "owner")
    rc, _, g = _grant_and_merge(tmp_path, capsys)
    assert rc == 1 and "not on PR #7" in g["why"]
    api.label(7, "vlmpath-accept-regression", "owner")
    api.pulls[7]["head"]["sha"] = sha("pushed-after")  # a new push: this run's label is not read
    rc, _, g = _grant_and_merge(tmp_path, capsys)
    assert rc == 1 and g["granted_by"] is None and "a new push" in g["why"]
    api.pulls[7]["head"]["sha"] = HEAD  # unchanged pair: the owner's label on the measured head accepts
    rc, md, g = _grant_and_merge(tmp_path, capsys)
    assert rc == 0 and g["granted_by"] == "owner"


def test_a_grant_for_another_pr_or_head_is_refused(api, tmp_path, capsys):
    api.label(7, "vlmpath-accept-regression", "maintainer")
    _grant_and_merge(tmp_path, capsys)
    grant = tmp_path / "grant.json"
    g = json.loads(grant.read_text())
    for field, value in (("pr", 8), ("head_sha", sha("other"))):
        grant.write_text(json.dumps({**g, field: value}))
        rc = main(["ci", "merge", str(tmp_path / "arts"), "--out", str(tmp_path / "m2"), "--fail",
                   "--accepted", str(tmp_path / "head-acc.yaml"), "--grant", str(grant)])
        err = capsys.readouterr().err
        assert rc == 2 and "--grant" in err and len(content_lines(err)) == 1, field  # fenced (render.job_log)


def test_a_label_accepts_only_the_prs_own_entries_not_unlisted_regressions(api, tmp_path, capsys):
    api.label(7, "vlmpath-accept-regression", "maintainer")
    arts = _artifacts(tmp_path)
    (tmp_path / "head-acc.yaml").write_text("accepted: []\n")  # nothing listed: the label accepts nothing
    grant = tmp_path / "grant.json"
    assert main(["ci", "label-grant", "--pr", "7", "--repo", REPO, "--head-sha", HEAD, "--out", str(grant)]) == 0
    rc = main(["ci", "merge", str(arts), "--out", str(tmp_path / "m"), "--fail", "--grant", str(grant),
               "--accepted", str(tmp_path / "head-acc.yaml")])
    capsys.readouterr()
    assert rc == 1


def test_the_base_files_entry_accepts_in_the_merge_without_the_prs_copy(tmp_path, capsys):
    arts = _artifacts(tmp_path)
    (tmp_path / "base-acc.yaml").write_text((tmp_path / "head-acc.yaml").read_text())
    rc = main(["ci", "merge", str(arts), "--out", str(tmp_path / "m"), "--fail",
               "--base-accepted", str(tmp_path / "base-acc.yaml")])
    capsys.readouterr()
    assert rc == 0 and "✅ accepted: known cost" in (tmp_path / "m" / "comment.md").read_text()


def test_merge_without_the_base_file_trusts_none_of_the_prs_entries(tmp_path, capsys):
    arts = _artifacts(tmp_path)
    rc = main(["ci", "merge", str(arts), "--out", str(tmp_path / "m"), "--fail",
               "--accepted", str(tmp_path / "head-acc.yaml")])
    capsys.readouterr()
    assert rc == 1 and "awaiting review" in (tmp_path / "m" / "comment.md").read_text()


def test_bad_label_grant_input_is_one_line(api, tmp_path, capsys):
    for args, needle in ((["--pr", "7", "--head-sha", "abc"], "--head-sha"),
                         (["--pr", "7", "--head-sha", HEAD, "--since", "yesterday"], "--since"),
                         (["--pr", "7", "--head-sha", HEAD, "--label", "bad\nlabel"], "--label")):
        rc = main(["ci", "label-grant", "--repo", REPO, "--out", str(tmp_path / "g.json"), *args])
        err = capsys.readouterr().err
        assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1, args
    assert not (tmp_path / "g.json").exists()


# --- a PR's entry on main: ci alert -----------------------------------------------------------------
def test_a_pr_scoped_entry_does_not_hold_mains_alert(github_fake, tmp_path):
    results = tmp_path / "history"
    speed = "bench_embed.Embed.track_tok_per_s"
    commits = []
    for i, value in enumerate([1000.0] * 4 + [400.0]):
        c = sha(f"grant-main-{i}")
        samples = [[value * f for f in (0.99, 1.0, 1.01, 0.995, 1.005)]]
        write_asv_run(results, "cpu-ci", c, {speed: ("tok/s", [], [], [value], samples)}, fingerprint("cpu"),
                      date=1_700_000_000_000 + i * 3_600_000)
        commits.append(c)
    findings = alert.judge_latest(results, commits[-1], window=4)
    pr_entry = accepted.entries_from({"accepted": [{"case": speed, "pr": 7, "reason": "for PR 7"}]}, "x")
    res = alert.sync_issues(findings, "octo-org/bench", alert.Links(), token=TOKEN, api_url=github_fake.url,
                            accepted=pr_entry)
    assert len(res.opened) == 1 and res.held == ()
    # Unchanged pair: the entry of that commit does hold it.
    commit_entry = accepted.entries_from({"accepted": [{"case": speed, "commit": commits[-1],
                                                        "reason": "known"}]}, "x")
    res = alert.sync_issues(findings, "octo-org/bench", alert.Links(), token=TOKEN, api_url=github_fake.url,
                            accepted=commit_entry)
    assert res.held and res.opened == ()


def test_the_yaml_is_parsed_in_one_place(monkeypatch, tmp_path):
    # The swap point for a bounded loader: load() and load_at() both go through parse_yaml.
    seen = []
    monkeypatch.setattr(accepted, "parse_yaml", lambda text, where: seen.append(where) or {"accepted": []})
    (tmp_path / "a.yaml").write_text("accepted: []\n")
    assert accepted.load(tmp_path / "a.yaml") == () and seen == [str(tmp_path / "a.yaml")]
    with pytest.raises(VlmpathError, match="larger than"):
        accepted.loads(b"#" * (accepted.MAX_BYTES + 1), "big.yaml")
    assert os.path.basename(seen[0]) == "a.yaml"


# --- red team: what a PR (or a tampered file) tries ---------------------------------------------------
def test_hostile_acceptance_inputs_hold(api, tmp_path, capsys):
    """Each try a PR can make at granting itself, and what holds (counted: all of them)."""
    from test_hostile_corpus import EVIL, comment_is_inert, no_workflow_command

    arts = _artifacts(tmp_path)
    base = tmp_path / "base-acc.yaml"
    base.write_text(f"accepted:\n  - case: '{ACC}'\n    machine: 'gpu-*'\n    pr: 7\n    reason: gpu only\n")

    def merge(head_text: str, *extra: str) -> tuple[int, str, str]:
        (tmp_path / "head-acc.yaml").write_text(head_text)
        out = tmp_path / "m"
        rc = main(["ci", "merge", str(arts), "--out", str(out), "--fail", "--accepted", str(tmp_path / "head-acc.yaml"),
                   "--base-accepted", str(base), *extra])
        cap = capsys.readouterr()
        md = (out / "comment.md").read_text() if rc != 2 else ""
        return rc, md, cap.out + cap.err

    held = 0
    # 1. Its own entry with a reason that is a payload: awaiting, red, inert in the comment and the log.
    evil = json.dumps(EVIL[:290])
    rc, md, log = merge(f"accepted:\n  - case: '{ACC}'\n    pr: 7\n    reason: {evil}\n")
    assert rc == 1 and "awaiting review" in md
    comment_is_inert(md)
    no_workflow_command(log, (tmp_path / "m" / "summary.txt").read_text())
    held += 1
    # 2. The base's entry widened (machine gpu-* -> *): a different entry, the PR's own.
    rc, md, _ = merge(base.read_text().replace("'gpu-*'", "'*'"))
    assert rc == 1 and "awaiting review" in md
    held += 1
    # 3. Every case at once: refused, one line, naming the file and the entry.
    rc, _, log = merge(f"accepted:\n  - case: '{ACC}'\n    pr: 7\n    reason: r\n  - case: '*'\n    pr: 7\n    reason: r\n")
    assert rc == 2 and "head-acc.yaml: entry 1: case '*' must name one benchmark in full" in log
    held += 1
    # 4. Another PR's number scoped entry, copied from the base: covers only that PR.
    base.write_text(f"accepted:\n  - case: '{ACC}'\n    pr: 8\n    reason: for 8\n")
    rc, md, _ = merge(base.read_text())
    assert rc == 1 and "accepted" not in md.splitlines()[1]
    held += 1
    # 5. A grant file written by hand, naming a "maintainer" that is a link: refused.
    grant = tmp_path / "g.json"
    grant.write_text(json.dumps({"schema_version": 1, "repo": REPO, "pr": 7, "head_sha": HEAD,
                                 "label": "vlmpath-accept-regression", "granted_by": "x](https://evil.example)",
                                 "permission": "admin", "why": "trust me"}))
    rc, _, log = merge(f"accepted:\n  - case: '{ACC}'\n    pr: 7\n    reason: r\n", "--grant", str(grant))
    assert rc == 2 and "--grant" in log
    held += 1
    # 6. The head's list as a symlink (to a file the job can read): refused, never followed.
    (tmp_path / "secret.yaml").write_text(f"accepted:\n  - case: '{ACC}'\n    pr: 7\n    reason: r\n")
    (tmp_path / "head-acc.yaml").unlink()
    (tmp_path / "head-acc.yaml").symlink_to(tmp_path / "secret.yaml")
    rc = main(["ci", "merge", str(arts), "--out", str(tmp_path / "m6"), "--fail",
               "--accepted", str(tmp_path / "head-acc.yaml"), "--base-accepted", str(tmp_path / "secret.yaml")])
    assert rc == 2 and "is a symlink" in capsys.readouterr().err
    held += 1
    # 7. The label applied by the author's second account without permission, then by a bot.
    api.label(7, "vlmpath-accept-regression", "contributor-alt")
    api.unlabel(7, "vlmpath-accept-regression", "contributor-alt")
    api.label(7, "vlmpath-accept-regression", "github-actions", kind="Bot")
    assert main(["ci", "label-grant", "--pr", "7", "--repo", REPO, "--head-sha", HEAD, "--out", str(grant)]) == 0
    assert json.loads(grant.read_text())["granted_by"] is None
    held += 1
    assert held == 7
