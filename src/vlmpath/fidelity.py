"""Did every image's rows land in the right place?

The golden rows of an item are what the encoder returns for that item alone, unchunked,
with no cache. After a whole chunked schedule, an item is *placed* when the final input
embeddings at its placeholder positions (over all its offsets, in order) equal its golden
rows: exactly in fp32 on the CPU, within a dtype-aware tolerance on a GPU (kernels pick
different tilings for different batch shapes). Accuracy is the share of placed items;
items of requests that failed count as not placed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from .workload import Workload

# (rtol, atol) per dtype for GPU comparisons; CPU fp32 is compared exactly.
TOLERANCES = {torch.float32: (1e-4, 1e-5), torch.bfloat16: (2e-2, 2e-2), torch.float16: (2e-3, 2e-3)}


@dataclass(frozen=True)
class Fidelity:
    accuracy: float
    max_abs_err: float       # over placed and misplaced items that produced rows; 0 if none
    placed: int
    total: int


def golden_rows(workload: Workload, encoder, known: dict[int, torch.Tensor] | None = None
                ) -> dict[int, torch.Tensor]:
    """Each distinct item (by hash) encoded alone; items already in ``known`` (rows of the
    same encoder, keyed by content hash) are not encoded again."""
    golden: dict[int, torch.Tensor] = {} if known is None else known
    for it in workload.items:
        if it.hash not in golden:
            golden[it.hash] = encoder.encode([it]).embeddings
    return golden


class Assembler:
    """Collects step outputs into each request's full ``[length, hidden]`` embeddings."""

    def __init__(self, workload: Workload):
        self.workload = workload
        self.rows: dict[int, torch.Tensor] = {}

    def add(self, step, embeds: torch.Tensor) -> None:
        pos = 0
        for e in step.entries:
            req = self.workload.requests[e.rid]
            if e.rid not in self.rows:
                self.rows[e.rid] = embeds.new_full((req.length, embeds.shape[1]), float("nan"))
            self.rows[e.rid][e.prefix:e.prefix + e.extend] = embeds[pos:pos + e.extend]
            pos += e.extend


def score(workload: Workload, assembled: Mapping[int, torch.Tensor], golden: Mapping[int, torch.Tensor],
          exact: bool, failed: set[int] = frozenset()) -> Fidelity:
    placed = total = 0
    max_err = 0.0
    for req in workload.requests:
        for it in req.items:
            total += 1
            if req.rid in failed or req.rid not in assembled:
                continue
            positions = torch.tensor([p for a, b in it.offsets for p in range(a, b + 1)], dtype=torch.int64)
            got = assembled[req.rid].index_select(0, positions.to(assembled[req.rid].device))
            want = golden[it.hash]
            if got.shape != want.shape:
                continue
            diff = (got.float() - want.float()).abs()
            err = float(diff.max()) if diff.numel() else 0.0
            if err == err:  # NaN: positions never written
                max_err = max(max_err, err)
            if exact:
                ok = torch.equal(got, want)
            else:
                rtol, atol = TOLERANCES.get(want.dtype, (1e-3, 1e-3))
                ok = bool(torch.allclose(got.float(), want.float(), rtol=rtol, atol=atol))
            placed += ok
    return Fidelity(placed / total if total else 1.0, max_err, placed, total)
