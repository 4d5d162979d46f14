"""How does ``vlmpath run`` start ``asv run`` without asv importing the suite once more?

``vlmpath run`` discovers the suite itself (its ``--bench`` check, ``runner.discovery``)
with asv's own discovery command, so its listing is exactly what ``asv run`` would
discover. ``python -m vlmpath.runner.asv_main ARGS`` is ``python -m asv ARGS`` with asv's
discovery step (``Benchmarks._disc_benchmarks``: one interpreter importing torch, ~2
CPU-s per run) answered from that listing, named by ``ASV_LISTING_ENV``; the variable is
removed before asv starts, so no benchmark process sees it. Everything else is asv's:
its environment set-up, ``-b`` selection, runs and results. Without the variable, or with
an asv that has no such step, this is plain asv.
"""

from __future__ import annotations

import os
import sys

from vlmpath.runner.discovery_cache import ASV_LISTING_ENV


def _answer_discovery(listing: list) -> None:
    from asv import util
    from asv.benchmarks import Benchmarks
    from asv.console import log

    own = getattr(Benchmarks, "_disc_benchmarks", None)
    if own is None:  # another asv: it discovers as it does
        return

    def disc(cls, conf, repo, environments, commit_hashes, check):
        if check:  # asv's checks import the suite anyway
            return own(conf, repo, environments, commit_hashes, check)
        cls.check_tree(conf.benchmark_dir)
        if not environments:
            raise util.UserError("No available environments")
        for env in environments:
            env.create()
        log.info("Discovering benchmarks (the listing vlmpath run discovered)")
        return listing

    Benchmarks._disc_benchmarks = classmethod(disc)


def main() -> None:
    path = os.environ.pop(ASV_LISTING_ENV, None)
    if path:
        from vlmpath.core import safe_json

        listing = safe_json.load_file(path, "the listing vlmpath run discovered")  # bounded: a PR's names
        if isinstance(listing, list):
            _answer_discovery(listing)
    from asv.main import main as asv_main

    sys.argv[0] = "asv"
    asv_main()


if __name__ == "__main__":
    main()
