"""A real server's end-to-end numbers, as asv benchmarks: opt-in, since they need a model.

``Serve.track_serve_*(workload, concurrency)``: one ``track_`` method per ``serve_*`` row of
the metric table (``vlmpath.core.metrics``; the comparison takes each row's direction and
band, or exactness, from it), over the case registry's serve axes
(``suite.cases.SERVE_PRESETS`` x ``SERVE_CONCURRENCY``, through ``_compat``). Opt-in: only
when the run names a model directory (``vlmpath run --serve DIR``, or a machine that sets
``VLMPATH_SERVE_MODEL``); otherwise ``setup`` raises ``NotImplementedError``, asv's
"skipped", never a failure, and nothing is started. So is a package without
``vlmpath.serving`` (an older base).

``setup_cache`` starts ``transformers serve`` (``VLMPATH_SERVE_LAUNCH``: ``sglang`` or
``vllm`` on a GPU box) once for the whole class, measures every workload and level with
``serving.bench.run_bench`` (each request alone first: the within-run agreement's
reference; 3 repeats, 1 in quick mode) and stops it; every track reads its case from that
one document. Throughput and latency return every repeat as a sample (asv's timing
shape, as ``_common.tok_per_s_track``); a level with a failed request fails its timing
tracks (a server that fails fast must not read as fast) while ``track_serve_errors`` and
``track_serve_agreement_solo`` report it. Across-side agreement (head's texts against
base's) needs both sides' texts, which asv's results do not keep: that row is
``serve-compare``'s and ``ci pr --serve``'s, not a track here.
"""

from __future__ import annotations

import os

from vlmpath.suite import cases

from . import _common, _compat

SERVE_MODEL_ENV = "VLMPATH_SERVE_MODEL"  # vlmpath.suite.bench_env.SERVE_MODEL_ENV (older packages lack it)
SERVE_LAUNCH_ENV = "VLMPATH_SERVE_LAUNCH"
#: Rows of the table that one side's run alone cannot give (see the module doc), and the
#: labelled-set score (a file the user passes to serve-bench, not a workload level).
ACROSS_SIDES = ("serve_agreement_base", "serve_labelled_score")
#: Run-file fields with no ``serve_`` prefix of their own.
FIELDS = {"serve_errors": "errors"}


NOT_OPTED_IN = (f"serve benchmarks are opt-in: `vlmpath run --serve MODEL_DIR` "
                f"(or set {SERVE_MODEL_ENV} on this machine)")


def serve_cache() -> dict:
    """setup_cache: ``{"doc": the measured serve-run document}``, or ``{"doc": None, "why": ...}``
    when not opted in (cheap). Never None itself: asv passes a None cache to no method."""
    model = (os.environ.get(SERVE_MODEL_ENV) or "").strip()
    if not model:
        return {"doc": None, "why": NOT_OPTED_IN}
    try:
        from vlmpath.serving.bench import BenchSettings, run_bench
        from vlmpath.serving.launch import launched
    except ImportError:  # compat: packages before vlmpath.serving
        return {"doc": None, "why": "the package under test has no vlmpath.serving"}
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    settings = BenchSettings(_compat.SERVE_PRESETS, _compat.SERVE_CONCURRENCY, max_tokens=8,
                             repeats=1 if cases.quick_from_env() else 3)
    kind = os.environ.get(SERVE_LAUNCH_ENV) or "transformers"
    with launched(kind, model, log_dir=os.getcwd(), device=device) as server:
        return {"doc": run_bench(server, settings)}


serve_cache.timeout = 1800


def case_of(cache: dict, workload: str, concurrency: int) -> dict:
    """The measured case; ``NotImplementedError`` (asv: skipped) when there is none."""
    if cache.get("doc") is None:
        raise NotImplementedError(cache.get("why") or NOT_OPTED_IN)
    for case in cache["doc"]["cases"]:
        if case["workload"] == workload and case["concurrency"] == concurrency:
            return case
    raise NotImplementedError(f"{workload} at concurrency {concurrency} was not measured")


def _track(spec):
    field = FIELDS.get(spec.name, spec.name.removeprefix("serve_"))

    def track(self, cache, workload, concurrency):
        case = case_of(cache, workload, concurrency)
        if spec.exact:  # errors and agreement: the finding even when requests failed
            value = case[field]
            if value is None:
                raise RuntimeError(f"{workload} c={concurrency}: {spec.name} not measured")
            return float(value)
        if case["errors"] or case[field] is None:
            raise RuntimeError(f"{workload} c={concurrency}: {case['errors']} requests failed: {case['error']}")
        samples = [float(s) for s in case["samples"].get(field) or () if s is not None]
        return {"samples": samples or [float(case[field])], "number": 1}

    track.__name__ = spec.track_method
    track.__qualname__ = f"Serve.{spec.track_method}"
    track.unit = spec.unit
    return track


def _serve_tracks(cls: type) -> type:
    for spec in _compat.SERVE_METRICS:
        if spec.name not in ACROSS_SIDES:
            setattr(cls, spec.track_method, _track(spec))
    return cls


@_common.report_failures
@_serve_tracks  # track_serve_request_per_s, _output_tok_per_s, ..., _agreement_solo, _errors
class Serve:
    params = (list(_compat.SERVE_PRESETS), list(_compat.SERVE_CONCURRENCY))
    param_names = ("workload", "concurrency")
    timeout = 1800
    setup_cache = staticmethod(serve_cache)

    def setup(self, cache, workload, concurrency):
        case_of(cache, workload, concurrency)  # not opted in: skipped (NotImplementedError)
