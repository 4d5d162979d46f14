"""Did the newest main commit regress a benchmark against recent main history, and is
each regression tracked by exactly one GitHub issue?

``judge_latest`` compares the commit with a **window** of the previous commits that have
results on the same machine (ordered by asv's commit date): the baseline of a case is the
median of the window's values, with the window's raw samples pooled (so the significance
test sees the history's own noise), judged by the same rules and thresholds as a PR
(``vlmpath.compare.verdict``). A single noisy commit in the window moves a median little;
a regression that stays becomes the baseline only after half a window. Only rows of the
same definition count: the same asv version and the same helper modules
(``core.helper_digest``, recorded in each commit's run-info file); a commit that changed how
a benchmark measures starts its history afresh ("definition changed", not judged).

``sync_issues`` keeps one open issue per regressed case (label ``benchmark-regression``,
identified by a hidden key in its body): a regression opens it, or updates the open one;
a case with an open issue that no longer regresses against the baseline recorded in that
issue (not the moving window) gets a comment and is closed. Running it twice for the same
commit changes nothing the second time.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vlmpath.compare.accepted import Accepted
from vlmpath.github import alert_hold
from vlmpath.github.comment import parse_repo
from vlmpath.github.issues import comment_issue, create_issue, list_issues, update_issue
from vlmpath.github.rest import make_client
from vlmpath.compare.asv_results import load_asv
from vlmpath.compare.results_store import run_files
from vlmpath.compare.comparison import FAILING_VERDICTS, Comparison, Verdict
from vlmpath.compare.records import Metric, backend_from_name
from vlmpath.compare.comparison import NOT_JUDGED_VERDICTS
from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.verdict import judge
from vlmpath.core.backends import noise_band
from vlmpath.core.errors import VlmpathError
from vlmpath.core.helper_digest import helpers_moved, module_of
from vlmpath.runner.run_files import read_run_info
from vlmpath.render.escape import clip, log_line, md_escape, title_text
from vlmpath.render.fmt import fmt_pair
from vlmpath.render.headline import case_text

LABEL = "benchmark-regression"
#: Why a case with history is not judged: the window measured it with another definition.
DEFINITION_MOVED = ("definition changed: the window measured this benchmark with another asv version or "
                    "other helper modules (benchmarks/_common.py ...); not judged until it has history of its own")
_KEY = re.compile(r"<!-- vlmpath-alert (\{.*?\}) -->")


@dataclass(frozen=True)
class Finding:
    """One case of the newest commit judged against the window."""

    key: str  # machine/benchmark(params): what one issue tracks
    machine: str
    label: str
    comparison: Comparison
    before_commit: str  # the newest commit of the window (the previous main commit)
    after_commit: str
    window: int  # commits in the baseline

    @property
    def regressed(self) -> bool:
        return self.comparison.verdict in FAILING_VERDICTS

    @property
    def judged(self) -> bool:
        """False for a case with no history, skipped, or with a value that is not a finite
        number in range: counted and named, never green, and never closes an issue."""
        return self.comparison.verdict not in NOT_JUDGED_VERDICTS


def _history(results_dir: Path, machine: str) -> list[tuple[int, str]]:
    """(asv commit date, sha) of every commit with results on ``machine``, oldest first."""
    seen: dict[str, int] = {}
    for p in run_files(results_dir / machine):
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):  # deep JSON too
            continue
        if isinstance(data, dict) and isinstance(data.get("commit_hash"), str) and "results" in data:
            seen[data["commit_hash"].lower()] = int(data.get("date") or 0)
    return sorted((d, s) for s, d in seen.items())


def _pooled(ms: Sequence[Metric]) -> Metric:
    """One baseline row: the median value of the window's rows of one case, samples pooled."""
    return replace(ms[-1], value=statistics.median(float(m.value) for m in ms),  # type: ignore[arg-type]
                   samples=tuple(x for m in ms for x in m.samples), ci_99=None)


def _helpers(root: Path, machine: str, sha: str) -> dict[str, str] | None:
    """The helper digests ``vlmpath run`` recorded for this commit (None: not recorded)."""
    info = read_run_info(root, machine, sha)
    h = info.get("helpers") if info else None
    return h if isinstance(h, dict) and all(isinstance(v, str) for v in h.values()) else None


def _same_definition(head: Metric, b: Metric, moved: set[str]) -> bool:
    """Was a window's row measured with head's definition: the same asv version (when both
    are known) and the same helper modules (``core.helper_digest``; ``moved``: modules
    whose helpers differ between that commit and head)?"""
    return (module_of(b.benchmark) not in moved
            and (not b.version or not head.version or b.version == head.version))


def _judge_one(m: Metric, window: Sequence[tuple[set[str], Mapping[tuple, Metric]]], cfg: Thresholds,
               kind: str) -> Comparison:
    """One case of the newest commit against the window's rows of the same definition
    (``window``: per commit, the modules whose helpers moved since, and its rows by case)."""
    same = [b for moved, rows in window if (b := rows.get(m.case)) is not None and b.ok
            and _same_definition(m, b, moved)]
    other = any((b := rows.get(m.case)) is not None and b.ok for _, rows in window) and not same
    if not same or m.skipped:  # new in this commit, or not measured: not judged, counted
        reason = "skipped" if same else DEFINITION_MOVED if other else "no history"
        return Comparison(m.machine, m.benchmark, m.params, m.unit, None, m.value if m.ok else None,
                          Verdict.NOT_COMPARABLE if same else Verdict.NEW, reason=reason)
    return judge(_pooled(same), m, cfg, kind)


def judge_latest(results_dir: str | Path, commit: str, *, window: int = 10,
                 thresholds: Thresholds | None = None) -> list[Finding]:
    """Every case of ``commit`` judged against the previous ``window`` commits, per machine."""
    if window < 1:
        raise VlmpathError(f"--window must be at least 1, got {window}")
    root = Path(results_dir)
    cfg = thresholds or Thresholds.default()
    head = load_asv(root, commit)
    out: list[Finding] = []
    for run in head.machines:
        hist = [sha for _, sha in _history(root, run.machine)]
        if run.commit.lower() not in hist:
            continue
        prev = hist[: hist.index(run.commit.lower())][-window:]
        if not prev:
            continue  # the first commit with results: nothing to judge against
        head_helpers = _helpers(root, run.machine, run.commit)
        by_commit = [(helpers_moved(_helpers(root, run.machine, sha), head_helpers),
                   {m.case: m for mr in load_asv(root, sha).machines if mr.machine == run.machine
                    for m in mr.metrics}) for sha in prev]
        kind = noise_band(run.backend)
        for m in run.metrics:
            c = _judge_one(m, by_commit, cfg, kind)
            label = case_text(m.benchmark, m.params)
            out.append(Finding(f"{run.machine}/{label}", run.machine, label, c, prev[-1], run.commit, len(prev)))
    return out


@dataclass(frozen=True)
class Links:
    run_url: str = ""
    dashboard_url: str = ""
    commit_url: str = ""  # with "{sha}"


def numbers_text(c: Comparison, esc=log_line) -> str:
    before, after = fmt_pair(c.base, c.head, c.unit)
    pct = f" ({(c.head / c.base - 1) * 100:+.1f}%)" if c.base and c.head is not None else ""
    after = after if c.head is not None else "failed"
    return f"{before} -> {after} {esc(clip(c.unit, 24))}{pct}"


def _commit(sha: str, links: Links) -> str:
    if not re.fullmatch(r"[0-9a-fA-F]{7,40}", sha):  # a link target only from a validated sha
        return md_escape(clip(sha, 40))
    return f"[{sha[:8]}]({links.commit_url.format(sha=sha)})" if links.commit_url else sha[:8]


def issue_title(f: Finding) -> str:
    # Names come from the results (code under test): one line, clipped, no mention.
    return title_text(f"Benchmark regression: {clip(f.label, 120)} on {clip(f.machine, 64)}", 240)


def issue_body(f: Finding, links: Links) -> str:
    meta = {"key": f.key, "before": f.comparison.base, "after": f.comparison.head, "unit": f.comparison.unit,
            "since": f.after_commit}
    lines = [
        f"<!-- vlmpath-alert {_hidden(meta)} -->",
        f"**{md_escape(clip(f.label, 200))}** on **{md_escape(clip(f.machine, 64))}** regressed: "
        f"**{numbers_text(f.comparison, md_escape)}**",
        "",
        f"- before: median of the {f.window} previous main commit(s), the last {_commit(f.before_commit, links)}",
        f"- after: {_commit(f.after_commit, links)}",
        f"- verdict: {f.comparison.verdict.value} ({f.comparison.method or 'failure'}"
        + (f", factor {f.comparison.factor:.0%}" if f.comparison.factor else "") + ")",
    ]
    if links.run_url:
        lines.append(f"- run: {links.run_url}")
    if links.dashboard_url:
        lines.append(f"- dashboard: {links.dashboard_url}")
    lines += ["", "Closed automatically when a later main commit is back within the threshold of the"
              " `before` value."]
    return "\n".join(lines) + "\n"


def _key_of(issue: Mapping[str, Any]) -> dict[str, Any] | None:
    m = _KEY.search(str(issue.get("body") or ""))
    try:
        return json.loads(m.group(1)) if m else None
    except ValueError:
        return None


@dataclass(frozen=True)
class SyncResult:
    opened: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    closed: tuple[str, ...] = ()
    held: tuple[str, ...] = ()  # regressed, but accepted or closed by a maintainer (alert_hold)


def sync_issues(findings: list[Finding], repo: str, links: Links, *, thresholds: Thresholds | None = None,
                token: str | None = None, api_url: str | None = None, client=None,
                accepted: Sequence[Accepted] = ()) -> SyncResult:
    """Open, update or close one issue per case (see the module docstring); ``accepted``:
    entries of benchmarks/accepted.yaml (``vlmpath.github.alert_hold``)."""
    owner, name = parse_repo(repo)
    client = client or make_client(api_url, token)
    cfg = thresholds or Thresholds.default()
    open_by_key = {}
    keyed = [(i, m) for i in list_issues(client, owner, name, label=LABEL, state="all") for m in [_key_of(i)] if m]
    for issue, meta in keyed:
        if issue.get("state", "open") == "open" and meta.get("key") not in open_by_key:
            open_by_key[meta["key"]] = (issue, meta)
    by_hand = alert_hold.closed_by_hand(keyed)
    opened, updated, closed, held = [], [], [], []
    for f in findings:
        have = open_by_key.get(f.key)
        why = alert_hold.accepted_reason(f, accepted) if f.regressed else None
        if why is not None:  # accepted in the repository: no issue; an open one is closed, said why
            if have is not None:
                comment_issue(client, owner, name, int(have[0]["number"]),
                              f"Accepted in benchmarks/accepted.yaml: {md_escape(clip(why, 300))}")
                _close(client, owner, name, have, recovered=False)
                closed.append(f.key)
            held.append(f.key)
            continue
        if f.regressed and have is None and f.key in by_hand and not alert_hold.moved_again(f, by_hand[f.key], cfg):
            held.append(f.key)  # a maintainer closed it and the value has not moved since
            continue
        if f.regressed:
            body = issue_body(f, links) if have is None else _keep_before(issue_body(f, links), have[1])
            if have is None:
                create_issue(client, owner, name, title=issue_title(f), body=body, labels=[LABEL])
                opened.append(f.key)
            elif have[0].get("body") != body:
                update_issue(client, owner, name, int(have[0]["number"]), body=body)
                updated.append(f.key)
            continue
        if have is None or not f.judged:
            continue
        before = have[1].get("before")
        if before is None or f.comparison.head is None:
            continue
        base = Metric(f.machine, f.comparison.benchmark, f.comparison.params, f.comparison.unit, float(before))
        head = Metric(f.machine, f.comparison.benchmark, f.comparison.params, f.comparison.unit,
                      float(f.comparison.head))
        vs_before = judge(base, head, cfg, noise_band(backend_from_name(f.machine)))
        if vs_before.verdict in FAILING_VERDICTS:
            continue  # still slower than when the issue opened
        comment_issue(client, owner, name, int(have[0]["number"]),
                      f"Recovered at {_commit(f.after_commit, links)}: baseline -> now "
                      f"**{numbers_text(vs_before, md_escape)}**"
                      + (f" ({links.run_url})" if links.run_url else ""))
        _close(client, owner, name, have, recovered=True)
        closed.append(f.key)
    return SyncResult(tuple(opened), tuple(updated), tuple(closed), tuple(held))


def _close(client, owner: str, name: str, have, *, recovered: bool) -> None:
    """Close an issue; a recovery is marked in its key, so that a closed issue without the
    mark reads as closed by a person (alert_hold: not reopened for the same change)."""
    issue, meta = have
    body = str(issue.get("body") or "")
    m = _KEY.search(body)
    if recovered and m:
        body = body.replace(m.group(0), f"<!-- vlmpath-alert {_hidden({**meta, 'recovered': True})} -->")
    update_issue(client, owner, name, int(issue["number"]), state="closed", state_reason="completed",
                 **({"body": body} if recovered and m else {}))


def _keep_before(body: str, meta: Mapping[str, Any]) -> str:
    """An open issue keeps the baseline it was opened with (the window moves; the issue does not)."""
    m = _KEY.search(body)
    assert m is not None
    new = json.loads(m.group(1))
    new.update(before=meta.get("before"), since=meta.get("since"))
    return body.replace(m.group(0), f"<!-- vlmpath-alert {_hidden(new)} -->")


def _hidden(meta: Mapping[str, Any]) -> str:
    """The key as JSON that cannot end its HTML comment (``-->``) nor mention anyone: the
    key holds benchmark names. ``\\u`` escapes are still JSON; ``json.loads`` undoes them."""
    text = json.dumps(meta, sort_keys=True)
    for ch in "<>&@`[]()":
        text = text.replace(ch, f"\\u{ord(ch):04x}")
    return text


__all__ = ["LABEL", "Finding", "Links", "SyncResult", "issue_body", "issue_title", "judge_latest", "sync_issues",
           "Verdict"]
