"""Which engine environment do an engine's adapter tests run, and the measured presets they share.

``engine_fixtures(name, example)`` returns the module fixtures both adapter test files use:
``engine_env`` (``VLMPATH_ENGINE_INSTALL``'s release of that engine when it names one, which
must then be complete: a failure, not a skip; else the newest complete environment; else a
skip naming the install command) and ``records`` (every preset measured once through it,
by workload); ``planted_fixture`` the planted faults, measured together. The release is in every test's id (``test_x[vllm==0.33.0]``): a result names
what it ran.
"""

from __future__ import annotations

import pytest

from vlmpath.suite.engine_run import measure_cases
from vlmpath.suite.measure import plan_cases

EVS = "evs_video"


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


def engine_fixtures(name: str, example: str):
    """(``engine_env``, ``records``) fixtures for a test module to bind at top level."""
    env, why = _chosen(name, example)

    @pytest.fixture(scope="module", params=[env.spec.label if env else f"no-{name}-env"])
    def engine_env():
        if why and why.startswith("FAIL "):
            pytest.fail(why[5:])
        if env is None:
            pytest.skip(why)
        return env

    @pytest.fixture(scope="module")
    def records(engine_env):
        recs = measure_cases(plan_cases(pipelines=["default"]), engine_env.spec, repeat=1)
        return {r.workload: r for r in recs}

    return engine_env, records


#: The plants of ``planted`` (``VLMPATH_ENGINE_FAULT``, several joined by ``;``): a raising
#: engine step on one workload, rows handed back in reverse order on another, a clean third.
PLANTS = "few_large_images:raise:engine says no;many_small_images:flip"
PLANTED = ("few_large_images", "many_small_images", "video")


def planted_fixture():
    """A module fixture: ``PLANTED`` measured in one engine process carrying ``PLANTS``
    (one worker start where a worker per plant cost one each)."""

    @pytest.fixture(scope="module")
    def planted(engine_env):
        from vlmpath.engines.adapter_common import FAULT_ENV

        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(FAULT_ENV, PLANTS)
            recs = measure_cases(plan_cases(workloads=list(PLANTED), pipelines=["default"]), engine_env.spec,
                                 repeat=1, count=False)
        return {r.workload: r for r in recs}

    return planted


def driven(records):
    """The presets the adapter can drive (all but EVS: model code in both engines)."""
    return {w: r for w, r in records.items() if w != EVS}
