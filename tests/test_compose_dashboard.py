"""Does the compose ``dashboard`` service start and serve the results volume's dashboard?

No docker engine here, so the test does what the container would: it reads
docker/compose.yaml and the image's Dockerfile, takes the service's exact ``command`` and
the image's plus the service's environment, maps the container paths onto a temporary
layout (``/results`` -> a results dir holding ``html/index.html``, ``/workspace`` -> this
checkout, ``/opt/vlmpath`` -> an empty dir) and the container port onto a free host port
(what compose's port mapping does), runs the image's ENTRYPOINT script with it through the
real ``vlmpath`` CLI, and fetches the page over HTTP. The service's healthcheck command
is run against it too, and must fail once the server is gone. The command line compose
shipped before (``serve --host``) is shown to exit 2.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker" / "compose.yaml"
CONTAINER_PORT = "8080"

_spec = importlib.util.spec_from_file_location("dockerlint", Path(__file__).with_name("dockerlint.py"))
dl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dl)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Container:
    """The dashboard service's process as the image would run it, on this host."""

    def __init__(self, tmp: Path):
        compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
        self.service = compose["services"]["dashboard"]
        image = self.service["image"]  # vlmpath:${VLMPATH_BACKEND:-cuda}
        backend = image.split("${VLMPATH_BACKEND:-")[1].rstrip("}") if "${" in image else "cuda"
        self.dockerfile = dl.parse_dockerfile(ROOT / "docker" / f"{backend}.Dockerfile")
        self.results = tmp / "results"
        self.home = tmp / "home"
        self.home.mkdir()
        self.port = _free_port()
        self.paths = {"/results": str(self.results), "/workspace": str(ROOT),
                      "/opt/vlmpath": str(tmp / "opt-vlmpath")}

    def host_path(self, value: str) -> str:
        for container, host in self.paths.items():
            if value == container or value.startswith(container + "/"):
                return host + value[len(container):]
        return value

    def env(self) -> dict[str, str]:
        env = {k: self.host_path(v) for k, v in self.dockerfile.envs.items()}
        env.update({k: self.host_path(v) for k, v in dl._env(self.service).items()})
        # The host side of a container: its own HOME, this venv's python and vlmpath on PATH.
        env.update(HOME=str(self.home), PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin",
                   VLMPATH_PYTHON=sys.executable, GIT_CONFIG_NOSYSTEM="1")
        return env

    def command(self) -> list[str]:
        argv = [str(a) for a in self.service["command"]]
        return [str(self.port) if a == CONTAINER_PORT and argv[i - 1] == "--port" else a
                for i, a in enumerate(argv)]

    def entrypoint(self) -> list[str]:
        (entry,) = [i["value"] for i in self.dockerfile.structure if i["instruction"] == "ENTRYPOINT"]
        assert "vlmpath-entrypoint" in entry  # the COPY of docker/entrypoint.sh
        return ["bash", str(ROOT / "docker" / "entrypoint.sh")]

    def healthcheck(self) -> list[str]:
        test = [str(a) for a in self.service["healthcheck"]["test"]]
        assert test[0] == "CMD"
        return [sys.executable if a == "python3" else a.replace(f":{CONTAINER_PORT}/", f":{self.port}/")
                for a in test[1:]]

    def start(self, argv: list[str] | None = None) -> subprocess.Popen:
        return subprocess.Popen(self.entrypoint() + (argv or self.command()), env=self.env(),
                                cwd=self.host_path(self.service["working_dir"]),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _fetch(url: str, proc: subprocess.Popen, deadline_s: float = 60) -> bytes:
    """The page, once the server listens (polled: startup time is not what is tested)."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.read()
        except OSError:
            if proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(f"the dashboard exited {proc.returncode} before serving:\n{out}\n{err}")
            if time.monotonic() > end:
                pytest.fail(f"nothing served at {url} after {deadline_s} s")
            time.sleep(0.2)


@pytest.fixture
def dash(tmp_path) -> Container:
    c = Container(tmp_path)
    (c.results / "html").mkdir(parents=True)
    (c.results / "html" / "index.html").write_text("<title>vlmpath results volume dashboard</title>\n")
    return c


def test_the_compose_dashboard_command_serves_the_results_volume(dash):
    gitconfig = dash.home / ".gitconfig"
    gitconfig.write_text("[user]\n\tname = host\n")
    proc = dash.start()
    try:
        page = _fetch(f"http://127.0.0.1:{dash.port}/", proc)
        assert b"vlmpath results volume dashboard" in page
        health = subprocess.run(dash.healthcheck(), capture_output=True, text=True, timeout=60)
        assert health.returncode == 0, health.stderr
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert f"serving {dash.results / 'html'}" in out
    assert "Traceback" not in err
    assert gitconfig.read_text() == "[user]\n\tname = host\n"
    # The healthcheck can fail: nothing listens any more.
    assert subprocess.run(dash.healthcheck(), capture_output=True, timeout=60).returncode != 0


def test_the_command_compose_used_to_ship_exits_2(dash):
    old = ["serve", "--host", "0.0.0.0", "--port", str(dash.port)]
    proc = dash.start(old)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    # One line naming the option and what to do (cli: unknown options answered by their subcommand).
    assert "unknown option --host" in err and "vlmpath serve --help" in err and "Traceback" not in err


def test_serve_without_a_published_dashboard_says_so(dash):
    (dash.results / "html" / "index.html").unlink()
    proc = dash.start()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert f"{dash.results / 'html'} has no index.html" in err
    assert "Traceback" not in err
