"""Is a regression alert held back: accepted in the repository, or closed by a maintainer?

``vlmpath ci alert`` opens one issue per regressed case. Two decisions of a person stop it:

- **accepted**: ``benchmarks/accepted.yaml`` (``vlmpath.compare.accepted``) lists the change;
  no issue is opened, and an open one is closed with the reason;
- **closed by hand**: a maintainer closed the issue (the alert closes its own only on a
  recovery, and marks those ``recovered`` in the hidden key). While the case still sits
  at the value the issue recorded (``after``), the regression is the same change, so no
  new issue is opened; once the value moves again (worse than ``after`` by the same rules
  as any regression), it is a new change and gets a new issue.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from vlmpath.compare.accepted import Accepted
from vlmpath.compare.records import Metric, backend_from_name
from vlmpath.compare.comparison import FAILING_VERDICTS
from vlmpath.compare.thresholds import Thresholds
from vlmpath.compare.verdict import judge
from vlmpath.core.backends import noise_band


def accepted_reason(f, entries: Sequence[Accepted]) -> str | None:
    """The reason of the first entry that lists this finding's change (None: none does)."""
    c = f.comparison
    backend = backend_from_name(f.machine)
    hit = next((e for e in entries if e.matches(c, backend=backend, head_commit=f.after_commit, pr=None)), None)
    return None if hit is None else hit.reason


def closed_by_hand(issues: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> dict[str, Mapping[str, Any]]:
    """key -> meta of the newest closed issue per case that the alert did not close itself."""
    out: dict[str, Mapping[str, Any]] = {}
    for issue, meta in issues:
        key = meta.get("key")
        if issue.get("state") == "closed" and isinstance(key, str) and key not in out:
            out[key] = meta
    return {k: m for k, m in out.items() if not m.get("recovered")}


def moved_again(f, meta: Mapping[str, Any], cfg: Thresholds) -> bool:
    """Has the value moved on from the one the closed issue recorded (worse beyond the band)?"""
    after, head = meta.get("after"), f.comparison.head
    if isinstance(after, bool) or not isinstance(after, (int, float)) or head is None:
        return True  # nothing recorded to hold against: alert
    c = f.comparison
    was = Metric(f.machine, c.benchmark, c.params, c.unit, float(after))
    now = Metric(f.machine, c.benchmark, c.params, c.unit, float(head))
    return judge(was, now, cfg, noise_band(backend_from_name(f.machine))).verdict in FAILING_VERDICTS
