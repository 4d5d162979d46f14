"""Is this user input usable? The one place every command checks it before any work.

Each check raises ``VlmpathError`` with one line that names the input, what is wrong and
how to fix it, so that the CLI prints it and exits 2 before anything is measured or
written: an output path is checked for writability before a half-minute measurement,
not after it. Sizes have stated upper limits (``LIMITS``, quoted in every message) because
a trace is untrusted: a ``{"text": 100000000000}`` segment must not reach the allocator,
and a 100000 x 100000 px image must not run a CPU tower for minutes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vlmpath.core.backends import gpu_labels
from vlmpath.core.errors import VlmpathError


@dataclass(frozen=True)
class Limits:
    """Upper bounds on one workload at one scale (``tiny``: a CPU, ``full``: a GPU)."""

    item_patches: int     # vision patches of one image, video or multi-region item
    trace_patches: int    # vision patches of the whole trace
    request_tokens: int   # prefill tokens of one request
    trace_tokens: int     # prefill tokens of the whole trace


#: tiny: at most a 896 x 896 px image (4096 patches, 1024 tokens) per item, which the
#: 4-block CPU tower encodes in about a second; full: Qwen2.5-VL's own processor maximum
#: (16384 tokens = 65536 patches per image).
LIMITS = {
    "tiny": Limits(item_patches=4096, trace_patches=65_536, request_tokens=32_768, trace_tokens=262_144),
    "full": Limits(item_patches=65_536, trace_patches=1_048_576, request_tokens=262_144,
                   trace_tokens=4_194_304),
}
#: Absolute bounds on any single number in a trace, checked while parsing (before a
#: scale is known), so that no arithmetic on it can grow without bound.
MAX_TRACE_INT = 1_000_000
MAX_TRACE_BYTES = 64 * 1024 * 1024
MAX_TRACE_REQUESTS = 10_000
MAX_REPEAT = 1000
MAX_SEED = 2**32 - 1


def check_int(value: Any, what: str, *, lo: int = 0, hi: int = MAX_TRACE_INT, fix: str = "") -> int:
    """``value`` as an int in ``[lo, hi]``. ``True``/``False`` are refused: JSON's booleans
    are Python ints, and ``{"text": true}`` once reached ``torch.randint`` as a size."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise VlmpathError(f"{what} must be an integer, got {value!r}{'; ' + fix if fix else ''}")
    if not lo <= value <= hi:
        kind = {0: "a non-negative integer", 1: "a positive integer"}.get(lo, f"an integer from {lo}")
        raise VlmpathError(f"{what} must be {kind} at most {hi}, got {value}{'; ' + fix if fix else ''}")
    return value


def check_number(value: Any, what: str) -> float:
    """A finite JSON number (not a boolean, not NaN or Infinity, which ``json`` accepts)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise VlmpathError(f"{what} must be a number (not a boolean, NaN or Infinity), got {value!r}")
    return value


def check_input_file(path: str | os.PathLike[str], what: str, fix: str) -> Path:
    """An existing, readable regular file (a directory is named as one, not as missing)."""
    p = Path(path)
    if p.is_dir():
        raise VlmpathError(f"{what} {str(p)!r} is a directory, not a file; {fix}")
    if not p.exists():
        raise VlmpathError(f"{what} {str(p)!r} does not exist; {fix}")
    if not os.access(p, os.R_OK):
        raise VlmpathError(f"{what} {str(p)!r} is not readable (permissions); {fix}")
    return p


def check_output_file(path: str | os.PathLike[str], flag: str) -> Path:
    """A file path that can be written (created with its missing parents, or replaced),
    checked before any work: the nearest existing ancestor must be a writable directory."""
    p = Path(path)
    fix = f"pass {flag} a file path in a writable directory, e.g. reports/{p.name or 'out'}"
    if str(path) == "" or p.is_dir():
        raise VlmpathError(f"{flag} {str(path)!r} is a directory, not a file; {fix}")
    if p.exists() and not os.access(p, os.W_OK):
        raise VlmpathError(f"{flag} {str(p)!r} is not writable (permissions); {fix}")
    parent = p.parent if str(p.parent) else Path(".")
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise VlmpathError(f"{flag} {str(p)!r}: {str(parent)!r} is a file, not a directory; {fix}")
    if not os.access(parent, os.W_OK | os.X_OK) or not _can_create_in(parent):
        raise VlmpathError(f"{flag} {str(p)!r}: directory {str(parent)!r} is not writable; {fix}")
    return p


def _can_create_in(directory: Path) -> bool:
    """A file can really be created there: ``os.access`` says yes to root on a read-only
    mount or in ``/proc``, and a measurement of minutes then failed at its last write."""
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".vlmpath-probe-"):
            return True
    except OSError:
        return False


def check_device(device: str, *, cuda_available: Callable[[], bool], device_count: Callable[[], int],
                 build: str = "") -> str:
    """``cpu``, ``cuda`` or ``cuda:N`` (ROCm builds also call their GPUs ``cuda``), usable
    on this torch build; ``build`` names the build in the message (e.g. "torch 2.13.0+cpu")."""
    kind, sep, index = str(device).partition(":")
    if kind not in ("cpu", "cuda") or (sep and not index.isdigit()) or (kind == "cpu" and sep):
        raise VlmpathError(f"--device {device!r} is not a device: use cpu, cuda or cuda:N")
    if kind == "cuda":
        if not cuda_available():
            raise VlmpathError(f"--device {device!r}: this torch ({build or 'build'}) sees no "
                               f"{gpu_labels()} GPU; use --device cpu, or install a GPU build of torch")
        n = device_count()
        if sep and int(index) >= n:
            raise VlmpathError(f"--device {device!r}: this machine has {n} GPU(s) (cuda:0 to "
                               f"cuda:{n - 1}); pick one of them")
    return str(device)


def check_output_files(*flag_paths: tuple[str, str | None]) -> None:
    """``check_output_file`` for each ``(flag, path)`` given (None: not asked for)."""
    for flag, path in flag_paths:
        if path:
            check_output_file(path, flag)


def json_lines(text: str, where: str, fix: str) -> list:
    """Every non-blank line of ``text`` parsed as JSON; a line that is not raises naming
    ``where:line`` and ``fix``. The one JSON Lines reader (records of engine runs and of
    untrusted artifacts alike); callers check what each value must be."""
    from vlmpath.core import safe_json

    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():  # bounded: depth and number length (safe_json)
            out.append(safe_json.loads(line, f"{where}:{n}", fix.lstrip("; ")))
    return out
