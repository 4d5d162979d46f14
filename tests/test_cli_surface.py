"""Does the CLI say what it is and what it accepts: ``--version``, the names in ``--help``,
and ``compare`` on any git revision (``HEAD~1``, ``main``) resolved to its sha?"""

from __future__ import annotations

import subprocess

import pytest
from asv_fixtures import write_asv_run

from vlmpath import __version__
from vlmpath.cli import main


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"vlmpath {__version__}"


@pytest.mark.parametrize("argv", [["--help"], ["measure", "--help"]])
def test_help_lists_every_registered_name(capsys, argv):
    from vlmpath.engines.pipelines import NAMED_PIPELINES
    from vlmpath.measure.presets import PRESETS
    from vlmpath.paths.registry import COUNTERS, ENCODE_STRATEGIES, HASH_PATHS, INJECTORS

    with pytest.raises(SystemExit):
        main(argv)
    out = capsys.readouterr().out
    for reg in (PRESETS, ENCODE_STRATEGIES, INJECTORS, COUNTERS, HASH_PATHS, NAMED_PIPELINES):
        for name in reg:
            assert name in out, name


def test_other_commands_help_has_no_names(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    assert "batched_by_span" not in capsys.readouterr().out


def test_compare_refuses_an_unwritable_output_before_reading(tmp_path, capsys):
    rc = main(["compare", "a" * 40, "b" * 40, "--results", str(tmp_path / "none"), "--markdown", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--markdown" in err and "is a directory" in err and "results directory" not in err


SPEC = {"bench_x.A.track_tok_per_s": ("tok/s", ["preset"], [["a"]], [1.0], None)}


@pytest.mark.e2e
def test_compare_resolves_git_revisions(tmp_path, capsys):
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args):
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "-q", "-b", "main")
    for n in (1, 2):
        (repo / "f").write_text(str(n))
        git("add", "f")
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", f"c{n}")
    base, head = git("rev-parse", "HEAD~1"), git("rev-parse", "HEAD")
    res = tmp_path / "res"
    write_asv_run(res, "m1", base, SPEC)
    write_asv_run(res, "m1", head, SPEC)
    js = tmp_path / "cmp.json"
    rc = main(["compare", "HEAD~1", "main", "--repo", str(repo), "--results", str(res), "--json", str(js)])
    assert rc == 0
    text = js.read_text(encoding="utf-8")
    assert base in text and head in text
    capsys.readouterr()
    assert main(["compare", "HEAD~5", "HEAD", "--repo", str(repo), "--results", str(res)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vlmpath compare: error: unknown commit 'HEAD~5'") and "Traceback" not in err


def _choices(argv_prefix: list[str], option: str):
    from vlmpath.cli import build_parser

    parser = build_parser()
    for name in argv_prefix:  # walk down the subcommands
        sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        parser = sub.choices[name]
    return next(a for a in parser._actions if option in a.option_strings).choices


def test_cli_choices_are_read_from_their_registries(monkeypatch):
    from vlmpath.runner.launch import LAUNCH_METHODS
    from vlmpath.engines import pipelines
    from vlmpath.engines.pipelines import NAMED_PIPELINES, Pipeline
    from vlmpath.suite.cases import PIPELINE_NAMES

    assert list(_choices(["measure"], "--pipeline")) == list(NAMED_PIPELINES) == list(PIPELINE_NAMES)
    assert list(_choices(["run"], "--launch-method")) == list(LAUNCH_METHODS)
    # Planted: a pipeline registered and nothing else changed is offered by the CLI.
    monkeypatch.setattr(pipelines, "NAMED_PIPELINES", {**NAMED_PIPELINES, "mine": Pipeline(inject="where_index")})
    assert "mine" in _choices(["measure"], "--pipeline")
