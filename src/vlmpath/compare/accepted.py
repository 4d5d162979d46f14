"""Which regressions has a maintainer accepted, and why?

``benchmarks/accepted.yaml`` is a file in the repository, reviewed like code. Each entry
names one benchmark in full (no wildcard in its name) and with it the metric it accepts
(the method's row in the metric table; an optional ``metric:`` must agree, and a reason
whose metric words name another metric is refused), optionally its parameters as a
pattern (``name (k=v, k2=*)``), where (a ``machine`` name pattern, or a ``backend``),
which change (the head ``commit``, the full 40-hex sha, or the ``pr`` number) and a
``reason``::

    schema_version: 1
    accepted:
      - case: bench_embed.EmbedRoutine.track_tok_per_s (pipeline=default, preset=*)
        backend: cpu
        pr: 123
        reason: exact accuracy costs 15% tok/s on CPU (#123)

An entry is bounded to its change: a ``commit`` entry matches that commit only, a ``pr``
entry only where the pull request is known and is that one (never a local ``compare``,
main's ``ci alert``, or another PR's flow).

Who granted it (docs/acceptance.md): where the comparison is of a pull request, the
PR's file is its own proposal. An entry that is also on the base branch (the same entry,
in the base revision's file) accepts; one the PR adds for itself only shows as "accepted by
this PR's own change, awaiting review" and keeps failing, unless a maintainer applied the
acceptance label (read through the API in the privileged job: ``vlmpath.github.label_grant``).
Where no base is given (``vlmpath compare`` of a checkout, ``ci alert`` on main) the file
read is the reviewed one and every entry counts. Patterns are matched without compiling a
regex (``*`` only, ``compare.selection``'s gap matcher): the list reaches the privileged
comment job.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vlmpath.compare.comparison import FAILING_VERDICTS, Comparison, ComparisonReport
from vlmpath.compare.selection import alt_matches
from vlmpath.core.errors import VlmpathError

#: Where the comparison looks for the list (relative to the repository root).
ACCEPTED_FILE = "benchmarks/accepted.yaml"
MAX_ENTRIES, MAX_TEXT, MAX_BYTES = 200, 300, 1 << 20
_SHA = re.compile(r"^[0-9a-f]{40}$")
_KEYS = {"case", "machine", "backend", "commit", "pr", "reason", "metric"}
#: A benchmark name as asv spells one: ASCII letters, digits, ``_`` and dots (no wildcard,
#: no look-alike letters: the entry names exactly one benchmark).
_BENCH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
# The words a reason uses for a metric, and the units they mean: a reason that speaks of
# one metric while the entry accepts another ("tok/s noise" on an accuracy row) is refused.
_METRIC_WORDS: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = tuple(
    (re.compile(rf"(?<![a-z0-9_]){w}(?![a-z0-9_])"), frozenset(units)) for w, units in (
        (r"tok/s|tokens?/s|tokens per second|tok_per_s|throughput|req/s|requests per second",
         ("tok/s", "req/s", "GB/s")),
        (r"accuracy|agreement|score|correctness", ("fraction",)),
        (r"syncs?|synchroni[sz]ations?", ("syncs",)),
        (r"encoder calls|calls", ("calls",)),
        (r"latency|timings?|seconds|ms|slower|ttft|itl|wall-clock", ("seconds",)),
        (r"memory|bytes|peakmem|vram|reserved", ("bytes",)),
        (r"instructions|bytecodes|elements", ("instructions", "bytecodes", "elements")),
        (r"bandwidth", ("GB/s", "ratio")),
    ))
#: What a row an entry only the PR itself added says (it still fails).
AWAITING = "accepted by this PR's own change, awaiting review"


@dataclass(frozen=True)
class Accepted:
    case: str
    reason: str
    machine: str | None = None
    backend: str | None = None
    commit: str | None = None
    pr: int | None = None
    metric: str | None = None

    @property
    def benchmark(self) -> str:
        """The one benchmark the entry names (``case`` without its parameter pattern)."""
        return self.case.split(" (", 1)[0]

    def matches(self, c: Comparison, *, backend: str | None, head_commit: str, pr: int | None) -> bool:
        # Bounded to its change: the head commit (all 40 hex digits: a prefix is what a
        # later commit can be ground to), or the PR, and only where that PR is known (a
        # local compare or main's alert knows none: a PR's entry never mutes them).
        if self.commit is not None and head_commit.lower() != self.commit:
            return False
        if c.benchmark != self.benchmark:  # one benchmark, exactly: its parameters may be a pattern
            return False
        if self.pr is not None and self.pr != pr:
            return False
        if self.machine is not None and not glob(self.machine, c.machine):
            return False
        if self.backend is not None and self.backend != backend:
            return False
        label = f"{c.benchmark} ({', '.join(f'{k}={v}' for k, v in c.params)})" if c.params else c.benchmark
        return glob(self.case, c.benchmark) or glob(self.case, label)


def glob(pattern: str, text: str) -> bool:
    """``*`` matches any run of characters; everything else is literal (no regex)."""
    return alt_matches(True, pattern.split("*"), True, text)


def _text(v: Any, what: str, where: str) -> str:
    if not isinstance(v, str) or not v.strip() or len(v) > MAX_TEXT:
        raise VlmpathError(f"{where}: {what} must be a non-empty string of at most {MAX_TEXT} characters, "
                           f"got {str(v)[:40]!r}")
    return v.strip()


def _case(v: Any, where: str) -> str:
    """One benchmark, named in full (no wildcard in its name: ``b*`` would be every
    ``bench_`` benchmark), then optionally its parameters as a pattern: ``name (k=*, ...)``."""
    if isinstance(v, str) and not v.strip(" ").isprintable():  # a newline or an invisible character inside
        raise VlmpathError(f"{where}: case {v.strip()[:60]!r} must name one benchmark in full, in visible characters")
    case = _text(v, "case", where)
    bench, sep, params = case.partition(" (")
    if not _BENCH.match(bench) or (sep and not params.endswith(")")):
        raise VlmpathError(f"{where}: case {case[:60]!r} must name one benchmark in full, with no wildcard in its "
                           "name (parameters may be a pattern), e.g. "
                           "'bench_embed.EmbedRoutine.track_tok_per_s (pipeline=default, preset=*)'")
    return case


def _metric(case: str, claimed: Any, reason: str, where: str) -> str:
    """The metric the entry accepts: its benchmark's, by the method name (core.metrics);
    a ``metric:`` key must agree, and so must the metric words of the reason."""
    from vlmpath.core.metrics import metric_for_method

    bench = case.split(" (", 1)[0]
    spec = metric_for_method(bench)
    if spec is None:
        raise VlmpathError(f"{where}: {bench[:60]!r} has no row in the metric table (core/metrics.py); "
                           "name a benchmark method that has one")
    if claimed is not None and claimed != spec.name:
        raise VlmpathError(f"{where}: metric {str(claimed)[:30]!r} is not the metric of {bench[:60]!r} "
                           f"({spec.name}); name the benchmark of the metric you accept")
    said = set()
    for pattern, units in _METRIC_WORDS:
        if pattern.search(reason.lower()):
            said |= units
    if said and spec.unit not in said:
        raise VlmpathError(f"{where}: the reason speaks of {'/'.join(sorted(said))} but the entry accepts "
                           f"{spec.name} ({spec.unit}); an entry accepts the metric its reason names")
    return spec.name


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
            raise VlmpathError(f"{here}: name the change: commit (the full 40-hex sha) or pr (a number)")
        if commit is not None and not (isinstance(commit, str) and _SHA.match(commit.lower())):
            raise VlmpathError(f"{here}: commit must be the full 40-hex sha, got {str(commit)[:40]!r}")
        if pr is not None and (isinstance(pr, bool) or not isinstance(pr, int) or not 0 < pr < 10**10):
            raise VlmpathError(f"{here}: pr must be a pull request number, got {str(pr)[:20]!r}")
        reason = _text(e.get("reason"), "reason", here)
        case = _case(e.get("case"), here)
        out.append(Accepted(
            case=case, reason=reason, metric=_metric(case, e.get("metric"), reason, here),
            machine=None if e.get("machine") is None else _text(e["machine"], "machine", here),
            backend=None if e.get("backend") is None else _text(e["backend"], "backend", here),
            commit=None if commit is None else commit.lower(), pr=pr))
    return tuple(out)


def parse_yaml(text: str, where: str) -> Any:
    """The one place the list's YAML is parsed: core's bounded loader (no aliases, anchors,
    tags or merge keys; a PR writes this file)."""
    from vlmpath.core import safe_yaml

    return safe_yaml.loads(text, where)


def loads(data: bytes, where: str) -> tuple[Accepted, ...]:
    """The entries of an accepted-regressions file's bytes."""
    if len(data) > MAX_BYTES:
        raise VlmpathError(f"{where}: larger than {MAX_BYTES} bytes; shorten the list")
    return entries_from(parse_yaml(data.decode("utf-8", errors="replace"), where), where)


def load(path: str | os.PathLike[str] | None) -> tuple[Accepted, ...]:
    """The entries of an accepted-regressions file; () when there is none."""
    if path is None or not Path(path).exists():
        return ()
    from vlmpath.core.safe_json import read_capped

    return loads(read_capped(path, "accepted-regressions file", MAX_BYTES), str(path))


def load_at(repo: str | os.PathLike[str], sha: str) -> tuple[Accepted, ...]:
    """The entries of ``benchmarks/accepted.yaml`` as committed at ``sha`` (``git show``);
    () when that revision has none: the base branch's list, whatever the checkout holds."""
    from vlmpath.core.git import file_at

    data = file_at(repo, sha, ACCEPTED_FILE, limit=MAX_BYTES)
    return () if data is None else loads(data, f"{ACCEPTED_FILE} at {sha[:12]}")


def apply(report: ComparisonReport, entries: Sequence[Accepted], *, pr: int | None = None,
          backends: Mapping[str, str] | None = None, base: Sequence[Accepted] | None = None,
          grant: str | None = None) -> ComparisonReport:
    """``report`` with every failing row an entry matches marked ``accepted`` (its reason).

    ``base``: the base branch's entries, given where ``entries`` are a pull request's own
    file. Those accept, whether or not the PR's branch has them (one landed on base after
    the PR branched counts). An entry of ``entries`` absent from ``base`` is the PR's own
    grant: its rows are marked ``awaiting_review`` and keep failing, unless ``grant`` (who
    accepted them: a maintainer's label, read in the privileged job) is given.
    ``base=None``: every entry counts (the file of a reviewed checkout)."""
    trusted = set(base) if base is not None else None
    entries = [*entries, *(e for e in base or () if e not in entries)]
    if not entries:
        return report
    from vlmpath.core.backends import backend_from_machine

    awaiting: list[Comparison] = []

    def mark(c: Comparison) -> Comparison:
        if c.verdict not in FAILING_VERDICTS:
            return c
        backend = (backends or {}).get(c.machine) or backend_from_machine(c.machine)
        hits = [e for e in entries if e.matches(c, backend=backend, head_commit=report.head_commit, pr=pr)]
        if not hits:
            return c
        on_base = next((e for e in hits if trusted is None or e in trusted), None)
        if on_base is not None:
            return replace(c, accepted=on_base.reason)
        if grant is not None:
            return replace(c, accepted=f"{hits[0].reason} ({grant})")
        awaiting.append(c)
        return replace(c, awaiting_review=hits[0].reason)

    machines = tuple(replace(m, comparisons=tuple(mark(c) for c in m.comparisons)) for m in report.machines)
    notes = report.notes
    if awaiting:
        notes += (f"{len(awaiting)} regression(s) {AWAITING}: the entries are in this PR's "
                  f"{ACCEPTED_FILE} but not on the base branch, so they still fail; a maintainer accepts them "
                  "with the acceptance label (docs/acceptance.md), or the entries land on the base branch first",)
    return replace(report, machines=machines, notes=notes)
