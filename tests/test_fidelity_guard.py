"""Does the measure refuse to report an accuracy when golden rows cannot tell items apart?

Planted degenerate golden rows (all-zero, constant, non-finite, two items alike) raise
``DegenerateGoldenError`` naming the encoder, from ``score`` and from ``measure_case``;
the unchanged rows score as before. ``measure_case`` is driven end to end through a local
checkpoint whose merger norm (``ln_q``) is zero: the bug of issue 10, as a user with a
damaged checkpoint would meet it.
"""

from __future__ import annotations

import pytest
import torch

from vlmpath.engines.pipelines import Pipeline
from vlmpath.measure.families import is_norm
from vlmpath.measure.families.qwen2_5_vl import build_vision_tower
from vlmpath.measure.fidelity import DegenerateGoldenError, check_golden, golden_rows, relative_error, score
from vlmpath.suite.measure import Case, Session, measure_case


def _plant(golden, how):
    planted = dict(golden)
    first, second = list(golden)[:2]
    rows = planted[first].clone()
    if how == "zero":
        rows[1] = 0
    elif how == "constant":
        rows[2] = 0.5
    elif how == "nan":
        rows[0, 3] = float("nan")
    elif how == "alike":  # two different items with the same rows: the tower ignores its input
        rows = planted[second].clone()
    planted[first] = rows
    return planted


@pytest.mark.parametrize("how", ["zero", "constant", "nan", "alike"])
def test_score_refuses_planted_degenerate_golden_rows(runner, how):
    wl = runner.workload("many_small_images")
    golden = runner.golden(wl)
    _, rows = runner.run(wl, Pipeline())
    assert score(wl, rows, golden, encoder="qwen2_5_vl").accuracy == 1.0  # unchanged: fine
    with pytest.raises(DegenerateGoldenError, match=r"encoder 'qwen2_5_vl'.*degenerate.*no accuracy"):
        score(wl, rows, _plant(golden, how), encoder="qwen2_5_vl")


def test_golden_rows_of_a_zeroing_encoder_are_refused(runner):
    class Zeroing:
        name = "zeroing"

        def __init__(self, inner):
            self.inner = inner

        def encode(self, items):
            out = self.inner.encode(items)
            return type(out)(torch.zeros_like(out.embeddings), out.item_rows, out.frame_rows)

    wl = runner.workload("many_small_images")
    with pytest.raises(DegenerateGoldenError, match="encoder 'zeroing'.*all zero"):
        golden_rows(wl, Zeroing(runner.encoder("qwen2_5_vl")))


def test_relative_error_against_zero_rows_is_never_small():
    # The GPU branch scores by relative error; against zero rows it used to return the
    # absolute error, so small misplaced rows looked placed.
    zero = torch.zeros(4, 8)
    assert relative_error(zero, zero) == 0.0
    assert relative_error(torch.full((4, 8), 1e-6), zero) == float("inf")
    assert relative_error(torch.zeros(0, 8), torch.zeros(0, 8)) == 0.0


def test_check_golden_accepts_distinct_rows():
    gen = torch.Generator().manual_seed(0)
    check_golden({1: torch.randn(4, 8, generator=gen), 2: torch.randn(4, 8, generator=gen)}, "any")


def test_measure_case_refuses_a_checkpoint_with_a_zero_merger_norm(tmp_path):
    from safetensors.torch import save_file

    tower = build_vision_tower("tiny", "cpu", seed=0)
    state = {f"visual.{k}": v.contiguous() for k, v in tower.state_dict().items()}
    save_file(state, str(tmp_path / "good.safetensors"))
    # The same checkpoint with the merger's RMSNorm weight zeroed (the old seeded init's bug).
    assert "visual.merger.ln_q.weight" in state
    state["visual.merger.ln_q.weight"] = torch.zeros_like(state["visual.merger.ln_q.weight"])
    bad = tmp_path / "bad"
    bad.mkdir()
    save_file(state, str(bad / "model.safetensors"))

    case = Case("many_small_images", Pipeline())
    with pytest.raises(DegenerateGoldenError, match=r"encoder 'qwen2_5_vl'.*item 0x[0-9a-f]+.*all zero.*ln_q"):
        measure_case(case, Session("cpu", weights_dir=str(bad)), repeat=1, count=False)
    rec = measure_case(case, Session("cpu", weights_dir=str(tmp_path)), repeat=1, count=False)
    assert rec.accuracy == 1.0 and rec.error is None


def test_every_norm_is_found_by_type_and_seeded_at_one(session):
    tower = session.encoder("qwen2_5_vl", "tiny").tower
    resampler = session.encoder("multi_region", "tiny").resampler
    for module in (tower, resampler):
        norms = {name: m for name, m in module.named_modules() if is_norm(m)}
        assert norms
        for m in norms.values():
            assert bool((m.weight == 1).all())
            assert getattr(m, "bias", None) is None or bool((m.bias == 0).all())
    names = {name for name, m in tower.named_modules() if is_norm(m)}
    assert "merger.ln_q" in names and "blocks.0.norm1" in names  # named without "norm" too
    assert {"ln_q", "ln_kv"} <= {name for name, m in resampler.named_modules() if is_norm(m)}
    assert is_norm(torch.nn.LayerNorm(4)) and not is_norm(torch.nn.Linear(4, 4))
