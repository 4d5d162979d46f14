"""Every registered strategy (except known-bad replays) is benchmarked by the asv suite.

The registries are found by walking vlmpath's modules, so a new registry is covered (or
fails here) without editing this test; params are read from the benchmark classes asv
collects.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from pathlib import Path

import pytest

import vlmpath
from vlmpath.core.registry import Registry
from vlmpath.measure.workload import preset
from vlmpath.suite import cases

ROOT = Path(__file__).resolve().parents[1]
#: Registry entries that no benchmark param names, with the reason. Reviewed on change:
#: the test fails when an entry here becomes covered (so the list cannot go stale).
#: (EVS was exempt until the ``evs_video`` preset covered it through ROUTINE_PRESETS.)
NOT_BENCHMARKED: dict[tuple[str, str], str] = {
    ("encoder", "internvl"): "the second model family (issue 15), kept out of the presets and the asv "
                             "suite so the benchmark set is unchanged; a trace naming it measures it",
}


def _registries() -> dict[str, Registry]:
    found: dict[str, Registry] = {}
    for info in pkgutil.walk_packages(vlmpath.__path__, "vlmpath."):
        if info.name.endswith(("cli", "__main__")):
            continue
        mod = importlib.import_module(info.name)
        for value in vars(mod).values():
            if isinstance(value, Registry):
                found[value.kind] = value
    return found


def benchmark_modules() -> list[str]:
    """The suite's modules, found as asv finds them (a new ``bench_*.py`` is covered here)."""
    return sorted(p.stem for p in (ROOT / "benchmarks").glob("bench_*.py"))


def _benchmark_params() -> set[str]:
    sys.path.insert(0, str(ROOT))
    try:
        values: set[str] = set()
        for name in benchmark_modules():
            mod = importlib.import_module(f"benchmarks.{name}")
            for _, cls in inspect.getmembers(mod, inspect.isclass):
                if cls.__module__ == mod.__name__:
                    for axis in getattr(cls, "params", ()):
                        values.update(str(v) for v in axis)
        return values
    finally:
        sys.path.remove(str(ROOT))


@pytest.fixture(scope="module")
def covered() -> set[str]:
    values = _benchmark_params()
    # Encoders are chosen by the workload, not by a param: a preset in the suite covers its model.
    models = {preset(p, "tiny").model for p in cases.ROUTINE_PRESETS}
    return values | {f"encoder:{m}" for m in models}


def test_registries_are_found():
    kinds = set(_registries())
    assert {"encode strategy", "inject strategy", "count strategy", "hash path", "encoder"} <= kinds


def test_every_default_strategy_is_benchmarked(covered):
    missing = []
    for kind, reg in sorted(_registries().items()):
        for name in reg.default_names():
            key = f"encoder:{name}" if kind == "encoder" else name
            if key not in covered and (kind, name) not in NOT_BENCHMARKED:
                missing.append(f"{kind} {name!r}")
    assert not missing, f"registered but in no benchmark's params: {missing}"


def stale_exemptions(exemptions, covered: set[str]) -> list[str]:
    """Exempted entries that a benchmark covers now (they must leave the exemption list)."""
    return [f"{kind} {name!r}" for kind, name in exemptions
            if (f"encoder:{name}" if kind == "encoder" else name) in covered]


def test_benchmark_modules_are_found_by_glob():
    found = benchmark_modules()
    assert "bench_embed" in found and all(n.startswith("bench_") for n in found)
    assert "_common" not in found and "_compat" not in found


def test_exemptions_are_still_needed(covered):
    assert stale_exemptions(NOT_BENCHMARKED, covered) == [], "benchmarked now: remove from NOT_BENCHMARKED"


def test_a_stale_exemption_is_caught(covered):
    # Planted: exempting a strategy the suite does benchmark must be reported...
    strategy = next(iter(sorted(_registries()["encode strategy"].default_names())))
    assert strategy in covered
    assert stale_exemptions({("encode strategy", strategy): "planted"}, covered) == [f"encode strategy {strategy!r}"]
    # ...and so must an exempted encoder whose model a suite preset uses.
    model = next(m.split(":", 1)[1] for m in sorted(covered) if m.startswith("encoder:"))
    assert stale_exemptions({("encoder", model): "planted"}, covered) == [f"encoder {model!r}"]
    # An exemption for something no benchmark names stays (unchanged pair: green).
    assert stale_exemptions({("encode strategy", "never-registered"): "planted"}, covered) == []


def test_known_bad_strategies_stay_out_of_the_default_suite(covered):
    bad = {name for reg in _registries().values() for name in reg.known_bad}
    assert bad, "expected at least one known-bad replay (batched_by_span)"
    assert not bad & covered
