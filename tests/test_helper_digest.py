"""Does a benchmark's definition cover the helper modules it measures through?

asv's version hashes a benchmark's own source only; ``core.helper_digest`` digests the suite
modules each benchmark module imports (directly or not), so a changed ``_common.py`` moves
the definition of every benchmark that measures through it, and nothing else does.
"""

from __future__ import annotations

from pathlib import Path

from vlmpath.core.helper_digest import helper_digests, helpers_moved, module_of

COMMON = '"""Builders."""\nfrom . import _compat\n\n\ndef read(x):\n    """Measured."""\n    return x * _compat.SCALE\n'
COMPAT = "SCALE = 1\n"
USES = "from . import _common\n\n\nclass A:\n    def track_x(self):\n        return _common.read(1)\n"
ALONE = "class B:\n    def track_y(self):\n        return 2\n"
ABSOLUTE = "from benchmarks._common import read\n\n\nclass C:\n    def track_z(self):\n        return read(3)\n"


def _suite(root: Path, **files: str) -> Path:
    bench = root / "benchmarks"
    bench.mkdir(parents=True, exist_ok=True)
    texts = {"__init__": "", "_common": COMMON, "_compat": COMPAT, "bench_a": USES, "bench_b": ALONE,
             "bench_c": ABSOLUTE, **files}
    for name, text in texts.items():
        (bench / f"{name}.py").write_text(text)
    return bench


def _moved(tmp_path: Path, **head: str) -> set[str]:
    base = helper_digests(_suite(tmp_path / "base"))
    return helpers_moved(base, helper_digests(_suite(tmp_path / "head", **head)))


def test_a_changed_helper_moves_every_module_that_measures_through_it(tmp_path):
    # The planted hole: the helper now returns a constant; no benchmark's own source changed.
    moved = _moved(tmp_path, _common=COMMON.replace("return x * _compat.SCALE", "return 1.0"))
    assert moved == {"bench_a", "bench_c"}  # relative and absolute imports; bench_b uses no helper


def test_a_helper_of_a_helper_counts(tmp_path):
    assert _moved(tmp_path, _compat="SCALE = 0\n") == {"bench_a", "bench_c", "_common"}


def test_the_package_init_runs_on_every_import_and_counts_for_all(tmp_path):
    moved = _moved(tmp_path, __init__="import os\nos.environ['X'] = '1'\n")
    assert {"bench_a", "bench_b", "bench_c"} <= moved


def test_an_unchanged_suite_and_cosmetic_edits_move_nothing(tmp_path):
    assert _moved(tmp_path) == set()
    cosmetic = COMMON.replace('"""Measured."""', '"""Measured, and now documented."""').replace(
        "def read(x):", "# a comment\n\ndef read(x):")
    assert _moved(tmp_path / "cosmetic", _common=cosmetic) == set()
    # A benchmark module's own edit is asv's version to see, not a helper change of others.
    assert _moved(tmp_path / "own", bench_a=USES.replace("read(1)", "read(2)")) == set()


def test_unknown_digests_move_nothing_and_names_map_to_modules(tmp_path):
    assert helpers_moved(None, {"bench_a": "x"}) == set() == helpers_moved({"bench_a": "x"}, {})
    assert helper_digests(tmp_path / "none") == {}
    assert module_of("bench_embed.EmbedRoutine.track_tok_per_s") == "bench_embed"


def test_the_real_suite_has_a_digest_per_benchmark_module():
    suite = Path(__file__).resolve().parents[1] / "benchmarks"
    digests = helper_digests(suite)
    assert {p.stem for p in suite.glob("bench_*.py")} <= set(digests)
    assert len({digests[m] for m in ("bench_embed", "bench_encode")}) == 1  # both: _common, _compat
