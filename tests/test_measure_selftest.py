"""Can the placement measure see a misplaced row? A self-test on the real encoders.

For every encoder (``qwen2_5_vl``, ``multi_region``, ``evs`` and InternVL's ``internvl``)
and every scale this CPU can run (``tiny`` as shipped; ``full`` as a shape-reduced smoke:
the full vision widths, heads, output size, tiles and bf16, with 2 blocks and few items,
see ``CONFIGS``):

- golden rows are non-degenerate: no all-zero, constant or non-finite row;
- different items are far apart (relative distance far above the placement tolerance),
  and so are an item's own rows shifted by one or reversed; the same item encoded twice
  (alone, then inside a batch with other items) is within the tolerance;
- mutation test: planted mistakes applied to a real run's final embeddings (swap two
  same-sized items, shift an item by one row, write one item's rows at another's
  offsets, drop an item, reverse an item's rows) each score below 1.0 with the project's
  own ``fidelity.score``; the untouched run scores exactly 1.0.

Before issue 10 every golden row was zero (the merger's RMSNorm ``ln_q`` had weight 0), and
every mutation here scored 1.0.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from vlmpath.engines.pipelines import Pipeline
from vlmpath.engines.reference import EmbedRoutine, text_table
from vlmpath.measure.encoders import ENCODERS, family_of
from vlmpath.measure.families import internvl, qwen2_5_vl
from vlmpath.measure.fidelity import (
    TOLERANCES,
    Assembler,
    final_offsets,
    golden_rows,
    relative_error,
    score,
    tolerance,
)
from vlmpath.measure.workload import MediaSpec, RequestSpec, build_requests, build_workload

# ``full`` on a CPU: every width of the full towers, two blocks (Qwen: one windowed, one full).
CONFIGS = {
    ("qwen2_5_vl", "tiny"): qwen2_5_vl.TOWERS["tiny"],
    ("qwen2_5_vl", "full"): replace(qwen2_5_vl.TOWERS["full"], depth=2, fullatt_block_indexes=(1,)),
    ("internvl", "tiny"): internvl.TOWERS["tiny"],
    ("internvl", "full"): replace(internvl.TOWERS["full"], depth=2),
}
SCALES = ("tiny", "full")
ENCODER_NAMES = ("qwen2_5_vl", "multi_region", "evs", "internvl")
# Misplaced rows must be this far (relative) from the golden rows: 4x the loosest
# tolerance of any dtype, so no tolerance can ever accept them.
SEPARATION = 4 * max(TOLERANCES.values())


def _image(grid, **kw):
    return MediaSpec("image", (grid,), **kw)


def _specs(encoder: str, scale: str) -> list[RequestSpec]:
    """Each workload holds two different items of the same size (for the swap) and, but for
    EVS (one video per request), a request with two items (another's offsets nearby)."""
    if encoder == "internvl":  # whole tiles: one-tile images, a two-frame video
        side = internvl.TILE_PATCHES[scale]
        return [RequestSpec((3, _image((1, side, side)), 2, _image((1, side, side)), 3)),
                RequestSpec((2, MediaSpec("video", ((2, side, side),)), 4))]
    if encoder == "multi_region":
        region = lambda *grids: MediaSpec("image", grids, regions=True)  # noqa: E731
        return [RequestSpec((3, region((1, 8, 8)), 2, region((1, 8, 8), (1, 4, 4)), 3)),
                RequestSpec((2, region((1, 4, 8)), 4))]
    if encoder == "evs":
        video = MediaSpec("video", ((4, 8, 8),), evs=True)
        return [RequestSpec((4, video, 4)), RequestSpec((4, video, 4))]
    return [RequestSpec((3, _image((1, 8, 8)), 2, _image((1, 8, 8)), 3)),
            RequestSpec((2, MediaSpec("video", ((2, 4, 8),)), 4, _image((1, 4, 6)), 1))]


class Measured:
    """One encoder at one scale: its workload, golden rows and one real run's rows."""

    def __init__(self, encoder: str, scale: str, tower: torch.nn.Module):
        self.encoder = ENCODERS[encoder](tower, torch.device("cpu"), 0)
        requests = build_requests(_specs(encoder, scale), vocab_size=512, seed=11, family=family_of(encoder))
        # EVS re-lays a request's placeholders only when it is the whole step.
        chunk = requests[0].length if encoder == "evs" else -1
        self.workload = build_workload("selftest", "tiny", encoder, requests, chunk, 512, 11)
        self.golden = golden_rows(self.workload, self.encoder)
        self.table = text_table(512, self.encoder.out_dim, self.encoder.dtype, "cpu", 11)
        routine = EmbedRoutine(self.workload, self.encoder, Pipeline(encode="batched"), self.table)
        asm = Assembler(self.workload)
        for step in self.workload.steps:
            asm.add(step, routine.run_step(step))
        self.rows = asm.rows

    def positions(self, item) -> torch.Tensor:
        return torch.tensor([p for a, b in final_offsets(item, self.golden) for p in range(a, b + 1)])

    def located(self):
        """(request id, item) of every item, in order."""
        return [(r.rid, it) for r in self.workload.requests for it in r.items]

    def accuracy(self, rows) -> float:
        return score(self.workload, rows, self.golden, encoder=self.encoder.name).accuracy


@pytest.fixture(scope="module")
def measured():
    # one per family and scale, shared by the family's encoders (as Session does)
    towers: dict[tuple[str, str], torch.nn.Module] = {}
    built: dict[tuple[str, str], Measured] = {}

    def get(encoder: str, scale: str) -> Measured:
        fam = family_of(encoder)
        if (fam.name, scale) not in towers:
            towers[fam.name, scale] = fam.build_tower(scale, "cpu", seed=0, config=CONFIGS[fam.name, scale])
        if (encoder, scale) not in built:
            built[encoder, scale] = Measured(encoder, scale, towers[fam.name, scale])
        return built[encoder, scale]

    return get


CASES = [(e, s) for s in SCALES for e in ENCODER_NAMES]


@pytest.mark.parametrize(("encoder", "scale"), CASES)
def test_golden_rows_are_not_degenerate(measured, encoder, scale):
    m = measured(encoder, scale)
    assert m.encoder.dtype == CONFIGS[family_of(encoder).name, scale].dtype
    for it in m.workload.items:
        rows = m.golden[it.hash].float()
        assert rows.shape[0] == len(m.positions(it)) > 0
        assert bool(torch.isfinite(rows).all())
        assert bool((rows.abs().sum(dim=1) > 0).all()), "an all-zero golden row"
        assert bool((rows.amax(dim=1) > rows.amin(dim=1)).all()), "a constant golden row"


@pytest.mark.parametrize(("encoder", "scale"), CASES)
def test_different_rows_are_far_apart_and_the_same_item_is_within_tolerance(measured, encoder, scale):
    m = measured(encoder, scale)
    tol = tolerance(m.encoder.dtype)
    items = list({it.hash: it for it in m.workload.items}.values())
    golden = [m.golden[it.hash] for it in items]
    pairs = [(a, b) for i, a in enumerate(golden) for b in golden[i + 1:] if a.shape == b.shape]
    assert pairs, "the workload needs two different items of the same size"
    for a, b in pairs:
        assert relative_error(a, b) > SEPARATION
    for g in golden:
        assert relative_error(g.roll(1, 0), g) > SEPARATION
        assert relative_error(g.flip(0), g) > SEPARATION
    # The same item encoded twice: alone (golden) and inside one batch with every other.
    # EVS keeps the tokens that change most between frames: in bf16 a batch's last-bit
    # noise moves near-ties in that ranking, so a batched EVS video may keep other tokens
    # (~0.5 away at ``full``). The routine never batches an EVS request with another (it
    # refuses such a step), so the tower rows before pruning are what must agree here,
    # and EVS itself must be deterministic for the same call.
    enc = getattr(m.encoder, "qwen", m.encoder)
    batch = enc.encode(items)
    for it, again in zip(items, torch.split(batch.embeddings, list(batch.item_rows))):
        alone = enc.encode([it]).embeddings if enc is not m.encoder else m.golden[it.hash]
        assert again.shape == alone.shape and relative_error(again, alone) <= tol
        assert torch.equal(m.encoder.encode([it]).embeddings, m.golden[it.hash])


def _same_size_pair(m: Measured):
    loc = m.located()
    for i, (ra, a) in enumerate(loc):
        for rb, b in loc[i + 1:]:
            if a.hash != b.hash and len(m.positions(a)) == len(m.positions(b)):
                return (ra, a), (rb, b)
    raise AssertionError("no two different items of the same size")


def swap(m, rows):
    (ra, a), (rb, b) = _same_size_pair(m)
    pa, pb = m.positions(a), m.positions(b)
    rows[ra][pa], rows[rb][pb] = m.rows[rb][pb].clone(), m.rows[ra][pa].clone()


def shift(m, rows):
    rid, it = m.located()[-1]
    pos = m.positions(it)
    rows[rid][pos] = m.rows[rid][pos - 1]  # every row one position late (an off-by-one)


def other_offsets(m, rows):
    (ra, a), (rb, b) = m.located()[0], m.located()[1]
    pa, pb = m.positions(a), m.positions(b)
    n = min(len(pa), len(pb))
    rows[rb][pb[:n]] = m.rows[ra][pa[:n]]  # a's rows where b belongs


def drop(m, rows):
    rid, it = m.located()[0]
    pos = m.positions(it)
    req = m.workload.requests[rid]
    ids = req.input_ids.clamp(0, m.table.shape[0] - 1)
    rows[rid][pos] = m.table[ids[pos]]  # never injected: the placeholders' text rows stay


def reverse(m, rows):
    rid, it = m.located()[0]
    pos = m.positions(it)
    rows[rid][pos] = m.rows[rid][pos.flip(0)]


MUTATIONS = {"swap": swap, "shift": shift, "other_offsets": other_offsets, "drop": drop, "reverse": reverse}


@pytest.mark.parametrize(("encoder", "scale"), CASES)
def test_untouched_run_scores_exactly_one(measured, encoder, scale):
    m = measured(encoder, scale)
    assert m.accuracy(m.rows) == 1.0


@pytest.mark.parametrize("mutation", MUTATIONS)
@pytest.mark.parametrize(("encoder", "scale"), CASES)
def test_planted_misplacement_lowers_accuracy(measured, encoder, scale, mutation):
    m = measured(encoder, scale)
    rows = {rid: r.clone() for rid, r in m.rows.items()}
    MUTATIONS[mutation](m, rows)
    assert any(not torch.equal(rows[k], m.rows[k]) for k in rows), "the mutation changed nothing"
    assert m.accuracy(rows) < 1.0
