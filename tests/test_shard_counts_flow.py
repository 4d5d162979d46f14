"""Where do a split PR check's instruction counts run: in exactly one shard, the one that
``runner.shard_costs.counts_shard`` names, through the whole ``ci pr --shard K/N
--instructions`` flow (``pr.flow.run_pr``), and is that shard's verdict the one that holds them?

Three real flows over a small real git repository whose ``benchmarks/`` is a real asv suite
(discovered by asv in a subprocess, as a PR job does); the suite runner and the counter
are fakes (``run_suite``, ``pr.instructions.count_pr``, which writes its artifact file as the
real one does): what is under test is which shard asks for counts, not the counting
(``tests/test_ir_trust.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from asv_fixtures import fingerprint, write_asv_run
from test_ci_flow import git

from vlmpath.pr import flow as ci_flow
from vlmpath.pr import instructions as pr_instructions
from vlmpath.pr.options import PrOptions
from vlmpath.runner.shards import Shard
from vlmpath.selfcheck.ir_cases import OPS_BENCHES, to_json

MACHINE = "cpu-test"
BENCH = "bench_embed.Embed.track_accuracy"
WORKLOADS = ("a", "b", "c", "d", "e", "f", "g")  # 7 units over 3 shards: 3, 2, 2 by count
COUNTED = OPS_BENCHES[("routine", "bytecodes")]
SUITE = f'''
class Embed:
    params = ({list(WORKLOADS)!r},)
    param_names = ("workload",)

    def track_accuracy(self, workload):
        return 1.0
'''


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    (r / "benchmarks").mkdir(parents=True)
    git(r, "init", "-q", "-b", "main")
    (r / "benchmarks" / "__init__.py").write_text("")
    (r / "benchmarks" / "bench_embed.py").write_text(SUITE)
    (r / "src" / "vlmpath").mkdir(parents=True)
    (r / "src" / "vlmpath" / "__init__.py").write_text("")
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "base")
    return r


def _suite(req) -> None:
    """Every case measured at accuracy 1.0 (the flow keeps the shard's own)."""
    write_asv_run(req.results_dir, req.machine, req.commit,
                  {BENCH: ("fraction", ["workload"], [list(WORKLOADS)], [1.0] * len(WORKLOADS), None)},
                  fingerprint("cpu"))


def test_the_counts_run_in_one_shard_only_and_that_shard_judges_them(repo, tmp_path, monkeypatch):
    counted_in = []

    def count_pr(root, base_sha, head_sha, out, *, machine, **kw):
        counted_in.append(out.name)
        rec = {"benchmark": COUNTED, "params": {"pipeline": "default", "preset": "a"}, "instructions": 100}
        (out / pr_instructions.OUT_FILE).write_text(to_json([{"side": s, "records": [rec]} for s in ("base", "head")]))

    monkeypatch.setattr(pr_instructions, "count_pr", count_pr)
    sha = git(repo, "rev-parse", "HEAD")
    runs = {}
    for k in (1, 2, 3):
        res = ci_flow.run_pr(
            PrOptions(sha, sha, out_dir=tmp_path / f"shard{k}", repo=repo, machine=MACHINE, charts=False,
                      results_dir=tmp_path / "store", instructions=True, shard=Shard(k, 3)),
            run_suite=_suite, env={"PATH": os.environ["PATH"]}, profile=False)
        runs[k] = (res, json.loads((tmp_path / f"shard{k}" / "run.json").read_text()))
    # 3, 2, 2 by count: the first of the lightest is shard 2, and only it counted.
    assert counted_in == ["shard2"]
    assert [r["instructions"] for _, r in (runs[1], runs[2], runs[3])] == [False, True, False]
    for k in (1, 3):
        res, info = runs[k]
        assert f"shard {k}/3: instruction counts are in shard 2/3" in info["notes"]
        assert all(c.benchmark != COUNTED for c in res.report.all())
    counted = [c for c in runs[2][0].report.all() if c.benchmark == COUNTED]
    assert len(counted) == 1 and counted[0].base == counted[0].head == 100.0
    # Each shard judged its own cases and only them: together, every workload once.
    owned = sorted(dict(c.params)["workload"] for res, _ in runs.values() for c in res.report.all()
                   if c.benchmark == BENCH)
    assert owned == sorted(WORKLOADS)
