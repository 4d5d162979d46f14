"""Which instruction counts does an artifact hold (``ci pr --instructions``)?

The counts (``OUT/instructions.json``, base and head sides, ``pr.instructions``) join the
machine's rows: one comparison, one comment, one exit code. They were selected by their own
pattern when counted (``--instructions-bench``; in a split check all of them, in one shard),
so a selection of the suite's cases never drops them (``Rows.kept``).
"""

from __future__ import annotations

from vlmpath.pr.instructions import counted_ids, load_artifact
from vlmpath.pr.sources import Context, Rows, RowSource


class Counts(RowSource):
    def rows(self, ctx: Context) -> Rows:
        got = Rows()
        for art in ctx.of_kind(engine=False):
            m = art.manifest
            counted = load_artifact(art.path, m.machine, m.base_sha, m.head_sha)
            if counted is not None:
                got.base.append(counted[0])
                got.head.append(counted[1])
        got.kept = counted_ids([*got.base, *got.head])
        return got
