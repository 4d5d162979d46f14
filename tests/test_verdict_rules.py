"""The verdict's exactness rules below pr/ (issue 39): acceptance names one benchmark and its
metric and a full commit; label events by time, logins without case; records that contradict
themselves; the yardstick classified from the PR's files as the privileged job reads them."""

from __future__ import annotations

import pytest
from asv_fixtures import sha
from github_fake import github_fake  # noqa: F401 (fixture)

from vlmpath.compare import accepted
from vlmpath.compare.comparison import Comparison, Verdict
from vlmpath.github.label_grant import last_label_event

ACC = "bench_embed.EmbedRoutine.track_accuracy"
HEAD = sha("verdict-head")


def _row(bench=ACC, params=(("preset", "multi_region"),)):
    return Comparison(machine="cpu-a", benchmark=bench, params=params, unit="fraction", base=1.0, head=0.5,
                      verdict=Verdict.REGRESSION)


def test_an_entry_matches_one_benchmark_its_parameters_by_pattern_and_the_full_commit_only():
    (e,) = accepted.entries_from({"accepted": [{"case": f"{ACC} (preset=multi_*)", "commit": HEAD,
                                                "reason": "accuracy traded for a fix"}]}, "x")
    assert e.metric == "accuracy"
    assert e.matches(_row(), backend="cpu", head_commit=HEAD.upper(), pr=None)
    assert not e.matches(_row(params=(("preset", "video"),)), backend="cpu", head_commit=HEAD, pr=None)
    assert not e.matches(_row(ACC + "_x"), backend="cpu", head_commit=HEAD, pr=None)  # no prefix of a name
    ground = HEAD[:7] + "0" * 33  # a head ground to share the first 7 hex digits
    assert not e.matches(_row(), backend="cpu", head_commit=ground, pr=None)


def _ev(kind, login, at, name="vlmpath-accept-regression"):
    return {"event": kind, "actor": {"login": login, "type": "User"}, "label": {"name": name}, "created_at": at}


def test_label_events_are_ordered_by_their_time_not_by_the_page():
    on, off = _ev("labeled", "maint", "2026-01-02T00:00:00Z"), _ev("unlabeled", "maint", "2026-01-03T00:00:00Z")
    # the page lists the removal first: by time it is the last word, so nothing holds
    assert last_label_event([off, on], "vlmpath-accept-regression") is None
    assert last_label_event([on], "VLMPATH-accept-regression") is on  # label names ignore case
    same = _ev("unlabeled", "maint", "2026-01-02T00:00:00Z")
    assert last_label_event([same, on], "vlmpath-accept-regression") is None  # a tie: the removal wins
    unreadable = _ev("unlabeled", "maint", "yesterday")
    assert last_label_event([on, unreadable], "vlmpath-accept-regression") is None
    assert last_label_event([_ev("labeled", "m", "2026-01-01T00:00:00Z", "other")], "vlmpath-accept-regression") is None


def test_the_authors_own_label_counts_nothing_whatever_the_case_of_the_login(github_fake):
    from github_fake import TOKEN

    from vlmpath.github.label_grant import read_grant
    from vlmpath.github.rest import make_client

    github_fake.open_pull(7, HEAD, author="Contributor")
    github_fake.collaborators["CONTRIBUTOR"] = "maintain"
    github_fake.label(7, "vlmpath-accept-regression", "CONTRIBUTOR")
    client = make_client(github_fake.url, TOKEN, max_retries=0)
    repo = f"{github_fake.owner}/{github_fake.repo}"
    got = read_grant(client, repo, 7, head_sha=HEAD)
    assert got.granted_by is None and "the PR's author" in got.why
    # planted: another maintainer's label is a grant
    github_fake.collaborators["maint"] = "maintain"
    github_fake.label(7, "vlmpath-accept-regression", "maint")
    assert read_grant(client, repo, 7, head_sha=HEAD).granted_by == "maint"


# --- records that contradict themselves (suite.record_check) -----------------------------------
from vlmpath.compare.from_records import run_from_records  # noqa: E402
from vlmpath.compare.verdict import compare  # noqa: E402
from vlmpath.suite.record import CaseRecord, dumps_record, loads_record  # noqa: E402
from vlmpath.suite.record_check import CONTRADICTS  # noqa: E402

_OK = dict(workload="multi_region", accuracy=1.0, items=4, placed=4, steps=3, failed_steps=0, syncs=0,
           encoder_calls=2, prefill_tokens=1000, samples=(0.5, 0.5, 0.5), tok_per_s=2000.0)


def _judge(head: dict):
    def side(fields, commit):
        rec = loads_record(dumps_record(CaseRecord(**fields)), "artifact record 1")  # as an artifact is read
        return run_from_records([rec], machine="cpu-a", commit=commit)
    return compare(side(_OK, sha("rb")), side(head, sha("rh")))


def test_a_record_that_holds_together_is_compared_as_given():
    assert _judge(_OK).exit_code() == 0


@pytest.mark.parametrize("forged, says", [
    (dict(placed=0), "accuracy 1 with 0 of 4 items placed"),
    (dict(placed=9, items=4), "9 of 4 items placed"),
    (dict(failed_steps=1), "1 failed step(s) and no error"),
    (dict(failed_steps=1, error="RuntimeError: x"), "1 failed step(s) and a speed of 2000 tok/s"),
    (dict(failed_steps=4), "4 of 3 steps failed"),
    (dict(accuracy=1.5, placed=6, items=4), "accuracy 1.5 is outside 0..1"),
    (dict(syncs=-1), "syncs -1 is not a count"),
])
def test_a_record_that_contradicts_itself_is_one_failure(forged, says):
    rep = _judge({**_OK, **forged})
    assert rep.exit_code() == 1
    (bad,) = rep.regressions
    assert bad.verdict is Verdict.NEWLY_FAILING and bad.error == f"{CONTRADICTS}: {says}"
    assert not rep.improvements and len(rep.all()) == 1  # one failure, no leftover rows


# --- the trusted yardstick classification (core.yardstick.classify, github.pr_files) ----------
from vlmpath.core.yardstick import YARDSTICK_CHANGED, classify, yardstick_withheld  # noqa: E402


@pytest.mark.parametrize("path", [
    ".github/workflows/bench-pr.yml", "ci/pr-bench.sh", "src/vlmpath/pr/flow.py", "src/vlmpath/compare/verdict.py",
    "pyproject.toml", "benchmarks/bench_embed.py", "docker/Dockerfile.cpu", "src/vlmpath/measure/syncs.py",
    "src/vlmpath/suite/cases.py", "./Benchmarks/x.py", "src/vlmpath/paths/../measure/timing.py",
    "src/vlmpath/paths/evil.pth", "src/vlmpath/paths/" + "sitecustomize.py", "ＣＩ/run.sh", "Dockerfile",
])
def test_the_yardstick_is_every_file_that_measures_or_judges(path):
    assert classify([(path, None)]) == ([path], [])


def test_the_code_under_test_alone_moves_no_yardstick_and_a_rename_counts_by_both_names():
    under = [("src/vlmpath/paths/encode.py", None), ("docs/verdict.md", None), ("README.md", None)]
    assert classify(under) == ([], sorted(p for p, _ in under)) and yardstick_withheld([]) == ()
    moved = [("src/vlmpath/paths/" + "old_bench.py", "benchmarks/bench_embed.py")]  # moved out of benchmarks/
    assert classify(moved)[0] == ["src/vlmpath/paths/" + "old_bench.py"]


def test_the_privileged_job_reads_the_files_itself_and_the_check_is_never_green(github_fake):
    from github_fake import TOKEN

    from vlmpath.compare.withheld import withhold
    from vlmpath.github.pr_files import changed_files
    from vlmpath.github.rest import make_client

    github_fake.open_pull(7, HEAD)
    github_fake.files[7] = [{"filename": f"src/vlmpath/paths/p{i}.py", "status": "modified"} for i in range(150)]
    github_fake.files[7].append({"filename": "src/vlmpath/compare/verdict.py", "status": "modified"})
    client = make_client(github_fake.url, TOKEN, max_retries=0)
    files, truncated = changed_files(client, f"{github_fake.owner}/{github_fake.repo}", 7)
    assert len(files) == 151 and not truncated  # two pages, followed
    yard, under = classify(files)
    assert yard == ["src/vlmpath/compare/verdict.py"] and len(under) == 150
    reasons = yardstick_withheld(yard)
    assert YARDSTICK_CHANGED in reasons[0] and "compare/verdict.py" in reasons[0]
    green = _judge(_OK)  # an unchanged pair, whatever the artifact says
    assert green.exit_code() == 0 and withhold(green, reasons).exit_code() == 3  # neutral, never green
    # a file record without a name: the list may be incomplete, so the yardstick may have moved
    github_fake.files[7] = [{"status": "modified"}]
    files, truncated = changed_files(client, f"{github_fake.owner}/{github_fake.repo}", 7)
    assert files == [] and truncated and yardstick_withheld([], truncated)


# --- the yardstick read fails closed (pr.judge.Acceptance, VLMPATH_YARDSTICK_REQUIRED) -----------
def test_a_required_yardstick_read_that_never_happened_is_never_green():
    from vlmpath.compare.withheld import YARDSTICK_UNREAD, yardstick_required
    from vlmpath.github.label_grant import LabelGrant
    from vlmpath.pr.judge import Acceptance

    green = _judge(_OK)
    head = sha("rh")
    unread, _ = Acceptance(pr=7, yardstick_required=True).apply(green, head)
    assert unread.exit_code() == 3 and unread.withheld == (YARDSTICK_UNREAD,)  # planted: the step failed
    read = LabelGrant("o/r", 7, head, "vlmpath-accept", None, None, "no label")  # read, nothing moved
    judged, _ = Acceptance(pr=7, grant=read, yardstick_required=True).apply(green, head)
    assert judged.exit_code() == 0 and not judged.withheld
    assert Acceptance(pr=7).apply(green, head)[0].exit_code() == 0  # a flow that reads no label
    assert yardstick_required({"VLMPATH_YARDSTICK_REQUIRED": "1"}) and not yardstick_required({})
