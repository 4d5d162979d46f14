"""Does the placement check tell GPU noise from misplaced rows?"""

from __future__ import annotations

import torch

from vlmpath.measure.fidelity import TOLERANCES, Assembler, relative_error, score
from vlmpath.measure.workload import preset


def _assembled_with(wl, rows_of):
    """Each request's final embeddings with every item's rows from ``rows_of(item)``."""
    hidden = 16
    out = {}
    for req in wl.requests:
        emb = torch.zeros(req.length, hidden, dtype=torch.bfloat16)
        for it in req.items:
            pos = torch.tensor([p for a, b in it.offsets for p in range(a, b + 1)])
            emb[pos] = rows_of(it)
        out[req.rid] = emb
    return out


def test_gpu_tolerance_accepts_bf16_noise_and_rejects_shifted_rows():
    wl = preset("many_small_images")
    gen = torch.Generator().manual_seed(3)
    golden = {it.hash: torch.randn(it.span, 16, generator=gen).to(torch.bfloat16) for it in wl.items}

    def noisy(it):
        g = golden[it.hash].float()
        return (g + 0.01 * g.abs().mean() * torch.randn(g.shape, generator=gen)).to(torch.bfloat16)

    ok = score(wl, _assembled_with(wl, noisy), golden, exact=False)
    assert ok.accuracy == 1.0 and ok.placed == ok.total
    # Exact comparison rejects the same noise: the tolerance is what accepts it.
    assert score(wl, _assembled_with(wl, noisy), golden, exact=True).accuracy == 0.0

    shifted = score(wl, _assembled_with(wl, lambda it: golden[it.hash].roll(1, 0)), golden, exact=False)
    assert shifted.accuracy == 0.0
    assert relative_error(golden[wl.items[0].hash].roll(1, 0), golden[wl.items[0].hash]) > 10 * TOLERANCES[torch.bfloat16]


def test_unwritten_positions_and_failed_requests_are_not_placed():
    wl = preset("many_small_images")
    gen = torch.Generator().manual_seed(4)
    golden = {it.hash: torch.randn(it.span, 16, generator=gen).to(torch.bfloat16) for it in wl.items}
    asm = _assembled_with(wl, lambda it: golden[it.hash])
    first = wl.requests[0]
    asm[first.rid][first.items[0].offsets[0][0]] = float("nan")  # one position never written
    fid = score(wl, asm, golden, exact=False, failed={wl.requests[1].rid})
    lost = 1 + len(wl.requests[1].items)
    assert fid.placed == fid.total - lost


def test_assembler_places_step_rows_at_their_positions():
    wl = preset("chunked_long")
    asm = Assembler(wl)
    for step in wl.steps:
        rows = []
        for e in step.entries:
            rows.append(torch.arange(e.prefix, e.prefix + e.extend, dtype=torch.float32).unsqueeze(1))
        asm.add(step, torch.cat(rows))
    for req in wl.requests:
        assert torch.equal(asm.rows[req.rid][:, 0], torch.arange(req.length, dtype=torch.float32))
