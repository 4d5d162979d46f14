"""Do the repository's own files keep their promises (quick start, CI entry, hygiene)?"""

from __future__ import annotations

import ast
import re
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def _quick_start_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def test_quick_start_is_two_commands_setup_then_main_job_then_tests():
    cmds = _quick_start_commands()
    assert len(cmds) == 2, cmds
    assert cmds[0].startswith("ci/setup.sh && ") and " run" in cmds[0]
    assert cmds[1].startswith("ci/setup.sh && ") and "pytest" in cmds[1]


def _ci_entry_lines() -> list[str]:
    return [ln.strip() for ln in (ROOT / ".ci/run").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]


def test_ci_entry_runs_exactly_the_readme_test_command_then_the_e2e_set():
    lines = _ci_entry_lines()
    readme = _quick_start_commands()[1]
    assert readme in lines
    after = lines[lines.index(readme) + 1:]
    e2e = [ln for ln in after if re.search(r"\.venv/bin/python -m pytest -m e2e\b", ln)]
    assert len(e2e) == 1, after
    # pytest exits 5 when nothing is selected: tolerated for the e2e set, nothing else.
    assert any('-ne 5' in ln and 'exit "$rc"' in ln for ln in after), after


def test_default_run_skips_e2e_and_the_marker_is_declared():
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "-m 'not e2e'" in ini["addopts"]
    assert any(m.startswith("e2e:") for m in ini["markers"])


def test_torch_requirement_is_a_loose_lower_bound():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch_req = [d for d in deps if re.match(r"torch\b", d)]
    assert len(torch_req) == 1
    # A lower bound only: a GPU image's own torch must satisfy it, and pip must not
    # be asked for a newer or pinned build.
    assert re.fullmatch(r"torch>=\d+(\.\d+)*", torch_req[0].replace(" ", "")), torch_req


def test_setup_installs_the_cpu_torch_before_the_package():
    setup = (ROOT / "ci/setup.sh").read_text()
    assert "torch==" in setup
    assert setup.index("CPU_TORCH\"") < setup.index('-e ".[test,serve]"')


def _library_modules():
    return sorted((ROOT / "src/vlmpath").rglob("*.py"))


def test_every_library_module_says_what_it_answers():
    missing = [str(p.relative_to(ROOT)) for p in _library_modules()
               if not ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))]
    assert not missing, f"modules without a docstring: {missing}"


def test_no_global_rng_seeding_in_the_library():
    # Randomness goes through explicit torch.Generator objects (no global mutable state).
    offenders = [str(p.relative_to(ROOT)) for p in _library_modules()
                 if re.search(r"torch\.(manual_seed|random\.manual_seed|set_default_device)\(", p.read_text())]
    assert not offenders, offenders


def test_generated_outputs_are_git_ignored():
    # `vlmpath run` refuses a dirty work tree; the default output folders of run, report
    # and ci pr must therefore never make it dirty.
    import subprocess

    paths = ["reports/out/run.json", "reports/charts/x.png", "bench-out/comment.md",
             ".asv/results/m/x.json", "test-artifacts/shot.png"]
    done = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=ROOT,
                          capture_output=True, text=True)
    assert sorted(done.stdout.split()) == sorted(paths), done.stdout
