"""Which of head's new or changed benchmark definitions does an artifact show?

``ci pr`` runs head's new or changed definitions (``pr.yardstick``) into its artifact's
``head-definitions/``; here they are read with the same checks and budget as its results,
cut to that machine's selection (literal names, ``compare.selection``) and shown as
"new definition, not judged" rows ("not in base" for the names the manifest lists as new,
or that the base side never measured). Shown, never judged: they cannot change the verdict.
"""

from __future__ import annotations

from dataclasses import replace

from vlmpath.compare.comparison import ComparisonReport
from vlmpath.compare.selection import keep_selected
from vlmpath.core.errors import VlmpathError
from vlmpath.pr.artifact import copy_results
from vlmpath.pr.sources import Context, Rows, RowSource
from vlmpath.pr.yardstick import DEFINITIONS_SUBDIR, definition_rows, with_definitions


class HeadDefinitions(RowSource):
    def shown(self, report: ComparisonReport, ctx: Context) -> tuple[ComparisonReport, Rows]:
        base_names: dict[str, set[str]] = {}
        for run in ctx.base_side:
            for mr in run.machines:
                base_names.setdefault(mr.machine, set()).update(m.benchmark for m in mr.metrics)
        for art in ctx.of_kind(engine=False):
            src, machine = art.path / DEFINITIONS_SUBDIR, art.manifest.machine
            if not src.is_dir() or src.is_symlink():
                continue
            defs = ctx.staging / DEFINITIONS_SUBDIR / art.name
            defs.mkdir(parents=True)
            owner: dict[str, str] = {}
            copy_results(src, defs, owner, f"{art.name} ({DEFINITIONS_SUBDIR}/)", ctx.spent, drop_run_info=True)
            if set(owner) - {machine}:
                raise VlmpathError(f"artifact {art.name}: {DEFINITIONS_SUBDIR}/ holds machines {sorted(owner)[:3]}, "
                                   f"not only its own {machine}")
            known = base_names.get(machine, set()) - set(art.manifest.new_definitions)
            block = definition_rows(defs, art.manifest.head_sha, machine, known)
            if block is not None and art.manifest.bench:
                block = keep_selected(replace(report, machines=(block,)), {block.machine: art.manifest.bench}).machines[0]
            if block is not None and block.comparisons:
                report = with_definitions(report, block)
        return report, Rows()
