"""Shared builders for the asv benchmarks: built lazily, once per benchmark process.

asv runs every (benchmark, parameter combination) in a fresh interpreter (launch method
``spawn``), so anything expensive is behind ``functools.lru_cache`` builders (the vision
tower through one ``measure.Session``; prepared workloads) and nothing is built at import.

The routine benchmarks (``bench_encode``, ``bench_embed``) report several numbers of one
measured case (tok/s, accuracy, syncs, encoder calls). Measuring the case once per number
would multiply the suite's cost, so they share one ``setup_cache`` (``routine_cache``;
the same function object, hence one asv cache key): asv runs every benchmark that uses it
in the cache's directory, and ``case_summary`` memoises each measured case there as a
small JSON file (written atomically). A case is measured by the first benchmark that needs
it, so ``-b`` narrowing measures only the selected cases; asv deletes the directory when
its last user is done.

Only public ``vlmpath`` names are used, so the current benchmark files run against the
installed package of the commit under test (both sides of a comparison).

Why a benchmark failed: asv files a raising benchmark as ``null`` and keeps the message
only in its log. ``report_failures`` (a class decorator) wraps ``setup`` and every
benchmark method: an exception is appended as one JSON line to the file named by
``VLMPATH_FAILURES_FILE`` (``vlmpath run`` sets it and files the lines beside the results),
then re-raised, so asv still records the failure. A class decorator leaves the methods'
source, hence asv's benchmark versions (code hashes), unchanged.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
import timeit

from vlmpath.measure.platform import sync
from vlmpath.suite import cases

from . import _compat

#: Wall clock, explicitly (older asv defaulted to process time, which misses GPU time);
#: time_ benchmarks synchronise the device inside the timed call.
TIMER = timeit.default_timer
#: Samples per timed benchmark outside quick mode: asv's Mann-Whitney test needs >= 7 per
#: side to ever reach p < 0.002 (``thresholds.yaml``); (min, max, max seconds) per round,
#: two rounds interleaved: 8 to 10.
ROUTINE_REPEAT = (4, 5, 20.0)
ROUNDS = 2


@functools.cache
def session(device: str):
    from vlmpath.suite.measure import Session

    return Session(device)


@functools.cache
def prepared(preset: str, hash_name: str, scale: str, device: str):
    """(workload as the scheduler sees it after arrival, encoder, text table)."""
    from vlmpath.engines.reference import text_table
    from vlmpath.measure.catalog import workload_by_name
    from vlmpath.suite.measure import arrive

    wl = workload_by_name(preset, scale, 0)
    encoder = session(device).encoder(wl.model, scale)
    wl, _, _ = arrive(wl, hash_name)
    dtype = encoder.dtype if hasattr(encoder, "dtype") else encoder.qwen.dtype  # EVS wraps a Qwen encoder
    table = text_table(wl.vocab_size, encoder.out_dim, dtype, device, wl.seed)
    return wl, encoder, table


def run_schedule(wl, encoder, pipeline, table, device: str):
    """Every step of the workload through a fresh routine (fresh cache), then a device sync.
    Raises whatever a step raises: a failing strategy is a failed benchmark."""
    from vlmpath.engines.reference import EmbedRoutine

    routine = EmbedRoutine(wl, encoder, pipeline, table)
    for step in wl.steps:
        routine.run_step(step)
    sync(device)
    return routine


#: asv_runner commands (``sys.argv[1]``) whose process never builds a tower: a discovery
#: (asv's, and ``vlmpath run``'s own, invoked alike: ``runner.discovery``) only lists the
#: benchmarks; ``setup_cache`` only runs ``routine_cache`` (the scale and mode).
NO_TOWER_COMMANDS = ("discover", "setup_cache")


def preimport_tower() -> None:
    """Import transformers' Qwen2.5-VL modules now. Under asv's ``forkserver`` launch method
    (``vlmpath run`` uses it on CPU) the suite is imported once in the server and every
    benchmark is a fork of it, so this ~3 s import is paid once instead of per benchmark;
    under ``spawn`` (GPU) the benchmark would import it anyway. The processes of
    ``NO_TOWER_COMMANDS`` skip it: ~3-4 CPU-s each, and a run has a discovery and a
    ``setup_cache`` process (the routine benchmarks' cache) besides the server, so a PR
    flow of 6 interleaved rounds paid it some 24 times beyond the 12 servers."""
    if sys.argv[1:2] and sys.argv[1] in NO_TOWER_COMMANDS:
        return
    import transformers.models.qwen2_5_vl.modeling_qwen2_5_vl  # noqa: F401


def routine_cache() -> dict:
    """setup_cache of the routine benchmarks: the run's scale and mode (cheap; see above)."""
    scale = cases.scale_from_env()
    return {"scale": scale, "quick": cases.quick_from_env()}


routine_cache.timeout = 60


def _memo_path(case: cases.RoutineCase, scale: str) -> str:
    key = f"{case.preset}-{scale}-{case.pipeline().label}".replace("/", "_")
    return os.path.join(os.getcwd(), f"vlmpath-case-{key}.json")


def case_summary(case: cases.RoutineCase, cache: dict) -> dict:
    """The measured case (``cases.record_summary``), memoised in the cache directory."""
    scale = cache["scale"]
    device = cases.bench_device(scale)
    path = _memo_path(case, scale)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    from vlmpath.suite.measure import measure_case

    record = measure_case(case.measure_case(scale), session(device),
                          repeat=cases.routine_repeat(cache["quick"]))
    summary = cases.record_summary(record)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(summary, f)
    os.replace(tmp, path)
    return summary


# --- samples of the routine tracks ------------------------------------------------------------
def tok_per_s_track(case: cases.RoutineCase, cache: dict) -> dict:
    """tok/s of every timed pass, in asv's timing-result shape (``{"samples", "number"}``):
    asv then stores the samples and their 99% interval for a ``track_`` benchmark too, so
    tok/s gets the same Mann-Whitney test as a time (the test ranks, so tok/s per pass and
    seconds per pass decide alike). Tokens come from median tok/s x median seconds, which
    an older package's summary (no ``prefill_tokens``) also has."""
    summary = case_summary(case, cache)
    median = cases.require_ok(summary, "tok_per_s")
    seconds = [float(s) for s in summary.get("samples") or () if s and s > 0]
    if not seconds:
        return {"samples": [median], "number": 1}
    tokens = summary.get("prefill_tokens") or median * float(summary["wall_s"])
    return {"samples": [tokens / s for s in seconds], "number": 1}


def hash_s_track(case: cases.RoutineCase, cache: dict) -> dict:
    """The receiver's hash seconds of the case's arrival, as samples: the summary's one
    (``hash_s``, measured with the case) plus fresh arrivals of the same workload up to
    ``routine_repeat`` (cheap: microseconds when forwarded, ~0.1 s per re-hash), so the
    Mann-Whitney test sees the microsecond noise. Skipped (asv: n/a) when the package
    under test does not record it (older summaries)."""
    from vlmpath.measure.catalog import workload_by_name
    from vlmpath.suite.measure import arrive

    summary = case_summary(case, cache)
    if summary.get("hash_s") is None and not summary.get("error"):
        raise NotImplementedError("this package's case summary has no hash_s")
    first = cases.require_ok(summary, "hash_s")
    wl = workload_by_name(case.preset, cache["scale"], 0)
    hash_name = case.pipeline().hash
    more = [arrive(wl, hash_name)[1] for _ in range(cases.routine_repeat(cache["quick"]) - 1)]
    return {"samples": [first] + more, "number": 1}


# --- the twin track_ methods of the routine benchmarks, from the metric table ----------------
def _track(spec, cls: type):
    """``track_<name>`` of one routine metric: the measured case's number. A failed case
    raises (``cases.require_ok``) unless the table says the number is the finding even
    then (``report_failed``: accuracy)."""

    def track(self, cache, *params):
        if spec.name == "tok_per_s":  # every pass as a sample: asv's significance test applies
            return tok_per_s_track(self.case, cache)
        summary = case_summary(self.case, cache)
        if spec.report_failed and summary.get(spec.name) is not None:
            return float(summary[spec.name])  # (none left: the case's own error, below)
        if getattr(spec, "may_be_unmeasured", False):
            try:
                return cases.require_measured(summary, spec.name)
            except NotImplementedError:
                # asv skips a benchmark only for a NotImplementedError raised in setup; from
                # the benchmark itself it would be a failure. NaN is asv's "skipped" value.
                return float("nan")
        return cases.require_ok(summary, spec.name)

    track.__name__ = spec.track_method
    track.__qualname__ = f"{cls.__name__}.{spec.track_method}"
    track.unit = spec.unit
    track.pretty_source = _history_source(spec, cls)
    return track


def _history_source(spec, cls: type) -> str:
    """The source asv hashes into the benchmark's version (``pretty_source``): the text of
    the hand-written method this one replaced, so results measured before the table keep
    their version and stay in the history (asv drops results whose version differs)."""
    args = ", ".join(("self", "cache") + tuple(cls.param_names))
    comment = _compat.HISTORY_COMMENTS.get(f"{cls.__name__}.{spec.track_method}")
    require = "require_measured" if getattr(spec, "may_be_unmeasured", False) else "require_ok"
    body = (f'return float(_common.case_summary(self.case, cache)["{spec.name}"])' if spec.report_failed
            else f'return cases.{require}(_common.case_summary(self.case, cache), "{spec.name}")')
    if spec.name == "tok_per_s":  # samples since issue 12: a new version, as asv must see it
        body = "return _common.tok_per_s_track(self.case, cache)"
    lines = [f"def {spec.track_method}({args}):"] + ([f"    # {comment}"] if comment else []) + [f"    {body}"]
    return "\n".join(lines) + "\n"


# Not named track_*: asv would collect a module-level track_ function as a benchmark.
def metric_tracks(path: str):
    """Class decorator: one ``track_<name>`` per metric the table (``vlmpath.core.metrics``)
    gives routine path ``path``; the class sets ``self.case`` in ``setup``. Apply it below
    ``report_failures`` so the generated methods are wrapped too."""

    def add(cls: type) -> type:
        for spec in _compat.metrics.routine_metrics(path):
            if spec.track_method in cls.__dict__:
                raise TypeError(f"{cls.__name__}.{spec.track_method} is generated from the metric table; "
                                "remove the hand-written one")
            setattr(cls, spec.track_method, _track(spec, cls))
        return cls

    return add


# --- why a benchmark failed ------------------------------------------------------------------
#: The format (variable, line shape, atomic append) is ``vlmpath.core.failures``'s.
FAILURES_ENV = _compat.failures.FAILURES_ENV
failure_line = _compat.failures.failure_line
record_failure = _compat.failures.record_failure
#: asv's benchmark-method prefixes (``vlmpath.core.asv_names``), plus the per-case ``setup``.
_WRAPPED_PREFIXES = _compat.BENCHMARK_PREFIXES


def error_text(exc: BaseException) -> str:
    """``"Type: first line"``; a failed case's own recorded error when the exception carries
    one (``cases.CaseFailed.case_error``, read by attribute: older packages lack the class)."""
    case_error = getattr(exc, "case_error", None)
    if case_error:
        text = str(case_error)
    else:
        msg = str(exc).strip()
        text = f"{type(exc).__name__}: {msg.splitlines()[0]}" if msg else type(exc).__name__
    limit = _compat.failures.MAX_ERROR_CHARS
    return text.splitlines()[0][:limit] if text else type(exc).__name__


def asv_name(cls: type, method: str) -> str:
    """asv's benchmark name: module path below the suite's package, class, method."""
    parts = cls.__module__.split(".", 1)
    return ".".join(parts[1:] + [cls.__name__, method])


def _benchmark_methods(cls: type) -> list[str]:
    return sorted(n for n in dir(cls) if n.startswith(_WRAPPED_PREFIXES) and callable(getattr(cls, n)))


def _reporting(cls: type, attr: str, func, names: list[str]):
    @functools.wraps(func)
    def wrapper(self, *args):
        try:
            return func(self, *args)
        except NotImplementedError:
            raise  # asv files it as skipped, not failed
        except Exception as exc:
            param_names = tuple(getattr(cls, "param_names", ()))
            values = args[len(args) - len(param_names):] if param_names else ()
            params = dict(zip(param_names, values))
            try:
                for name in names:
                    record_failure(name, params, error_text(exc))
            except OSError as write_exc:  # never hide the benchmark's own error
                print(f"vlmpath: could not record the failure of {attr} in ${FAILURES_ENV}: {write_exc}",
                      file=sys.stderr)
            raise

    return wrapper


def report_failures(cls: type) -> type:
    """Class decorator: ``setup`` and every benchmark method record why they raised (see the
    module docstring). A failing ``setup`` fails every benchmark of the class, so it is
    recorded under each of their names."""
    methods = _benchmark_methods(cls)
    for attr in methods + (["setup"] if callable(getattr(cls, "setup", None)) else []):
        names = [asv_name(cls, m) for m in methods] if attr == "setup" else [asv_name(cls, attr)]
        setattr(cls, attr, _reporting(cls, attr, cls.__dict__.get(attr, getattr(cls, attr)), names))
    return cls
