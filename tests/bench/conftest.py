"""pytest-benchmark mirror of the asv suite: fixtures and the machine-info hook.

``pytest tests/bench --benchmark-enable --benchmark-only`` is the quick local loop (serial:
tests/conftest.py drops the addopts' xdist workers when benchmarks are timed); the normal
test run (``--benchmark-disable`` in pyproject) runs each case once as a plain test.
"""

from __future__ import annotations

import pytest


def pytest_benchmark_update_machine_info(config, machine_info):
    """Put the platform fingerprint and the asv machine name into the JSON's machine_info
    (``vlmpath.compare.pytest_results.load_pytest_benchmark`` reads both)."""
    from vlmpath.measure.platform import probe

    plat = probe()
    machine_info["vlmpath_fingerprint"] = plat.to_dict()
    machine_info["vlmpath_machine"] = plat.machine


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """One intra-op thread while these modules run (restored after), as ``vlmpath run`` pins
    OMP_NUM_THREADS=1 on CPU: on a shared 2-core box, OpenMP threads spin-waiting for each
    other made short ops 100x slower and the whole mirror several times slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def bench_scale() -> str:
    from vlmpath.suite import cases

    return cases.scale_from_env()


@pytest.fixture(scope="session")
def bench_device(bench_scale) -> str:
    from vlmpath.suite import cases

    try:
        return cases.bench_device(bench_scale)
    except NotImplementedError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def bench_session(bench_device):
    from vlmpath.suite.measure import Session

    return Session(bench_device)


@pytest.fixture(scope="session")
def routine_records(bench_session, bench_scale, pytestconfig):
    """Measured routine cases, memoised per (preset, pipeline) for the session: the encode
    ``batched`` and embed ``default`` rows are the same case and are measured once.
    With benchmarks disabled (the normal test run) nothing reads the timed samples (the
    extra_info goes into no JSON), so each case is measured once instead of
    ``ROUTINE_SAMPLES`` times: the same checks (no error, the same encoder calls), a
    seventh of the work."""
    from vlmpath.suite import cases
    from vlmpath.suite.measure import measure_case

    disabled = bool(pytestconfig.getoption("benchmark_disable", False))
    repeat = 1 if disabled else cases.routine_repeat(cases.quick_from_env())
    memo: dict = {}

    def get(case: cases.RoutineCase):
        key = (case.preset, case.pipeline().label)
        if key not in memo:
            memo[key] = measure_case(case.measure_case(bench_scale), bench_session, repeat=repeat)
        return memo[key]

    return get
