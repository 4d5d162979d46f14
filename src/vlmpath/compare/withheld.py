"""Did an artifact's case selection cut cases that base judged, and what then withholds green?

An artifact's ``run.json`` carries the ``--bench`` selection its run used; ``ci merge`` cuts
each machine's rows to it (``compare.selection.keep_selected``). The pull request writes
that file, so a selection could cut exactly the regressed rows. The selection that counts
is the trusted workflow's input (``trusted``, handed to ``ci merge`` as
``VLMPATH_TRUSTED_BENCH``): a case base judged (a usable base value) that the trusted
selection keeps and the artifact's selection cuts makes the verdict *incomplete* (exit 3),
never green, and the report says how many and which (``ComparisonReport.withheld``).
Without a trusted selection, a cut case counts when head measured it (a base reused from
the trusted store holds every case, so a case head never ran is not evidence).

Entry points: ``selection_withheld(report, selections, trusted)`` -> the reasons (pure;
call it on the report *before* the artifact's selection is applied), and ``withhold(report,
reasons)`` -> the report that carries them. Call both from the merge (``pr.merge``, the
lead's ``judge()``), just before ``keep_selected``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from vlmpath.compare.comparison import ComparisonReport, Verdict
from vlmpath.compare.selection import matches, parse
from vlmpath.compare.vanished import VANISHED

#: Most case names one reason lists.
SHOWN = 3


def selection_withheld(report: ComparisonReport, selections: Mapping[str, object],
                       trusted: str | None = None) -> tuple[str, ...]:
    """One reason per machine whose artifact selection leaves out cases base judged that
    ``trusted`` (the workflow's own selection; None: every case) keeps. A selection that is
    not a plain list of names is read as cutting nothing here (``keep_selected`` does not
    apply it either)."""
    trusted_parsed = parse(trusted) if trusted else None
    out = []
    for m in report.machines:
        pattern = selections.get(m.machine)
        if not pattern:
            continue
        parsed = parse(pattern)  # type: ignore[arg-type]
        if parsed is None:
            continue
        cut = [c for c in m.comparisons
               if c.base is not None and c.verdict is not Verdict.NEW
               and not matches(parsed, c.benchmark, c.params)
               and (matches(trusted_parsed, c.benchmark, c.params) if trusted_parsed is not None
                    # No trusted selection given: a base reused from the trusted store holds
                    # every case, so only the cases head measured and the artifact cut count.
                    else not c.reason.startswith(VANISHED))]
        if cut:
            names = ", ".join(sorted({c.benchmark for c in cut})[:SHOWN])
            more = " ..." if len({c.benchmark for c in cut}) > SHOWN else ""
            out.append(f"{m.machine}: the artifact's selection leaves out {len(cut)} case(s) base judged "
                       f"({names}{more}); the trusted workflow selects them: not judged, never green")
    return tuple(out)


def withhold(report: ComparisonReport, reasons: tuple[str, ...]) -> ComparisonReport:
    """``report`` that is never green while ``reasons`` stand (said in its notes too)."""
    if not reasons:
        return report
    return replace(report, withheld=tuple(dict.fromkeys(report.withheld + reasons)),
                   notes=tuple(dict.fromkeys(report.notes + reasons)))


#: The environment variable through which the privileged job hands ``ci merge`` its own
#: workflow's selection (a repository variable, never the artifact's ``run.json``).
TRUSTED_BENCH_ENV = "VLMPATH_TRUSTED_BENCH"


def trusted_selection(environ: Mapping[str, str]) -> str | None:
    """The trusted workflow's selection (``TRUSTED_BENCH_ENV``), None for every case."""
    return environ.get(TRUSTED_BENCH_ENV) or None


#: Set to ``1`` by the privileged job that also runs ``ci label-grant``: without its
#: ``grant.json`` (the step failed: API down, rate limit) nobody read which files the PR
#: changed, so whether the yardstick moved is unknown and the verdict is never green (the
#: check fails closed, never open).
YARDSTICK_REQUIRED_ENV = "VLMPATH_YARDSTICK_REQUIRED"
#: The reason shown when the required read is missing.
YARDSTICK_UNREAD = ("the PR's changed files were not read (vlmpath ci label-grant wrote no grant.json): "
                    "whether the yardstick moved is unknown; re-run the comment job: never green")


def yardstick_required(environ: Mapping[str, str]) -> bool:
    """Whether the trusted job asks for the yardstick read (``YARDSTICK_REQUIRED_ENV``)."""
    return environ.get(YARDSTICK_REQUIRED_ENV) == "1"
