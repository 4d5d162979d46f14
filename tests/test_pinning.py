"""``vlmpath measure`` pins CPU threads as ``vlmpath run`` does, records them, and warns
when the machine is loaded beyond its cores (issue 12)."""

from __future__ import annotations

import json

import pytest
import torch

from vlmpath.cli import main
from vlmpath.core.errors import VlmpathError
from vlmpath.measure import pinning

MEASURE = ["measure", "--workload", "video", "--pipeline", "default", "--repeat", "1", "--no-syncs",
           "--device", "cpu"]


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_measure_records_the_pinned_threads_and_restores_torch(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    out = tmp_path / "m.jsonl"
    assert main([*MEASURE, "--json", str(out)]) == 0
    (rec,) = _records(out)
    assert rec["threads"] == 1  # `vlmpath run`'s CPU rule, not torch's all-cores default
    assert main([*MEASURE, "--threads", "2", "--json", str(out)]) == 0
    assert _records(out)[0]["threads"] == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert main([*MEASURE, "--json", str(out)]) == 0
    assert _records(out)[0]["threads"] == 3
    assert torch.get_num_threads() == before
    assert "threads" in capsys.readouterr().out


def test_measure_warns_when_the_load_exceeds_the_cores(tmp_path, monkeypatch, capsys):
    import vlmpath.suite.measure as sm

    monkeypatch.setattr(sm, "load_average", lambda: 99.0)
    assert main([*MEASURE, "--json", str(tmp_path / "m.jsonl")]) == 0
    assert "machine busy while measuring: load average 99.0" in capsys.readouterr().err
    assert _records(tmp_path / "m.jsonl")[0]["load_avg"] == 99.0
    monkeypatch.setattr(sm, "load_average", lambda: 0.0)
    assert main([*MEASURE]) == 0
    assert "machine busy" not in capsys.readouterr().err


def test_thread_rules_and_bad_values():
    assert pinning.cpu_threads(None, "cpu", {}) == 1
    assert pinning.cpu_threads(None, "cpu", {"OMP_NUM_THREADS": "4"}) == 4
    assert pinning.cpu_threads(None, "cuda:0", {}) is None
    assert pinning.cpu_threads(2, "cuda:0", {}) == 2
    with pytest.raises(VlmpathError, match="OMP_NUM_THREADS='x'.*--threads"):
        pinning.cpu_threads(None, "cpu", {"OMP_NUM_THREADS": "x"})
    with pytest.raises(VlmpathError, match="--threads must be at least 1"):
        pinning.cpu_threads(0, "cpu", {})
    assert pinning.load_warning(1.5, cores=2) is None and "load average 3.0 on 2 cores" in pinning.load_warning(3.0, 2)
