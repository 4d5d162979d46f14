"""Did a pull request make a routine case execute more instructions (CPU runners)?

``vlmpath instructions --out FILE`` (``cli.instructions``) counts this checkout's routine
cases (``selfcheck.ir_cases``) and writes the records. ``vlmpath ci pr --instructions`` (``count_pr``) checks base and head
out again, counts both at once (one callgrind process each), writes the raw records to
``OUT/instructions.json`` (atomically) and returns each side as ``RunResults`` rows
(``bench_embed.EmbedRoutine.track_instructions``, unit ``instructions``, the PR's machine)
that the flow merges with the side's asv results before comparing, so they reach the
comment, the summary and the exit code like every other gate. ``vlmpath ci merge`` reads
the same file back from each artifact (``load_artifact``). Both sides' profiles are kept in
``OUT/ir-profiles``; ``what_grew`` explains each count that grew (``compare.ir_grew``) in
``comment.md`` and ``OUT/ir-grew.json``, which ``ci merge`` adds to the posted comment.
Instruction counts are a CPU gate: on a GPU backend the option is refused (GPU runners keep time).
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from vlmpath.selfcheck.ir_cases import (COUNT_UNITS, DEFAULT_COUNTER, Side, count_sides, load_sides, run_results,
                                        to_json)
from vlmpath.core import atomic
from vlmpath.core.errors import VlmpathError
from vlmpath.core.scales import DEFAULT_SCALE

OUT_FILE = "instructions.json"
MAX_FILE_BYTES = 4 << 20
#: Both sides' callgrind profiles and call counts, per case (``OUT/ir-profiles/{base,head}``).
PROFILES_SUBDIR = "ir-profiles"
#: What grew in each moved case (``compare.ir_grew``), as the comment shows it.
GREW_FILE = "ir-grew.json"
#: A count that grew by this much is explained in the comment, gated or not (A/A moves 0.01%).
MOVED = 0.005
MAX_CASES = 6


def refuse_gpu(what: str = "--instructions") -> None:
    from vlmpath.measure.platform import probe

    plat = probe()
    if plat.is_gpu:
        raise VlmpathError(f"{what} counts CPU instructions (Valgrind) and runs on CPU runners only; this "
                           f"machine's backend is {plat.backend}: leave it out here (GPU runners keep time)")


def count_threads(threads: int | None) -> int:
    from vlmpath.measure.pinning import cpu_threads

    return cpu_threads(threads, "cpu") or 1


def count_pr(root: Path, base_sha: str, head_sha: str, out: Path, *, machine: str, bench: str | None = None,
             scale: str | None = None, counter: str = DEFAULT_COUNTER):
    """(base, head) ``RunResults`` of instruction counts, each side counted from its own checkout;
    both sides' profiles kept in ``out/ir-profiles`` (``what_grew`` reads them)."""
    import shutil

    from vlmpath.core.git import worktree

    profiles = out / PROFILES_SUBDIR
    shutil.rmtree(profiles, ignore_errors=True)  # a stale profile would explain the wrong run
    from vlmpath.pr.side import log

    kw = {"bench": bench, "scale": scale or DEFAULT_SCALE, "threads": count_threads(None), "log": log, "mode": "routine",
          "profiles": profiles, "counter": counter}

    with tempfile.TemporaryDirectory(prefix="vlmpath-ir-wt-") as tmp:
        with worktree(root, head_sha, Path(tmp) / "head") as head_wt:
            if base_sha == head_sha:
                sides = count_sides([Side("head", head_wt / "src", head_sha)], **kw)
                shutil.copytree(profiles / "head", profiles / "base", dirs_exist_ok=True)
                sides = [{**sides[0], "side": "base"}, sides[0]]
            else:
                with worktree(root, base_sha, Path(tmp) / "base") as base_wt:
                    sides = count_sides([Side("base", base_wt / "src", base_sha), Side("head", head_wt / "src", head_sha)],
                                        **kw)
    atomic.write_text(out / OUT_FILE, to_json(sides))
    return tuple(run_results(s, machine, sha) for s, sha in zip(sides, (base_sha, head_sha)))


def _moved(report) -> list:
    """The count rows that grew by ``MOVED`` or more, largest first, at most ``MAX_CASES``."""
    return sorted((c for c in report.all() if c.unit in COUNT_UNITS and c.ratio and c.ratio - 1 >= MOVED),
                  key=lambda c: -c.ratio)[:MAX_CASES]


def what_grew(out: Path, report) -> list[str]:
    """Explain every instruction count that grew by ``MOVED`` or more (regressions first):
    ``OUT/ir-grew.json`` and a section of ``comment.md``; returns notes."""
    import json

    from vlmpath.compare.ir_grew import grew
    from vlmpath.core.atomic import write_text as write_text_atomic
    from vlmpath.render.ir_grew import append_to_comment

    path = out / OUT_FILE
    if not path.is_file():
        return []
    sides = {s.get("side"): s for s in load_sides(path.read_text(encoding="utf-8"), str(path))}
    files = {side: {(r.get("benchmark"), tuple(sorted(r["params"].items()))): r.get("profile")
                    for r in s.get("records", ())} for side, s in sides.items()}
    moved = _moved(report)
    growths = []
    for c in moved:
        key = (c.benchmark, tuple(sorted(c.params)))
        b, h = files.get("base", {}).get(key), files.get("head", {}).get(key)
        if b and h:
            tally = "" if c.unit == "instructions" else f" {c.unit}"  # both native tallies may move
            label = c.benchmark.split(".")[-2] + tally + "(" + ", ".join(v for _, v in c.params) + ")"
            growths.append(grew(label, out / PROFILES_SUBDIR / "base", out / PROFILES_SUBDIR / "head", b, h,
                                unit=c.unit))
    if not growths:
        return []
    write_text_atomic(out / GREW_FILE, json.dumps([g.to_dict() for g in growths], indent=1) + "\n")
    append_to_comment(out / "comment.md", growths)
    return [f"what grew in {len(growths)} moved instruction count(s): comment section, {GREW_FILE}"]


def what_grew_records(out: Path, report, base_recs, head_recs) -> list[str]:
    """``what_grew`` for an engine flow (``ci pr --engine-src``): each engine routine count
    that grew by ``MOVED`` or more, explained from the two sides' records (``counts_top``);
    ``OUT/ir-grew.json`` (which ``ci merge`` reads) and a section of ``comment.md``."""
    import json

    from vlmpath.compare.ir_grew import grew_tops
    from vlmpath.core.atomic import write_text as write_text_atomic
    from vlmpath.render.ir_grew import append_to_comment

    base = {r.workload: r for r in base_recs}
    head = {r.workload: r for r in head_recs}
    moved = _moved(report)
    growths = []
    for c in moved:
        wl = dict(c.params).get("workload") or dict(c.params).get("preset")
        if wl in base and wl in head:
            g = grew_tops(f"{c.benchmark.rsplit('.', 1)[-1].removeprefix('track_')}({wl})",
                          base[wl].counts_top, head[wl].counts_top, c.unit)
            growths.append(replace(g, base_total=int(c.base), head_total=int(c.head)))
    if not growths:
        return []
    write_text_atomic(out / GREW_FILE, json.dumps([g.to_dict() for g in growths], indent=1) + "\n")
    append_to_comment(out / "comment.md", growths)
    return [f"what grew in {len(growths)} moved engine count(s): comment section, {GREW_FILE}"]


def counted_ids(sides) -> frozenset:
    """The (machine, benchmark, params) of every count in ``sides`` (``count_pr``'s or
    ``load_artifact``'s pairs): rows a ``--bench`` or a shard's selection must not drop, as
    they were selected by their own pattern when counted."""
    return frozenset((m.machine, x.benchmark, x.params) for run in sides for m in run.machines for x in m.metrics)


def load_artifact(art: Path, machine: str, base_sha: str, head_sha: str):
    """(base, head) ``RunResults`` from an artifact's ``instructions.json``; None when it has none."""
    path = art / OUT_FILE
    if not path.exists():
        return None
    if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
        raise VlmpathError(f"artifact {art.name}: {OUT_FILE} is not a regular file of at most {MAX_FILE_BYTES} bytes")
    sides = {s.get("side"): s for s in load_sides(path.read_text(encoding="utf-8", errors="replace"),
                                                  f"artifact {art.name}: {OUT_FILE}")}
    if set(sides) != {"base", "head"}:
        raise VlmpathError(f"artifact {art.name}: {OUT_FILE} must hold a base and a head side")
    return run_results(sides["base"], machine, base_sha), run_results(sides["head"], machine, head_sha)
