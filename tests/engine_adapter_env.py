"""Which engine environment do an engine's adapter tests run, and the measured presets they share.

``engine_fixtures(name, example, extra_sets)`` returns the module fixtures both adapter test
files use: ``engine_env`` (``VLMPATH_ENGINE_INSTALL``'s release of that engine when it names
one, which must then be complete: a failure, not a skip; else the newest complete
environment; else a skip naming the install command; ``engine_env_fixture`` gives it alone,
for the engine's other test modules), ``measured`` (every case set the module's tests need,
measured by ONE engine worker start: ``suite.engine_run.measure_case_sets``; a start costs
~10 s of importing the engine), and from it ``records`` (every preset measured once, by
workload) and ``planted`` (the planted faults, measured together). ``reference_records`` is
the reference's records the encoder-call tests compare with, measured once per test session
(both adapter modules compare with the same). The release is in every test's id
(``test_x[vllm==0.33.0]``): a result names what it ran.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import pytest

from vlmpath.core.errors import VlmpathError
from vlmpath.suite.engine_run import CaseSet, measure_case_sets, measure_cases
from vlmpath.suite.measure import plan_cases

EVS = "evs_video"
#: The presets of issue 38 (split order, the cache and chunking paths): measured uncounted in
#: a set of their own (``paths``), since their numbers are accuracy and the path counts; the
#: counted ``records`` keep the presets before them (and their cost).
from vlmpath.measure.presets import PATH_PRESETS  # noqa: E402 - beside EVS, where the reader looks


def counted_presets() -> list[str]:
    from vlmpath.measure.presets import PRESETS

    return [p for p in PRESETS if p not in PATH_PRESETS]


def _chosen(name: str, example: str):
    """(the environment, why none)."""
    from vlmpath.core.errors import EngineError
    from vlmpath.engines import envs

    try:
        env = envs.env_for_tests(name)
    except EngineError as exc:  # the release CI installed is not usable: a failure, not a skip
        return None, f"FAIL {exc}"
    if env is None:
        return None, (f"no complete {name} engine environment under {envs.engine_home()}: run `vlmpath engine "
                      f"install {name}=={example}` (or set VLMPATH_ENGINE_HOME) to run the {name} adapter tests")
    return env, None


def engine_env_fixture(name: str, example: str):
    """The ``engine_env`` module fixture (see the module docstring), for a module to bind."""
    env, why = _chosen(name, example)

    @pytest.fixture(scope="module", params=[env.spec.label if env else f"no-{name}-env"])
    def engine_env():
        if why and why.startswith("FAIL "):
            pytest.fail(why[5:])
        if env is None:
            pytest.skip(why)
        return env

    return engine_env


def engine_fixtures(name: str, example: str, extra_sets: Callable[[], dict[str, CaseSet]] | None = None):
    """(``engine_env``, ``measured``, ``records``, ``planted``) fixtures for a test module to
    bind at top level. ``measured`` is ONE ``measure_case_sets`` call (one worker start) over
    the module's case sets by name: ``records`` (every preset, counted), ``planted``
    (``PLANTED`` carrying ``PLANTS``) and ``extra_sets()``'s; ``records`` and ``planted`` are
    those two sets by workload."""
    engine_env = engine_env_fixture(name, example)

    @pytest.fixture(scope="module")
    def measured(engine_env):
        sets = {"records": CaseSet(plan_cases(workloads=counted_presets(), pipelines=["default"]), repeat=1),
                "paths": CaseSet(plan_cases(workloads=list(PATH_PRESETS), pipelines=["default"]), repeat=1,
                                 count=False),
                "planted": CaseSet(plan_cases(workloads=list(PLANTED), pipelines=["default"]), repeat=1,
                                   count=False, faults=PLANTS),
                **split_plant_sets(),
                **(extra_sets() if extra_sets else {})}
        return dict(zip(sets, measure_case_sets(list(sets.values()), engine_env.spec), strict=True))

    @pytest.fixture(scope="module")
    def records(measured):
        return by_workload(set_records(measured, "records"))

    @pytest.fixture(scope="module")
    def planted(measured):
        return by_workload(set_records(measured, "planted"))

    return engine_env, measured, records, planted


#: The plants of ``planted`` (``CaseSet.faults``: ``VLMPATH_ENGINE_FAULT``'s text, several
#: joined by ``;``): a raising engine step on one workload, rows handed back in reverse order
#: on another, a clean third.
PLANTS = "few_large_images:raise:engine says no;many_small_images:flip"
PLANTED = ("few_large_images", "many_small_images", "video")


#: The wrong-order splits planted where the engine splits a batched output (issue 38).
SPLIT_PLANTS = ("split_reversed", "split_rotated")


def split_plant_sets() -> dict[str, CaseSet]:
    """One set per wrong-order split, on ``split_order`` alone (uncounted: accuracy tells)."""
    return {kind: CaseSet(plan_cases(workloads=["split_order"], pipelines=["default"]), repeat=1, count=False,
                          faults=f"split_order:{kind}") for kind in SPLIT_PLANTS}


def check_split_plants(measured: dict) -> None:
    """Both wrong-order splits are red on ``split_order``; the unchanged engine is green."""
    records = by_workload(set_records(measured, "paths"))
    assert records["split_order"].accuracy == 1.0 and records["split_order"].error is None
    for kind in SPLIT_PLANTS:
        [rec] = set_records(measured, kind)
        assert rec.workload == "split_order" and rec.accuracy < 1.0, (kind, rec.accuracy, rec.error)


#: The new presets' path counts every engine must measure (issue 38), not None.
PATH_COUNTS = ("reencodes", "off_chunk_encodes", "cache_evictions", "cache_retained_bytes",
               "cache_unaccounted_bytes", "cache_over_budget_bytes")


def check_path_counts(measured: dict) -> dict:
    """Every path preset carries the path counts; the cache presets encode nothing twice
    and keep no storage they do not account for (both releases the tests pin are right).
    Returns the records by workload (for the engine's own expectations)."""
    records = by_workload(set_records(measured, "paths"))
    assert set(records) == set(PATH_PRESETS)
    for w, rec in records.items():  # a failed case (the engine refused it) has no cache to read
        assert rec.error is not None or all(getattr(rec, k) is not None for k in PATH_COUNTS), (
            w, [getattr(rec, k) for k in PATH_COUNTS])
    for w in ("cache_oversize", "cache_dup_chunked"):
        rec = records[w]
        assert rec.accuracy == 1.0 and rec.reencodes == 0 and rec.cache_unaccounted_bytes == 0, w
    print("FIGURE path counts " + "; ".join(
        f"{w}: acc {r.accuracy:.2f} calls {r.encoder_calls} " + " ".join(f"{k}={getattr(r, k)}" for k in PATH_COUNTS)
        + f" foreign={r.foreign_rows} err={r.error}" for w, r in records.items()))
    return records


def set_records(measured: dict, name: str) -> list:
    """The records of set ``name``; a set the worker refused raises its refusal."""
    got = measured[name]
    if isinstance(got, VlmpathError):
        raise got
    return got


def by_workload(recs) -> dict:
    return {r.workload: r for r in recs}


def driven(records):
    """The presets the adapter can drive (all but EVS: model code in both engines)."""
    return {w: r for w, r in records.items() if w != EVS}


def driven_cases():
    """The ``default`` pipeline's case of every counted preset ``driven`` keeps."""
    return [c for c in plan_cases(workloads=counted_presets(), pipelines=["default"]) if c.workload != EVS]


@cache  # one test session measures each (workloads, strategy) once: both modules ask the same
def _reference(workloads: tuple[str, ...], strategy: str) -> tuple:
    return tuple(measure_cases(plan_cases(workloads=list(workloads), encode=[strategy]), "reference", repeat=1,
                               count=False))


def reference_records(workloads, strategy: str) -> dict:
    """The reference routine's records of ``workloads`` with encode ``strategy`` (the default
    pipeline otherwise), uncounted, by workload."""
    return by_workload(_reference(tuple(workloads), strategy))
