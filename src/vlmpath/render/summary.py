"""What did one ``vlmpath run`` measure, in one table?

Reads the run's asv results JSON (through ``vlmpath.compare.asv_results.load_asv``, never asv's console
text) for one commit on one machine and renders it three ways: a terminal table, markdown
and JSON (``reports_dir/run-<machine>-<sha8>.{json,md}``, written atomically). Nothing here
measures or compares.

Status of a run: ``complete`` (every selected case has a value or was skipped on purpose),
``partial`` (a selected case failed or is missing, or asv exited non-zero),
``interrupted`` (Ctrl-C: asv saved nothing new, rows are whatever was there before) or
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
        d["rows"] = [{**asdict(r), "params": dict(r.params)} for r in self.rows]
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


MISSING_REASON = "selected but no result: asv stopped before it, or the benchmark file lacks it"


def skip_reason(benchmark: str) -> str:
    """Why asv recorded n/a for ``benchmark``: the metric table says which numbers a device
    or routine may not measure (``MetricSpec.may_be_unmeasured``)."""
    spec = METRIC_BY_NAME.get(strip_kind(benchmark.rsplit(".", 1)[-1]))
    if spec is not None and spec.may_be_unmeasured:
        return (f"not measured here: {spec.name} ({spec.description}) needs a counter this device or "
                "routine lacks (e.g. no allocator pool on CPU, no counts for the reference engine)")
    return "skipped by the benchmark (asv n/a): not supported on this machine or scale"


def _state_text(r: Row) -> str:
    return f"{r.state} ({r.reason})" if r.reason and r.state == "skipped" else r.state


def render_terminal(s: Summary) -> str:
    from vlmpath.render.tables import text_table

    c = s.counts()
    head = (f"vlmpath run {s.status}: {s.machine} @ {s.commit[:8]}: {c['ok']} ok, {c['failed']} failed, "
            f"{c['skipped']} skipped, {c['missing']} missing")
    if s.duration_s is not None:
        head += f" in {s.duration_s:.0f} s"
    body = text_table(["benchmark", "params", "value", "n", "better", "state"],
                      [[r.benchmark, r.params_text, fmt_with_unit(r.value, r.unit), r.samples, r.better, r.state]
                       for r in s.rows])
    why = "".join(f"failed: {r.benchmark}({r.params_text}): {_one_line(r.error, ERROR_CHARS)}\n"
                  for r in s.rows if r.state == "failed" and r.error)
    reasons = dict.fromkeys(f"skipped: {strip_kind(r.benchmark.rsplit('.', 1)[-1])}: {r.reason}"
                            for r in s.rows if r.state == "skipped" and r.reason)
    why += "".join(f"{line}\n" for line in reasons)  # once per benchmark, not per row
    notes = list(s.notes)
    if s.options.get("quick"):  # issue 12: a quick number is a hint, not a measurement
        notes.append("quick run: every number is ONE sample (n = 1); indicative only, never a regression by itself")
    tail = "".join(f"note: {n}\n" for n in notes)
    return f"{head}\n{body.rstrip()}\n{why}{tail}"


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
    stem = Path(reports_dir) / f"run-{s.machine}-{s.commit[:8]}"
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
    write_atomic(Path(reports_dir) / LATEST_JSON, data)
    write_atomic(Path(reports_dir) / LATEST_MD, md)
    return jpath, mpath
