"""Does anything a pull request can write reach the privileged job raw, or turn green unjudged?

One hostile corpus (issue 20) run through every sink that reads a PR's output: ``vlmpath
compare``, ``vlmpath ci merge`` (comment, summary, log), the comment renderer at its size
bounds, ``vlmpath ci alert`` (issue titles and bodies, on the loopback fake GitHub) and
``vlmpath measure`` (traces). Every test asserts the same things where they apply: no
traceback, no output line that starts a workflow command (``::``), no raw mention, link or
HTML from the corpus in the comment, a comment within GitHub's 65,536 characters, and no
green verdict where nothing was judged. Unchanged inputs are shown green beside them.
"""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path

import pytest
from asv_fixtures import fingerprint, sha, write_asv_run
from log_scan import assert_inert, content_lines
from github_fake import TOKEN, github_fake  # noqa: F401 (fixture)

from vlmpath.cli import main
from vlmpath.render.comment import GITHUB_COMMENT_LIMIT, MARKER

BASE, HEAD = sha("hostile-base"), sha("hostile-head")
ACC = "bench_embed.Embed.track_accuracy"
SPEED = "bench_embed.Embed.track_tok_per_s"
# Workflow commands, a mention, a link, raw HTML, a code span, a table cell, terminal
# escapes and line breaks of every kind: what a PR can put in any string it writes.
EVIL = ("::error file=a::pwned\n::add-mask::x @octocat [click](https://evil.example/x) "
        "<img src=x onerror=alert(1)> `tick` |cell| \x1b[31mred\r::stop-commands::t\u2028::warning::w")
EVIL_DIR = "bench-::error::@octocat [x](https:evil) <b>\n::warning::d"


# --- the checks every sink gets --------------------------------------------------------------
def no_workflow_command(*texts: str) -> None:
    # As the runner reads a log: no "::" first and no "##[" outside a stop-commands fence.
    assert_inert(*texts)


def no_traceback(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text and "RecursionError" not in text, text[-2000:]


def comment_is_inert(md: str) -> None:
    """No mention, link or HTML of the corpus outside code; within GitHub's limit."""
    assert len(md) <= GITHUB_COMMENT_LIMIT and md.startswith(MARKER)
    outside = re.sub(r"`[^`\n]*`", "", md)  # code spans render as text
    assert not re.search(r"(?<![\\\w&#])@octocat", outside), "live mention"
    links = re.findall(r"(?<!\\)\[([^\]\n]*)(?<!\\)\]\(([^)\n]*)\)", outside)
    assert all(label in ("base trace", "head trace", "Charts") and "evil" not in target
               for label, target in links), links
    assert "<img" not in md and "<b>\n" not in md and "\x1b" not in md


def is_red(md: str, summary: str = "") -> None:
    headline = md.splitlines()[1]
    assert "newly failing" in headline or "regression" in headline, headline
    assert "No regressions" not in headline and "Incomplete" not in headline
    if summary:
        assert "regression(s): exit 1" in summary, summary


def is_not_green(md: str, summary: str = "") -> None:
    headline = md.splitlines()[1]
    assert headline.startswith("**Incomplete"), headline
    assert "No regressions" not in headline
    if summary:
        assert "verdict: incomplete" in summary


# --- fixtures: results and artifacts written by hand, as a PR's job would ----------------------
def results(root: Path, machine: str, commit: str, spec: dict, fp: dict | None = None) -> Path:
    return write_asv_run(root, machine, commit, spec, fp if fp is not None else fingerprint("cpu"))


def set_values(res: Path, machine: str, commit: str, name: str, values: list) -> None:
    """Put raw JSON values (strings, booleans, Infinity) where asv writes numbers."""
    f = next((res / machine).glob(f"{commit[:8]}-*.json"))
    d = json.loads(f.read_text(encoding="utf-8"))
    d["results"][name][0] = values
    f.write_text(json.dumps(d), encoding="utf-8")


def artifact(root: Path, name: str, res: Path, machine: str, *, bench: str | None = None,
             notes=()) -> Path:
    import shutil

    art = root / name
    shutil.copytree(res, art / "results")
    (art / "run.json").write_text(json.dumps({
        "schema_version": 1, "base_sha": BASE, "head_sha": HEAD, "machine": machine, "bench": bench,
        "notes": list(notes)}), encoding="utf-8")
    (art / "pr-number").write_text("7\n", encoding="utf-8")
    return art


def merge(tmp_path: Path, arts: Path, capsys, *extra: str) -> tuple[int, str, str, str]:
    out = tmp_path / "merged"
    rc = main(["ci", "merge", str(arts), "--out", str(out), *extra])
    cap = capsys.readouterr()
    no_traceback(cap.out, cap.err)
    no_workflow_command(cap.out, cap.err)
    md = (out / "comment.md").read_text(encoding="utf-8") if (out / "comment.md").exists() else ""
    summary = (out / "summary.txt").read_text(encoding="utf-8") if (out / "summary.txt").exists() else ""
    no_workflow_command(summary)
    if md:
        comment_is_inert(md)
    return rc, md, summary, cap.out + cap.err


def compare(tmp_path: Path, res: Path, capsys, *extra: str) -> tuple[int, str, str]:
    md_path = tmp_path / "c.md"
    rc = main(["compare", BASE, HEAD, "--results", str(res), "--markdown", str(md_path), *extra])
    cap = capsys.readouterr()
    no_traceback(cap.out, cap.err)
    no_workflow_command(cap.out, cap.err)
    md = md_path.read_text(encoding="utf-8") if md_path.exists() else ""
    if md:
        comment_is_inert(md)
    return rc, md, cap.out + cap.err


GOOD = {ACC: ("fraction", [], [], [1.0], None), SPEED: ("tok/s", [], [], [1000.0], None)}
WORSE = {ACC: ("fraction", [], [], [0.6], None), SPEED: ("tok/s", [], [], [1000.0], None)}


# --- 1. an honest verdict ----------------------------------------------------------------------
def test_unchanged_pair_is_green_and_a_drop_is_red(tmp_path, capsys):
    res = tmp_path / "res"
    results(res, "cpu-a", BASE, GOOD)
    results(res, "cpu-a", HEAD, GOOD)
    rc, md, _ = compare(tmp_path, res, capsys)
    assert rc == 0 and md.splitlines()[1].startswith("**No regressions**")
    results(res, "cpu-a", HEAD, WORSE)
    rc, md, _ = compare(tmp_path, res, capsys)
    assert rc == 1 and "regression" in md.splitlines()[1]


def test_renamed_benchmarks_are_removed_and_new_not_judged_never_green(tmp_path, capsys):
    res = tmp_path / "res"
    results(res, "cpu-a", BASE, GOOD)
    renamed = {k.replace("Embed.", "EmbedV2."): v for k, v in WORSE.items()}
    results(res, "cpu-a", HEAD, renamed, fingerprint("cpu"))
    rc, md, out = compare(tmp_path, res, capsys)
    assert rc == 1  # base's cases vanished on head: red (issue 39), never "No regressions: 2 new, 2 removed"
    is_red(md)
    assert "vanished on head" in out and "2 new" in md
    assert "if benchmarks were renamed" in md and "Embed.track_accuracy -> bench" in out.replace("\\", "")
    # ci merge, with --fail, says the same (exit 1), even though head's accuracy "fell" out of sight.
    arts = tmp_path / "arts"
    artifact(arts, "bench-cpu", res, "cpu-a")
    rc, md, summary, _ = merge(tmp_path, arts, capsys, "--fail")
    assert rc == 1
    is_red(md, summary)


def test_a_selection_that_matches_nothing_is_incomplete_not_green(tmp_path, capsys):
    res = tmp_path / "res"
    results(res, "cpu-a", BASE, GOOD)
    results(res, "cpu-a", HEAD, WORSE)  # accuracy 1.00 -> 0.60 in head's results
    arts = tmp_path / "arts"
    artifact(arts, "bench-cpu", res, "cpu-a", bench="NoSuchBenchmark")
    rc, md, summary, _ = merge(tmp_path, arts, capsys, "--fail")
    assert rc == 3
    is_not_green(md, summary)
    assert "matched no case" in md
    # The same artifact with a selection that matches: red.
    import shutil

    shutil.rmtree(tmp_path / "merged")
    (arts / "bench-cpu" / "run.json").write_text(json.dumps({
        "schema_version": 1, "base_sha": BASE, "head_sha": HEAD, "machine": "cpu-a", "bench": "Embed.track_acc"}))
    rc, md, _, _ = merge(tmp_path, arts, capsys, "--fail")
    assert rc == 1 and "1 regression" in md.splitlines()[1]


def test_a_side_with_no_results_is_not_judged(tmp_path, capsys):
    res = tmp_path / "res"
    results(res, "cpu-a", BASE, GOOD)
    results(res, "cpu-b", HEAD, WORSE)  # head measured on another machine only
    rc, md, _ = compare(tmp_path, res, capsys)
    assert rc == 3
    is_not_green(md)


def test_a_machine_whose_head_results_an_artifact_dropped_is_red_in_the_merge(tmp_path, capsys):
    """Two machines; one artifact's results hold base only (its head dropped, or filed under
    another machine's name): its judged cases vanished on head, never "not judged" beside a
    green machine. The same folder in a local compare stays "not judged" (no promise)."""
    res_a, res_b = tmp_path / "res-a", tmp_path / "res-b"
    for res in (res_a, res_b):
        results(res, res.name.replace("res", "cpu"), BASE, GOOD)
    results(res_a, "cpu-a", HEAD, GOOD)  # unchanged pair: green on its own
    arts = tmp_path / "arts"
    artifact(arts, "bench-a", res_a, "cpu-a")
    artifact(arts, "bench-b", res_b, "cpu-b")  # head's results gone
    rc, md, summary, out = merge(tmp_path, arts, capsys, "--fail")
    assert rc == 1 and "vanished on head: no head results for this machine" in out
    is_red(md, summary)
    import shutil

    shutil.rmtree(tmp_path / "merged")
    results(res_b, "cpu-b", HEAD, GOOD)  # the same pair with cpu-b's head: green
    shutil.rmtree(arts)
    artifact(arts, "bench-a", res_a, "cpu-a")
    artifact(arts, "bench-b", res_b, "cpu-b")
    rc, md, _, _ = merge(tmp_path, arts, capsys, "--fail")
    assert rc == 0


@pytest.mark.parametrize("raw, why", [
    ("nan", "is not a number (str)"),
    ("Infinity", "is not a number (str)"),
    (float("inf"), "is not finite"),
    (True, "is not a number (bool)"),
    (-5, "outside the range of fraction"),
    (1.5, "outside the range of fraction"),
])
def test_values_that_are_not_numbers_in_range_are_not_judged(tmp_path, capsys, raw, why):
    res = tmp_path / "res"
    results(res, "cpu-a", BASE, {ACC: GOOD[ACC]})
    results(res, "cpu-a", HEAD, {ACC: GOOD[ACC]})
    set_values(res, "cpu-a", HEAD, ACC, [raw])
    rc, md, out = compare(tmp_path, res, capsys)
    assert rc == 1  # base judged it, head has no number: vanished on head (issue 39), never green
    is_red(md)
    assert "0 improvements" not in md.splitlines()[1] and why in out and "vanished on head" in out
    js = tmp_path / "c.json"
    main(["compare", BASE, HEAD, "--results", str(res), "--json", str(js), "--no-fail"])
    (row,) = json.loads(js.read_text())["machines"][0]["comparisons"]
    assert row["verdict"] == "newly failing" and row["head"] is None


def test_the_engine_flow_and_ci_pr_follow_the_same_rule():
    """Engine records (``ci pr --engine-src``, merged by ``ci merge``) and ``ci pr``'s own
    selection go through the same verdict: a NaN or Infinity record value is not judged,
    and a selection that leaves nothing is incomplete (exit 3), never green."""
    from vlmpath.compare.from_records import run_from_records
    from vlmpath.compare.verdict import compare as judge_all
    from vlmpath.compare.selection import keep_selected

    from vlmpath.suite.record import CaseRecord

    # Built directly: loads_record already refuses a non-finite number from a file (one line,
    # exit 2); this is the verdict's own rule for a value that got past a reader.
    def rec(**kw):
        return CaseRecord(**{"workload": "w", "pipeline": {"encode": "engine"}, "tok_per_s": 1000.0,
                             "accuracy": 1.0, "syncs": 0, "encoder_syncs": 2, "encoder_calls": 1, **kw})
    base = run_from_records([rec()], machine="m", commit="a" * 40)
    head = run_from_records([rec(accuracy=float("nan"), tok_per_s=float("inf"))], machine="m", commit="b" * 40)
    rep = judge_all(base, head)
    bad = {c.benchmark.rsplit(".", 1)[1]: c for c in rep.not_judged}
    assert "not finite" in bad["track_accuracy"].reason and "not finite" in bad["track_tok_per_s"].reason
    # Memory the CPU worker did not measure is not judged either, and said so: never a zero.
    assert set(bad) - {"track_accuracy", "track_tok_per_s"} <= {"track_peak_bytes", "track_reserved_bytes"}
    assert rep.improvements == [] and rep.regressions == []
    assert judge_all(base, base).exit_code() == 0  # the unchanged pair: green
    nothing = keep_selected(judge_all(base, base), {"m": "NoSuchCase"})
    assert nothing.all() == [] and nothing.exit_code() == 3 and nothing.incomplete


def test_same_commit_and_an_older_benchmark_version_are_said(tmp_path, capsys):
    res = tmp_path / "res"
    results(res, "cpu-a", BASE, GOOD)
    results(res, "cpu-a", HEAD, GOOD)
    f = next((res / "cpu-a").glob(f"{BASE[:8]}-*.json"))
    d = json.loads(f.read_text())
    cols = d["result_columns"]
    d["results"][ACC][cols.index("version")] = "0" * 64  # base ran the older benchmark code
    f.write_text(json.dumps(d))
    rc, md, out = compare(tmp_path, res, capsys)
    assert rc == 0 and "base was measured with the older benchmark code" in out
    rc = main(["compare", HEAD, HEAD, "--results", str(res)])
    out = capsys.readouterr().out
    assert rc == 0 and "base and head are the same commit" in out


# --- 1b. a row's meaning is never the results' (issue 27) ----------------------------------------
def _set_unit(res: Path, unit) -> None:
    meta = json.loads((res / "benchmarks.json").read_text())
    meta[ACC]["unit"] = unit
    (res / "benchmarks.json").write_text(json.dumps(meta))


def _rename_everywhere(res: Path, old: str, new: str) -> None:
    for f in [res / "benchmarks.json", *(res / "cpu-a").glob("*-*.json")]:
        f.write_text(f.read_text().replace(f'"{old}"', f'"{new}"'))


#: What a PR's results can say about the meaning of accuracy 1.00 -> 0.60, and what it must
#: never read as: green, or an improvement. name -> (planting, red exit codes allowed).
DEFINITION_CORPUS = {
    "unit says seconds (lower is better)": (lambda res: _set_unit(res, "seconds"), {3}),
    "unit says asv's default 'unit'": (lambda res: _set_unit(res, "unit"), {3}),
    "unit is a number": (lambda res: _set_unit(res, 5), {3}),
    "unit is an object": (lambda res: _set_unit(res, {"direction": "lower"}), {3}),
    "unit carries workflow commands": (lambda res: _set_unit(res, EVIL), {3}),
    "unit is null": (lambda res: _set_unit(res, None), {1}),
    "no benchmarks.json": (lambda res: (res / "benchmarks.json").unlink(), {1}),
    "method the table lacks": (lambda res: _rename_everywhere(res, ACC, ACC + "_v2"), {3}),
    "method name carries workflow commands": (lambda res: _rename_everywhere(res, ACC, ACC + "_::error::x"), {3}),
}


@pytest.mark.parametrize("name", sorted(DEFINITION_CORPUS))
def test_what_the_results_say_a_metric_means_never_turns_a_drop_green(tmp_path, capsys, name):
    plant, red = DEFINITION_CORPUS[name]
    res = tmp_path / "res"
    results(res, "cpu-a", BASE, GOOD)
    results(res, "cpu-a", HEAD, WORSE)  # accuracy 1.00 -> 0.60
    plant(res)
    rc, md, _ = compare(tmp_path, res, capsys)
    first = md.splitlines()[1]
    assert rc in red and "No regressions" not in first and "improvement" not in first.replace("0 improvements", "")
    if 3 in red:
        assert "untrusted definition" in first
    arts = tmp_path / "arts"
    artifact(arts, "bench-cpu", res, "cpu-a")
    rc, md, summary, _ = merge(tmp_path, arts, capsys, "--fail")  # the comment the privileged job posts
    assert rc in red and "No regressions" not in md.splitlines()[1]


# --- 2. untrusted text stays data, in every sink ---------------------------------------------
def evil_results(res: Path, machine: str) -> None:
    name = f"bench_embed.Embed.track_{EVIL}"
    spec_b = {name: (EVIL, [EVIL], [[EVIL]], [1.0], None), ACC: GOOD[ACC]}
    spec_h = {name: (EVIL, [EVIL], [[EVIL]], [2.0], None), ACC: ("fraction", [], [], [0.5], None)}
    fail = "bench_embed.Embed.time_fail"  # failing in head, with the corpus as its message
    spec_b[fail], spec_h[fail] = ("seconds", [], [], [1.0], None), ("seconds", [], [], [None], None)
    fp = {**fingerprint("cpu"), "torch": EVIL}
    results(res, machine, BASE, spec_b, fp)
    results(res, machine, HEAD, spec_h, {**fp, "torch": EVIL + "2"})
    from vlmpath.core.failures import failure_line, failures_path

    failures_path(res / machine, HEAD).write_text(json.dumps([json.loads(failure_line(fail, {}, EVIL))]))


def test_the_corpus_through_compare_merge_and_the_comment(tmp_path, capsys):
    res = tmp_path / "res"
    evil_results(res, "cpu-a")
    rc, md, out = compare(tmp_path, res, capsys)
    assert rc == 1 and "@octocat" in out.replace("&#64;", "@")  # shown, as data
    arts = tmp_path / "arts"
    artifact(arts, EVIL_DIR, res, "cpu-a", notes=[EVIL, EVIL * 50])
    (arts / EVIL_DIR / "profiles.json").write_text(json.dumps([{
        "machine": EVIL, "case": EVIL, "benchmarks": [EVIL], "base_trace": "profiles/a/base.trace.json",
        "head_trace": "profiles/a/head.trace.json", "note": EVIL,
        "deltas": [{"name": EVIL, "base_calls": 1, "head_calls": 2, "base_us": 1.0, "head_us": 9.0}]}]))
    (arts / "bench-failed").mkdir()
    (arts / "bench-failed" / "error.txt").write_text(EVIL)  # a machine whose run failed
    rc, md, summary, log = merge(tmp_path, arts, capsys, "--fail")
    assert rc == 1 and "Where the time went" in md and "newly failing" in md
    assert "trace links left out" in md  # the directory name is not fit for a link target
    assert "::error" in summary  # the text is there, as data, not at a line start


def test_an_error_quoting_a_hostile_artifact_name_is_one_inert_line(tmp_path, capsys):
    res = tmp_path / "res"
    results(res, "cpu-a", BASE, GOOD)
    results(res, "cpu-a", HEAD, GOOD)
    arts = tmp_path / "arts"
    artifact(arts, "bench-cpu", res, "cpu-a")
    artifact(arts, EVIL_DIR, res, "cpu-a")  # the same machine twice: an error naming both
    rc, _, _, log = merge(tmp_path, arts, capsys, "--fail")
    lines = content_lines(log)
    assert rc == 2 and len(lines) == 1 and "appears in artifacts" in lines[0]
    assert not (tmp_path / "merged").exists()


def test_profile_links_are_built_from_a_plain_artifact_name_and_encoded(tmp_path, capsys):
    res = tmp_path / "res"
    results(res, "cpu-a", BASE, GOOD)
    results(res, "cpu-a", HEAD, WORSE)
    arts = tmp_path / "arts"
    artifact(arts, "bench-cpu", res, "cpu-a")
    (arts / "bench-cpu" / "profiles.json").write_text(json.dumps([{
        "machine": "cpu-a", "case": "c", "benchmarks": [ACC], "base_trace": "profiles/a/base.trace.json",
        "head_trace": "profiles/a b/x).json", "note": None, "deltas": []}]))
    rc, md, _, _ = merge(tmp_path, arts, capsys)
    assert "[base trace](bench-cpu/profiles/a/base.trace.json)" in md
    assert "x)" not in md.split("Where the time went")[1]  # an unsafe path gets no link at all


def test_the_corpus_through_ci_alert_titles_bodies_and_log(tmp_path, capsys, github_fake, monkeypatch):
    res = tmp_path / "history"
    # The hostile text rides in a parameter: a method name the metric table lacks is never
    # judged (compare.definitions), so it could not reach an alert's title at all.
    name = "bench_embed.Embed.track_tok_per_s"
    for i in range(4):
        write_asv_run(res, "cpu-a", sha(f"m{i}"), {name: ("tok/s", ["preset"], [[EVIL]], [1000.0], [[1000.0 * f for f in
                      (0.99, 1.0, 1.01, 0.995, 1.005)]])}, fingerprint("cpu"), date=1_700_000_000_000 + i * 3_600_000)
    slow = sha("m4")
    write_asv_run(res, "cpu-a", slow, {name: ("tok/s", ["preset"], [[EVIL]], [300.0], [[300.0 * f for f in
                  (0.99, 1.0, 1.01, 0.995, 1.005)]])}, fingerprint("cpu"), date=1_700_000_000_000 + 4 * 3_600_000)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", github_fake.url)
    rc = main(["ci", "alert", "--results", str(res), "--commit", slow, "--window", "4",
               "--repo", "octo-org/bench", "--fail"])
    cap = capsys.readouterr()
    no_traceback(cap.out, cap.err)
    no_workflow_command(cap.out, cap.err)
    assert rc == 1
    (issue,) = github_fake.issues.values()
    title, body = issue["title"], issue["body"]
    assert "\n" not in title and "\x1b" not in title and "@octocat" not in title and len(title) <= 240
    no_workflow_command(body)
    assert not re.search(r"(?<![\\\w&#])@octocat", body) and "<img" not in body
    assert not re.search(r"(?<!\\)\]\(https://evil", body)


def test_alert_with_nothing_judged_is_incomplete(tmp_path, capsys):
    res = tmp_path / "history"
    write_asv_run(res, "cpu-a", sha("m0"), {ACC: GOOD[ACC]}, fingerprint("cpu"), date=1_700_000_000_000)
    write_asv_run(res, "cpu-a", sha("m1"), {ACC: GOOD[ACC]}, fingerprint("cpu"), date=1_700_003_600_000)
    set_values(res, "cpu-a", sha("m1"), ACC, ["nan"])
    rc = main(["ci", "alert", "--results", str(res), "--commit", sha("m1"), "--fail"])
    out = capsys.readouterr().out
    assert rc == 3 and "0 case(s) judged" in out and "not judged" in out and "incomplete" in out


# --- 3. bounded parsing ---------------------------------------------------------------------------
DEEP = "[" * 100_000


def _artifact_files(art: Path) -> list[Path]:
    return sorted(p for p in art.rglob("*") if p.is_file() and p.name != "pr-number")


def test_deep_json_in_every_artifact_file_is_one_line_or_a_note(tmp_path, capsys):
    res = tmp_path / "res"
    failing = {"bench_embed.Embed.time_fail": ("seconds", [], [], [None], None)}  # its message is read
    results(res, "cpu-a", BASE, {**GOOD, "bench_embed.Embed.time_fail": ("seconds", [], [], [1.0], None)})
    results(res, "cpu-a", HEAD, {**WORSE, **failing})
    (res / "cpu-a" / f"vlmpath-failures-{HEAD[:8]}.json").write_text("[]")
    arts = tmp_path / "arts"
    art = artifact(arts, "bench-cpu", res, "cpu-a")
    (art / "profiles.json").write_text("[]")
    (art / "instructions.json").write_text(json.dumps({
        "schema_version": 1, "benchmark": "bench_embed.EmbedRoutine.track_instructions",
        "sides": [{"side": "base", "records": []}, {"side": "head", "records": []}]}))
    files = _artifact_files(art)
    assert len(files) >= 8
    for f in files:
        good = f.read_bytes()
        f.write_text(DEEP)
        rc, md, summary, log = merge(tmp_path, arts, capsys, "--fail")
        if rc == 2:  # an error: one line, naming the file
            lines = content_lines(log)
            assert len(lines) == 1 and f.name in lines[0] and "nested more than" in lines[0], (f, log)
        else:  # a file the comparison can do without: said in the comment, never green
            assert rc in (1, 3) and f.name in md.replace("\\", ""), (f, md[:400])
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".merged.")]  # staging removed
        f.write_bytes(good)
        import shutil

        shutil.rmtree(tmp_path / "merged", ignore_errors=True)


def test_a_5000_digit_number_is_one_line(tmp_path, capsys, no_measuring):
    res = tmp_path / "res"
    results(res, "cpu-a", BASE, GOOD)
    results(res, "cpu-a", HEAD, GOOD)
    f = next((res / "cpu-a").glob(f"{HEAD[:8]}-*.json"))
    f.write_text(f.read_text().replace("1000.0", "1" * 5000, 1))
    rc, _, out = compare(tmp_path, res, capsys)
    assert rc == 2 and "a number of 5000 characters" in out and f.name in out
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"segments": [{"text": ' + "9" * 5000 + "}]}\n")
    assert main(["measure", "--workload", f"trace:{trace}"]) == 2
    err = capsys.readouterr().err
    no_traceback(err)
    assert len(err.strip().splitlines()) == 1 and "a number of 5000 characters" in err


def test_a_device_file_or_a_huge_sparse_file_as_a_trace_is_refused_unread(tmp_path, capsys, no_measuring):
    sparse = tmp_path / "huge.jsonl"
    with open(sparse, "wb") as fh:
        fh.truncate(1 << 40)  # 1 TiB of holes: read whole, this would not finish
    for path, needle in (("/dev/zero", "not a regular file"), (str(sparse), "over the limit")):
        assert main(["measure", "--workload", f"trace:{path}"]) == 2
        err = capsys.readouterr().err
        no_traceback(err)
        assert len(err.strip().splitlines()) == 1 and needle in err, err


@pytest.fixture
def no_measuring(monkeypatch):
    import vlmpath.suite.measure as sm

    def boom(*a, **k):
        raise AssertionError("a case was measured before the input check")

    monkeypatch.setattr(sm, "measure_case", boom)


@pytest.mark.parametrize("pattern", ["(a+)+$", "(x+x+)+y", "^(([a-z])+.)+[A-Z]([a-z])+$", "a{1,99999}"])
def test_a_catastrophic_selection_is_never_compiled(tmp_path, capsys, monkeypatch, pattern):
    import vlmpath.pr.merge as merge_mod

    res = tmp_path / "res"
    long_name = "bench_embed.Embed.track_" + "a" * 40 + "!"
    results(res, "cpu-a", BASE, {long_name: ("tok/s", [], [], [1.0], None)})
    results(res, "cpu-a", HEAD, {long_name: ("tok/s", [], [], [1.0], None)})
    arts = tmp_path / "arts"
    artifact(arts, "bench-cpu", res, "cpu-a", bench=pattern)
    compiled = []
    real = re.compile
    monkeypatch.setattr(merge_mod.re, "compile", lambda p, *a: compiled.append(p) or real(p, *a))
    rc, md, _, _ = merge(tmp_path, arts, capsys)
    assert pattern not in compiled
    assert "never compiled" in md.replace("\\", "")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".merged.")]


# --- 4. a comment that always posts -----------------------------------------------------------------
def test_the_comment_fits_at_every_bound_with_profiles_and_a_70k_value(tmp_path, capsys):
    from vlmpath.compare.profile_diff import CaseProfile, OpDelta
    from vlmpath.compare.verdict import compare as judge_all
    from vlmpath.compare.records import MachineRun, Metric, RunResults
    from vlmpath.render.comment import render_markdown

    huge = "v" * 70_000
    def run(commit, value):
        ms = [Metric(f"m{j}-" + "x" * 50, f"bench_embed.Embed.track_tok_per_s_{i}", (("p", huge if i == 0 else EVIL),),
                     "tok/s", value) for i in range(300) for j in range(1)]
        machines = {}
        for m in ms:
            machines.setdefault(m.machine, []).append(m)
        return RunResults(commit, tuple(MachineRun(k, commit, tuple(v)) for k, v in machines.items()),
                          notes=tuple(f"{EVIL} note {i}" for i in range(300)))
    rep = judge_all(run(BASE, 1000.0), run(HEAD, 500.0))
    profiles = [CaseProfile(EVIL * 3, EVIL * 3, (EVIL,) * 20,
                            tuple(OpDelta(EVIL * 2, 1, 2, 1.0, 9.0) for _ in range(20)),
                            "profiles/a/base.trace.json", "profiles/a/head.trace.json", EVIL * 5)
                for _ in range(10)]
    md = render_markdown(rep, profiles=profiles)
    comment_is_inert(md)
    no_workflow_command(md)
    assert md.splitlines()[1].startswith("**300 regressions")  # the verdict line is kept
    assert huge not in md and ("left out" in md or "omitted" in md)
    # Room was made in the sections, not by a hard cut of the text; 300 notes do not crowd
    # out the changes table, and the profiles section is inside the fit (said when cut).
    assert "comment cut at the size limit" not in md and "### What changed" in md
    assert "Where the time went" in md and "more warnings in comparison.json" in md
    # The smallest budget still keeps the marker and the verdict line.
    tiny = render_markdown(rep, profiles=profiles, max_chars=2000)
    assert len(tiny) <= 2000 and tiny.splitlines()[1] == md.splitlines()[1]


# --- 5. faults end cleanly ---------------------------------------------------------------------
def test_disk_full_during_run_leaves_the_store_unchanged(tmp_path, capsys, monkeypatch):
    """An injected ENOSPC when the fingerprint is written, after asv wrote new results: one
    line, exit 2, and every store file (results, fingerprint, run info) as before the run."""
    import subprocess

    import vlmpath.runner.run as runmod
    import vlmpath.runner.run_files as run_files
    import vlmpath.measure.platform as platform

    repo = tmp_path / "repo"
    (repo / "benchmarks").mkdir(parents=True)
    (repo / "asv.conf.json").write_text(json.dumps({"version": 1, "project": "x", "repo": ".",
                                                    "benchmark_dir": "benchmarks"}))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.email=t@e", "-c", "user.name=t", "commit", "-q", "-m", "x"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    store = tmp_path / "store"
    machine = "cpu-disk"
    # The store before: an earlier run of the same commit, with its fingerprint.
    old = write_asv_run(store, machine, commit, GOOD, fingerprint("cpu"))
    (store / machine / f"vlmpath-fingerprint-{commit[:8]}.json").write_text('{"torch": "old"}')
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}

    from types import SimpleNamespace

    monkeypatch.setattr(platform, "probe", lambda: SimpleNamespace(backend="cpu", device_name="cpu"))
    monkeypatch.setattr(runmod, "discover_listing", lambda *a, **k: [{"name": ACC, "params": [], "unit": ""}])
    monkeypatch.setattr(runmod, "package_location", lambda *a, **k: "here")
    monkeypatch.setattr(runmod, "asv", lambda *a, **k: None)

    def fake_asv_run(cmd, env, cwd, out):  # asv rewrites the results file and adds another
        old.write_text(old.read_text().replace("1.0", "0.5"))
        (store / machine / f"{commit[:8]}-other-env.json").write_text("{}")
        return 0
    monkeypatch.setattr(runmod, "stream", fake_asv_run)
    monkeypatch.setattr(runmod, "fingerprint", lambda *a, **k: {"torch": "new"})

    def full(path, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    monkeypatch.setattr(run_files, "write_text", full)
    rc = main(["run", "--repo", str(repo), "--results-dir", str(store), "--machine", machine,
               "--reports-dir", str(tmp_path / "reports"), "--allow-dirty"])
    cap = capsys.readouterr()
    no_traceback(cap.err, cap.out)
    err = [ln for ln in cap.err.splitlines() if ln.strip()]
    assert rc == 2 and len(err) == 1 and "No space left on device" in err[0], cap.err
    assert "as it was before the run" in err[0]
    after = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    assert after == before


def test_an_http_body_is_read_with_a_cap(monkeypatch):
    import io

    import vlmpath.github.rest as gh
    from vlmpath.core.errors import VlmpathError

    monkeypatch.setattr(gh, "MAX_BODY_BYTES", 1000)
    big = io.BytesIO(b"x" * 5000)
    with pytest.raises(VlmpathError, match="response body over 1000 bytes"):
        gh._read_capped(big, "GET /x")
    assert gh._read_capped(io.BytesIO(b"{}"), "GET /x") == b"{}"
