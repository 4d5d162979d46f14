"""Instruments that check themselves (measure.instrument_check, issue 39): the code under test
shares their process, so a case whose instruments changed while it ran is one failure that
says so. Planted: the two-line silencer, a Python wrapper around ``Tensor.item``, a swapped
code object; held: an untouched run."""

from __future__ import annotations

import torch

from vlmpath.measure import syncs
from vlmpath.measure.instrument_check import INSTRUMENT_CHANGED, verify
from vlmpath.measure.syncs import SyncCount, count_syncs


def test_untouched_instruments_verify_clean():
    with count_syncs() as sc:
        torch.ones(3).sum().item()
    assert sc.count == 1 and verify() is None


def test_the_two_line_silencer_is_named(monkeypatch):
    monkeypatch.setattr(SyncCount, "count", property(lambda self: 0))  # what a PR appends to the routine
    why = verify()
    assert why == f"{INSTRUMENT_CHANGED}: syncs.SyncCount.count; its numbers are not read"
    monkeypatch.undo()
    assert verify() is None


def test_a_wrapped_torch_entry_point_and_a_swapped_code_object_are_named(monkeypatch):
    real = torch.Tensor.item
    monkeypatch.setattr(torch.Tensor, "item", lambda self: real(self))
    assert "torch.Tensor.item" in verify()
    monkeypatch.undo()
    monkeypatch.setattr(syncs._rule, "__code__", (lambda func: 0).__code__)
    assert "syncs._rule" in verify()
    monkeypatch.undo()
    monkeypatch.setattr(syncs, "count_syncs", lambda **kw: None)
    assert "syncs.count_syncs" in verify()


def test_a_record_measured_under_a_changed_instrument_is_one_failure(monkeypatch):
    from vlmpath.suite.record import CaseRecord
    from vlmpath.suite.record_check import instruments_held

    rec = CaseRecord(workload="multi_region", syncs=9, tok_per_s=100.0, accuracy=1.0, items=4, placed=4)
    assert instruments_held(rec) is rec  # held: untouched
    monkeypatch.setattr(SyncCount, "count", property(lambda self: 0))
    bad = instruments_held(rec)
    assert bad.error.startswith(INSTRUMENT_CHANGED) and bad.syncs is None and bad.tok_per_s is None


# Through the real measure_case and `ci pr`: tests/test_instrument_silencer_e2e.py.
