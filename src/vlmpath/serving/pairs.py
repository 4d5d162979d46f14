"""How are base's and head's servers measured so that a neighbour's load cannot pick a side?

``interleaved({"base": spec, "head": spec}, settings, rounds, out_dir)`` starts both servers (each its own
``launch.LaunchSpec``: model, interpreter, ``PYTHONPATH`` of the side's tree, a planted
fault), keeps both up, and measures them in alternating rounds, the side that goes first
alternating too (base-head, head-base, ...; with more sides the order rotates), writing ``base-<i>.json`` and ``head-<i>.json``
per round (the servers load side by side: all started, then each waited for). Only the last round also serves each request alone (the within-run agreement's reference:
the comparison judges exact rows on the last round). Round i of base and round i of head are a pair: the comparison judges timings on
the pairs (``compare.paired`` through ``compare.from_serve``), never on pooled samples.
``last_round(side, server, settings, doc)`` runs on each side's last round before its file
is written (``serve-pair --engine-client``: vLLM's own client on the same server and requests).
Both servers are stopped on the way out, whatever happened.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from vlmpath.serving.bench import BenchSettings, run_bench
from vlmpath.serving.launch import launched, wait_healthy
from vlmpath.serving.run_file import write_run


@dataclass(frozen=True)
class LaunchSpec:
    kind: str
    model: str
    python: str | None = None
    device: str = "cpu"
    pythonpath: tuple[str, ...] = field(default=())
    plant: str | None = None
    startup_timeout_s: float = 120.0


def start(spec: LaunchSpec, log_dir: str | os.PathLike[str], wait: bool = True):
    """The context manager that runs ``spec``'s server (``wait=False``: not yet up, see ``launched``)."""
    return launched(spec.kind, spec.model, log_dir=log_dir, python=spec.python, device=spec.device,
                    pythonpath=spec.pythonpath, startup_timeout_s=spec.startup_timeout_s, plant=spec.plant,
                    wait=wait)


def interleaved(sides: dict[str, LaunchSpec], settings: BenchSettings, rounds: int,
                out_dir: str | os.PathLike[str],
                progress: Callable[[str], None] = lambda _m: None,
                last_round: Callable[[str, object, BenchSettings, dict], None] | None = None) -> dict[str, list[Path]]:
    """Run the rounds (module doc) over every side (base and head; a test adds a second base
    for an A/A pair in the same window); returns each side's run files, round by round. The
    order of the sides rotates by one each round."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = list(sides)
    paths: dict[str, list[Path]] = {n: [] for n in names}
    with contextlib.ExitStack() as stack:
        # All started first, then each waited for: the servers load side by side.
        servers = {n: stack.enter_context(start(sides[n], out / "logs", wait=False)) for n in names}
        for n in names:
            wait_healthy(servers[n], sides[n].startup_timeout_s, servers[n].started)
        for i in range(rounds):
            k = i % len(names)
            for side in names[k:] + names[:k]:
                progress(f"round {i + 1}/{rounds}: {side}")
                # Each server's first round warms it; the last also serves each request
                # alone (the within-run agreement's reference: exact rows are judged on it).
                doc = run_bench(servers[side], replace(settings, warmup=i == 0, solo=i == rounds - 1), progress)
                if last_round is not None and i == rounds - 1:
                    last_round(side, servers[side], settings, doc)  # e.g. the engine's own client, same server
                path = out / f"{side}-{i}.json"
                write_run(path, doc)
                paths[side].append(path)
    return paths
