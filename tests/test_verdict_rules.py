"""The verdict's exactness rules below pr/ (issue 39): acceptance names one benchmark and its
metric and a full commit; label events by time, logins without case; records that contradict
themselves; the yardstick classified from the PR's files as the privileged job reads them."""

from __future__ import annotations

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
