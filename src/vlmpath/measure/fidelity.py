"""Did every image's rows land in the right place?

The golden rows of an item are what the encoder returns for that item alone, unchunked,
with no cache. After a whole chunked schedule, an item is *placed* when the final input
embeddings at its placeholder positions (over all its offsets, in order) match its golden
rows: the *relative* error of its rows, ``||got - want|| / ||want||``, is within a
per-dtype tolerance. Kernels pick different tilings for different batch shapes (a batched
call and an item alone differ by ~1e-6 in fp32 on a CPU; bf16 noise accumulates over 32
blocks on a GPU), while rows of another image, rows shifted by one or reversed are
more than 0.2 away, 4x the loosest tolerance (``tests/test_measure_selftest.py`` pins both
on the real encoders; the multi-region resampler's rows are the closest, ~0.35). Accuracy
is the share of placed items; items of requests that failed count as not placed.

Golden rows that cannot tell items apart (all-zero, constant within a row, non-finite,
or two different items with the same rows) make every placement look right: ``score``
and ``golden_rows`` refuse them with ``DegenerateGoldenError`` naming the encoder, so a
seeded init or a local checkpoint that zeroes the tower's output can never report 1.0.

EVS videos keep a data-dependent number of rows per frame, and the routine re-lays their
frame placeholders inside the pre-sized span. Their golden rows are still the item encoded
alone; ``golden_rows`` also keeps the per-frame counts of that encode (``GoldenRows.frames``)
and ``score`` checks the item at its *final* offsets, re-laid from those counts with the
same ``evs_layout.evs_relayout`` the routine's full path uses (on a CPU the routine's own
counts are the same; a test pins that both layouts agree).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from vlmpath.core.errors import VlmpathError
from vlmpath.measure.evs_layout import evs_relayout
from vlmpath.measure.items import Item
from vlmpath.measure.workload import Workload

# Relative (Frobenius) error allowed per dtype on a GPU; CPU fp32 is compared exactly.
# bf16 keeps 8 bits of mantissa (eps 2**-8): a few ulps of drift per row is ~1e-2.
TOLERANCES = {torch.float32: 1e-4, torch.bfloat16: 5e-2, torch.float16: 1e-2}


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """``||got - want|| / ||want||`` in fp32; 0 when both are zero (or empty), infinite when
    only ``want`` is zero (an absolute error against zero rows would call small rows
    placed)."""
    g, w = got.float(), want.float()
    denom = float(torch.linalg.vector_norm(w))
    num = float(torch.linalg.vector_norm(g - w))
    if denom > 0:
        return num / denom
    return 0.0 if num == 0 else float("inf")


def tolerance(dtype: torch.dtype) -> float:
    return TOLERANCES.get(dtype, 1e-3)


class DegenerateGoldenError(VlmpathError):
    """Golden rows that every placement would match: no accuracy can be reported."""


def degenerate_reason(rows: torch.Tensor) -> str | None:
    """Why an item's golden rows cannot tell placements apart, or None when they can."""
    if rows.numel() == 0:
        return None
    r = rows.float().reshape(rows.shape[0], -1)
    if not bool(torch.isfinite(r).all()):
        return "non-finite values"
    zero = (r == 0).all(dim=1)
    if bool(zero.any()):
        return f"{int(zero.sum())} of {r.shape[0]} rows all zero"
    if r.shape[1] > 1:
        flat = r.amax(dim=1) == r.amin(dim=1)
        if bool(flat.any()):
            return f"{int(flat.sum())} of {r.shape[0]} rows constant"
    return None


def check_golden(golden: Mapping[int, torch.Tensor], encoder: str, hashes=None) -> None:
    """Refuse golden rows that are degenerate, or two different items (by content hash)
    whose rows are within the placement tolerance of each other (a tower that ignores its
    input). ``hashes`` narrows the check to those items."""
    last_of_shape: dict[tuple, tuple[int, torch.Tensor]] = {}
    for h in (golden if hashes is None else dict.fromkeys(hashes)):
        rows = golden[h]
        why = degenerate_reason(rows)
        if why is None and rows.numel() and rows.shape in last_of_shape:
            other, prev = last_of_shape[rows.shape]
            if relative_error(rows, prev) <= tolerance(rows.dtype):
                why = f"the same rows as item {other:#x}"
        if why is not None:
            raise DegenerateGoldenError(
                f"encoder {encoder!r}: golden rows of item {h:#x} are degenerate ({why}), so "
                "misplaced rows would still score as placed; no accuracy reported. Check the "
                "tower's weights (a local checkpoint with a missing or zero norm weight, e.g. "
                "merger.ln_q) or the seeded init")
        last_of_shape[rows.shape] = (h, rows)


@dataclass(frozen=True)
class Fidelity:
    accuracy: float
    max_abs_err: float       # over placed and misplaced items that produced rows; 0 if none
    placed: int
    total: int
    foreign: int = 0         # misplaced items whose rows are another item's (a key collision)


class GoldenRows(dict):
    """Content hash -> an item's rows encoded alone; ``frames`` keeps the per-frame row
    counts of items whose encoder reports them (EVS), by the same hash. Distinct items under
    one hash (a key collision: the same bytes under another grid, or a forced key) keep
    their own rows in ``others``, by (hash, grids); ``grids`` says whose rows the hash holds."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.frames: dict[int, tuple[int, ...]] = {}
        self.grids: dict[int, tuple] = {}
        self.others: dict[tuple[int, tuple], torch.Tensor] = {}


def golden_for(golden: Mapping[int, torch.Tensor], item: Item) -> torch.Tensor:
    """An item's own golden rows, also when another item shares its hash."""
    grids = getattr(golden, "grids", {})
    if item.hash in grids and grids[item.hash] != item.grid_thw:
        return golden.others[(item.hash, item.grid_thw)]
    return golden[item.hash]


def golden_rows(workload: Workload, encoder, known: GoldenRows | None = None) -> GoldenRows:
    """Each distinct item (by hash) encoded alone; items already in ``known`` (rows of the
    same encoder, keyed by content hash) are not encoded again. Degenerate rows raise
    ``DegenerateGoldenError`` naming the encoder."""
    golden = GoldenRows() if known is None else known
    frames = getattr(golden, "frames", None)  # a plain dict keeps rows only
    grids = getattr(golden, "grids", None)
    for it in workload.items:
        if it.hash not in golden:
            out = encoder.encode([it])
            golden[it.hash] = out.embeddings
            if grids is not None:
                grids[it.hash] = it.grid_thw
            if out.frame_rows is not None and frames is not None:
                frames[it.hash] = out.frame_rows[0]
        elif grids is not None and grids.get(it.hash, it.grid_thw) != it.grid_thw \
                and (it.hash, it.grid_thw) not in golden.others:
            golden.others[(it.hash, it.grid_thw)] = encoder.encode([it]).embeddings  # a key collision
    check_golden(golden, getattr(encoder, "name", type(encoder).__name__), (it.hash for it in workload.items))
    return golden


def final_offsets(item: Item, golden: Mapping[int, torch.Tensor]) -> tuple[tuple[int, int], ...]:
    """Where an item's rows must end up: its offsets, re-laid for an EVS video from the
    per-frame counts of its golden encode."""
    counts = getattr(golden, "frames", {}).get(item.hash)
    if item.frame_tokens and counts is not None:
        return evs_relayout(item, counts).offsets
    return item.offsets


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
          exact: bool = False, failed: set[int] = frozenset(), encoder: str = "unnamed") -> Fidelity:
    """Placement of every item; ``exact`` asks for bit equality instead of the per-dtype
    tolerance (tests of paths that must not change a bit). Refuses degenerate golden rows."""
    check_golden(golden, encoder, (it.hash for it in workload.items))
    placed = total = foreign = 0
    max_err = 0.0
    for req in workload.requests:
        for it in req.items:
            total += 1
            if req.rid in failed or req.rid not in assembled:
                continue
            positions = torch.tensor([p for a, b in final_offsets(it, golden) for p in range(a, b + 1)],
                                     dtype=torch.int64)
            got = assembled[req.rid].index_select(0, positions.to(assembled[req.rid].device))
            want = golden_for(golden, it)
            if got.shape != want.shape:
                continue
            diff = (got.float() - want.float()).abs()
            err = float(diff.max()) if diff.numel() else 0.0
            if err == err:  # NaN: positions never written
                max_err = max(max_err, err)
            if exact:
                ok = torch.equal(got, want)
            else:
                ok = relative_error(got, want) <= tolerance(want.dtype)
            placed += ok
            if not ok:
                foreign += _anothers(got, want, it, workload, golden)
    return Fidelity(placed / total if total else 1.0, max_err, placed, total, foreign)


def _anothers(got: torch.Tensor, want: torch.Tensor, item: Item, workload: Workload, golden) -> bool:
    """Whether misplaced rows are another item's golden rows (served from its entry)."""
    for other in workload.items:
        rows = golden_for(golden, other)
        if rows is not want and rows.shape == got.shape and relative_error(got, rows) <= tolerance(rows.dtype):
            return True
    return False


from vlmpath.measure.instrument_check import pristine as _pristine  # noqa: E402 (last: nothing later touched us)

_pristine(__name__)
