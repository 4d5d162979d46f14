"""A real asv results directory for the chart and dashboard tests, and how it was recorded.

``tests/fixtures/asv_report_results/`` was written by ``python tests/report_fixture.py``:
the real ``asv run -E existing:<python> --set-commit-hash <sha> --record-samples`` over a
tiny benchmark set (named like the suite's: ``bench_embed.EmbedRoutine.*``,
``bench_encode.EncodeRoutine.*``) that measures real cases with ``vlmpath.suite.measure`` on the
CPU, for three commits of a small git repository. That repository is rebuilt byte for
byte by ``make_repo`` (fixed contents, authors and dates, so the commit shas are the
same every time): ``asv publish`` needs the commits to exist to draw its graphs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "asv_report_results"
MACHINE = "cpu-ci"
_DATES = ("2026-11-01T10:00:00+00:00", "2026-11-08T10:00:00+00:00", "2026-11-15T10:00:00+00:00")

_BENCH = '''
"""Tiny recording set: real measure_case runs on the CPU (see tests/report_fixture.py)."""
# Only the cache builder imports vlmpath (torch): the track processes read plain floats.
PRESETS = ["multi_region", "few_large_images"]
CHOICES = {choices}


def _measure_all():
    import sys
    sys.path.insert(0, {src})  # asv passes no PYTHONPATH to its benchmark processes
    from vlmpath.engines.pipelines import NAMED_PIPELINES, Pipeline
    from vlmpath.suite.measure import Case, Session, measure_case

    session, out = Session("cpu"), {}
    for choice in CHOICES:
        for preset in PRESETS:
            r = measure_case(Case(preset, {pipeline}), session, repeat=3, count=True)
            out[choice, preset] = {"tok_per_s": r.tok_per_s, "accuracy": r.accuracy,
                                   "syncs": r.syncs, "error": r.error}
    return out


def _ok(cache, choice, preset, key):
    r = cache[choice, preset]
    if r["error"] is not None or r["tok_per_s"] is None:
        raise RuntimeError(r["error"] or "case failed")
    return float(r[key])


class {cls}:
    params = (list(CHOICES), PRESETS)
    param_names = ("{pname}", "preset")
    timeout = 600

    def setup_cache(self):
        return _measure_all()

    def track_tok_per_s(self, cache, choice, preset):
        return _ok(cache, choice, preset, "tok_per_s")
    track_tok_per_s.unit = "tok/s"

    def track_accuracy(self, cache, choice, preset):
        return float(cache[choice, preset]["accuracy"])
    track_accuracy.unit = "fraction"

    def track_syncs(self, cache, choice, preset):
        return _ok(cache, choice, preset, "syncs")
    track_syncs.unit = "syncs"
'''


def _fill(**fields: str) -> str:
    text = _BENCH
    for k, v in fields.items():
        text = text.replace("{" + k + "}", v)
    return text


def make_repo(path: Path) -> list[str]:
    """Three commits with fixed contents and dates; returns their shas, oldest first."""
    path.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "fixture", "GIT_AUTHOR_EMAIL": "fixture@example.invalid",
           "GIT_COMMITTER_NAME": "fixture", "GIT_COMMITTER_EMAIL": "fixture@example.invalid",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

    def git(*args: str, date: str | None = None) -> str:
        e = env if date is None else {**env, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        return subprocess.run(["git", *args], cwd=path, env=e, check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "-q", "-b", "main")
    shas = []
    for i, date in enumerate(_DATES):
        (path / "README.md").write_text(f"fixture commit {i}\n")
        git("add", "README.md")
        git("commit", "-q", "-m", f"fixture commit {i}", date=date)
        shas.append(git("rev-parse", "HEAD"))
    return shas


def asv_conf(path: Path, repo: Path, results: Path, html: Path, benchmarks: Path) -> Path:
    conf = {"version": 1, "project": "vlmpath", "repo": str(repo), "branches": ["main"],
            "dvcs": "git", "environment_type": "existing", "pythons": [],
            "benchmark_dir": str(benchmarks), "results_dir": str(results), "html_dir": str(html),
            "env_dir": str(path.parent / "env"), "launch_method": "spawn",
            "build_command": [], "install_command": [], "uninstall_command": []}
    path.write_text(json.dumps(conf, indent=1))
    return path


def record(out: Path = FIXTURE) -> None:  # pragma: no cover - run by hand, output is stored
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        shas = make_repo(t / "repo")
        bench = t / "benchmarks"
        bench.mkdir()
        (bench / "__init__.py").write_text("")
        src = str(HERE.parent / "src")
        (bench / "bench_embed.py").write_text(_fill(
            src=repr(src), cls="EmbedRoutine", choices='("default", "legacy")', pname="pipeline",
            pipeline="NAMED_PIPELINES[choice]"))
        (bench / "bench_encode.py").write_text(_fill(
            src=repr(src), cls="EncodeRoutine", choices='("per_request", "batched", "batched_by_span")',
            pname="strategy",
            pipeline="Pipeline(encode=choice)"))
        conf = asv_conf(t / "asv.conf.json", t / "repo", t / "results", t / "html", bench)
        asv = [sys.executable, "-m", "asv"]
        subprocess.run(asv + ["machine", "--yes", "--machine", MACHINE, "--config", str(conf)],
                       check=True)
        for sha in shas:
            # asv exits 2 when a benchmark failed; batched_by_span is meant to fail.
            subprocess.run(asv + ["run", "--config", str(conf), "-E", f"existing:{sys.executable}",
                                  "--set-commit-hash", sha, "--machine", MACHINE, "--record-samples"],
                           check=False)
            if not list((t / "results" / MACHINE).glob(f"{sha[:8]}-*.json")):
                raise SystemExit(f"asv recorded nothing for {sha}")
            from vlmpath.measure.platform import probe

            fp = probe().to_dict()
            (t / "results" / MACHINE / f"vlmpath-fingerprint-{sha[:8]}.json").write_text(
                json.dumps(fp, indent=1, sort_keys=True))
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(t / "results", out)


if __name__ == "__main__":  # pragma: no cover
    sys.path.insert(0, str(HERE.parent / "src"))
    record()
