"""Does every ``pip install`` of the workflows, templates, scripts and images run under ci/constraints.txt?

One constraints file holds the bounds a job must not install past (asv < 0.7: vlmpath
reads ``asv._stats``). Each logical ``pip install`` line (backslash continuations joined)
of .github/workflows/, ci/templates/, ci/*.sh, docker/*.Dockerfile and docker/entrypoint.sh
passes it: ``-c ci/constraints.txt`` (``-c vlmpath/ci/constraints.txt`` in an engine
template, where vlmpath is checked out under vlmpath/), or in the images the image's
constraints file, into which the Dockerfile appends ci/constraints.txt. A planted
unconstrained install is seen; the file's bounds agree with pyproject.toml.
"""

from __future__ import annotations

import re
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "ci" / "constraints.txt"
IMAGE_FILE = "/opt/vlmpath/constraints.txt"
_OK = re.compile(r"(?:-c|--constraint)[ =]\"?(?:(?:\S*/)?ci/constraints\.txt|" + re.escape(IMAGE_FILE)
                 + r"|\"?\$constraint)")


def files() -> list[Path]:
    return sorted([*ROOT.glob(".github/workflows/*.yml"), *ROOT.glob("ci/templates/*.yml"),
                   *ROOT.glob("ci/*.sh"), *ROOT.glob("docker/*.Dockerfile"), ROOT / "docker" / "entrypoint.sh"])


def pip_installs(text: str) -> list[str]:
    logical = re.sub(r"\\\n\s*", " ", text).splitlines()
    return [ln.strip() for ln in logical if re.search(r"\bpip3? install\b", ln)
            and not ln.lstrip().startswith("#") and "echo " not in ln and not re.search(r"\bpip install \$\(", ln)]


def unconstrained(text: str) -> list[str]:
    return [ln for ln in pip_installs(text) if not _OK.search(ln)]


def test_every_pip_install_runs_under_the_constraints_file():
    found = {str(p.relative_to(ROOT)): u for p in files() if (u := unconstrained(p.read_text(encoding="utf-8")))}
    assert found == {}
    assert sum(len(pip_installs(p.read_text(encoding="utf-8"))) for p in files()) >= 10


def test_the_images_constraints_file_carries_the_repositorys():
    benchmark_images = [df for df in ROOT.glob("docker/*.Dockerfile") if df.name != "dind-nvidia.Dockerfile"]
    assert sorted(df.name for df in benchmark_images) == ["cuda.Dockerfile", "rocm.Dockerfile"]
    # The runners' dind daemon holds no Python environment: nothing pip could install.
    assert not pip_installs((ROOT / "docker" / "dind-nvidia.Dockerfile").read_text(encoding="utf-8"))
    for df in benchmark_images:
        text = df.read_text(encoding="utf-8")
        assert "COPY ci/constraints.txt /opt/vlmpath/project-constraints.txt" in text, df.name
        record = text.index("torch_guard.py record")
        append = text.index(f"cat /opt/vlmpath/project-constraints.txt >> {IMAGE_FILE}")
        assert record < append < text.index("-m pip install"), df.name


def test_the_constraints_agree_with_pyproject_and_cap_asv():
    lines = [ln.split("#")[0].strip() for ln in CONSTRAINTS.read_text().splitlines()]
    pins = {re.split(r"[<>=!~]", ln, maxsplit=1)[0].lower(): ln for ln in lines if ln}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["serve"]
    by_name = {re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0].lower(): d.replace(" ", "") for d in deps}
    assert pins["asv"] == by_name["asv"] and "<0.7" in pins["asv"]  # asv._stats (compare/verdict.py)
    for name, spec in pins.items():
        assert spec == by_name[name], f"{name}: ci/constraints.txt says {spec}, pyproject {by_name[name]}"


def test_a_planted_unconstrained_install_is_seen():
    planted = ('run: |\n  python -m pip install --disable-pip-version-check "asv>=0.6.4" "pyyaml>=6"\n'
               "RUN python3 -m pip install \\\n    --no-cache-dir . \\\n && true\n"
               "  python -m pip install -c ci/constraints.txt asv\n")
    assert len(unconstrained(planted)) == 2
