"""May a stored base result stand in for measuring the base again, and if not, why not?

A PR comparison reuses stored base results only when they are as good as a fresh run:

- **trusted**: the run-info file beside them says a trusted run wrote them. Only
  ``vlmpath run --trusted`` (used by the main/nightly workflow alone, on a results store
  that PR jobs mount read-only) writes ``"trusted": true``; the PR flow stamps every side
  it measures ``"trusted": false`` (``mark_run``), whatever the runner wrote;
- **same options**: ``--quick`` and ``--scale`` equal the PR run's (a quick or tiny base
  against a full head is not a comparison);
- **same toolchain**: both platform fingerprints exist and their toolchain keys agree;
- **covers head**: every case head measured within the selection (benchmark and
  parameter combination; NaN = skipped, so *not* measured) has a base value, measured
  with the same asv benchmark ``version`` (asv's hash of the benchmark's source).

``reuse_problem`` returns the first reason that fails (None = reusable), so the PR
comment can say why the base was measured again.

The run-info file: ``<results>/<machine>/vlmpath-run-<sha8>.json`` with ``quick``,
``scale``, ``bench``, ``trusted``, ``partial`` (why the last run did not finish, or null)
and ``commit``.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vlmpath.compare.asv_results import param_display, read_fingerprint
from vlmpath.core.errors import VlmpathError
from vlmpath.core.scales import DEFAULT_SCALE
from vlmpath.runner.run_files import read_run_info

# DEFAULT_SCALE (core.scales): what `vlmpath run` measures when --scale is not given


def stored_cases(paths: Sequence[Path]) -> dict[tuple[str, tuple[str, ...]], tuple[str | None, bool]]:
    """(benchmark, params) -> (asv benchmark version, measured?) over asv run files.

    Measured: a number or a failure (None); NaN is asv's "skipped / not selected"."""
    out: dict[tuple[str, tuple[str, ...]], tuple[str | None, bool]] = {}
    for p in paths:
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):  # deep JSON too
            continue  # an unreadable file covers nothing
        cols = data.get("result_columns") if isinstance(data, dict) else None
        if not isinstance(cols, list) or not isinstance(data.get("results"), dict):
            continue
        for name, row in data["results"].items():
            rec = dict(zip(cols, row)) if isinstance(row, list) else {}
            params = rec.get("params") or []
            combos = list(itertools.product(*params)) if params else [()]
            values = rec.get("result")
            for j, combo in enumerate(combos):
                v = values[j] if isinstance(values, list) and j < len(values) else None
                measured = not (isinstance(v, float) and math.isnan(v))
                key = (name, tuple(param_display(x) for x in combo))
                out[key] = (rec.get("version"), measured)
    return out


def _selected(bench: str | None, name: str, params: tuple[str, ...]) -> bool:
    if not bench:
        return True
    from vlmpath.compare.selection import asv_selects as selected

    return selected(bench, name, tuple((f"p{i}", v) for i, v in enumerate(params)))


@dataclass(frozen=True)
class Stored:
    """One side's results of one commit: the results directory, the commit, its files there."""

    dir: Path
    sha: str
    files: tuple[Path, ...]


def reuse_problem(base: Stored, head: Stored, machine: str, *, bench: str | None, quick: bool,
                  scale: str | None) -> str | None:
    """Why the stored base results may not be reused (None: they may); see the module docstring."""
    base_dir, base_files, base_sha = base.dir, base.files, base.sha
    head_dir, head_files, head_sha = head.dir, head.files, head.sha
    if not base_files:
        return f"no stored results for {base_sha[:8]} on {machine}"
    info = read_run_info(base_dir, machine, base_sha)
    if info is not None and info.get("partial"):
        return f"the last run of the stored base did not finish ({str(info['partial'])[:80]})"
    if info is None or info.get("trusted") is not True:
        return "stored base results were not written by a trusted (main/nightly) run"
    if bool(info.get("quick")) != bool(quick) or (info.get("scale") or DEFAULT_SCALE) != (scale or DEFAULT_SCALE):
        return (f"stored base results used other options (quick={bool(info.get('quick'))}, "
                f"scale={info.get('scale') or DEFAULT_SCALE}; this run quick={bool(quick)}, "
                f"scale={scale or DEFAULT_SCALE})")
    try:
        fb, fh = read_fingerprint(base_dir / machine, base_sha), read_fingerprint(head_dir / machine, head_sha)
    except VlmpathError as exc:
        return str(exc)
    if fb is None or fh is None:
        return "no platform fingerprint for the stored base or for head"
    diff = fb.toolchain_diff(fh)
    if diff:
        return "toolchain changed since the stored base: " + "; ".join(f"{k} {b} -> {h}" for k, b, h in diff)
    base_cases, head_cases = stored_cases(base_files), stored_cases(head_files)
    wanted = [(k, ver) for k, (ver, measured) in sorted(head_cases.items())
              if measured and _selected(bench, k[0], k[1])]
    if not wanted:
        return "head measured no selected case"
    for (name, params), ver in wanted:
        label = f"{name}({', '.join(params)})" if params else name
        got = base_cases.get((name, params))
        if got is None or not got[1]:
            return f"stored base results did not measure {label}"
        if got[0] != ver:
            return f"benchmark {label} changed since the stored base (asv version {str(got[0])[:8]} -> {str(ver)[:8]})"
    return None
