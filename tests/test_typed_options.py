"""Typed options, parsed once: ``--scale``, ``--engine``, ``--shard``, ``--tower``,
``--counter`` and ``--vllm-runner`` become a ``Scale``, an ``EngineSpec``, a ``Shard``, a
``Tower``, a ``Counter`` and a ``VllmRunner``
at the CLI (or where the value crosses a process boundary) and travel as those values:
each one's parse, round trip and one-line refusal; the records ``vlmpath run`` and
``vlmpath ci pr`` hand on. A second parse of a typed value is that value (``parse`` returns a
member unchanged), so the records' types, not a scan of the sources, keep a value parsed once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vlmpath.cli import build_parser, main
from vlmpath.core.errors import VlmpathError
from vlmpath.core.machine_names import MachineName
from vlmpath.core.option_enums import Counter, Tower, VllmRunner
from vlmpath.core.scales import DEFAULT_SCALE, Scale
from vlmpath.engines.base import EngineSpec
from vlmpath.pr.options import PrOptions
from vlmpath.runner.options import RunOptions
from vlmpath.runner.shards import Shard

ROOT = Path(__file__).resolve().parents[1]


# --- each value: parse, round trip, refusal -------------------------------------------------
@pytest.mark.parametrize("cls", [Scale, Tower, Counter, VllmRunner])
def test_a_choice_parses_its_names_round_trips_and_is_its_name(cls):
    for member in cls:
        assert cls.parse(member.value) is member and cls.parse(member) is member
        assert cls.parse(str(member)) is member and f"{member}" == member.value
        assert json.loads(json.dumps({"v": member})) == {"v": member.value}  # records keep the name


@pytest.mark.parametrize("cls, close, want", [(Scale, "tiyn", "tiny"), (Tower, "engnie", "engine"),
                                              (Counter, "callgrnd", "callgrind")])
def test_a_wrong_choice_is_one_line_naming_the_flag_a_close_name_and_the_choices(cls, close, want):
    with pytest.raises(VlmpathError) as e:
        cls.parse(close)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"--{cls.__name__.lower()} {close!r}")
    assert f"did you mean {want!r}" in msg and all(m.value in msg for m in cls)
    for far in ("zzzz", "", None, 3):
        with pytest.raises(VlmpathError) as e:
            cls.parse(far)
        assert "did you mean" not in str(e.value)


def test_the_environment_variable_is_named_when_it_holds_a_wrong_scale():
    with pytest.raises(VlmpathError, match=r"^VLMPATH_SCALE='fulll' is not a scale \(did you mean 'full'\?\)"):
        Scale.parse("fulll", given="VLMPATH_SCALE=")


def test_a_machine_name_is_a_str_parsed_once_and_a_bad_one_is_one_line():
    name = MachineName.parse("cpu-x86_64.ci")
    assert isinstance(name, str) and name == "cpu-x86_64.ci" and MachineName.parse(name) is name
    for bad in ("", "a b", "../up", "-lead", "x" * 65, None):
        with pytest.raises(VlmpathError, match="letters, digits") as e:
            MachineName.parse(bad)
        assert "\n" not in str(e.value)
    with pytest.raises(VlmpathError, match=r"^VLMPATH_MACHINE='a/b' is not usable"):
        MachineName.parse("a/b", given="VLMPATH_MACHINE=")
    from vlmpath.measure.platform import machine_name

    # A probed name is usable by construction: the flows take it without checking it again.
    for backend, device in (("cuda", "NVIDIA H200 " * 20), ("cpu", "!!"), ("rocm", "AMD Instinct MI300X")):
        probed = machine_name(backend, device)
        assert MachineName.parse(probed) == probed


def test_shard_and_engine_specs_round_trip_through_their_text(tmp_path):
    for text in ("1/1", "2/3", "64/64"):
        shard = Shard.parse(text)
        assert Shard.parse(str(shard)) == shard and Shard.parse(shard) is shard
    (tmp_path / "sglang").mkdir()
    for spec in (EngineSpec.parse(None), EngineSpec.parse("sglang==0.5.23"), EngineSpec.parse(None, src=str(tmp_path)),
                 EngineSpec.for_tree(tmp_path), EngineSpec.for_tree(tmp_path, "sglang")):
        assert EngineSpec.parse(spec.label) == spec
    with pytest.raises(VlmpathError, match="has no engine package inside"):
        EngineSpec.for_tree(tmp_path / "sglang")


# --- the CLI builds the typed values, once -----------------------------------------------------
def test_the_parsed_arguments_hold_typed_values():
    p = build_parser()
    assert p.parse_args(["run"]).scale is DEFAULT_SCALE
    assert p.parse_args(["run", "--scale", "full"]).scale is Scale.FULL
    assert p.parse_args(["measure", "--tower", "engine"]).tower is Tower.ENGINE
    assert p.parse_args(["measure"]).tower is Tower.OURS
    assert p.parse_args(["measure", "--vllm-runner", "v1"]).vllm_runner is VllmRunner.V1
    assert p.parse_args(["measure"]).vllm_runner is VllmRunner.SERVER
    pr = p.parse_args(["ci", "pr", "--base", "a", "--head", "b", "--counter", "callgrind", "--scale", "tiny"])
    assert pr.counter is Counter.CALLGRIND and pr.scale is Scale.TINY
    assert p.parse_args(["ci", "pr", "--base", "a", "--head", "b"]).scale is None  # run's default decides


@pytest.mark.parametrize("argv, line", [
    (["run", "--scale", "ful"], "vlmpath run: error: --scale 'ful' is not a scale (did you mean 'full'?)"),
    (["measure", "--tower", "engin"], "vlmpath measure: error: --tower 'engin' (did you mean 'engine'?)"),
    (["measure", "--vllm-runner", "servr"], "vlmpath measure: error: --vllm-runner 'servr' (did you mean 'server'?)"),
    (["ci", "pr", "--base", "a", "--head", "b", "--counter", "op"],
     "vlmpath ci: error: --counter 'op' (did you mean 'ops'?)"),
])
def test_a_wrong_typed_option_is_one_line_and_exit_2(argv, line, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(line), err


def test_a_wrong_scale_is_refused_before_torch_is_imported():
    code = ("import sys\nfrom vlmpath.cli import main\n"
            "rc = main(['measure', '--scale', 'tiyn', '--workload', 'video'])\n"
            "print('RC', rc, 'torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert proc.stdout.strip().endswith("RC 2 False"), proc.stdout + proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "did you mean 'tiny'" in proc.stderr


def test_vlmpath_run_hands_one_typed_options_record_to_the_runner(monkeypatch, tmp_path):
    import vlmpath.runner.run as runner

    seen: list[RunOptions] = []

    def fake_run(opts):
        seen.append(opts)
        raise VlmpathError("stop here")  # what was handed on is the question

    monkeypatch.setattr(runner, "run", fake_run)
    assert main(["run", "--scale", "full", "--engine", "sglang==0.5.23", "--shard", "2/3", "--machine", "m-1"]) == 2
    assert main(["run"]) == 2
    typed, plain = seen
    assert typed.scale is Scale.FULL and typed.engine == EngineSpec("release", "sglang", "0.5.23")
    assert typed.shard == Shard(2, 3) and isinstance(typed.machine, MachineName) and typed.machine == "m-1"
    assert plain.scale is DEFAULT_SCALE and plain.engine is None and plain.shard is None and plain.machine is None


def test_ci_pr_hands_one_options_record_to_the_flow(monkeypatch, tmp_path):
    from vlmpath.pr import flow, outputs

    seen: list[PrOptions] = []

    class Done:
        out_dir, exit_code = tmp_path, 0

    def fake_run_pr(opts):
        seen.append(opts)
        (tmp_path / outputs.SUMMARY_FILE).write_text("ok\n", encoding="utf-8")
        return Done()

    monkeypatch.setattr(flow, "run_pr", fake_run_pr)
    argv = ["ci", "pr", "--base", "main", "--head", "HEAD", "--out", str(tmp_path), "--scale", "tiny",
            "--shard", "1/2", "--counts", "--counter", "callgrind", "--no-fail", "--pr", "7", "--machine", "cpu-a"]
    assert main(argv) == 0
    (opts,) = seen
    assert (opts.base, opts.head, opts.scale, opts.shard, opts.counter) == ("main", "HEAD", Scale.TINY, Shard(1, 2),
                                                                            Counter.CALLGRIND)
    assert opts.instructions and not opts.fail_on_regression and opts.pr == 7 and opts.engine_src is None
    assert isinstance(opts.machine, MachineName) and opts.machine == "cpu-a"


@pytest.mark.parametrize("flag, bad, why", [("--shard", "3/2", "K must be from 1 to N"),
                                            ("--machine", "a b", "letters, digits")])
def test_ci_pr_refuses_a_bad_shard_or_machine_into_its_error_file(flag, bad, why, tmp_path, capsys):
    assert main(["ci", "pr", "--base", "a", "--head", "b", "--out", str(tmp_path), flag, bad]) == 2
    assert why in capsys.readouterr().err
    assert any(why in f.read_text() for f in tmp_path.iterdir() if f.is_file())


def test_pr_options_refuse_counts_or_shards_with_an_engine_repository():
    with pytest.raises(VlmpathError, match="leave them out with --engine-src"):
        PrOptions("a", "b", engine_src="/x", shard=Shard(1, 2))
    assert PrOptions("a", "b", engine_src="/x").tower is Tower.OURS
    assert PrOptions("a", "b", engine_src="/x").vllm_runner is VllmRunner.SERVER


def test_ci_pr_refuses_serve_with_an_engine_repository(tmp_path, capsys):
    code = main(["ci", "pr", "--base", "a", "--head", "b", "--out", str(tmp_path), "--engine-src", str(tmp_path),
                 "--serve", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--serve" in err[0] and "serve-pair" in err[0]
    assert "serve-pair" in (tmp_path / "error.txt").read_text()  # as any refusal of ci pr
