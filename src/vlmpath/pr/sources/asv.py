"""Which asv rows does an artifact hold, and how do the shards of one machine come together?

Each asv artifact's ``results/`` is copied into the judge's staging tree through the checked,
budgeted reader (``pr.artifact.copy_results``). The artifacts of one machine that say they
are shards (the manifest's ``shard``) are merged into one results file per commit
(``pr.shard.merge_shard_artifacts``: each case from the shard that owns it). Then each side
is read once from the merged tree.

A shard of 1..N that did not arrive: in ``ci merge`` (``Context.every_shard``) its cases are
not judged, named, and the check is incomplete at best (``pr.shard.with_missing_shards``);
in one shard's own ``ci pr`` the other shards' cases are simply not this check's (left out,
with a note saying where they are judged).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from vlmpath.compare.comparison import ComparisonReport
from vlmpath.core.errors import VlmpathError
from vlmpath.pr.artifact import RESULTS_SUBDIR, Artifact, copy_results
from vlmpath.pr.sources import Context, Rows, RowSource


def _load_merged(dest: Path, sha: str, owner: dict[str, str]):
    """One side of the merged results; a refusal names the artifact's own path, not the
    staging directory (deleted by then)."""
    from vlmpath.compare import asv_results

    try:
        return asv_results.load_asv(dest, sha)
    except VlmpathError as exc:
        text = str(exc)
        for machine, artifact in owner.items():
            text = text.replace(str(dest / machine), f"artifact {artifact}: {RESULTS_SUBDIR}/{machine}")
        raise VlmpathError(text.replace(str(dest), f"the merged {RESULTS_SUBDIR}")) from None


class AsvResults(RowSource):
    def __init__(self) -> None:
        self.gaps: dict[str, tuple] = {}

    def rows(self, ctx: Context) -> Rows:
        from vlmpath.pr.shard import merge_shard_artifacts

        dest = ctx.staging / RESULTS_SUBDIR
        dest.mkdir(parents=True, exist_ok=True)
        arts = ctx.of_kind(engine=False)
        shards: dict[str, list[Artifact]] = {}
        for art in arts:
            if art.manifest.shard is not None:
                shards.setdefault(art.manifest.machine, []).append(art)
            else:
                copy_results(art.path / RESULTS_SUBDIR, dest, ctx.owner, art.name, ctx.spent)
        for machine in shards:
            if machine in ctx.owner:
                raise VlmpathError(f"machine {machine} appears as a shard and as a whole run "
                                   f"(artifact {ctx.owner[machine]})")
        self.gaps = merge_shard_artifacts(ctx.staging, dest, shards, ctx.spent)
        if not arts:
            return Rows()
        base_sha, head_sha = arts[0].manifest.base_sha, arts[0].manifest.head_sha
        return Rows([_load_merged(dest, base_sha, ctx.owner)], [_load_merged(dest, head_sha, ctx.owner)])

    def shown(self, report: ComparisonReport, ctx: Context) -> tuple[ComparisonReport, Rows]:
        from vlmpath.pr.shard import only_arrived, with_missing_shards

        gaps = {m: g for m, g in self.gaps.items() if g[1]}
        if not gaps:
            return report, Rows()
        if not ctx.every_shard:  # one shard's own check: the others' cases are not its rows
            machines = tuple(only_arrived(m, *gaps[m.machine]) if m.machine in gaps else m for m in report.machines)
            return replace(report, machines=machines), Rows()
        machines = tuple(with_missing_shards(m, *gaps[m.machine]) if m.machine in gaps else m
                         for m in report.machines)
        absent = [f"{m}: shard {k}/{n}" for m, (n, ks, _) in sorted(gaps.items()) for k in ks]
        return replace(report, machines=machines), Rows(missing=absent)
