"""Does ``run.json`` cross the file boundary through one typed pair, every field checked once?

``pr.artifact.RunManifest`` is what both measurers write and every judge reads; its
``dumps_manifest``/``loads_manifest`` pair is the only code that touches run.json's keys.
An artifact is hostile input: what would change what a number means is refused in one
line; what only informs is cut or left out; the selection is read as literal names
(``compare.selection``), never compiled.
"""

from __future__ import annotations

import json

import pytest

from vlmpath.compare.selection import matches, parse
from vlmpath.core.errors import VlmpathError
from vlmpath.pr.artifact import Kind, Outcome, RunManifest, ShardClaim, dumps_manifest, loads_manifest

BASE, HEAD = "a" * 40, "b" * 40
MINIMAL = {"schema_version": 1, "base_sha": BASE, "head_sha": HEAD, "machine": "cpu-ci"}


def _load(**kw) -> RunManifest:
    return loads_manifest(json.dumps({**MINIMAL, **kw}), "run.json")


def test_a_manifest_crosses_the_file_unchanged_and_a_minimal_one_reads_with_defaults():
    m = RunManifest(machine="cpu-ci", base_sha=BASE, head_sha=HEAD, kind=Kind.ENGINE, base_tip=BASE, bench="Embed.track_acc",
                    quick=True, notes=("one", "two"), interleave=6, shard=ShardClaim(1, 2, ("u",)),
                    serve="/models/tiny", serve_rounds=6, workloads=("w",), engines={"base": ("x",)},
                    outcome=Outcome(1, 0, False, 1, ("chart",)))
    assert loads_manifest(dumps_manifest(m), "run.json") == m
    flat = json.loads(dumps_manifest(m))  # the outcome is flat, as workflows read it
    assert (flat["exit_code"], flat["regressions"], flat["machine"], flat["kind"]) == (1, 1, "cpu-ci", "engine")
    assert _load() == RunManifest(machine="cpu-ci", base_sha=BASE, head_sha=HEAD)


@pytest.mark.parametrize("bad, words", [
    ({"schema_version": 2}, "not a vlmpath ci run record"),
    ({"base_sha": "A" * 40}, "base_sha is not a 40-digit"),
    ({"head_sha": None}, "head_sha is not a 40-digit"),
    ({"machine": "../etc"}, "machine name"),
    ({"interleave": 1}, "interleave '1' is not a round count of 2 to 50"),
    ({"interleave": "6"}, "is not a round count"),
    ({"interleave": True}, "is not a round count"),
    ({"shard": {"k": 3, "n": 2, "units": []}}, "shard entry is not"),
    ({"shard": "1/2"}, "shard entry is not"),
])
def test_what_would_change_a_verdict_is_refused_in_one_line(bad, words):
    with pytest.raises(VlmpathError, match=words):
        _load(**bad)


def test_what_only_informs_is_cut_or_left_out_and_a_serve_claim_is_kept_as_claimed():
    m = _load(notes="not a list", base_ref=7, scale=["x"], workloads=[1, "w"], quick="yes",
              serve=True, serve_rounds="six", bench=["Embed"])
    assert m.notes == () and m.base_ref is None and m.scale is None and m.workloads == ("w",)
    assert m.quick is False  # only a real true makes a run quick
    assert (m.serve, m.serve_rounds) == ("True", -1)  # claimed, unreadable: the serve source names it
    assert _load(serve=None, serve_rounds=6).serve_rounds is None
    assert _load(notes=["x" * 5000]).notes == ("x" * 500,)
    assert m.bench == "['Embed']" and parse(m.bench) is None  # never applied: a note says so


def test_the_selection_reads_asv_spellings_as_literal_names_and_refuses_the_rest():
    name, params = "bench_embed.EmbedRoutine.track_accuracy", (("pipeline", "default"), ("preset", "video"))
    spelled = parse(r"track_accuracy\('default', 'video'\)")
    assert spelled is not None and matches(spelled, name, params)
    assert not matches(spelled, name, (("pipeline", "legacy"), ("preset", "video")))
    assert matches(parse(r"^bench_embed\.EmbedRoutine\..*video"), name, params)
    assert not matches(parse(r"^bench_embed\.EmbedRoutine\..*video"), "xbench_embed.EmbedRoutine.a", params)
    assert matches(parse(r"x\$"), "ax$", ()) and not matches(parse(r"x\$"), "ax", ())  # an escaped anchor is a letter
    groups = parse(r"bench_embed\.EmbedRoutine\.track_(accuracy|tok_per_s)\('default', 'video'\)")
    assert matches(groups, name, params) and not matches(groups, name.replace("accuracy", "syncs"), params)
    shard = parse(r"^(?:m\.C\.t\(1\)|m\.C\.u)$")  # runner.shards.selection_regex's spelling
    assert matches(shard, "m.C.t", (("p", "1"),)) and matches(shard, "m.C.u", ()) and not matches(shard, "m.C.v", ())
    for regex in (r"a\d", r"(a|b)+", "(?=a)b", "a+", "[ab]", "a" * 501, "a\\", "(a", "a)", "(a|b|c|d)" * 5):
        assert parse(regex) is None, regex
