"""Shared fixtures for the core tests: one vision-tower session per test run, built lazily.

Building the tiny Qwen2.5-VL tower and encoding golden rows are the expensive parts of the
core tests, so one ``CoreRunner`` (session-scoped) builds each encoder, workload, golden
set and measured ``CaseRecord`` once and hands the same objects to every test. Tests must
treat what they get as read-only.
"""

from __future__ import annotations

import pytest

try:  # without set-up: one line saying so, not an import traceback
    import torch  # noqa: F401
    import xdist  # noqa: F401  (addopts: -n 2)
except ModuleNotFoundError as _missing:
    import sys

    # SystemExit, not pytest.exit: pytest reports an exception raised while importing a
    # conftest as an import traceback; an exit passes through.
    print(f"tests: {_missing.name} is not installed in this Python ({sys.executable}): run ci/setup.sh first "
          "(it makes ./.venv), then .venv/bin/python -m pytest", file=sys.stderr)
    raise SystemExit(4) from None
from counted_pipelines import COUNTED_PIPELINES

from vlmpath.engines.pipelines import Pipeline
from vlmpath.engines.reference import EmbedRoutine, text_table
from vlmpath.measure.fidelity import Assembler, golden_rows, score
from vlmpath.measure.workload import Workload, preset
from vlmpath.suite.measure import Case, Session, measure_case
from vlmpath.suite.record import CaseRecord

#: Fixtures that build a git history or drive a real program (git, bash, asv): every test
#: using one is end-to-end (``-m e2e``), without a marker to forget on each test.
E2E_FIXTURES = frozenset({"repo", "clone", "replay", "box"})


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist turns ``-n`` into workers
def pytest_cmdline_main(config):
    """Run serially where workers would be wrong: the addopts' ``-n 2`` would make
    pytest-benchmark switch itself off (``--benchmark-only``/``--benchmark-enable``, the
    timing loop of ``tests/bench``) and is refused with ``--pdb``."""
    timing = config.getoption("benchmark_only", False) or config.getoption("benchmark_enable", False)
    if getattr(config.option, "numprocesses", None) and (timing or config.getoption("usepdb", False)):
        config.option.numprocesses = 0


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects
def pytest_collection_modifyitems(config, items):
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = set(callspec.params) if callspec is not None else set()  # "repo" may be a parameter
        if E2E_FIXTURES & (set(getattr(item, "fixturenames", ())) - params):
            item.add_marker(pytest.mark.e2e)


class CoreRunner:
    """Lazily built, cached encoders, workloads, golden rows and measured cases."""

    def __init__(self, session: Session):
        self.session = session
        self._workloads: dict[str, Workload] = {}
        self._golden: dict[str, dict[int, torch.Tensor]] = {}
        self._runs: dict[tuple, tuple] = {}
        self._records: dict[tuple[str, Pipeline, bool], CaseRecord] = {}

    def workload(self, name: str) -> Workload:
        if name not in self._workloads:
            self._workloads[name] = preset(name, "tiny", 0)
        return self._workloads[name]

    def encoder(self, model: str):
        return self.session.encoder(model, "tiny")

    def golden(self, wl: Workload) -> dict[int, torch.Tensor]:
        key = f"{wl.name}/{wl.chunk_size}"
        if key not in self._golden:
            self._golden[key] = golden_rows(wl, self.encoder(wl.model))
        return self._golden[key]

    def routine(self, wl: Workload, pipeline: Pipeline, encoder=None, **kw) -> EmbedRoutine:
        enc = encoder if encoder is not None else self.encoder(wl.model)
        table = text_table(wl.vocab_size, enc.out_dim, torch.float32, "cpu", wl.seed)
        return EmbedRoutine(wl, enc, pipeline, table, **kw)

    def run(self, wl: Workload, pipeline: Pipeline, encoder=None, **kw):
        """Run the whole schedule (no error handling: a failing step raises);
        returns (routine, {rid: [length, hidden] final embeddings}). Runs with the
        session's encoder and default options are memoized (results are read-only)."""
        memo = encoder is None and not kw
        key = (wl.name, wl.seed, wl.chunk_size, pipeline)
        if memo and key in self._runs:
            return self._runs[key]
        routine = self.routine(wl, pipeline, encoder, **kw)
        asm = Assembler(wl)
        for step in wl.steps:
            asm.add(step, routine.run_step(step))
        if memo:
            self._runs[key] = (routine, asm.rows)
        return routine, asm.rows

    def score(self, wl: Workload, rows, failed=frozenset(), exact: bool = False):
        """Placement as ``measure_case`` scores it (the dtype's tolerance), or bit for bit."""
        return score(wl, rows, self.golden(wl), exact=exact, failed=set(failed), encoder=wl.model)

    def record(self, workload: str, pipeline: str | Pipeline, count: bool) -> CaseRecord:
        """``measure_case`` with ``repeat=1``; ``pipeline`` is a Pipeline or a key of
        ``COUNTED_PIPELINES``."""
        pipe = COUNTED_PIPELINES[pipeline] if isinstance(pipeline, str) else pipeline
        key = (workload, pipe, count)
        if key not in self._records:
            self._records[key] = measure_case(Case(workload, pipe), self.session, repeat=1, count=count)
        return self._records[key]


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    """One intra-op thread for the whole run (restored after), as ``vlmpath run`` pins
    OMP_NUM_THREADS=1 on CPU and tests/bench/conftest.py does for the mirror: on a shared
    2-core box OpenMP threads spin-waiting for each other made the tiny towers' ops ~4x
    dearer in CPU and in wall (measure_case on multi_region: 38 s of CPU, 9 s with one)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def session() -> Session:
    return Session("cpu")


@pytest.fixture(scope="session")
def runner(session: Session) -> CoreRunner:
    return CoreRunner(session)
