"""What did each release of an engine do on our workloads, measured one after the other?

``run_sweep`` walks a list of releases (``vlmpath.engines.releases``, oldest first) and,
for each one not yet in the store, *prepares* it (by default: installs its env from the
shared cache, ``install_release``) and *measures* it (the adapters' measurement,
``measure_cases`` in the env's python) on the sweep's workloads. Each release ends as
one point of ``<store>/sweep-<engine>.json``:

- ``measured``: its records are in ``<store>/records/<engine>-<version>.jsonl``;
- ``failed``: one line saying why (the install failed, or the adapter could not drive the
  release: every case failed, the first case's error is the reason). A failed release
  is a finding, not a crash: the sweep goes on to the next one.

The state file is rewritten (atomically) after every release, so an interrupted sweep
resumes where it stopped: a release with a point is not measured again (``retry_failed``
re-measures the failed ones). ``partial`` says whether every requested release has a
point. The store is read back by the asv writer and the timeline chart; those never
measure anything.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from vlmpath.core import atomic
from vlmpath.core.errors import VlmpathError
from vlmpath.engines.base import EngineSpec
from vlmpath.engines.env_recipe import children_cpu_seconds
from vlmpath.engines.releases import Release
from vlmpath.suite.record import CaseRecord, read_records, write_records

# split_order: a wrong-order split of a batched output reads red (every preset before it
# held uniform or palindromic counts per call); the cache presets carry the path counts
# (re-encodes, off-chunk encodes, evictions, retained storage) at the release boundary.
DEFAULT_WORKLOADS = ("multi_region", "mixed", "interleaved_modalities", "split_order", "cache_oversize",
                     "cache_dup_chunked", "multi_span_chunks", "cache_dup_pressure")
STATE_VERSION = 1
MAX_REASON = 300


@dataclass
class Point:
    """One release of the sweep: measured (records on disk) or failed (with its reason)."""

    version: str
    date: str                  # ISO 8601 upload date (UTC)
    state: str                 # "measured" | "failed"
    reason: str | None = None
    install_seconds: float | None = None
    disk_bytes: int | None = None
    measure_seconds: float | None = None
    measure_cpu_seconds: float | None = None

    @property
    def when(self) -> datetime:
        return datetime.fromisoformat(self.date)


@dataclass
class SweepState:
    engine: str
    requested: list[str] = field(default_factory=list)
    points: dict[str, Point] = field(default_factory=dict)
    workloads: list[str] = field(default_factory=list)
    scale: str = "tiny"

    @property
    def partial(self) -> bool:
        return any(v not in self.points for v in self.requested)

    def ordered(self) -> list[Point]:
        return sorted(self.points.values(), key=lambda p: (p.when, p.version))


@dataclass(frozen=True)
class Prepared:
    """What measuring a release needs: the spec the worker reports, the python that runs it."""

    spec: EngineSpec
    python: str | None = None
    install_seconds: float | None = None
    disk_bytes: int | None = None
    home: str | None = None        # the engine home the release's env is in


Prepare = Callable[[Release], Prepared]
Measure = Callable[[Prepared, Sequence], list[CaseRecord]]


def state_path(store: Path, engine: str) -> Path:
    return Path(store) / f"sweep-{engine}.json"


def records_path(store: Path, engine: str, version: str) -> Path:
    return Path(store) / "records" / f"{engine}-{version}.jsonl"


def load_state(store: Path, engine: str) -> SweepState:
    """The store's state of ``engine``'s sweep (empty when there is none yet)."""
    path = state_path(store, engine)
    if not path.exists():
        return SweepState(engine)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        points = {v: Point(**{k: p.get(k) for k in Point.__dataclass_fields__}) for v, p in data["points"].items()}
        for p in points.values():
            if p.state not in ("measured", "failed") or not isinstance(p.version, str):
                raise ValueError(f"point {p.version!r} has state {p.state!r}")
            p.when  # noqa: B018 (a date that does not parse is a bad file)
        return SweepState(engine, [str(v) for v in data["requested"]], points, list(data.get("workloads") or []),
                          str(data.get("scale") or "tiny"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise VlmpathError(f"{path}: not a sweep state file ({exc}); move it away to start the sweep afresh") from exc


def save_state(store: Path, state: SweepState) -> Path:
    data = {"version": STATE_VERSION, "engine": state.engine, "requested": state.requested,
            "workloads": state.workloads, "scale": state.scale, "partial": state.partial,
            "points": {p.version: asdict(p) for p in state.ordered()},
            "updated": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    return atomic.write_text(state_path(store, state.engine), json.dumps(data, indent=2) + "\n")


def one_line(text: str) -> str:
    """A reason as one bounded line (an engine's error can be a traceback)."""
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    line = lines[-1] if lines and lines[0].startswith("Traceback") else (lines[0] if lines else "no reason given")
    return line[:MAX_REASON]


def measure_release(prepared: Prepared, cases: Sequence, *, repeat: int = 1, device: str | None = None,
                    threads: int | None = None) -> list[CaseRecord]:
    """The adapters' measurement of ``cases`` with one release, in its env's python."""
    from vlmpath.suite.engine_run import measure_cases

    return measure_cases(cases, prepared.spec, repeat=repeat, python=prepared.python, home=prepared.home,
                         device=device, threads=threads)


def install_release(release: Release, *, home: Path, shared_cache: Path | None, log=print) -> Prepared:
    """Install (or reuse) the release's env under ``home`` (``vlmpath.engines.envs``)."""
    from vlmpath.engines import envs

    env = envs.install(release.spec, home, log=log, shared_cache=shared_cache)
    m = env.manifest
    return Prepared(env.spec, str(env.python), m.get("install_seconds"), m.get("disk_bytes"), str(home))


def run_sweep(engine: str, releases: Sequence[Release], store: Path, *, prepare: Prepare, measure: Measure,
              workloads: Sequence[str] = DEFAULT_WORKLOADS, scale: str = "tiny", seed: int = 0,
              retry_failed: bool = False, limit: int | None = None, log=print) -> SweepState:
    """Measure every release of ``releases`` not yet in the store (see the module docstring)."""
    from vlmpath.suite.measure import plan_cases

    store = Path(store)
    state = load_state(store, engine)
    if state.workloads and list(state.workloads) != list(workloads) or state.points and state.scale != scale:
        raise VlmpathError(f"{state_path(store, engine)} was measured on {state.workloads} at scale {state.scale}: "
                           "sweep with the same --workload/--scale, or use another --store")
    state.workloads, state.scale = list(workloads), scale
    state.requested = list(dict.fromkeys([*state.requested, *(r.version for r in releases)]))
    cases = plan_cases(workloads=list(workloads), encode=None, inject=None, count=None, hash=None,
                       pipelines=["default"], scale=scale, seed=seed)
    done = 0
    for rel in releases:
        old = state.points.get(rel.version)
        if old is not None and (old.state == "measured" or not retry_failed):
            log(f"engine sweep: {rel.label} already {old.state} ({old.date[:10]}); not measured again")
            continue
        if limit is not None and done >= limit:
            break
        done += 1
        log(f"engine sweep: {rel.label} (released {rel.date.date()})")
        state.points[rel.version] = _one_release(rel, store, cases, prepare, measure, log)
        save_state(store, state)
    save_state(store, state)
    return state


def _one_release(rel: Release, store: Path, cases, prepare: Prepare, measure: Measure, log) -> Point:
    date = rel.date.astimezone(timezone.utc).isoformat(timespec="seconds")
    try:
        prepared = prepare(rel)
    except (VlmpathError, OSError) as exc:
        log(f"engine sweep: {rel.label}: install failed: {one_line(str(exc))}")
        return Point(rel.version, date, "failed", "install failed: " + one_line(str(exc)))
    t0, c0 = time.perf_counter(), children_cpu_seconds()
    try:
        records = measure(prepared, cases)
    except (VlmpathError, OSError) as exc:  # the worker could not start or died
        records, crash = [], one_line(str(exc))
    else:
        crash = None
    wall, cpu = round(time.perf_counter() - t0, 1), round(children_cpu_seconds() - c0, 1)
    common = dict(install_seconds=prepared.install_seconds, disk_bytes=prepared.disk_bytes,
                  measure_seconds=wall, measure_cpu_seconds=cpu)
    if crash is not None or not records or all(r.error for r in records):
        reason = crash or (one_line(records[0].error) if records else "the engine returned no cases")
        log(f"engine sweep: {rel.label}: the adapter cannot drive it: {reason}")
        return Point(rel.version, date, "failed", reason, **common)
    write_records(records_path(store, rel.engine, rel.version), records)
    return Point(rel.version, date, "measured", None, **common)


def point_records(store: Path, engine: str, point: Point) -> list[CaseRecord]:
    """The measured records of a point (none for a failed one)."""
    if point.state != "measured":
        return []
    return read_records(records_path(store, engine, point.version))


@dataclass(frozen=True)
class Step:
    """A gated, exact number that moved between two consecutive measured releases."""

    before: str              # the earlier release's version
    after: str
    workload: str
    metric: str
    old: float | None
    new: float | None
    worse: bool

    @property
    def line(self) -> str:
        """``step\tsglang 0.5.22 -> 0.5.23\tcache_oversize\tcache_evictions 2 -> 0 (better)``."""
        fmt = lambda v: "-" if v is None else (f"{v:.2f}" if isinstance(v, float) and not v.is_integer()  # noqa: E731
                                               else str(int(v)))
        return (f"step\t{self.before} -> {self.after}\t{self.workload}\t{self.metric} {fmt(self.old)} -> "
                f"{fmt(self.new)} ({'worse' if self.worse else 'better'})")


def release_steps(state: SweepState, records: dict[str, Sequence[CaseRecord]]) -> list[Step]:
    """Every exact, gated engine metric (the metric table's ``exact`` rows of the engine
    path) that changed between consecutive *measured* releases (date order), per workload:
    where a release shipped or fixed something, the timeline reads a step. Failed releases
    are skipped (their neighbours are compared); unmeasured values (None) on both sides are
    no step."""
    from vlmpath.core.metrics import Direction, routine_metrics

    exact = [m for m in routine_metrics("engine") if m.exact]
    measured = [p for p in state.ordered() if p.state == "measured"]
    steps = []
    for a, b in zip(measured, measured[1:]):
        old = {r.workload: r for r in records.get(a.version, ())}
        new = {r.workload: r for r in records.get(b.version, ())}
        for w in [w for w in state.workloads if w in old and w in new]:
            for m in exact:
                x, y = getattr(old[w], m.name, None), getattr(new[w], m.name, None)
                if x == y or x is None or y is None:  # unmeasured on a side (an older record): no step
                    continue
                worse = y < x if m.direction == Direction.HIGHER else y > x
                steps.append(Step(a.version, b.version, w, m.name, x, y, worse))
    return steps


def fake_prepare(src: str, python: str | None = None) -> Prepare:
    """Every release measured from one engine source tree (tests, and trying the sweep offline)."""
    def prepare(rel: Release) -> Prepared:
        return Prepared(EngineSpec.for_tree(src, rel.engine), python)
    return prepare
