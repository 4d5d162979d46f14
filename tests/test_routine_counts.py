"""Does the engine side of the counted gate count a routine's own work exactly, and see a plant?

``suite.routine_counts.count_routine`` on the real reference routine (an engine adapter's
``routine`` has the same signature; the real sglang/vLLM routines are counted in their
adapter tests and the engine PR flow): the same pass counts the same twice, an extra copy
of each step's rows is more elements, an extra Python loop per step is more bytecodes, and
a routine that cannot be counted gives no number and the reason (never a zero).
"""

from __future__ import annotations

import pytest

from vlmpath.engines.pipelines import DEFAULT_PIPELINE
from vlmpath.engines.reference import EmbedRoutine
from vlmpath.suite.measure import Session, prepare
from vlmpath.suite.routine_counts import count_routine


@pytest.fixture(scope="module")
def prep():
    return prepare("mixed", DEFAULT_PIPELINE.hash, "tiny", Session("cpu"))


def _count(prep, make=EmbedRoutine):
    return count_routine(make, prep.workload, prep.encoder, DEFAULT_PIPELINE, prep.table, 1 << 30)


class _Planted(EmbedRoutine):
    """The plants live in this test file: counted as the routine's own code."""

    copy_rows = False
    loops = 0

    def run_step(self, step):
        out = super().run_step(step)
        if self.copy_rows:
            out.clone()
        for _ in range(self.loops):
            sum(e.extend for e in step.entries)
        return out


def test_a_pass_counts_the_same_twice_and_each_plant_grows_its_own_tally(prep):
    a, b = _count(prep), _count(prep)
    assert a.error is None and a.bytecodes > 1000 and a.elements > 1000
    assert (a.bytecodes, a.elements) == (b.bytecodes, b.elements)

    copying = type("Copying", (_Planted,), {"copy_rows": True})
    looping = type("Looping", (_Planted,), {"loops": 3})
    c, d = _count(prep, copying), _count(prep, looping)
    assert c.elements > a.elements * 1.05 and abs(c.bytecodes - a.bytecodes) / a.bytecodes < 0.05
    assert d.bytecodes > a.bytecodes * 1.02 and d.elements == a.elements


def test_a_routine_that_cannot_be_counted_gives_no_number_and_says_why(prep):
    built = []

    def make(*args, **kw):
        built.append(1)
        if len(built) == 3:  # the counted pass's routine
            raise RuntimeError("boom in the engine")
        return EmbedRoutine(*args, **kw)

    got = _count(prep, make)
    assert (got.bytecodes, got.elements) == (None, None)
    assert got.error == "RuntimeError: boom in the engine"
