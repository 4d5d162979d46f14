"""Do the CLI's default output folders and the documented example outputs land in git-ignored paths?

A command a new user copies from the README or docs/commands.md (or runs with its defaults) must not leave
files that ``git status`` shows, nor make ``vlmpath run`` call the work tree dirty.
Checked with ``git check-ignore`` against this checkout's .gitignore; a planted path
outside it is shown to be seen.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

from vlmpath.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
OUTPUT_DESTS = {"out", "json", "markdown", "reports_dir", "results_dir", "html_dir", "results"}
# Where a command writes inside its --out (report: OUT/charts/, its description says).
WRITES_UNDER = {"vlmpath report --out": "charts"}


def _defaults(p: argparse.ArgumentParser, prefix: str = "vlmpath"):
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield from _defaults(sp, f"{prefix} {name}")
        elif a.dest in OUTPUT_DESTS and isinstance(a.default, str) and a.default:
            opt = f"{prefix} {a.option_strings[0]}"
            yield opt, f"{a.default}/{WRITES_UNDER[opt]}" if opt in WRITES_UNDER else a.default


def _readme_outputs() -> list[str]:
    """The outputs of docs/commands.md's command list and of the README's commands."""
    text = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    blocks = [re.search(r"\A# Commands\n+```bash\n(.*?)```", text, flags=re.S).group(1)]
    blocks += re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)
    return [o for b in blocks for o in re.findall(r"--(?:out|json|markdown)\s+([\w./-]+)", b)]


def _not_ignored(paths: list[str]) -> list[str]:
    probe = [f"{p.rstrip('/')}/probe.json" for p in paths]
    r = subprocess.run(["git", "check-ignore", "--no-index", "--stdin", "-v", "-n"], cwd=ROOT,
                       input="\n".join(probe) + "\n", capture_output=True, text=True)
    # -n -v: every path is printed; "::<TAB>path" means no ignore rule matched it.
    return [line.split("\t", 1)[1].removesuffix("/probe.json")
            for line in r.stdout.splitlines() if line.startswith("::")]


def test_default_output_folders_are_git_ignored():
    defaults = dict(_defaults(build_parser()))
    assert defaults["vlmpath profile --out"] == "reports/profile"
    assert _not_ignored(list(defaults.values())) == []


def test_the_readme_example_outputs_are_git_ignored():
    outputs = _readme_outputs()
    assert len(outputs) >= 5
    assert _not_ignored(outputs) == []


def test_a_path_outside_the_ignored_folders_is_seen():
    assert _not_ignored(["profile-out", "reports/profile"]) == ["profile-out"]
