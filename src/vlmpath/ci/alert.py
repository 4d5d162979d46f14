"""Did the newest main commit regress a benchmark against recent main history, and is
each regression tracked by exactly one GitHub issue?

``judge_latest`` compares the commit with a **window** of the previous commits that have
results on the same machine (ordered by asv's commit date): the baseline of a case is the
median of the window's values, with the window's raw samples pooled (so the significance
test sees the history's own noise), judged by the same rules and thresholds as a PR
(``vlmpath.compare.verdict``). A single noisy commit in the window moves a median little;
a regression that stays becomes the baseline only after half a window.

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
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vlmpath.ci.github import parse_repo
from vlmpath.ci.github_http import make_client
from vlmpath.ci.github_issues import close_issue, comment_issue, create_issue, list_issues, update_issue
from vlmpath.compare.asv_results import load_asv
from vlmpath.compare.comparison import FAILING_VERDICTS, Comparison, Verdict
from vlmpath.compare.records import MachineRun, Metric, backend_from_name
from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.verdict import judge
from vlmpath.core.backends import noise_band
from vlmpath.core.errors import VlmpathError
from vlmpath.render.fmt import fmt_pair
from vlmpath.render.headline import case_text

LABEL = "benchmark-regression"
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


def _history(results_dir: Path, machine: str) -> list[tuple[int, str]]:
    """(asv commit date, sha) of every commit with results on ``machine``, oldest first."""
    seen: dict[str, int] = {}
    for p in sorted((results_dir / machine).glob("*.json")):
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if isinstance(data, dict) and isinstance(data.get("commit_hash"), str) and "results" in data:
            seen[data["commit_hash"].lower()] = int(data.get("date") or 0)
    return sorted((d, s) for s, d in seen.items())


def _baseline(runs: list[MachineRun]) -> dict[tuple, Metric]:
    """Per case: median value of the window's successful runs, samples pooled."""
    by_case: dict[tuple, list[Metric]] = {}
    for run in runs:
        for m in run.metrics:
            if m.ok:
                by_case.setdefault(m.case, []).append(m)
    return {case: replace(ms[-1], value=statistics.median(float(m.value) for m in ms),  # type: ignore[arg-type]
                          samples=tuple(x for m in ms for x in m.samples), ci_99=None)
            for case, ms in by_case.items()}


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
        base_runs = [m for sha in prev for m in load_asv(root, sha).machines if m.machine == run.machine]
        base = _baseline(base_runs)
        kind = noise_band(run.backend)
        for m in run.metrics:
            b = base.get(m.case)
            if b is None or m.skipped:
                continue  # new in this commit, or not measured: nothing to alert on
            c = judge(b, m, cfg, kind)
            label = case_text(m.benchmark, m.params)
            out.append(Finding(f"{run.machine}/{label}", run.machine, label, c, prev[-1], run.commit, len(prev)))
    return out


@dataclass(frozen=True)
class Links:
    run_url: str = ""
    dashboard_url: str = ""
    commit_url: str = ""  # with "{sha}"


def _numbers(c: Comparison) -> str:
    before, after = fmt_pair(c.base, c.head, c.unit)
    pct = f" ({(c.head / c.base - 1) * 100:+.1f}%)" if c.base and c.head is not None else ""
    after = after if c.head is not None else "failed"
    return f"{before} -> {after} {c.unit}{pct}"


def _commit(sha: str, links: Links) -> str:
    return f"[{sha[:8]}]({links.commit_url.format(sha=sha)})" if links.commit_url else sha[:8]


def issue_title(f: Finding) -> str:
    return f"Benchmark regression: {f.label} on {f.machine}"


def issue_body(f: Finding, links: Links) -> str:
    meta = {"key": f.key, "before": f.comparison.base, "unit": f.comparison.unit, "since": f.after_commit}
    lines = [
        f"<!-- vlmpath-alert {json.dumps(meta, sort_keys=True)} -->",
        f"**{f.label}** on **{f.machine}** regressed: **{_numbers(f.comparison)}**",
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


def sync_issues(findings: list[Finding], repo: str, links: Links, *, thresholds: Thresholds | None = None,
                token: str | None = None, api_url: str | None = None, client=None) -> SyncResult:
    """Open, update or close one issue per case (see the module docstring)."""
    owner, name = parse_repo(repo)
    client = client or make_client(api_url, token)
    cfg = thresholds or Thresholds.default()
    open_by_key = {}
    for issue in list_issues(client, owner, name, label=LABEL, state="open"):
        meta = _key_of(issue)
        if meta and meta.get("key") not in open_by_key:
            open_by_key[meta["key"]] = (issue, meta)
    opened, updated, closed = [], [], []
    for f in findings:
        have = open_by_key.get(f.key)
        if f.regressed:
            body = issue_body(f, links) if have is None else _keep_before(issue_body(f, links), have[1])
            if have is None:
                create_issue(client, owner, name, title=issue_title(f), body=body, labels=[LABEL])
                opened.append(f.key)
            elif have[0].get("body") != body:
                update_issue(client, owner, name, int(have[0]["number"]), body=body)
                updated.append(f.key)
            continue
        if have is None:
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
                      f"Recovered at {_commit(f.after_commit, links)}: baseline -> now **{_numbers(vs_before)}**"
                      + (f" ({links.run_url})" if links.run_url else ""))
        close_issue(client, owner, name, int(have[0]["number"]))
        closed.append(f.key)
    return SyncResult(tuple(opened), tuple(updated), tuple(closed))


def _keep_before(body: str, meta: Mapping[str, Any]) -> str:
    """An open issue keeps the baseline it was opened with (the window moves; the issue does not)."""
    m = _KEY.search(body)
    assert m is not None
    new = json.loads(m.group(1))
    new.update(before=meta.get("before"), since=meta.get("since"))
    return body.replace(m.group(0), f"<!-- vlmpath-alert {json.dumps(new, sort_keys=True)} -->")


__all__ = ["LABEL", "Finding", "Links", "SyncResult", "issue_body", "issue_title", "judge_latest", "sync_issues",
           "Verdict"]
