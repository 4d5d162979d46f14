"""Does the red-team corpus (tests/redteam_corpus.py) hold through the real code?

Each entry of the corpus goes through what reads it in the privileged jobs: ``vlmpath ci
merge`` (every string field at once: benchmark name, parameter value, unit, failure
message, fingerprint, run notes, error.txt, artifact name, profiles, what grew), ``vlmpath
ci alert`` (issue titles, bodies, log), the JSON readers of every artifact file, the YAML
reader of ``accepted.yaml`` and ``--config``, and each escaping sink alone. What must hold:

- the job log: no line the Actions runner would act on outside a ``::stop-commands::``
  fence (``tests/log_scan.py``), no traceback;
- the comment and issues: every line printable (no control, bidi, zero-width character,
  surrogate), no live mention, link or HTML, within GitHub's limit;
- a bad file: one line naming it (exit 2), or one note while the comment still posts;
  a YAML alias bomb refused before anything is expanded (a count, not a timing);
- the merge's peak memory on ~60 MB of results is below 600 MB (e2e: its own process).

Unchanged inputs beside them stay green (``test_the_plain_twin_is_green``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from asv_fixtures import RESULT_COLUMNS, fingerprint, sha, write_asv_run
from github_fake import TOKEN, github_fake  # noqa: F401 (fixture)
from log_scan import assert_inert, content_lines
from redteam_corpus import JSON_BODIES, TEXTS, YAML_BODIES

from vlmpath.cli import main
from vlmpath.render.comment import GITHUB_COMMENT_LIMIT, MARKER

ROOT = Path(__file__).resolve().parents[1]
BASE, HEAD = sha("redteam-base"), sha("redteam-head")
ACC = "bench_embed.Embed.track_accuracy"
FAIL = "bench_embed.Failing.time_fail"  # a case of its own: a failed case is one failure
GOOD = {ACC: ("fraction", [], [], [1.0], None)}


def _raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _dir_name(text: str) -> str:
    # What a file system takes of the text as a directory name (no "/", NUL or surrogate).
    kept = "".join(ch for ch in text if ch not in "/\x00" and not 0xD800 <= ord(ch) <= 0xDFFF)
    return ("bench-" + kept).encode()[:200].decode("utf-8", "ignore").strip() or "bench-x"


def _run_json(machine: str, notes=()) -> str:
    return json.dumps({"schema_version": 1, "base_sha": BASE, "head_sha": HEAD, "machine": machine,
                       "bench": None, "notes": list(notes)})


def _artifact(arts: Path, name: str, res: Path, machine: str = "cpu-a", notes=()) -> Path:
    art = arts / name
    shutil.copytree(res, art / "results")
    (art / "run.json").write_text(_run_json(machine, notes), encoding="utf-8")
    (art / "pr-number").write_text("7\n", encoding="utf-8")
    return art


def _hostile_artifacts(tmp: Path, s: str) -> Path:
    """One artifact with ``s`` in every string field it has, and one whose run failed with
    ``s`` as its error; accuracy falls 1.0 -> 0.5 beside it, so the verdict is red."""
    res = tmp / "res"
    name = f"bench_embed.Hostile.track_{s}"
    spec_b = {name: (s, ["p"], [[s]], [1.0], None), ACC: GOOD[ACC], FAIL: ("seconds", [], [], [1.0], None)}
    spec_h = {name: (s, ["p"], [[s]], [2.0], None), ACC: ("fraction", [], [], [0.5], None),
              FAIL: ("seconds", [], [], [None], None)}
    write_asv_run(res, "cpu-a", BASE, spec_b, fingerprint("cpu", torch=s))
    write_asv_run(res, "cpu-a", HEAD, spec_h, fingerprint("cpu", torch=s + "2"))
    from vlmpath.core.failures import failure_line, failures_path

    failures_path(res / "cpu-a", HEAD).write_bytes(b"[" + failure_line(FAIL, {}, s).rstrip() + b"]")
    arts = tmp / "arts"
    art = _artifact(arts, _dir_name(s), res, notes=[s, s * 3])
    (art / "profiles.json").write_bytes(_raw(json.dumps([{
        "machine": s, "case": s, "benchmarks": [s], "base_trace": "profiles/a/base.trace.json",
        "head_trace": "profiles/a/head.trace.json", "note": s,
        "deltas": [{"name": s, "base_calls": 1, "head_calls": 2, "base_us": 1.0, "head_us": 9.0}]}])))
    (art / "ir-grew.json").write_bytes(_raw(json.dumps([{
        "case": s, "base_total": 10, "head_total": 20, "notes": [s], "unit": "bytecodes",
        "python": [{"name": s, "base": 1, "head": 5, "share": 0.5}]}])))
    (arts / "bench-failed").mkdir()
    (arts / "bench-failed" / "error.txt").write_bytes(_raw(s))
    return arts


def _merge(tmp: Path, arts: Path, capsys, *extra: str) -> tuple[int, str, str, str]:
    out = tmp / "merged"
    shutil.rmtree(out, ignore_errors=True)
    rc = main(["ci", "merge", str(arts), "--out", str(out), *extra])
    cap = capsys.readouterr()
    _no_traceback(cap.out + cap.err)
    assert_inert(cap.out, cap.err)
    md = (out / "comment.md").read_text(encoding="utf-8") if (out / "comment.md").exists() else ""
    summary = (out / "summary.txt").read_text(encoding="utf-8") if (out / "summary.txt").exists() else ""
    if md:
        _shown_inert(md)
    if summary:
        assert_inert(summary)
        assert all(ln.isprintable() for ln in summary.split("\n")), "a refused character in summary.txt"
    return rc, md, summary, cap.out + cap.err


def _no_traceback(text: str) -> None:
    assert "Traceback" not in text and "RecursionError" not in text, text[-2000:]


def _shown_inert(md: str) -> None:
    """A comment or issue body: printable lines only, no live mention, link or HTML."""
    assert len(md) <= GITHUB_COMMENT_LIMIT
    bad = [ln for ln in md.split("\n") if not ln.isprintable()]
    assert not bad, [ascii(b[:120]) for b in bad[:3]]
    outside = re.sub(r"`[^`\n]*`", "", md)
    assert not re.search(r"(?<![\\\w&#])@octocat", outside), "live mention"
    assert not re.search(r"(?<!\\)\]\(https://evil", outside) and "<img" not in outside and "<!-- -->" not in outside


# --- 1. every text through the merge: log, comment, summary --------------------------------
@pytest.mark.parametrize("key", sorted(TEXTS))
def test_a_hostile_text_in_every_field_of_a_merge(tmp_path, capsys, key):
    rc, md, summary, _ = _merge(tmp_path, _hostile_artifacts(tmp_path, TEXTS[key]), capsys, "--fail")
    assert rc == 1 and md.startswith(MARKER) and "regression(s)" in summary
    rows = json.loads((tmp_path / "merged" / "comparison.json").read_text())["machines"][0]["comparisons"]
    assert {r["verdict"] for r in rows if r["benchmark"] == ACC} == {"regression"}  # red, whatever the names


def test_the_plain_twin_is_green(tmp_path, capsys):
    res = tmp_path / "res"
    write_asv_run(res, "cpu-a", BASE, GOOD, fingerprint("cpu"))
    write_asv_run(res, "cpu-a", HEAD, GOOD, fingerprint("cpu"))
    arts = tmp_path / "arts"
    _artifact(arts, "bench-cpu", res)
    rc, md, _, log = _merge(tmp_path, arts, capsys, "--fail")
    assert rc == 0 and md.splitlines()[1].startswith("**No regressions")
    assert "::stop-commands::" in log  # the summary was printed fenced


# --- 2. every text through ci alert: titles, bodies, log -----------------------------------
def test_every_hostile_text_through_ci_alert(tmp_path, capsys, github_fake, monkeypatch):
    res = tmp_path / "history"
    # A known method (its definition is the metric table's), the text in its parameter values.
    texts = list(TEXTS.values())
    name = "bench_embed.Embed.track_tok_per_s"
    spread = (0.99, 1.0, 1.01, 0.995, 1.005)

    def run(commit: str, value: float, i: int) -> None:
        write_asv_run(res, "cpu-a", commit, {name: ("tok/s", ["case"], [texts], [value] * len(texts),
                                                    [[value * f for f in spread]] * len(texts))},
                      fingerprint("cpu"), date=1_700_000_000_000 + i * 3_600_000)
    for i in range(4):
        run(sha(f"rt{i}"), 1000.0, i)
    slow = sha("rt4")
    run(slow, 300.0, 4)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", github_fake.url)
    rc = main(["ci", "alert", "--results", str(res), "--commit", slow, "--window", "4", "--repo", "octo-org/bench",
               "--fail"])
    cap = capsys.readouterr()
    _no_traceback(cap.out + cap.err)
    scan = assert_inert(cap.out, cap.err)
    assert rc == 1 and len(github_fake.issues) == len(TEXTS)
    assert any("regressed" in ln for ln in scan.content) or "regressed" in cap.out
    for issue in github_fake.issues.values():
        title = issue["title"]
        assert title.isprintable() and "##[" not in title and "@" not in title and len(title) <= 240, ascii(title)
        assert not title.lstrip().startswith("::")
        _shown_inert(issue["body"])


# --- 3. every JSON body in every artifact file ---------------------------------------------
def _good_artifacts(tmp: Path) -> Path:
    res = tmp / "res"
    write_asv_run(res, "cpu-a", BASE, GOOD, fingerprint("cpu"))
    write_asv_run(res, "cpu-a", HEAD, GOOD, fingerprint("cpu"))
    arts = tmp / "arts"
    _artifact(arts, "bench-cpu", res)
    return arts


@pytest.mark.parametrize("key", sorted(JSON_BODIES))
@pytest.mark.parametrize("file", ["ir-grew.json", "profiles.json"])
def test_a_bad_side_file_is_one_note_and_the_comment_posts(tmp_path, capsys, key, file):
    arts = _good_artifacts(tmp_path)
    (arts / "bench-cpu" / file).write_text(JSON_BODIES[key], encoding="utf-8")
    rc, md, _, _ = _merge(tmp_path, arts, capsys, "--fail")
    assert rc == 0 and md.splitlines()[1].startswith("**No regressions")  # it posts, and the verdict stands
    said = [ln for ln in md.replace("\\", "").splitlines()
            if ("what-grew" in ln if file == "ir-grew.json" else "profiles.json" in ln)]
    if key.startswith("negative-zero") and file == "ir-grew.json":  # a valid what-grew body: shown, no note
        assert said == [] and "What grew" in md
    else:
        assert len(said) == 1, said  # one line, saying why


@pytest.mark.parametrize("key", sorted(JSON_BODIES))
@pytest.mark.parametrize("file", ["run.json", "results"])
def test_a_bad_run_record_or_results_file_is_one_line(tmp_path, capsys, key, file):
    arts = _good_artifacts(tmp_path)
    target = (arts / "bench-cpu" / "run.json" if file == "run.json"
              else next((arts / "bench-cpu" / "results" / "cpu-a").glob(f"{HEAD[:8]}-*.json")))
    target.write_text(JSON_BODIES[key], encoding="utf-8")
    rc, _, _, log = _merge(tmp_path, arts, capsys, "--fail")
    lines = content_lines(log)
    assert rc == 2 and len(lines) == 1 and target.name in lines[0], lines
    assert not (tmp_path / "merged").exists()


@pytest.mark.parametrize("key", sorted(JSON_BODIES))
def test_a_bad_engine_record_line_is_one_line(tmp_path, capsys, key):
    """An engine PR's artifact (``ci pr --engine-src``): records as JSON Lines, read by the
    privileged merge with the same bounds."""
    art = tmp_path / "arts" / "bench-engine"
    (art / "records").mkdir(parents=True)
    (art / "run.json").write_text(json.dumps({**json.loads(_run_json("cpu-a")), "kind": "engine"}), encoding="utf-8")
    (art / "pr-number").write_text("7\n", encoding="utf-8")
    (art / "records" / "base.jsonl").write_text(JSON_BODIES[key].replace("\n", " ") + "\n", encoding="utf-8")
    (art / "records" / "head.jsonl").write_text(JSON_BODIES[key].replace("\n", " ") + "\n", encoding="utf-8")
    rc, _, _, log = _merge(tmp_path, tmp_path / "arts", capsys, "--fail")
    lines = content_lines(log)
    assert rc == 2 and len(lines) == 1 and "base.jsonl" in lines[0], lines


def test_the_run_budget_refuses_past_its_bytes_and_its_time():
    from vlmpath.core.budget import RunBudget
    from vlmpath.core.errors import VlmpathError

    now = [0.0]
    spent = RunBudget(max_bytes=100, max_seconds=10.0, clock=lambda: now[0])
    spent.charge(60, "a")
    spent.charge(40, "b")  # exactly the limit: fine
    with pytest.raises(VlmpathError, match="c: the run's inputs are over 100 bytes"):
        spent.charge(1, "c")
    spent = RunBudget(max_bytes=100, max_seconds=10.0, clock=lambda: now[0])
    now[0] = 10.0
    spent.check_time("d")
    now[0] = 10.5
    with pytest.raises(VlmpathError, match="d: the run spent 10 s"):
        spent.check_time("d")


# --- 4. every YAML body as accepted.yaml and as --config -----------------------------------
@pytest.mark.parametrize("key", sorted(YAML_BODIES))
@pytest.mark.parametrize("flag", ["--accepted", "--config"])
def test_a_hostile_yaml_is_one_line_naming_the_file(tmp_path, capsys, key, flag):
    res = tmp_path / "res"
    write_asv_run(res, "cpu-a", BASE, GOOD, fingerprint("cpu"))
    write_asv_run(res, "cpu-a", HEAD, {ACC: ("fraction", [], [], [0.5], None)}, fingerprint("cpu"))
    body, needle = YAML_BODIES[key]
    f = tmp_path / "hostile.yaml"
    f.write_bytes(body)
    rc = main(["compare", BASE, HEAD, "--results", str(res), flag, str(f)])
    cap = capsys.readouterr()
    _no_traceback(cap.out + cap.err)
    lines = content_lines(cap.err)
    assert rc == 2 and len(lines) == 1 and "hostile.yaml" in lines[0], lines
    if not (key == "not-utf8" and flag == "--accepted"):  # the list reads bytes as U+FFFD, then its own rules refuse
        assert needle.lower() in lines[0].lower(), (needle, lines[0])
    arts = tmp_path / "arts"
    _artifact(arts, "bench-cpu", res)
    rc, _, _, log = _merge(tmp_path, arts, capsys, flag, str(f))  # the privileged job says it too, fenced
    merged = content_lines(log)
    assert rc == 2 and len(merged) == 1 and "hostile.yaml" in merged[0], merged


def test_an_alias_bomb_is_refused_before_anything_is_expanded(tmp_path, monkeypatch):
    import yaml.composer

    from vlmpath.core import safe_yaml
    from vlmpath.core.errors import VlmpathError

    composed = []
    real = yaml.composer.Composer.compose_node

    def counting(self, parent, index):
        composed.append(1)
        return real(self, parent, index)

    monkeypatch.setattr(yaml.composer.Composer, "compose_node", counting)
    bomb = YAML_BODIES["alias-bomb"][0]
    assert len(bomb) < 500
    f = tmp_path / "accepted.yaml"
    f.write_bytes(bomb)
    with pytest.raises(VlmpathError, match="anchor"):
        safe_yaml.load_file(f, "accepted-regressions file")
    assert len(composed) <= 3  # the top mapping and the first key: the anchor is refused there
    f.write_bytes(b"accepted: [{case: a, pr: 7, reason: r}]\n")  # the plain twin loads
    assert safe_yaml.load_file(f, "accepted-regressions file") == {"accepted": [{"case": "a", "pr": 7, "reason": "r"}]}


# --- 5. every text through every sink alone -------------------------------------------------
@pytest.mark.parametrize("key", sorted(TEXTS))
def test_each_sink_lets_through_only_what_it_allows(key):
    from vlmpath.render.escape import file_name, html_escape, log_line, md_code, md_escape, title_text
    from vlmpath.render.job_log import stop_commands_block

    s = TEXTS[key]
    for out in (md_escape(s), html_escape(s), md_code(s), log_line(s), title_text(s)):
        assert out.isprintable(), ascii(out[:80])
    for out in (md_escape(s), html_escape(s)):
        assert not re.search(r"[<>]", out) and "@" not in out and "\n" not in out
    assert "`" not in md_code(s) and not re.search(r"(?<!\\)\|", md_code(s))
    for line in (log_line(s), title_text(s)):
        assert "##[" not in line and not line.lstrip().startswith("::")
    assert "@" not in title_text(s) and len(title_text(s)) <= 200
    name = file_name(s)
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}", name), name
    block = stop_commands_block(s)
    assert assert_inert(block).fences == 1 and all(ln.isprintable() for ln in block.split("\n"))


# --- 6. budgets of the merge: a failure-only merge, and memory -------------------------------
def test_a_merge_of_many_failed_artifacts_is_fitted_and_posts(tmp_path, capsys):
    arts = tmp_path / "arts"
    for i in range(400):
        (arts / f"bench-m{i:03d}").mkdir(parents=True)
        (arts / f"bench-m{i:03d}" / "error.txt").write_text("##[error] boom " + "y" * 600, encoding="utf-8")
    rc, md, _, _ = _merge(tmp_path, arts, capsys)
    assert rc == 0 and len(md) <= GITHUB_COMMENT_LIMIT and "did not run on any machine" in md
    assert "more errors omitted" in md
    from vlmpath.github.comment import prepare_body

    assert prepare_body(md) == md  # GitHub would take it: the marker is in, the size fits
    (arts / "bench-m000" / "error.txt").write_text("one error", encoding="utf-8")
    for p in arts.iterdir():
        if p.name != "bench-m000":
            shutil.rmtree(p)
    rc, md, _, _ = _merge(tmp_path, arts, capsys)  # one failed machine: said whole, nothing omitted
    assert "one error" in md and "omitted" not in md


def _big_results(root: Path, mb: int) -> None:
    """~``mb`` MB of results in two files (base, head): long parameter values (what used to
    be copied into every case) over a second axis, with samples."""
    mdir = root / "bench-cpu" / "results" / "cpu-a"
    mdir.mkdir(parents=True)
    (mdir / "machine.json").write_text(json.dumps({"machine": "cpu-a", "version": 1}))
    per_file = mb * 1_000_000 // 2
    n_long, n_short, n_bench = 10, 40, 3
    plen = per_file // (n_bench * n_long)
    for commit, value in ((BASE, 1.0e-3), (HEAD, 1.0e-3)):
        results = {}
        for b in range(n_bench):
            params = [[repr(f"v{k}-" + "x" * plen) for k in range(n_long)], [repr(f"w{k}") for k in range(n_short)]]
            n = n_long * n_short
            samples = [[value * (1 + 0.001 * (j % 7)) for j in range(10)] for _ in range(n)]
            results[f"bench_embed.Embed{b}.time_case"] = [[value] * n, params, "v" * 64, 1_700_000_000_000, 0.5,
                                                         None, None, None, None, None, None, samples]
        (mdir / f"{commit[:8]}-existing-py.json").write_text(json.dumps({
            "commit_hash": commit, "env_name": "existing-py", "date": 1_700_000_000_000,
            "params": {"machine": "cpu-a"}, "python": "3.11", "requirements": {}, "env_vars": {},
            "result_columns": RESULT_COLUMNS, "results": results, "durations": {}, "version": 2}))
    (root / "bench-cpu" / "run.json").write_text(_run_json("cpu-a"))
    (root / "bench-cpu" / "pr-number").write_text("7\n")


# The child's own peak, read from its /proc/self/status (VmHWM) as it exits. Not wait4's
# ru_maxrss: the kernel folds the RSS of the forking parent's address space into the child's
# maxrss at exec, so under a pytest process grown by earlier tests (608 MB in CI) it reported
# the parent, not the merge (363 MB alone).
_PEAK_LAUNCHER = """import os, runpy, sys
try:
    runpy.run_module("vlmpath.cli", run_name="__main__", alter_sys=True)
finally:
    with open("/proc/self/status") as f, open(os.environ["VLMPATH_TEST_HWM"], "w") as out:
        out.write(next(line for line in f if line.startswith("VmHWM:")))
"""


@pytest.mark.e2e
def test_the_merge_of_60_mb_of_results_peaks_below_600_mb(tmp_path):
    arts = tmp_path / "arts"
    _big_results(arts, 60)
    size = sum(p.stat().st_size for p in arts.rglob("*") if p.is_file())
    assert size > 58_000_000
    hwm = tmp_path / "vmhwm.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "VLMPATH_TEST_HWM": str(hwm)}
    proc = subprocess.run([sys.executable, "-c", _PEAK_LAUNCHER, "ci", "merge", str(arts), "--out",
                           str(tmp_path / "merged")], env=env, capture_output=True)
    out, err = proc.stdout, proc.stderr
    peak_mb = int(hwm.read_text().split()[1]) / 1024  # "VmHWM:  N kB"
    print(f"ci merge of {size / 1e6:.1f} MB of results: peak RSS {peak_mb:.0f} MB")
    assert proc.returncode == 0, err.decode()[-2000:]
    assert peak_mb < 600, peak_mb
    md = (tmp_path / "merged" / "comment.md").read_text(encoding="utf-8")
    assert len(md) <= GITHUB_COMMENT_LIMIT and "cases on 1 machine" in md
    assert_inert(out.decode(), err.decode())
