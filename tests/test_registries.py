"""Are the strategy and preset registries one torch-free table each, whose entries load their
implementation only when looked up?

``paths.registry`` (the four stage registries) and ``measure.presets`` (the presets) are the
one source of names: the CLI checks a name against them before torch loads, the help text
and the asv axes read them, and a lookup imports the stage's module. Shown by behaviour:
a fresh interpreter reads every name and refuses misspelt ones without importing torch,
then one lookup imports it; a registry entry naming a module that does not exist is listed
and checked by name, and fails only when looked up.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vlmpath.core.errors import UnknownNameError, VlmpathError
from vlmpath.core.registry import Lazy, Registry
from vlmpath.paths import registry

ROOT = Path(__file__).resolve().parents[1]

_FRESH = r'''
import json, sys
from vlmpath.core.errors import VlmpathError
from vlmpath.measure.presets import PATH_PRESETS, PRESETS
from vlmpath.paths.registry import STAGES
from vlmpath.suite.inputs import check_choices, names_for_help
got = {"names": {f: sorted(r) for f, r in STAGES.items()}, "defaults": {f: r.default_names() for f, r in STAGES.items()},
       "presets": list(PRESETS), "path_presets": list(PATH_PRESETS), "encoders": sorted({e.encoder for e in PRESETS.values()}),
       "help": names_for_help(), "errors": []}
check_choices({"encode": ["batched"], "hash": ["xxh3"]}, ["video", "trace:t.jsonl"])
for stages, workloads in (({"encode": ["batchd"]}, None), ({"hash": ["forwardd"]}, None), ({}, ["vidoe"])):
    try:
        check_choices(stages, workloads)
    except VlmpathError as exc:
        got["errors"].append(str(exc))
from vlmpath.cli import main
got["rc"] = main(["measure", "--count", "offset", "--workload", "video"])
got["torch_before_lookup"] = "torch" in sys.modules
STAGES["encode"]["batched"]
got["torch_after_lookup"] = "torch" in sys.modules
print(json.dumps(got))
'''


def test_the_registries_and_the_choice_check_import_no_torch_and_a_lookup_does():
    proc = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["torch_before_lookup"] is False and got["torch_after_lookup"] is True
    assert got["names"]["encode"] == ["batched", "batched_by_span", "per_request"]
    assert got["defaults"]["encode"] == ["batched", "per_request"]  # known-bad replay left out
    assert got["names"]["hash"] == ["blake3", "forwarded", "rehash", "xxh3"]
    assert got["presets"][:3] == ["many_small_images", "few_large_images", "video"] and len(got["presets"]) == 15
    assert set(got["path_presets"]) < set(got["presets"]) and got["encoders"] == ["evs", "multi_region", "qwen2_5_vl"]
    assert "  --encode: batched, batched_by_span, per_request" in got["help"]
    bad_encode, bad_hash, bad_preset = got["errors"]
    assert bad_encode.startswith("unknown encode strategy 'batchd' (did you mean 'batched'?)")
    assert bad_hash.startswith("unknown hash path 'forwardd' (did you mean 'forwarded'?)")
    assert bad_preset.startswith("unknown workload preset 'vidoe' (did you mean 'video'?)")
    assert "trace:FILE.jsonl" in bad_preset
    # The CLI: exit 2, one line, from the same registry.
    err = proc.stderr.strip().splitlines()
    assert got["rc"] == 2 and len(err) == 1 and "unknown count strategy 'offset'" in err[0], proc.stderr


def test_the_stage_modules_hold_the_one_registry_not_a_copy():
    from vlmpath.paths import count, encode, hashing, inject

    assert encode.ENCODE_STRATEGIES is registry.ENCODE_STRATEGIES
    assert inject.INJECTORS is registry.INJECTORS
    assert count.COUNTERS is registry.COUNTERS
    assert hashing.HASH_PATHS is registry.HASH_PATHS
    assert dict(registry.STAGES) == {"encode": encode.ENCODE_STRATEGIES, "inject": inject.INJECTORS,
                                     "count": count.COUNTERS, "hash": hashing.HASH_PATHS}


def test_every_entry_loads_the_implementation_it_names():
    from vlmpath.paths import count, encode, hashing, inject

    assert registry.ENCODE_STRATEGIES["batched"] is encode.batched
    assert registry.INJECTORS["cumsum_index_copy"] is inject.cumsum_index_copy
    assert registry.COUNTERS["offsets"] is count.offsets
    for stage, reg in registry.STAGES.items():
        for name in reg:
            impl = reg[name]
            if stage == "hash":
                assert isinstance(impl, hashing.HashPath) and impl.name == name  # its messages say its name
            else:
                assert callable(impl) and impl.__name__ == name, (stage, name)


def test_an_entry_is_imported_only_when_looked_up():
    # Planted: an entry naming a module that does not exist. Names, membership and the
    # default suite are read without importing it; the lookup is where it fails.
    reg = Registry("toy strategy", {"fine": Lazy("vlmpath.paths.count:offsets"),
                                    "ghost": Lazy("vlmpath_no_such_module:ghost")}, known_bad=frozenset({"fine"}))
    assert "ghost" in reg and "nope" not in reg and sorted(reg) == ["fine", "ghost"] and len(reg) == 2
    assert reg.default_names() == ["ghost"]
    with pytest.raises(ModuleNotFoundError, match="vlmpath_no_such_module"):
        reg["ghost"]
    with pytest.raises(UnknownNameError, match="unknown toy strategy 'ghots' \\(did you mean 'ghost'"):
        reg["ghots"]


def test_a_misnamed_entry_is_refused_in_one_line():
    with pytest.raises(VlmpathError, match="defines no 'batchd'; fix the entry's 'module:attribute'"):
        Lazy("vlmpath.paths.encode:batchd").load()
    for bad in ("vlmpath.paths.encode", "vlmpath.paths.encode:", ":batched", "m:not-an-attr"):
        with pytest.raises(VlmpathError, match="name an implementation as 'module:attribute'"):
            Lazy(bad)
