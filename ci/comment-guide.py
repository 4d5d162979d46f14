#!/usr/bin/env python3
"""Is the annotated PR comment of docs/reading-a-pr-comment.md what the renderer writes today?

The page shows one real comment: the PR comment vlmpath posts when a change plants a
known-bad pipeline. Its numbers were measured on a real machine (``--measure``: two runs of
``vlmpath measure --json``, base on the default pipeline, head on the #25910 replay
``batched_by_span`` with a ``nonzero`` sync in the injector (``where_index``) and a
``.item()`` readback in the count (``mask_sum``)) and frozen in
docs/comment-guide/records.json, so that the check is deterministic; what is re-run every
time is the comparison and the renderer, on those records, exactly as ``vlmpath ci pr
--engine-src`` and ``ci merge`` run them (``compare.from_records``, ``compare.verdict``,
``render.comment``).

    .venv/bin/python ci/comment-guide.py --check     # exit 1 when the page is stale (CI)
    .venv/bin/python ci/comment-guide.py --write     # regenerate the page's generated parts and the chart
    .venv/bin/python ci/comment-guide.py --measure   # re-measure here (about a minute), then --write

Only the parts between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` are
written; the annotations around them are prose, and ``--write`` refuses (exit 1, naming
the part) when the comment no longer has what they point at.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reading-a-pr-comment.md"
RECORDS = ROOT / "docs" / "comment-guide" / "records.json"
CHART = ROOT / "docs" / "img" / "pr-chart.png"  # the README's picture: the same comparison as the PR chart
WORKLOADS = ("many_small_images", "multi_region", "chunked_long")
REPEAT = 7  # passes per case: at 7 samples per side the tok/s rows get the Mann-Whitney test
BASE_ARGS = ("--pipeline", "default")
HEAD_ARGS = ("--encode", "batched_by_span", "--inject", "where_index", "--count", "mask_sum",
             "--hash", "forwarded")
# Stand-ins for the two commits: both sides ran the same vlmpath; the pipelines differ.
BASE_SHA = "ba5e" * 10
HEAD_SHA = "bad0" * 10
#: What the annotations point at: (what, a pattern the comment must match).
POINTED_AT = (
    ("the marker line", r"\A<!-- vlmpath-bench -->\n"),
    ("the verdict line naming the regressions and the failed case",
     r"\A[^\n]*\n\*\*3 regressions, 1 newly failing on cpu\\-epyc\*\*"),
    ("the 'What changed' table", r"\n### What changed\n"),
    ("the failed case as one row",
     re.escape(r"| engine\_embed\.Engine \(workload=multi\_region\) | tok/s | 3047 | — | — | 💥 newly failing")),
    ("a syncs row from 0", re.escape(r"track\_syncs \(workload=chunked\_long\) | syncs | 0 | ") + "[1-9]"),
    ("a newly failing case with its finding and its exception",
     re.escape(r"newly failing: accuracy 1\.00 \-&gt; 0\.60; RuntimeError")),
    ("the folded per-machine details", r"\n<details>\n<summary>"),
    ("the warning that a head case failed", re.escape(r"1 case\(s\) failed in the head run")),
    ("the exact note", r"\| exact \|"),
    ("a 'too noisy to judge' tok/s row", r"too noisy to judge \| mann\\-whitney; MDE"),
    ("an MDE note", r"MDE \d+%"),
)


def _src_path() -> None:
    src = str(ROOT / "src")
    if src not in sys.path:
        sys.path.insert(0, src)


def report_from(frozen: dict):
    """The comparison of the frozen records, as ``ci pr --engine-src`` judges them."""
    _src_path()
    from vlmpath.compare import verdict
    from vlmpath.compare.from_records import run_from_records
    from vlmpath.suite.record import loads_record

    machine = frozen["machine"]
    sides = {s: [loads_record(r, f"{RECORDS.name} {s}") for r in frozen[s]] for s in ("base", "head")}
    report = verdict.compare(
        run_from_records(sides["base"], machine=machine, commit=BASE_SHA, where="base records"),
        run_from_records(sides["head"], machine=machine, commit=HEAD_SHA, where="head records"))
    return report


def comment_from(frozen: dict) -> str:
    """The PR comment the renderer writes for the frozen records (the code under check)."""
    from vlmpath.render.comment import render_markdown

    return render_markdown(report_from(frozen))


def draw_chart(frozen: dict) -> None:
    """The PR chart of the same comparison (``render.report_history.pr_chart``), the picture
    of the README; drawn by --write, not compared by --check (PNG bytes vary by matplotlib)."""
    from vlmpath.compare.thresholds import Thresholds
    from vlmpath.render.report_figure import save_figure
    from vlmpath.render.report_history import pr_chart

    fig = pr_chart(report_from(frozen), thresholds=Thresholds.default())
    save_figure(fig, CHART)
    fig.clear()


def planted_table(frozen: dict) -> str:
    """What was measured, per side: the stages and the headline values of each record."""
    lines = ["| side | pipeline (encode / inject / count / hash) | workload | tok/s | accuracy | syncs | what synced | calls | items placed | error |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for side in ("base", "head"):
        for r in frozen[side]:
            p = r["pipeline"]
            stages = " / ".join(f"`{p[k]}`" for k in ("encode", "inject", "count", "hash"))
            tok = "—" if r["tok_per_s"] is None else f"{r['tok_per_s']:.0f}"
            err = "—" if not r["error"] else "raised (`RuntimeError`)"
            synced = ", ".join(f"`{k}` x{v}" for k, v in sorted(r["sync_events"].items())) or "—"
            lines.append(f"| {side} | {stages} | `{r['workload']}` | {tok} | {r['accuracy']:.2f} | "
                         f"{r['syncs']} | {synced} | {r['encoder_calls']} | {r['placed']}/{r['items']} | {err} |")
    m = frozen["measured"]
    lines += ["", f"Measured {m['date']} on `{frozen['machine']}` ({m['hardware']}; load average "
              f"{m['load']}), {REPEAT} timed passes per case, with:", "", "```bash",
              *m["commands"], "```"]
    return "\n".join(lines)


def generated(frozen: dict) -> dict[str, str]:
    comment = comment_from(frozen)
    missing = [what for what, pat in POINTED_AT if not re.search(pat, comment)]
    if missing:
        raise SystemExit(f"comment-guide: the rendered comment no longer has {', '.join(missing)}: "
                         f"update the annotations of {PAGE.relative_to(ROOT)} and POINTED_AT in this script")
    return {"planted": planted_table(frozen), "comment": f"````markdown\n{comment.rstrip()}\n````"}


def fill(page: str, parts: dict[str, str]) -> str:
    for name, body in parts.items():
        pat = re.compile(rf"(<!-- generated:{name} -->\n).*?(<!-- /generated:{name} -->)", re.S)
        if not pat.search(page):
            raise SystemExit(f"comment-guide: {PAGE.relative_to(ROOT)} has no "
                             f"<!-- generated:{name} --> ... <!-- /generated:{name} --> block")
        page = pat.sub(lambda m: m.group(1) + body + "\n" + m.group(2), page)
    return page


def frozen_records() -> dict:
    return json.loads(RECORDS.read_text(encoding="utf-8"))


def expected_page() -> tuple[str, str]:
    current = PAGE.read_text(encoding="utf-8")
    return current, fill(current, generated(frozen_records()))


def _measure_side(args: tuple[str, ...], out: Path) -> list[dict]:
    cmd = [sys.executable, "-m", "vlmpath.cli", "measure", *(a for w in WORKLOADS for a in ("--workload", w)),
           *args, "--repeat", str(REPEAT), "--json", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    subprocess.run(cmd, check=True, env=env, cwd=ROOT)
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]


def measure() -> None:
    import platform

    _src_path()
    from vlmpath.measure.platform import probe

    with tempfile.TemporaryDirectory() as tmp:
        base = _measure_side(BASE_ARGS, Path(tmp) / "base.jsonl")
        head = _measure_side(HEAD_ARGS, Path(tmp) / "head.jsonl")
    loads = [r["load_avg"] for r in base + head if r.get("load_avg") is not None]
    show = lambda args: "vlmpath measure " + " ".join(f"--workload {w}" for w in WORKLOADS) + " " \
        + " ".join(args) + f" --repeat {REPEAT} --json reports/measure/SIDE.jsonl"
    frozen = {
        "about": "frozen input of ci/comment-guide.py (re-measure: ci/comment-guide.py --measure)",
        "machine": probe().machine,
        "measured": {"date": datetime.date.today().isoformat(),
                     "hardware": f"{os.cpu_count()} CPU cores, {platform.machine()}, {platform.python_version()}",
                     "load": f"{min(loads):.1f}-{max(loads):.1f}" if loads else "unknown",
                     "commands": [show(BASE_ARGS).replace("SIDE", "base"), show(HEAD_ARGS).replace("SIDE", "head")]},
        "base": base, "head": head,
    }
    RECORDS.parent.mkdir(parents=True, exist_ok=True)
    RECORDS.write_text(json.dumps(frozen, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", action="store_true", help="exit 1 when the page differs from what --write writes")
    g.add_argument("--write", action="store_true", help="rewrite the page's generated parts and docs/img/pr-chart.png")
    g.add_argument("--measure", action="store_true", help="re-measure the records on this machine, then --write")
    a = ap.parse_args(argv)
    if a.measure:
        measure()
    current, want = expected_page()
    if a.check:
        if current != want:
            print(f"comment-guide: {PAGE.relative_to(ROOT)} is not what the renderer writes today; "
                  "run: .venv/bin/python ci/comment-guide.py --write", file=sys.stderr)
            return 1
        return 0
    if current != want:
        tmp = PAGE.with_suffix(".md.tmp")
        tmp.write_text(want, encoding="utf-8")
        os.replace(tmp, PAGE)  # atomic: a crash leaves the old page, never half of one
    draw_chart(frozen_records())
    return 0


if __name__ == "__main__":
    sys.exit(main())
