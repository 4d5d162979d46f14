"""Injection and counting (#26082): both scatters agree, counts from offsets equal the
mask, length mismatches fail, the default pipeline never syncs, and the deterministic
counters of every preset match ``tests/expected_counts.json``."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from counted_pipelines import COUNTED_PIPELINES

from vlmpath.core.errors import LengthMismatchError, VlmpathError
from vlmpath.engines.pipelines import DEFAULT_PIPELINE, LEGACY_PIPELINE, Pipeline
from vlmpath.measure.presets import PRESETS
from vlmpath.measure.syncs import count_syncs
from vlmpath.measure.workload import preset
from vlmpath.paths.count import CountQuery, count_from_offsets, mask_sum, offsets
from vlmpath.paths.encode import RequestChunk, chunk_is_active
from vlmpath.paths.inject import adjust_length, check_length, inject_deepstack, masked_scatter, where_index
from vlmpath.paths.registry import COUNTERS, INJECTORS

EXPECTED = Path(__file__).with_name("expected_counts.json")
UPDATE_ENV = "VLMPATH_UPDATE_EXPECTED"


# --- capture real masks, rows and count queries from the routine ------------------------
@pytest.fixture(scope="module")
def captured(runner):
    """preset -> list of (dest before injection, mask, rows) and list of CountQuery, taken
    from every step of a default-pipeline run (the routine's own stages, wrapped)."""
    cache: dict[str, tuple[list, list]] = {}

    def get(name: str):
        if name not in cache:
            wl = runner.workload(name)
            routine = runner.routine(wl, DEFAULT_PIPELINE)
            injections, queries = [], []

            def inject(dest, mask, rows):
                injections.append((dest.clone(), mask, rows))
                masked_scatter(dest, mask, rows)

            def count(q):
                queries.append(q)
                return offsets(q)

            routine.inject, routine.count = inject, count
            for step in wl.steps:
                routine.run_step(step)
            cache[name] = (injections, queries)
        return cache[name]

    return get


@pytest.mark.parametrize("name", PRESETS)
def test_masked_scatter_equals_where_index(captured, name):
    injections, _ = captured(name)
    assert injections
    for dest, mask, rows in injections:
        a, b = dest.clone(), dest.clone()
        masked_scatter(a, mask, rows)
        where_index(b, mask, rows)
        assert torch.equal(a, b)
        assert torch.equal(a[mask.squeeze(-1)], rows)      # rows land in position order
        assert torch.equal(a[~mask.squeeze(-1)], dest[~mask.squeeze(-1)])  # text untouched


@pytest.mark.parametrize("name", ["many_small_images", "mixed", "multi_region"])
def test_deepstack_injection_agrees(captured, name):
    injections, _ = captured(name)
    for dest, mask, rows in injections:
        wide = torch.cat([rows, 2 * rows, -rows], dim=1)  # [K, H * (1 + 2)]
        outs = []
        for inj in (masked_scatter, where_index):
            d, ds = dest.clone(), torch.zeros(dest.shape[0], 2 * dest.shape[1])
            inject_deepstack(inj, d, ds, mask, wide)
            outs.append((d, ds))
        (d0, ds0), (d1, ds1) = outs
        assert torch.equal(d0, d1) and torch.equal(ds0, ds1)
        m = mask.squeeze(-1)
        assert torch.equal(d0[m], rows)
        assert torch.equal(ds0[m], wide[:, dest.shape[1]:])
        assert not bool(ds0[~m].any())  # deepstack rows of text tokens stay zero
    dest, mask, rows = injections[0]
    with pytest.raises(LengthMismatchError, match="deepstack"):
        inject_deepstack(masked_scatter, dest.clone(), torch.zeros(dest.shape[0], 4), mask, rows)


def test_check_length_and_adjust_length():
    rows = torch.arange(12.0).view(6, 2)
    check_length(rows, 6)
    for count in (5, 7):
        with pytest.raises(LengthMismatchError, match=f"6 encoder rows for {count} placeholder tokens"):
            check_length(rows, count)
        with pytest.raises(LengthMismatchError, match="adjust_length"):
            adjust_length(rows, count)  # strict is the default
    assert adjust_length(rows, 6) is rows
    assert torch.equal(adjust_length(rows, 4, mode="crop_last"), rows[2:])  # keeps the LAST rows
    with pytest.raises(LengthMismatchError, match="insufficient"):
        adjust_length(rows, 7, mode="crop_last")
    with pytest.raises(VlmpathError, match="strict"):
        adjust_length(rows, 6, mode="crop_first")


@pytest.mark.parametrize("inject", sorted(INJECTORS))
def test_routine_rejects_a_length_mismatch_for_both_injectors(runner, inject):
    wl = runner.workload("many_small_images")
    routine = runner.routine(wl, Pipeline(inject=inject))
    routine.count = lambda q: offsets(q) + 1  # the placeholders claim one token more
    injected = []
    routine.inject = lambda *a: injected.append(a)
    with pytest.raises(LengthMismatchError, match="placeholder tokens in this step"):
        routine.run_step(wl.steps[0])
    assert not injected  # the check comes before any write


# --- counting -----------------------------------------------------------------------------
SPEC_VECTORS = [  # embed-path.md section 3, exactly as listed there
    (([8], [16], [[(2, 5), (9, 14), (20, 24)]]), 10),
    (([30], [0], [[(2, 5), (9, 14), (20, 24)]]), 0),
    (([4, 0, 10], [4, 10, 10], [[(2, 5)], [], [(5, 12), (18, 25)]]), 7),
    (([4, 0], [8, 2], [[(2, 5), (9, 14)], [(0, 3)]]), 7),
    (([0, 0], [20, 4], [[(2, 5), (9, 14)], [(0, 3)]]), 14),
    (([15, 4], [5, 1], [[(2, 5), (9, 14)], [(0, 3)]]), 0),
    (([0, 0], [20], [[(2, 5), (9, 14)], [(0, 3)]]), 10),  # a missing extend counts as 0
]


@pytest.mark.parametrize("args, want", SPEC_VECTORS)
def test_count_from_offsets_spec_vectors(args, want):
    assert count_from_offsets(*args) == want


@pytest.mark.parametrize("name", PRESETS)
def test_offsets_equal_mask_sum_on_every_step(runner, captured, name):
    _, queries = captured(name)
    assert len(queries) >= len(runner.workload(name).steps)
    for q in queries:
        n = int(q.mask.sum())
        assert offsets(q) == mask_sum(q) == n
        with count_syncs() as sc:
            offsets(q)
        assert sc.count == q.ids_rewritten  # host arithmetic only, but for the EVS fallback


def test_evs_fallback_uses_the_mask(captured):
    _, queries = captured("many_small_images")
    q = next(q for q in queries if q.mask.any())
    stale = replace(q, offsets=tuple(() for _ in q.offsets))  # offsets no longer describe ids
    assert offsets(stale) == 0
    rewritten = replace(stale, ids_rewritten=True)
    want = int(q.mask.sum())
    with count_syncs() as sc:
        got = offsets(rewritten)
    assert got == want > 0
    assert sc.events == {"Tensor.item": 1}  # the fallback pays the sync
    assert COUNTERS["offsets"] is offsets and COUNTERS["mask_sum"] is mask_sum


def test_count_query_defaults_to_unrewritten_ids():
    q = CountQuery(torch.zeros(3, 1, dtype=torch.bool), (0,), (3,), (((0, 1),),))
    assert not q.ids_rewritten and offsets(q) == 2 and mask_sum(q) == 0


# --- syncs of whole pipelines ---------------------------------------------------------------
def _evs_fallbacks(wl) -> int:
    """Steps whose chunk path re-lays an EVS video (new input_ids): each costs the offsets
    counter one mask.sum().item(), as in the engine."""
    return sum(chunk_is_active(RequestChunk(e.rid, evs, e.prefix, e.extend))
               for s in wl.steps for e in s.entries
               if (evs := tuple(it for it in wl.requests[e.rid].items if it.frame_tokens)))


def _legacy_events(wl) -> dict[str, int]:
    """What the legacy pipeline must sync on: one mask.sum().item() per step and modality
    with items, one nonzero (torch.where) per such pair with placeholders in the step."""
    items = nonzero = 0
    for step in wl.steps:
        reqs = [(wl.requests[e.rid], e) for e in step.entries]
        for modality in sorted({it.modality for r, _ in reqs for it in r.items}):
            chunks = [(e, [it for it in r.items if it.modality == modality]) for r, e in reqs]
            chunks = [(e, its) for e, its in chunks if its]
            items += 1
            nonzero += count_from_offsets([e.prefix for e, _ in chunks], [e.extend for e, _ in chunks],
                                          [[o for it in its for o in it.offsets] for _, its in chunks]) > 0
    return {"Tensor.item": items, "aten.nonzero": nonzero}


@pytest.mark.parametrize("name", PRESETS)
def test_default_pipeline_never_syncs_legacy_does(runner, name):
    default = runner.record(name, "default", count=True)
    legacy = runner.record(name, "legacy", count=True)
    assert default.error is None and legacy.error is None
    fallbacks = _evs_fallbacks(runner.workload(name))  # 0 except on EVS presets
    assert default.syncs == fallbacks
    assert default.sync_events == ({"Tensor.item": fallbacks} if fallbacks else {})
    assert legacy.syncs >= 2
    assert legacy.sync_events == _legacy_events(runner.workload(name))
    assert legacy.syncs == sum(legacy.sync_events.values())
    # The vision tower is the same in both: its syncs are counted apart and are equal.
    assert default.encoder_syncs == legacy.encoder_syncs


# --- expected counts ------------------------------------------------------------------------
COUNTED = ("syncs", "encoder_syncs", "encoder_calls", "cache_hits", "accuracy")
# (pipeline key, count syncs?): per_request is pinned for its encode counters only.
PINNED = (("default", True), ("legacy", True), ("per_request", False))


def _current_counts(runner) -> dict:
    cases = {}
    for name in PRESETS:
        for key, count in PINNED:
            rec = runner.record(name, key, count=count)
            cases[f"{name}/{key}"] = {k: getattr(rec, k) for k in COUNTED}
    return {
        "_comment": ("Deterministic counters per preset (tiny scale, CPU, seed 0, repeat=1) of "
                     "the pipelines in tests/counted_pipelines.py COUNTED_PIPELINES; syncs are null where "
                     f"not counted. Regenerate: {UPDATE_ENV}=1 pytest tests/test_inject_count.py "
                     "-k expected_counts, then explain the change in the commit message."),
        "pipelines": {k: COUNTED_PIPELINES[k].to_dict() for k, _ in PINNED},
        "cases": cases,
    }


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def test_expected_counts(runner):
    """Fails on ANY difference, better or worse: an improvement must be explained and the
    file updated in the same change (like PyTorch's expected_results.csv)."""
    got = _current_counts(runner)
    text = json.dumps(got, indent=2, sort_keys=True) + "\n"
    if os.environ.get(UPDATE_ENV) == "1":
        _write_atomic(EXPECTED, text)
        pytest.skip(f"wrote {EXPECTED}")
    want = json.loads(EXPECTED.read_text(encoding="utf-8"))
    diffs = _diff(got, want)
    if diffs:
        pytest.fail(
            "counters differ from tests/expected_counts.json (a regression, or an improvement "
            "that must be explained):\n" + "\n".join(diffs)
            + f"\n\nIf the change is intended, replace {EXPECTED} with (or run with {UPDATE_ENV}=1):\n"
            + text, pytrace=False)


def _diff(got: dict, want: dict) -> list[str]:
    """One line per case whose counters differ, naming each counter's old and new value."""
    diffs = []
    gc, wc = got.get("cases", {}), want.get("cases", {})
    for case in sorted(set(gc) | set(wc)):
        g, w = gc.get(case) or {}, wc.get(case) or {}
        if case not in gc or case not in wc:
            diffs.append(f"  {case}: {'missing' if case not in gc else 'new'}")
        elif g != w:
            diffs.append(f"  {case}: " + ", ".join(
                f"{k} {w.get(k)!r} -> {g.get(k)!r}" for k in sorted(set(g) | set(w)) if w.get(k) != g.get(k)))
    if got.get("pipelines") != want.get("pipelines"):
        diffs.append(f"  pipelines: {want.get('pipelines')!r} -> {got.get('pipelines')!r}")
    return diffs


def test_expected_counts_diff_fails_on_any_change():
    want = json.loads(EXPECTED.read_text(encoding="utf-8"))
    assert _diff(want, want) == []
    better = json.loads(json.dumps(want))
    better["cases"]["many_small_images/legacy"]["syncs"] -= 1  # an unexplained improvement
    del better["cases"]["video/default"]
    lines = _diff(better, want)
    assert len(lines) == 2
    old = want["cases"]["many_small_images/legacy"]["syncs"]
    assert f"many_small_images/legacy: syncs {old} -> {old - 1}" in lines[0]
    assert "video/default: missing" in lines[1]


def test_expected_counts_file_is_well_formed():
    want = json.loads(EXPECTED.read_text(encoding="utf-8"))
    assert set(want["cases"]) == {f"{n}/{k}" for n in PRESETS for k, _ in PINNED}
    for case, counters in want["cases"].items():
        assert set(counters) == set(COUNTED), case
        if case.endswith("/default"):
            evs = preset(case.split("/")[0]).model == "evs"  # the EVS fallback syncs
            assert (counters["syncs"] > 0 if evs else counters["syncs"] == 0), case
            assert counters["accuracy"] == 1.0, case
        if case.endswith("/legacy"):
            assert counters["syncs"] >= 2, case
    assert want["pipelines"]["legacy"] == LEGACY_PIPELINE.to_dict()
