"""Which regressions has a maintainer accepted, and why?

``benchmarks/accepted.yaml`` is a file in the repository, reviewed in the pull request like
code. Each entry names a case (its benchmark name, or ``name (k=v, ...)``, literally or
with ``*`` wildcards), where (a ``machine`` name pattern, or a ``backend``), which change
(the head ``commit``, 7+ hex digits, or the ``pr`` number) and a ``reason``::

    schema_version: 1
    accepted:
      - case: bench_embed.EmbedRoutine.track_tok_per_s*
        backend: cpu
        pr: 123
        reason: exact accuracy costs 15% tok/s on CPU (#123)

A regression (or newly failing case) that an entry matches is shown as "accepted: reason"
and does not fail the check; nothing else changes. Patterns are matched without compiling
a regex (``*`` only, ``compare.selection``'s gap matcher): the list can reach the privileged
comment job through an artifact.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vlmpath.compare.comparison import FAILING_VERDICTS, Comparison, ComparisonReport
from vlmpath.compare.selection import _alt_matches
from vlmpath.core.errors import VlmpathError

#: Where the comparison looks for the list (relative to the repository root).
ACCEPTED_FILE = "benchmarks/accepted.yaml"
MAX_ENTRIES, MAX_TEXT = 200, 300
_SHA = re.compile(r"^[0-9a-f]{7,40}$")
_KEYS = {"case", "machine", "backend", "commit", "pr", "reason"}


@dataclass(frozen=True)
class Accepted:
    case: str
    reason: str
    machine: str | None = None
    backend: str | None = None
    commit: str | None = None
    pr: int | None = None

    def matches(self, c: Comparison, *, backend: str | None, head_commit: str, pr: int | None) -> bool:
        # The change: the head commit, and the PR where it is known (a local compare or main's
        # alert knows no PR: there the file in the checkout is what was reviewed).
        if self.commit is not None and not head_commit.lower().startswith(self.commit):
            return False
        if self.pr is not None and pr is not None and self.pr != pr:
            return False
        if self.machine is not None and not glob(self.machine, c.machine):
            return False
        if self.backend is not None and self.backend != backend:
            return False
        label = f"{c.benchmark} ({', '.join(f'{k}={v}' for k, v in c.params)})" if c.params else c.benchmark
        return glob(self.case, c.benchmark) or glob(self.case, label)


def glob(pattern: str, text: str) -> bool:
    """``*`` matches any run of characters; everything else is literal (no regex)."""
    return _alt_matches(True, pattern.split("*"), True, text)


def _text(v: Any, what: str, where: str) -> str:
    if not isinstance(v, str) or not v.strip() or len(v) > MAX_TEXT:
        raise VlmpathError(f"{where}: {what} must be a non-empty string of at most {MAX_TEXT} characters, "
                           f"got {str(v)[:40]!r}")
    return v.strip()


def entries_from(raw: Any, where: str) -> tuple[Accepted, ...]:
    """Validated entries from the parsed YAML (or an artifact's copy of them)."""
    if raw is None:
        return ()
    items = raw.get("accepted") if isinstance(raw, Mapping) else raw
    if isinstance(raw, Mapping) and raw.get("schema_version", 1) != 1:
        raise VlmpathError(f"{where}: schema_version must be 1")
    if not isinstance(items, list) or len(items) > MAX_ENTRIES:
        raise VlmpathError(f"{where}: 'accepted' must be a list of at most {MAX_ENTRIES} entries")
    out = []
    for i, e in enumerate(items):
        here = f"{where}: entry {i}"
        if not isinstance(e, Mapping) or set(e) - _KEYS:
            raise VlmpathError(f"{here}: an entry has the keys {', '.join(sorted(_KEYS))} only")
        commit, pr = e.get("commit"), e.get("pr")
        if commit is None and pr is None:
            raise VlmpathError(f"{here}: name the change: commit (7+ hex digits) or pr (a number)")
        if commit is not None and not (isinstance(commit, str) and _SHA.match(commit.lower())):
            raise VlmpathError(f"{here}: commit must be 7-40 hex digits, got {str(commit)[:40]!r}")
        if pr is not None and (isinstance(pr, bool) or not isinstance(pr, int) or not 0 < pr < 10**10):
            raise VlmpathError(f"{here}: pr must be a pull request number, got {str(pr)[:20]!r}")
        out.append(Accepted(
            case=_text(e.get("case"), "case", here), reason=_text(e.get("reason"), "reason", here),
            machine=None if e.get("machine") is None else _text(e["machine"], "machine", here),
            backend=None if e.get("backend") is None else _text(e["backend"], "backend", here),
            commit=None if commit is None else commit.lower(), pr=pr))
    return tuple(out)


def load(path: str | os.PathLike[str] | None) -> tuple[Accepted, ...]:
    """The entries of an accepted-regressions file; () when there is none."""
    if path is None or not Path(path).exists():
        return ()
    import yaml

    from vlmpath.core.safe_json import read_capped

    text = read_capped(path, "accepted-regressions file", 1 << 20).decode("utf-8", errors="replace")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise VlmpathError(f"{path}: not valid YAML ({str(exc).splitlines()[0]}); fix the file") from None
    return entries_from(raw, str(path))


def to_list(entries: Iterable[Accepted]) -> list[dict[str, Any]]:
    """The entries as plain dicts (for ``run.json``: ``ci merge`` applies the same list)."""
    return [{k: v for k, v in vars(e).items() if v is not None} for e in entries]


def apply(report: ComparisonReport, entries: Sequence[Accepted], *, pr: int | None = None,
          backends: Mapping[str, str] | None = None) -> ComparisonReport:
    """``report`` with every failing row an entry matches marked ``accepted`` (its reason)."""
    if not entries:
        return report
    from vlmpath.core.backends import backend_from_machine

    def mark(c: Comparison) -> Comparison:
        if c.verdict not in FAILING_VERDICTS:
            return c
        backend = (backends or {}).get(c.machine) or backend_from_machine(c.machine)
        hit = next((e for e in entries if e.matches(c, backend=backend, head_commit=report.head_commit, pr=pr)),
                   None)
        return c if hit is None else replace(c, accepted=hit.reason)

    machines = tuple(replace(m, comparisons=tuple(mark(c) for c in m.comparisons)) for m in report.machines)
    return replace(report, machines=machines)
