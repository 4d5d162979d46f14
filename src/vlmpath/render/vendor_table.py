"""How does the cross-vendor comparison read in the PR comment, for any number of GPU backends?

``ComparisonReport.cross_vendor`` holds one row per case and (reference machine, other
machine) pair. The comment groups them per case and reference machine: one ratio column
per other backend present (base → head, ⚠️ when the ratio moved beyond the GPU noise
band) and one change column per backend present, the reference first. Labels come from
the backend table (``core.backends.label_of``; a backend it lacks is written upper-case),
so a new backend's rows need nothing here.
"""

from __future__ import annotations

from collections.abc import Sequence

from vlmpath.compare.comparison import CrossVendorRow
from vlmpath.core.backends import BACKENDS, Backend, label_of
from vlmpath.render.escape import md_escape
from vlmpath.render.fmt import fmt_pct, fmt_ratio
from vlmpath.render.headline import case_text


def _joined(rows: Sequence[CrossVendorRow], text, several: bool) -> str:
    """One cell for the rows of one backend; the machine is named when it has several."""
    return "; ".join(text(r) + (f" ({md_escape(r.other_machine)})" if several else "") for r in rows)


def vendor_table(rows: Sequence[CrossVendorRow], backends: Sequence[Backend] = BACKENDS,
                 ) -> tuple[list[str], list[list[str]]]:
    """(heading lines, table cells per row) of the cross-vendor section; flagged cases first."""
    reference = rows[0].reference
    others = list(dict.fromkeys(r.other for r in rows))
    ref_label = label_of(reference, backends)
    labels = {o: label_of(o, backends) for o in others}
    heading = [f"### {' · '.join(labels.values())} / {ref_label} ratio", "",
               f"Value on {' or '.join(labels.values())} divided by value on {ref_label} for the same case, "
               "at base and head; ⚠️ marks a ratio that moved beyond the GPU noise band.", ""]
    header = (["case", "metric", "machines"] + [f"{labels[o]}/{ref_label} base → head" for o in others]
              + [f"{ref_label} change"] + [f"{labels[o]} change" for o in others])
    groups: dict[tuple, list[CrossVendorRow]] = {}
    for r in rows:
        groups.setdefault((r.benchmark, r.params, r.unit, r.reference, r.reference_machine), []).append(r)
    ordered = sorted(groups.values(), key=lambda g: (not any(r.flagged for r in g), g[0].benchmark, g[0].params))
    cells: list[list[str]] = [header]
    for group in ordered:
        first = group[0]
        per = {o: [r for r in group if r.other == o] for o in others}
        machines = [first.reference_machine] + list(dict.fromkeys(r.other_machine for r in group))
        row = [md_escape(case_text(first.benchmark, first.params)), md_escape(first.unit),
               md_escape(" / ".join(machines))]
        row += [_joined(per[o], lambda r: f"{fmt_ratio(r.base_ratio)} → {fmt_ratio(r.head_ratio)}"
                        + (" ⚠️" if r.flagged else ""), len(per[o]) > 1) for o in others]
        row += [fmt_pct(first.reference_change)]
        row += [_joined(per[o], lambda r: fmt_pct(r.other_change), len(per[o]) > 1) for o in others]
        cells.append(row)
    return heading, cells
