"""Is an engine one registry entry, found by name everywhere, and can a new one be added
without editing vlmpath?

The toy engine (``tests/toy_engine.py``) lives in a temporary directory: one module (its
entry and adapter) plus its data file and the entry point a ``pip install`` would leave.
With that directory on the path and nothing else changed, ``--engine toy==1.0`` parses,
``engine install`` builds its environment (a cheap fake installer), ``engine list`` shows
it, ``measure`` drives it in the engine worker, and ``ci pr --engine-src`` finds it by its
checkout layout and turns red on a misplacement planted in the toy engine's own merge
while an identical commit stays green. Without the directory the registry does not know
it (discovery is a function of the path, not a registration).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from toy_engine import toy, write_toy, write_toyeng  # noqa: F401 - toy: the fixture (tests/toy_engine.py)

from vlmpath.cli import main
from vlmpath.core.errors import EngineError, VlmpathError
from vlmpath.engines import registry
from vlmpath.engines.base import EngineAdapter, EngineSpec, Routine

WORKLOAD = "many_small_images"  # several items per step: reversed rows land in the wrong places


# --- the registry itself (fast) ------------------------------------------------------------
def test_sglang_is_an_entry_and_unknown_names_list_the_known():
    assert "sglang" in registry.names()
    e = registry.get("sglang")
    assert (e.package, e.import_name, e.source_dirs) == ("sglang", "sglang", ("python", ""))
    assert {"triton", "msgspec", "blake3"} <= set(e.chain())
    assert {"count", "scatter", "shm"} <= set(e.seams)
    assert e.adapter == "vlmpath.engines.sglang_adapter:SglangEngine"
    with pytest.raises(EngineError, match=r"unknown engine 'tgi': vlmpath drives .*sglang"):
        registry.get("tgi")


def test_sglang_adapter_and_reference_routine_satisfy_the_protocols():
    from vlmpath.engines.reference import EmbedRoutine
    from vlmpath.engines.sglang_adapter import SglangEngine, SglangRoutine

    for cls, proto in ((SglangEngine, EngineAdapter), (SglangRoutine, Routine), (EmbedRoutine, Routine)):
        missing = [m for m in ("routine", "arrive", "run_step") if hasattr(proto, m) and not hasattr(cls, m)]
        assert not missing, (cls, missing)


def test_toy_is_found_through_its_entry_point_and_parsed_like_sglang(toy, tmp_path):
    assert "toy" in registry.names()
    spec = EngineSpec.parse("toy==1.0")
    assert (spec.label, spec.slug) == ("toy==1.0", "toy-1.0")
    tree = write_toyeng(tmp_path / "checkout" / "src")
    src = EngineSpec.parse(None, src=str(tree))  # the engine is the one whose package the tree holds
    assert src.label == f"toy@src:{tree.resolve()}" and EngineSpec.parse(src.label) == src
    with pytest.raises(EngineError, match=f"give --engine-src {tree}"):
        EngineSpec.parse(None, src=str(tmp_path / "checkout"))  # the checkout's root: its src/ is named
    from vlmpath.pr.engine import engine_subdir

    assert engine_subdir(tmp_path / "checkout", None) == "src"  # the entry's layout, not sglang's python/
    assert registry.get("toy").chain() == ["numpy"]


def test_the_worker_builds_the_entrys_adapter_and_holds_it_to_the_protocol(toy, monkeypatch):
    from vlmpath.suite.worker import load_engine

    monkeypatch.syspath_prepend(str(toy.parent / "release"))  # the released toyeng
    import toy_vlmpath

    engine = load_engine("toy==1.0")
    assert isinstance(engine, toy_vlmpath.ToyEngine) and isinstance(engine, EngineAdapter)
    assert (engine.label, engine.version, engine.seams) == ("toy==1.0", "1.0", {"merge": "masked_scatter",
                                                                              "rows": "in_order"})
    monkeypatch.setattr(toy_vlmpath.ToyEngine, "seams", {}, raising=False)
    monkeypatch.setattr(toy_vlmpath.ToyEngine, "__init__", lambda self, label, options: None)
    monkeypatch.setattr(toy_vlmpath.ToyEngine, "label", "toy==1.0", raising=False)
    monkeypatch.setattr(toy_vlmpath.ToyEngine, "version", "1.0", raising=False)
    with pytest.raises(EngineError, match="found no merge, rows seam"):
        load_engine("toy==1.0")
    monkeypatch.delattr(toy_vlmpath.ToyEngine, "arrive")
    with pytest.raises(EngineError, match="lacks what the suite drives"):
        load_engine("toy==1.0")


def test_without_the_plugin_on_the_path_toy_is_unknown(tmp_path, monkeypatch):
    write_toy(tmp_path / "toy")  # written, not on the path
    assert "toy" not in registry.names()
    with pytest.raises(EngineError, match="unknown engine 'toy'"):
        EngineSpec.parse("toy==1.0")


def test_help_texts_name_the_registered_engines(toy, capsys):
    with pytest.raises(SystemExit):
        main(["measure", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "sglang, toy" in text


def test_a_module_without_an_entry_in_an_engine_package_is_refused(tmp_path, monkeypatch):
    pkg = tmp_path / "eng_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "good.py").write_text(textwrap.dedent('''
        from vlmpath.engines.registry import EngineEntry
        ENGINE = EngineEntry(name="good", package="good", import_name="good", adapter="good:Good")
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert list(registry.discover("eng_pkg")) == ["good"]
    (pkg / "stray.py").write_text("X = 1\n")
    with pytest.raises(VlmpathError, match=r"eng_pkg.stray .* defines no ENGINE = EngineEntry\(name='stray'"):
        registry.discover("eng_pkg")
    for m in ("eng_pkg", "eng_pkg.good", "eng_pkg.stray"):
        sys.modules.pop(m, None)


@pytest.mark.parametrize("kw, words", [
    ({"name": "reference"}, "a name is lowercase"),
    ({"name": "Bad-Name"}, "a name is lowercase"),
    ({"adapter": "no_colon"}, "must be 'module:Class'"),
    ({"source_dirs": ("../x",)}, "relative paths inside a checkout"),
    ({"options": "runner"}, "options are EngineOptions with distinct names"),
    ({"options": lambda O: (O("a", ("x",), "x", "h"), O("a", ("y",), "y", "h"))}, "options are EngineOptions"),
    ({"options": lambda O: (O("a", ("x", "y"), "z", "h"),)}, r"default 'z' is one of its choices"),
    ({"options": lambda O: (O("a", ("x", "x"), "x", "h"),)}, r"choices are distinct non-empty words"),
    ({"options": lambda O: (O("a", ("x=1",), "x=1", "h"),)}, r"choices are distinct non-empty words \(no '='\)"),
    ({"options": lambda O: (O("Bad-Name", ("x",), "x", "h"),)}, "engine option 'Bad-Name': a name is lowercase"),
    ({"bench_client": lambda B: B("c")}, "give run='module:function' or not_run='why', one"),
    ({"bench_client": lambda B: B("c", run="m:f", not_run="why")}, "give run='module:function' or not_run='why'"),
    ({"bench_client": lambda B: B("c", run="no_colon")}, "give run='module:function'"),
])
def test_bad_entries_are_refused_naming_the_field(kw, words):
    from vlmpath.engines.registry import BenchClient, EngineEntry, EngineOption

    made = {"options": EngineOption, "bench_client": BenchClient}
    with pytest.raises(VlmpathError, match=words):  # an option or client is refused where it is made
        EngineEntry(**{"name": "ok", "package": "ok", "import_name": "ok", "adapter": "m:C",
                       **{k: v(made[k]) if callable(v) else v for k, v in kw.items()}})


# --- the toy engine through install, measure and the PR flow (subprocesses) ----------------
def git(repo: Path, *args: str) -> str:
    r = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com",
                        "-c", "commit.gpgsign=false", *args], capture_output=True, text=True, check=True)
    return r.stdout.strip()


def commit(repo: Path, text: str, msg: str) -> str:
    (repo / "src" / "toyeng" / "__init__.py").write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", msg)
    return git(repo, "rev-parse", "HEAD")


@pytest.mark.e2e
def test_toy_engine_through_install_list_measure_and_the_pr_flow(toy, tmp_path, monkeypatch, capsys):
    home = tmp_path / "engines"
    monkeypatch.setenv("VLMPATH_ENGINE_HOME", str(home))
    assert main(["engine", "install", "toy==1.0"]) == 0
    assert main(["engine", "list"]) == 0
    listed = capsys.readouterr().out
    assert "toy==1.0" in listed and listed.rstrip().endswith("complete")
    assert json.loads((home / "toy-1.0" / "manifest.json").read_text())["complete"] is True

    out = tmp_path / "m.jsonl"
    assert main(["measure", "--engine", "toy==1.0", "--workload", WORKLOAD, "--repeat", "1", "--no-syncs",
                 "--json", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert (rec["engine"], rec["engine_version"], rec["engine_seams"]) == ("toy==1.0", "1.0",
                                                                            {"merge": "masked_scatter",
                                                                             "rows": "in_order"})
    assert rec["engine_options"] == {"rows": "in_order"}  # the entry's default, recorded
    assert rec["error"] is None and rec["accuracy"] == 1.0 and rec["items"] > 1

    repo = tmp_path / "toyeng-repo"
    write_toyeng(repo / "src")
    git(repo, "init", "-q", "-b", "main")
    released = (repo / "src" / "toyeng" / "__init__.py").read_text()
    base = commit(repo, released, "as released")
    # Silent: the same number of rows, in the same dtype and shape; only their order is wrong.
    mistake = commit(repo, released.replace("rows.to(embeds.dtype)", "rows.flip(0).to(embeds.dtype)"),
                     "merge: write the rows newest first")
    git(repo, "checkout", "-q", "-b", "same", base)
    same = commit(repo, released.replace('"""Write', '"""Write (unchanged)'), "docs only")

    def pr(head: str, name: str) -> tuple[int, str]:
        o = tmp_path / name
        code = main(["ci", "pr", "--engine-src", str(repo), "--base", base, "--head", head, "--out", str(o),
                     "--machine", "cpu-test", "--workload", WORKLOAD, "--repeat", "1", "--no-charts"])
        return code, (o / "comment.md").read_text().replace("\\", "")

    code, comment = pr(mistake, "red")
    assert code == 1 and f"accuracy {WORKLOAD}" in comment, comment
    run = json.loads((tmp_path / "red" / "run.json").read_text())
    assert run["engine_subdir"] == "src" and run["engines"]["head"][0].startswith("toy@src:")
    code, comment = pr(same, "green")
    assert code == 0 and "**No regressions**" in comment, comment


def test_a_third_engine_serves_through_its_registry_entry_alone(toy, tmp_path, capsys):
    """toy's one plug-in module also names its server (``EngineEntry.server``): ``--launch``
    offers it and ``serve-bench`` starts it, asks it and stops it; no vlmpath file names toy."""
    import json

    assert main(["serve-bench", "--write-tiny-model", str(tmp_path / "model")]) == 0
    code = main(["serve-bench", "--launch", "toy", "--model", str(tmp_path / "model"), "--workload",
                 "many_small_images", "--concurrency", "1", "--max-tokens", "3", "--engine-client", "none",
                 "--log-dir", str(tmp_path / "logs"), "--out", str(tmp_path / "toy.json")])
    out = capsys.readouterr()
    assert code == 0, out.err
    run = json.loads((tmp_path / "toy.json").read_text())
    assert run["server"]["kind"] == "toy" and run["server"]["command"][1].endswith("toy_server.py")  # its recipe
    (case,) = run["cases"]
    assert case["workload"] == "many_small_images" and case["completed"] == 8 and case["errors"] == 0
    assert set(case["outputs"]) == {"t0 t1 t2 "}  # its own server answered every request, 3 tokens each
    assert list((tmp_path / "logs").glob("server-toy-*.log"))
    # A lone plant says it needs a pair (one server agrees with itself: agreement 1.00 proves nothing).
    assert main(["serve-bench", "--launch", "toy", "--model", str(tmp_path / "model"), "--workload",
                 "many_small_images", "--concurrency", "1", "--max-tokens", "2", "--engine-client", "none",
                 "--log-dir", str(tmp_path / "logs"), "--plant", "shift"]) == 0
    said = capsys.readouterr().out
    assert "--plant shift alone judges nothing" in said and "serve-pair --launch toy --head-plant shift" in said
    with pytest.raises(SystemExit):
        main(["serve-bench", "--help"])
    assert "toy" in capsys.readouterr().out.split("--launch", 1)[1].split("}", 1)[0]  # a choice, from the registry
