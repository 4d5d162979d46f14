"""Which CPU thread settings does a measurement run under, and is the machine busy?

``vlmpath run`` pins ``OMP_NUM_THREADS=1`` on CPU runners (``vlmpath.runner.launch``: with two
cores and short kernels a second OpenMP thread costs more than it gives). ``vlmpath
measure`` used torch's default (all cores), so the same case measured 1.7x apart between
the two commands, and a neighbour's load cut it ~60x with no warning (issue 12). This
module gives both the same setting and says when the machine is loaded:

- ``cpu_threads``: ``--threads`` if given, else ``OMP_NUM_THREADS``, else 1 on a CPU
  device (``vlmpath run``'s rule); on a GPU device torch's own default stays (None);
- ``pinned``: sets torch's intra-op threads for a block and restores them after;
- ``load_warning``: a line when the 1-minute load average exceeds the cores.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import torch

from vlmpath.core.errors import VlmpathError

THREADS_ENV = "OMP_NUM_THREADS"


def cpu_threads(requested: int | None, device: str, env: Mapping[str, str] | None = None) -> int | None:
    env = os.environ if env is None else env
    if requested is not None:
        if requested < 1:
            raise VlmpathError(f"--threads must be at least 1, got {requested}")
        return requested
    if not str(device).startswith("cpu"):
        return None
    raw = env.get(THREADS_ENV, "").strip()
    if not raw:
        return 1
    try:
        n = int(raw)
    except ValueError:
        raise VlmpathError(f"{THREADS_ENV}={raw!r} is not a number of threads: set it to an integer "
                           "or pass --threads N") from None
    if n < 1:
        raise VlmpathError(f"{THREADS_ENV}={raw!r} must be at least 1 (or pass --threads N)")
    return n


@contextmanager
def pinned(threads: int | None) -> Iterator[int]:
    """torch's intra-op threads set to ``threads`` (unchanged when None) inside the block;
    yields the count in effect."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # not on every platform
        return None


def load_warning(load: float | None, cores: int | None = None) -> str | None:
    """A warning when the load average exceeds the cores: timings are then shared."""
    cores = cores or os.cpu_count() or 1
    if load is None or load <= cores:
        return None
    return (f"machine busy while measuring: load average {load:.1f} on {cores} cores; "
            "timings include other processes' work (compare only runs measured alike)")
