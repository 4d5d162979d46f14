"""``vlmpath run`` (src/vlmpath/runner/run.py), its summary (summary.py) and ``vlmpath serve``.

Fast tests cover selection, environment, bad input and the summary; the slow one runs the
real thing end to end in a clone whose package differs from this checkout, which proves
that the benchmark processes import the commit under test.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import threading
import urllib.request
from pathlib import Path

import pytest

from vlmpath.compare import results_store
from vlmpath.runner import run as runmod
from vlmpath.runner import serve
from vlmpath.core.errors import VlmpathError
from vlmpath.core.scales import Scale
from vlmpath.render import summary as summod

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "asv_results"
SHA_A, SHA_B = "e8bafdb4", "0b9c015c"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A clone of this repository (committed state) with a package change committed: its
    ``masked_scatter`` forces a sync, so its benchmarks differ measurably from ours."""
    dest = tmp_path_factory.mktemp("clone") / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)
    _git(dest, "config", "user.email", "test@example.com")
    _git(dest, "config", "user.name", "test")
    # asv.conf.json names the branch "main": a clone of a feature branch must still publish.
    _git(dest, "checkout", "-q", "-B", "main")
    inject = dest / "src" / "vlmpath" / "paths" / "inject.py"
    old = "    dest.masked_scatter_(mask.expand_as(dest), rows.to(dest.dtype))\n"
    text = inject.read_text()
    assert old in text, "inject.py changed: update this fixture's edit"
    inject.write_text(text.replace(old, "    int(mask.sum().item())  # test-only sync\n" + old))
    _git(dest, "commit", "-qam", "test: masked_scatter syncs")
    return dest


def _disc(name: str, *axes: tuple[str, ...]) -> runmod.Discovered:
    return runmod.Discovered(name, tuple(axes), "")


SUITE = [_disc("bench_inject.Inject.track_syncs", ("'masked_scatter'", "'where_index'"), ("'video'", "'mixed'")),
         _disc("bench_hash.Receive.time_receive", ("'xxh3'",), ("1", "64"))]


def test_select_matches_names_and_params_like_asv():
    got = runmod.select(SUITE, r"track_syncs\('where_index'")
    assert [(b.name, c) for b, c in got] == [("bench_inject.Inject.track_syncs", ("'where_index'", "'video'")),
                                            ("bench_inject.Inject.track_syncs", ("'where_index'", "'mixed'"))]
    assert len(runmod.select(SUITE, None)) == 6
    assert len(runmod.select(SUITE, r"time_receive\('xxh3', 64\)")) == 1


def test_select_rejects_a_regex_matching_nothing_and_lists_names():
    with pytest.raises(VlmpathError, match=r"matches no benchmark.*bench_hash\.Receive\.time_receive"):
        runmod.select(SUITE, "nothing_like_this")
    with pytest.raises(VlmpathError, match="not a valid regular expression"):
        runmod.select(SUITE, "(")


def test_launch_method():
    assert runmod.launch_method("auto", "cpu") == "forkserver"
    assert runmod.launch_method("auto", "cuda") == "spawn"
    assert runmod.launch_method("auto", "rocm") == "spawn"
    with pytest.raises(VlmpathError, match="cannot be used on a GPU"):
        runmod.launch_method("forkserver", "cuda")
    with pytest.raises(VlmpathError, match="choose one of"):
        runmod.launch_method("fork", "cpu")


def test_benchmark_env_puts_the_commit_under_test_first():
    base = {"PYTHONPATH": "/extra", "PATH": "/bin"}
    env = runmod.benchmark_env(runmod.RunOptions(quick=True, scale=Scale.TINY), ROOT, "m1", "cpu", base=base)
    # asv's runner drops PYTHONPATH; ASV_PYTHONPATH is what reaches sys.path.
    assert env["ASV_PYTHONPATH"].split(os.pathsep) == [str(ROOT / "src"), "/extra"]
    assert env["VLMPATH_SCALE"] == "tiny" and env["VLMPATH_QUICK"] == "1" and env["VLMPATH_MACHINE"] == "m1"
    assert env["OMP_NUM_THREADS"] == "1"
    env = runmod.benchmark_env(runmod.RunOptions(package_src="", extra_env={"K": "v"}), ROOT, "m1", "cuda", base={})
    assert "ASV_PYTHONPATH" not in env and "VLMPATH_QUICK" not in env and "OMP_NUM_THREADS" not in env
    assert env["K"] == "v"
    # Another commit than the work tree's HEAD: the caller's path (that commit's package) only.
    env = runmod.benchmark_env(runmod.RunOptions(), ROOT, "m1", "cpu", base=base, commit_is_head=False)
    assert env["ASV_PYTHONPATH"] == "/extra"


def test_dirty_tree_is_refused(clone, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (clone / "README.md").write_text((clone / "README.md").read_text() + "\nlocal edit\n")
    try:
        with pytest.raises(VlmpathError, match=r"uncommitted changes \(README.md\).*--allow-dirty"):
            runmod.run(runmod.RunOptions(repo=str(clone), results_dir=str(tmp_path / "r")))
    finally:
        _git(clone, "checkout", "--", "README.md")
    assert not (tmp_path / "r").exists()  # refused before anything was written


def test_unwritable_results_dir_and_unknown_commit(clone, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(VlmpathError, match="results dir .* is not writable"):
        runmod.run(runmod.RunOptions(repo=str(clone), results_dir=str(blocker / "results")))
    with pytest.raises(VlmpathError, match="no such commit"):
        runmod.run(runmod.RunOptions(repo=str(clone), set_commit_hash="deadbeefdeadbeef"))
    with pytest.raises(VlmpathError, match="not a hex commit"):
        runmod.run(runmod.RunOptions(repo=str(clone), set_commit_hash="HEAD~1"))


def test_not_a_git_repo(tmp_path):
    with pytest.raises(VlmpathError, match="not inside a git work tree"):
        runmod.run(runmod.RunOptions(repo=str(tmp_path)))


def test_summary_of_the_real_fixture_marks_missing_selection_partial(tmp_path):
    sel = [("bench_embed.EmbedRoutine.track_syncs", ("'legacy'", "'video'")),
           ("bench_inject.Count.time_count", ("'offsets'", "'many_small_images'")),
           ("bench_embed.EmbedRoutine.track_syncs", ("'legacy'", "'mixed'")),  # not selected then: NaN
           ("bench_hash.Receive.time_receive", ("'xxh3'", "1"))]  # no result at all
    s = summod.summarize(FIXTURE, SHA_B, "cpu-fixture", selected=sel)
    states = [(r.benchmark.rsplit(".", 1)[1], r.params_text, r.state) for r in s.rows]
    assert states == [("track_syncs", "legacy, video", "ok"), ("time_count", "offsets, many_small_images", "ok"),
                      ("track_syncs", "legacy, mixed", "skipped"), ("time_receive", "xxh3, 1", "missing")]
    assert s.status == "partial" and s.rows[0].value == 2.0 and s.rows[1].samples >= 6
    assert s.fingerprint["backend"] == "cpu"
    full = summod.summarize(FIXTURE, SHA_A, "cpu-fixture", selected=sel[:2])
    assert full.status == "complete"
    jpath, mpath = summod.write_summary(s, tmp_path)
    data = json.loads(jpath.read_text())
    assert data["status"] == "partial" and data["partial"] and data["counts"]["missing"] == 1
    assert "| `bench_hash.Receive.time_receive` | xxh3, 1 | - | 0 |  | **missing**: selected but no result" in mpath.read_text()
    # The per-run pair and the latest pair the dashboard reads; no temp files left.
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([jpath.name, mpath.name, "summary.json", "summary.md"])
    assert "2 syncs" in summod.render_table(s) and "2 syncs" not in summod.render_terminal(s)  # table: files, --table
    assert "2 syncs" in summod.render_terminal(s, table=True)
    assert summod.load_summary(jpath).rows == s.rows  # what `vlmpath run --table` prints from


def test_summary_marks_failed_benchmarks_and_interruption(tmp_path):
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from asv_fixtures import sha, write_asv_run
    finally:
        sys.path.remove(str(ROOT / "tests"))
    commit = sha("x")
    write_asv_run(tmp_path, "m1", commit, {
        "bench_embed.EmbedRoutine.track_tok_per_s": ("tok/s", ["pipeline"], [["default", "legacy"]], [10.0, None], None),
    })
    s = summod.summarize(tmp_path, commit, "m1")
    assert s.status == "partial" and [r.state for r in s.rows] == ["ok", "failed"]
    assert summod.summarize(tmp_path, commit, "m1", interrupted=True).status == "interrupted"
    none = summod.summarize(tmp_path, sha("other"), "m1")
    assert none.status == "failed" and "no results for commit" in none.notes[0]


def test_summary_shows_why_a_case_failed(tmp_path):
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from asv_fixtures import sha, write_asv_run
    finally:
        sys.path.remove(str(ROOT / "tests"))
    from vlmpath.core.failures import failures_path

    commit = sha("y")
    write_asv_run(tmp_path, "m1", commit, {
        "bench_embed.EmbedRoutine.track_tok_per_s": ("tok/s", ["pipeline"], [["default", "legacy"]], [None, None], None),
    })
    msg = "RuntimeError: split_with_sizes expects split_sizes to sum exactly to 256 <b>|x|</b> " + "y" * 300
    failures_path(tmp_path / "m1", commit).write_text(json.dumps(
        [{"benchmark": "bench_embed.EmbedRoutine.track_tok_per_s", "params": {"pipeline": "default"}, "error": msg}]))
    s = summod.summarize(tmp_path, commit, "m1")
    assert [r.error for r in s.rows] == [msg, "failed (asv recorded no result)"]
    term = summod.render_terminal(s)
    assert "failed: bench_embed.EmbedRoutine.track_tok_per_s(default): RuntimeError: split_with_sizes" in term
    assert "y" * 300 not in term  # clipped on screen; the JSON keeps it whole
    md = summod.render_markdown(s)
    row = next(line for line in md.splitlines() if "| default |" in line)
    assert "**failed**: RuntimeError\\: split\\_with\\_sizes" in row and "<b>" not in row and "\\|x\\|" in row
    assert json.loads(json.dumps(s.to_dict()))["rows"][0]["error"] == msg
    failures_path(tmp_path / "m1", commit).write_text("not json")
    broken = summod.summarize(tmp_path, commit, "m1")
    assert broken.rows[0].error == "failed (asv recorded no result)"
    assert any("corrupted failures file" in n for n in broken.notes) and "note: failure messages not shown" in \
        summod.render_terminal(broken)


def _failure(bench: str, error: str, **params) -> str:
    return json.dumps({"benchmark": bench, "params": params, "error": error})


def test_failure_lines_are_filed_deduplicated_and_merged_with_unselected_earlier_ones(tmp_path):
    from vlmpath.core.failures import failures_path, read_failures

    lines = tmp_path / "failures.jsonl"
    lines.write_text("\n".join([
        _failure("b.E.track_tok_per_s", "E: second round", pipeline="default", preset="video"),
        _failure("b.E.track_tok_per_s", "E: second round", pipeline="default", preset="video"),
        '{"benchmark": "b.E.track_tok_per_s", "par',  # a torn line: skipped with a warning
        _failure("b.H.time_receive", "MemoryError: no", path="xxh3", size_mib=64),
    ]) + "\n")
    commit = "c" * 40
    previous = failures_path(tmp_path / "res" / "m1", commit)
    previous.parent.mkdir(parents=True)
    previous.write_text(json.dumps([
        {"benchmark": "b.E.track_syncs", "params": {"pipeline": "legacy", "preset": "video"}, "error": "E: kept"},
        {"benchmark": "b.H.time_receive", "params": {"path": "xxh3", "size_mib": 1}, "error": "E: fixed since"},
    ]))
    chosen = [(_disc("b.E.track_tok_per_s", ("'default'",), ("'video'",)), ("'default'", "'video'")),
              (_disc("b.H.time_receive", ("'xxh3'",), ("1", "64")), ("'xxh3'", "1")),
              (_disc("b.H.time_receive", ("'xxh3'",), ("1", "64")), ("'xxh3'", "64"))]
    out = io.StringIO()
    path = runmod.write_failures(tmp_path / "res", "m1", commit, lines, chosen, out)
    assert path == previous and "1 unreadable line(s)" in out.getvalue()
    got = json.loads(path.read_text())
    assert got == sorted(got, key=lambda d: (d["benchmark"], tuple(map(str, d["params"].values()))))
    assert [(f.benchmark, f.params, f.error) for f in read_failures(path)] == [
        ("b.E.track_syncs", (("pipeline", "legacy"), ("preset", "video")), "E: kept"),  # not selected: kept
        ("b.E.track_tok_per_s", (("pipeline", "default"), ("preset", "video")), "E: second round"),  # once
        ("b.H.time_receive", (("path", "xxh3"), ("size_mib", "64")), "MemoryError: no"),
    ]  # size_mib=1 was selected and did not fail again: gone
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # atomic: no temp file left
    # Nothing failed and nothing before: an empty list, still written.
    empty = runmod.write_failures(tmp_path / "res", "m2", commit, tmp_path / "none.jsonl", chosen, io.StringIO())
    assert json.loads(empty.read_text()) == []


def test_corrupt_previous_failures_file_is_replaced_with_a_warning(tmp_path):
    from vlmpath.core.failures import failures_path

    prev = failures_path(tmp_path / "m1", "d" * 40)
    prev.parent.mkdir(parents=True)
    prev.write_text("{")
    out = io.StringIO()
    runmod.write_failures(tmp_path, "m1", "d" * 40, tmp_path / "none.jsonl", [], out)
    assert "corrupted failures file" in out.getvalue() and json.loads(prev.read_text()) == []


def test_serve_publishes_the_html_dir(tmp_path):
    (tmp_path / "index.html").write_text("<html>vlmpath dashboard</html>")
    server = serve.make_server(tmp_path, port=0)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        port = server.server_address[1]
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=10).read().decode()
        assert "vlmpath dashboard" in body
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(VlmpathError, match="has no index.html"):
        serve.make_server(tmp_path / "empty", port=0)


@pytest.mark.e2e
def test_vlmpath_run_end_to_end_in_a_clone(clone, tmp_path):
    """The CLI of the clone, in the clone: quick, narrow; the clone's changed package shows up
    in the results (masked_scatter syncs), so the benchmarks imported the commit under test."""
    head = _git(clone, "rev-parse", "HEAD").strip()
    env = dict(os.environ, HOME=str(tmp_path), PYTHONPATH=str(clone / "src"), VLMPATH_MACHINE="cpu-e2e")
    regex = (r"bench_inject\.Inject\.track_syncs\('masked_scatter', 'few_large_images'\)"
             r"|bench_embed\.EmbedRoutine\.track_(syncs|tok_per_s)\('default', 'video'\)")
    cmd = [sys.executable, "-m", "vlmpath.cli", "run", "--quick", "--bench", regex]
    first = subprocess.Popen(cmd, cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # A second run on the same results directory, while the first holds it: refused in one
    # line naming the first (core.run_lock); the first's results below are whole.
    lock = clone / ".asv" / "results" / ".vlmpath-run.lock"
    deadline = time.monotonic() + 300
    while not (lock.is_file() and lock.read_text().strip()) and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    second = subprocess.run(cmd, cwd=clone, env=env, check=False, capture_output=True, text=True, timeout=600)
    out, err = first.communicate(timeout=600)
    proc = subprocess.CompletedProcess(cmd, first.returncode, out, err)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert second.returncode == 2 and f"in use by another run (pid {first.pid}" in second.stderr, second.stderr
    assert "%] ··· bench_" in proc.stdout  # asv's progress lines were streamed
    # It ends on what it found and where to look, not on a table of every case.
    tail = proc.stdout.rstrip().splitlines()
    assert tail[-1].startswith("look here: ") and tail[-1].split()[2].endswith("vlmpath/index.html"), tail[-6:]
    assert tail[-2].startswith("full table: ") and "| bench_" not in "\n".join(tail[-8:])
    assert f"benchmarks import vlmpath from {clone / 'src' / 'vlmpath'}" in proc.stdout

    results = clone / ".asv" / "results"
    s = summod.summarize(results, head, "cpu-e2e")
    vals = {(r.benchmark.rsplit(".", 1)[1], r.params_text): r.value for r in s.rows if r.state == "ok"}
    assert vals[("track_syncs", "masked_scatter, few_large_images")] == 1.0  # ours is 0
    assert vals[("track_syncs", "default, video")] >= 1.0
    assert vals[("track_tok_per_s", "default, video")] > 0
    fp = json.loads(results_store.fingerprint_path(results, "cpu-e2e", head).read_text())
    assert fp["machine"] == "cpu-e2e" and fp["backend"] == "cpu"
    assert json.loads((results / "cpu-e2e" / f"vlmpath-failures-{head[:8]}.json").read_text()) == []  # none failed
    info = json.loads((results / "cpu-e2e" / f"vlmpath-run-{head[:8]}.json").read_text())
    from vlmpath.core.helper_digest import helper_digests

    assert info == {"commit": head, "quick": True, "scale": "tiny", "bench": regex, "trusted": False, "partial": None,
                    "helpers": helper_digests(clone / "benchmarks")}  # for ci alert (core.helper_digest)
    assert {"bench_embed", "bench_encode"} <= set(info["helpers"])
    summary = json.loads((clone / "reports" / "out" / f"run-cpu-e2e-{head[:8]}.json").read_text())
    assert summary["status"] == "complete" and summary["counts"]["ok"] == 3 and summary["commit"] == head
    index = json.loads((clone / ".asv" / "html" / "index.json").read_text())
    assert (clone / ".asv" / "html" / "index.html").is_file()
    assert "bench_embed.EmbedRoutine.track_tok_per_s" in index["benchmarks"]

    # From the run to the dashboard page, with no hand-made file: the run's latest summary
    # (reports/out/summary.md) is the one the page shows.
    latest = clone / "reports" / "out" / "summary.md"
    assert latest.read_text() == (clone / "reports" / "out" / f"run-cpu-e2e-{head[:8]}.md").read_text()
    assert not (clone / "reports" / "summary.md").exists()
    proc = subprocess.run([sys.executable, "-m", "vlmpath.cli", "report", "--html", ".asv/html"],
                          cwd=clone, env=env, check=False, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    page = (clone / ".asv" / "html" / "vlmpath" / "index.html").read_text()
    assert "No summary yet" not in page
    # The summary rendered (render.md_html), not raw Markdown
    assert f"vlmpath run: <code>cpu-e2e</code> @ <code>{head[:8]}</code> (complete)" in page and "###" not in page
    assert (clone / ".asv" / "html" / "vlmpath" / "summary.json").is_file()
    assert _git(clone, "status", "--porcelain") == ""  # outputs stay in ignored folders


@pytest.mark.e2e
def test_ctrl_c_leaves_no_half_written_results(clone, tmp_path):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) during ``asv run``: asv
    saves nothing for the commit, no fingerprint is written, the summary says interrupted."""
    import signal
    import time

    head = _git(clone, "rev-parse", "HEAD").strip()
    env = dict(os.environ, HOME=str(tmp_path), PYTHONPATH=str(clone / "src"), VLMPATH_MACHINE="cpu-int")
    proc = subprocess.Popen([sys.executable, "-m", "vlmpath.cli", "run", "--bench", "bench_encode.EncodeTime",
                             "--results-dir", str(tmp_path / "res"), "--reports-dir", str(tmp_path / "rep")],
                            cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True,
                            # As from a terminal: Ctrl-C is live. A shell that started this test
                            # run in the background (`... &`) leaves SIGINT ignored, and Python
                            # keeps an inherited SIG_IGN (the run then finished with exit 0).
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "Benchmarking existing" in line:
            time.sleep(2)  # inside the first benchmark
            os.killpg(proc.pid, signal.SIGINT)
            break
    rest = proc.stdout.read()
    assert proc.wait(timeout=120) == 130, "".join(seen)[-2000:] + rest[-2000:]
    mdir = tmp_path / "res" / "cpu-int"
    assert not [p.name for p in mdir.glob(f"{head[:8]}-*.json")]  # asv saved nothing
    assert not results_store.fingerprint_path(tmp_path / "res", "cpu-int", head).exists()
    assert not (mdir / f"vlmpath-failures-{head[:8]}.json").exists()
    data = json.loads((tmp_path / "rep" / f"interrupted-cpu-int-{head[:8]}.json").read_text())
    assert data["status"] == "interrupted" and data["partial"] and data["rows"] == []  # only what it measured
    assert not (tmp_path / "rep" / f"run-cpu-int-{head[:8]}.json").exists()  # never replaces a complete one
    assert not (tmp_path / "rep" / "summary.md").exists()
    assert not results_store.run_info_path(tmp_path / "res", "cpu-int", head).exists()  # nothing filed: nothing marked
    assert not [p for p in (tmp_path / "rep").iterdir() if p.name.startswith(".")]  # no temp files


def test_latest_summary_is_written_and_the_dashboard_reads_the_newer_one(tmp_path):
    from vlmpath.render.dashboard import latest_summary_dir, write_dashboard

    reports, out = tmp_path / "reports", tmp_path / "reports" / "out"
    first = summod.Summary(commit="a" * 40, machine="cpu-x", status="complete", rows=())
    summod.write_summary(first, out)
    assert (out / "summary.md").read_text() == (out / f"run-cpu-x-{'a' * 8}.md").read_text()
    second = summod.Summary(commit="b" * 40, machine="cpu-x", status="partial", rows=())
    summod.write_summary(second, out)
    assert "`bbbbbbbb`" in (out / "summary.md").read_text()  # the latest run replaces it
    assert (out / f"run-cpu-x-{'a' * 8}.md").is_file()  # per-run files stay
    assert latest_summary_dir(reports) == out
    # A summary placed in the reports dir itself wins only when it is newer (planted both ways).
    (reports / "summary.md").write_text("hand-made\n")
    os.utime(reports / "summary.md", ns=(1, 1))
    assert latest_summary_dir(reports) == out
    os.utime(out / "summary.md", ns=(1, 1))
    os.utime(reports / "summary.md", None)
    assert latest_summary_dir(reports) == reports
    os.utime(out / "summary.md", None)
    (reports / "summary.md").unlink()
    html = tmp_path / "html"
    html.mkdir()
    page = write_dashboard(html, reports).read_text()
    assert "vlmpath run: <code>cpu-x</code> @ <code>bbbbbbbb</code> (partial)" in page and "No summary yet" not in page
