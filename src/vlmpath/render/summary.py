"""What did one ``vlmpath run`` measure, in one table?

Reads the run's asv results JSON (through ``vlmpath.compare.asv_results.load_asv``, never asv's console
text) for one commit on one machine and renders it three ways: a terminal table, markdown
and JSON (``reports_dir/run-<machine>-<sha8>.{json,md}``, written atomically). Nothing here
measures or compares.

Status of a run: ``complete`` (every selected case has a value or was skipped on purpose),
``partial`` (a selected case failed or is missing, or asv exited non-zero),
``interrupted`` (Ctrl-C: asv saved nothing new, so no rows: the earlier results are not
this run's; its files are ``interrupted-*`` and the latest summary stays as it was) or
``failed`` (no results at all for the commit).

A failed row carries why it failed (``Row.error``: the benchmark's own message when the
run filed it, see ``vlmpath.compare.asv_results``); the terminal and markdown show it below the table
and in the state cell.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vlmpath.core.asv_names import strip_kind
from vlmpath.core.errors import VlmpathError
from vlmpath.core.metrics import METRIC_BY_NAME, unit_spec
from vlmpath.render.fmt import fmt_with_unit

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Row:
    benchmark: str
    params: tuple[tuple[str, str], ...]
    unit: str
    value: float | None
    samples: int
    state: str                # ok | failed | skipped | missing
    error: str | None = None  # failed rows: the benchmark's message, else a generic marker
    reason: str | None = None  # skipped and missing rows: why there is no value

    @property
    def better(self) -> str:
        """``higher`` / ``lower`` (the metric table's direction of the unit), else ``""``."""
        spec = unit_spec(self.unit)
        return spec.direction if spec else ""

    @property
    def params_text(self) -> str:
        return ", ".join(v for _, v in self.params)


@dataclass(frozen=True)
class Summary:
    commit: str
    machine: str
    status: str
    rows: tuple[Row, ...]
    asv_returncode: int = 0
    duration_s: float | None = None
    fingerprint: Mapping[str, Any] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    schema_version: int = SCHEMA_VERSION

    @property
    def partial(self) -> bool:
        return self.status != "complete"

    def counts(self) -> dict[str, int]:
        out = {"ok": 0, "failed": 0, "skipped": 0, "missing": 0}
        for r in self.rows:
            out[r.state] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["partial"] = self.partial
        d["counts"] = self.counts()
        # params as a mapping (readers index it) and their order (JSON keys are sorted)
        d["rows"] = [{**asdict(r), "params": dict(r.params), "param_order": [k for k, _ in r.params]}
                     for r in self.rows]
        return d


def _unquote(s: str) -> str:
    return s[1:-1] if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"" else s


def summarize(results_dir: str | Path, commit: str, machine: str, *,
              selected: Iterable[tuple[str, tuple[str, ...]]] | None = None,
              interrupted: bool = False, asv_returncode: int = 0, duration_s: float | None = None,
              options: Mapping[str, Any] | None = None) -> Summary:
    """The summary of ``commit`` on ``machine``; ``selected`` ((name, asv param reprs) pairs)
    limits rows to what this run selected and reports selected cases with no result as
    ``missing``."""
    from vlmpath.compare.asv_results import load_asv

    if interrupted:  # asv files a commit's results only when its run ends: none are this run's
        return Summary(commit=commit, machine=machine, status="interrupted", rows=(), asv_returncode=asv_returncode,
                       duration_s=duration_s, options=dict(options or {}), notes=(INTERRUPTED_NOTE,))
    notes: list[str] = []
    metrics = []
    fingerprint = None
    try:
        run = load_asv(results_dir, commit)
        mrun = run.machine(machine)
        if mrun is None:
            notes.append(f"no results for machine {machine} (machines: {', '.join(run.machine_names)})")
        else:
            metrics = list(mrun.metrics)
            fingerprint = None if mrun.fingerprint is None else asdict(mrun.fingerprint)
            notes.extend(mrun.notes)
    except VlmpathError as exc:
        notes.append(str(exc))

    by_case = {(m.benchmark, tuple(v for _, v in m.params)): m for m in metrics}
    rows: list[Row] = []
    if selected is None:
        keys = sorted(by_case)
    else:
        keys = [(name, tuple(_unquote(p) for p in combo)) for name, combo in selected]
    for key in keys:
        m = by_case.get(key)
        if m is None:
            rows.append(Row(key[0], tuple((f"param{i + 1}", v) for i, v in enumerate(key[1])), "", None, 0,
                            "missing", reason=MISSING_REASON))
            continue
        state = "skipped" if m.skipped else ("ok" if m.ok else "failed")
        # A track_ method returns one value (asv keeps no samples): n is 1, not 0.
        n = len(m.samples) or (1 if m.value is not None else 0)
        rows.append(Row(m.benchmark, m.params, m.unit, m.value, n, state,
                        m.error if state == "failed" else None,
                        skip_reason(m.benchmark) if state == "skipped" else None))

    counts = {s: sum(r.state == s for r in rows) for s in ("ok", "failed", "missing")}
    if interrupted:
        status = "interrupted"
    elif not metrics:
        status = "failed"
    elif counts["failed"] or counts["missing"] or asv_returncode not in (0, 2):
        # asv exits 2 when a benchmark failed; those rows say so already.
        status = "partial"
    else:
        status = "complete"
    return Summary(commit=commit, machine=machine, status=status, rows=tuple(rows),
                   asv_returncode=asv_returncode, duration_s=duration_s, fingerprint=fingerprint,
                   options=dict(options or {}), notes=tuple(notes))


INTERRUPTED_NOTE = ("interrupted: asv keeps a commit's results only when its run ends, so nothing this run "
                    "measured was kept; earlier results of this commit, if any, stay as they were")
MISSING_REASON = "selected but no result: asv stopped before it, or the benchmark file lacks it"


def skip_reason(benchmark: str) -> str:
    """Why asv recorded n/a for ``benchmark``: the metric table says which numbers a device
    or routine may not measure (``MetricSpec.may_be_unmeasured``)."""
    spec = METRIC_BY_NAME.get(strip_kind(benchmark.rsplit(".", 1)[-1]))
    if spec is not None and spec.may_be_unmeasured:
        return (f"not measured here: {spec.name} ({spec.description}) needs a counter this device or "
                "routine lacks (e.g. no allocator pool on CPU, no counts for the reference engine)")
    return "skipped by the benchmark (asv n/a): not supported on this machine or scale"


def render_terminal(s: Summary, *, table: bool = False) -> str:
    """What the run ends on: its status line, the few numbers that answer the landing
    page's questions (``render.run_headline``), why cases failed, one short line per
    skipped metric, and notes. ``table``: every case too (``vlmpath run --table``)."""
    from vlmpath.render import run_headline

    c = s.counts()
    head = (f"vlmpath run {s.status}: {s.machine} @ {s.commit[:8]}: {c['ok']} ok, {c['failed']} failed, "
            f"{c['skipped']} skipped, {c['missing']} missing")
    if s.duration_s is not None:
        head += f" in {s.duration_s:.0f} s"
    lines = [head]
    if table:
        lines.append(render_table(s).rstrip())
    found = run_headline.findings(s)
    if found:
        quick = " (quick: one sample per number, indicative)" if s.options.get("quick") else ""
        lines.append(f"what this box found{quick}:")
        lines += [f"  {x}" for x in found]
    lines += run_headline.failed_lines(s.rows, _one_line, ERROR_CHARS)
    lines += run_headline.skipped_lines(s.rows)
    notes = list(s.notes)
    if s.options.get("quick") and not found:  # issue 12: a quick number is a hint, not a measurement
        notes.append("quick run: every number is ONE sample (n = 1); indicative only, never a regression by itself")
    lines += [f"note: {n}" for n in notes]
    return "\n".join(lines) + "\n"


def render_table(s: Summary) -> str:
    """Every case of the run, one row each (the terminal shows it with ``--table``)."""
    from vlmpath.render.tables import text_table

    return text_table(["benchmark", "params", "value", "n", "better", "state"],
                      [[r.benchmark, r.params_text, fmt_with_unit(r.value, r.unit), r.samples, r.better, r.state]
                       for r in s.rows])


def load_summary(path: str | Path) -> Summary:
    """A summary JSON ``write_summary`` wrote, back as a ``Summary``."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    def params(r: dict) -> tuple[tuple[str, str], ...]:
        order = r.get("param_order") or list(r["params"])
        return tuple((str(k), str(r["params"][k])) for k in order)

    rows = tuple(Row(r["benchmark"], params(r), r["unit"],
                     r["value"], r["samples"], r["state"], r.get("error"), r.get("reason")) for r in d["rows"])
    return Summary(commit=d["commit"], machine=d["machine"], status=d["status"], rows=rows,
                   asv_returncode=d.get("asv_returncode", 0), duration_s=d.get("duration_s"),
                   fingerprint=d.get("fingerprint"), options=d.get("options") or {}, notes=tuple(d.get("notes", ())))


#: Longest failure message shown in a summary (the JSON keeps it whole).
ERROR_CHARS = 160


def _one_line(text: str | None, limit: int) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def render_markdown(s: Summary) -> str:
    c = s.counts()
    lines = [f"### vlmpath run: `{s.machine}` @ `{s.commit[:8]}` ({s.status})", "",
             f"{c['ok']} ok, {c['failed']} failed, {c['skipped']} skipped, {c['missing']} missing", "",
             "| benchmark | params | value | n | better | state |", "|---|---|---:|---:|---|---|"]
    from vlmpath.render.escape import (
        md_escape,  # messages come from benchmarks: make them inert
    )

    for r in s.rows:
        state = r.state if r.state == "ok" else f"**{r.state}**"
        if r.state == "failed" and r.error:
            state += f": {md_escape(_one_line(r.error, ERROR_CHARS))}"
        elif r.reason:
            state += f": {md_escape(r.reason)}"
        better = f"{r.better} is better" if r.better else ""
        lines.append(f"| `{r.benchmark}` | {r.params_text} | {fmt_with_unit(r.value, r.unit)} | {r.samples} | "
                     f"{better} | {state} |")
    lines += [f"> {n}" for n in s.notes]
    return "\n".join(lines) + "\n"


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` atomically, mode 0644 (see ``vlmpath.core.atomic``)."""
    from vlmpath.core import atomic

    atomic.write_text(path, text)


def summary_paths(reports_dir: str | Path, s: Summary) -> tuple[Path, Path]:
    """An interrupted run's files have their own name: they never replace a complete
    run's summary of the same commit."""
    kind = "interrupted" if s.status == "interrupted" else "run"
    stem = Path(reports_dir) / f"{kind}-{s.machine}-{s.commit[:8]}"
    return stem.with_suffix(".json"), stem.with_suffix(".md")


#: The latest run's summary, beside the per-run files: what the dashboard page shows
#: (``vlmpath.render.dashboard``). Per-run names keep history; these names are stable.
LATEST_MD, LATEST_JSON = "summary.md", "summary.json"


def write_summary(s: Summary, reports_dir: str | Path) -> tuple[Path, Path]:
    """JSON and markdown, each written atomically (readers never see half a file), as
    ``run-<machine>-<sha8>.{json,md}`` and again as the latest ``summary.{json,md}``."""
    jpath, mpath = summary_paths(reports_dir, s)
    data = json.dumps(s.to_dict(), indent=2, sort_keys=True, allow_nan=False, default=str) + "\n"
    md = render_markdown(s)
    write_atomic(jpath, data)
    write_atomic(mpath, md)
    if s.status == "interrupted":  # the latest summary stays the last run that measured
        return jpath, mpath
    write_atomic(Path(reports_dir) / LATEST_JSON, data)
    write_atomic(Path(reports_dir) / LATEST_MD, md)
    return jpath, mpath
