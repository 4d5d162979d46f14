"""One discovery per side of a PR check: the cache (``runner.discovery_cache``) and asv's
discovery answered from the run's listing (``runner.asv_main``).

The suite here is a two-file asv suite in a temp dir (no torch: each discovery is a
fraction of a second); the real suite through ``vlmpath run`` is in the e2e tests.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from vlmpath.runner import discovery
from vlmpath.runner.discovery_cache import DISCOVERY_CACHE_ENV

SUITE = '''
class Case:
    params = ([1, 2], ["a", "b"])
    param_names = ("n", "s")

    def track_x(self, n, s):
        return n
'''


def _suite(tmp: Path, body: str = SUITE) -> Path:
    bdir = tmp / "suite" / "benchmarks"
    bdir.mkdir(parents=True, exist_ok=True)
    (bdir / "__init__.py").write_text("")
    (bdir / "bench_x.py").write_text(body)
    return bdir


def _counting(monkeypatch) -> list:
    calls = []
    real = subprocess.run

    def run(cmd, *a, **kw):
        calls.append(cmd)
        return real(cmd, *a, **kw)

    monkeypatch.setattr(discovery.subprocess, "run", run)
    return calls


def test_a_side_is_discovered_once_and_a_changed_file_or_option_is_discovered_again(tmp_path, monkeypatch):
    bdir = _suite(tmp_path)
    env = {"PATH": "/usr/bin:/bin", DISCOVERY_CACHE_ENV: str(tmp_path / "cache"), "VLMPATH_SCALE": "tiny"}
    calls = _counting(monkeypatch)
    first = discovery.discover(bdir, sys.executable, env)
    assert [(b.name, b.params) for b in first] == [("bench_x.Case.track_x", (("1", "2"), ("'a'", "'b'")))]
    assert discovery.discover(bdir, sys.executable, {**env, "TMPDIR": str(tmp_path)}) == first
    assert len(calls) == 1  # the second (another TMPDIR only) came from the cache
    discovery.discover(bdir, sys.executable, {**env, "VLMPATH_SCALE": "full"})
    assert len(calls) == 2  # another option: discovered again
    # Another length, not only other bytes: Python trusts a ``.pyc`` whose source has the same
    # size and the same mtime second, so a same-size rewrite within one second would be run
    # from the stale bytecode by any importer (asv's too), a CI flake, not the cache's doing.
    (bdir / "bench_x.py").write_text(SUITE.replace("track_x", "track_changed"))
    assert [b.name for b in discovery.discover(bdir, sys.executable, env)] == ["bench_x.Case.track_changed"]
    assert len(calls) == 3  # a changed benchmark file: never the stale listing


def test_without_a_cache_directory_every_discovery_runs(tmp_path, monkeypatch):
    bdir = _suite(tmp_path)
    calls = _counting(monkeypatch)
    env = {"PATH": "/usr/bin:/bin"}
    assert discovery.discover(bdir, sys.executable, env) == discovery.discover(bdir, sys.executable, env)
    assert len(calls) == 2 and not (tmp_path / "cache").exists()


def test_asv_run_gets_the_listing_instead_of_discovering(tmp_path, monkeypatch):
    from asv.benchmarks import Benchmarks

    from vlmpath.runner import asv_main

    bdir = _suite(tmp_path)
    listing = discovery.discover_listing(bdir, sys.executable, {"PATH": "/usr/bin:/bin"})
    monkeypatch.setattr(Benchmarks, "_disc_benchmarks", Benchmarks._disc_benchmarks)  # restored after
    asv_main._answer_discovery(listing)
    created = []
    env = SimpleNamespace(create=lambda: created.append(True))
    conf = SimpleNamespace(benchmark_dir=str(bdir))
    assert Benchmarks._disc_benchmarks(conf, None, [env], ["abc"], False) == listing
    assert created == [True]  # asv's environment set-up still runs
    with pytest.raises(Exception, match="No available environments"):
        Benchmarks._disc_benchmarks(conf, None, [], ["abc"], False)


def test_a_cache_file_out_of_bounds_is_a_miss_not_a_crash(tmp_path, monkeypatch):
    """The listing's names come from a PR's benchmark code: its cache file is read within
    the bounds (``core.safe_json``); a file past them is discovered again."""
    from vlmpath.runner import discovery_cache

    bdir = _suite(tmp_path)
    env = {"PATH": "/usr/bin:/bin", DISCOVERY_CACHE_ENV: str(tmp_path / "cache")}
    calls = _counting(monkeypatch)
    first = discovery.discover(bdir, sys.executable, env)
    (kept,) = (tmp_path / "cache").glob("discovered-*.json")
    kept.write_text("[" * 100_000 + "]" * 100_000)  # nested past the depth bound
    assert discovery_cache.load(kept) is None
    assert discovery.discover(bdir, sys.executable, env) == first and len(calls) == 2
