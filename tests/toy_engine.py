"""A toy engine written into a temporary directory, as a third party would add one.

``write_toy(root)`` makes, under ``root``:

- ``plug/toy_vlmpath.py``: ONE module, the engine's whole registration: ``ENGINE =
  EngineEntry(name="toy", ...)`` and the adapter class ``ToyEngine`` (an ``EngineAdapter``).
  Its routine is vlmpath's reference routine with the *engine's own* ``toyeng.merge`` as the
  placement step, so a mistake in the engine's code shows in the accuracy. It declares one
  option, ``rows`` (``in_order``, or ``reversed``: the rows handed to the merge newest first, a
  misplacement the accuracy shows; its own flag ``--toy-rows``), which its adapter takes as the
  mapping it was given and records in its seam ``rows``; its own bench client (``bench``: a row
  per case, from a run of the engine env's python); and the files its CI templates watch
  (``ci_paths``). Its installer is a cheap fake (no pip): a ``bin/python`` that runs this
  interpreter with the env's own copy of the released ``toyeng`` on the path (after
  ``PYTHONPATH``, where a venv's site-packages is); with ``TOY_GATE`` set it logs
  ``start``/``end`` to ``TOY_LOG`` and waits for the gate file in between (the lock test holds
  an install open with it); ``TOY_FAIL`` makes it fail after doing its work (an install that
  did not finish);
- ``plug/toy_import_chain.txt``: its data file;
- ``plug/toy_vlmpath-0.1.dist-info/``: the entry point ``vlmpath.engines: toy`` (what
  ``pip install`` of a plug-in would leave), so the registry finds it with ``plug/`` on
  the path, in this process and in the engine worker alike;
- ``release/toyeng/``: the released engine (version 1.0), which the installer copies.

Nothing in vlmpath is edited or registered: putting ``plug/`` on the path is all.
"""

from __future__ import annotations

import os
import sys

import pytest
import textwrap
from pathlib import Path

#: The modules the toy writes at test time (not distributions: nothing to declare).
WRITTEN_MODULES = ("toy_vlmpath", "toyeng")

TOYENG = textwrap.dedent('''
    """toyeng: an engine whose multimodal merge vlmpath measures."""
    __version__ = "{version}"
    MERGE = "masked_scatter"


    def merge(embeds, mask, rows):
        """Write the encoder rows into the masked positions of ``embeds``, in order."""
        embeds.masked_scatter_(mask.expand_as(embeds), rows.to(embeds.dtype))
''')

PLUGIN = textwrap.dedent('''
    """The toy engine: its registry entry and its adapter, in one module."""
    from __future__ import annotations

    import os
    import shutil
    import time
    from pathlib import Path

    from vlmpath.engines.registry import BenchClient, EngineEntry, EngineOption

    HERE = Path(__file__).resolve().parent
    RELEASE = Path({release!r})
    HOST_PYTHON = {python!r}


    def install(ctx):
        """A cheap fake install step (no network): the env's python and its own toyeng."""
        log, gate = os.environ.get("TOY_LOG"), os.environ.get("TOY_GATE")

        def note(word):
            if log:
                with open(log, "a") as f:
                    f.write(f"{{word}} {{os.getpid()}}\\n")

        note("start")
        if gate:  # held open until the test opens the gate
            deadline = time.monotonic() + 300
            while not Path(gate).exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        site = ctx.path / "site"
        shutil.rmtree(site, ignore_errors=True)
        shutil.copytree(RELEASE / "toyeng", site / "toyeng")
        ctx.python.parent.mkdir(parents=True, exist_ok=True)
        # After PYTHONPATH, as a venv's site-packages comes after it (an --engine-src tree wins).
        ctx.python.write_text(f'#!/bin/sh\\nPYTHONPATH="$PYTHONPATH:{{site}}" exec {{HOST_PYTHON}} "$@"\\n')
        ctx.python.chmod(0o755)
        ctx.steps.append({{"step": "toy", "command": ["copy", str(RELEASE)], "seconds": 0}})
        if os.environ.get("TOY_FAIL"):
            raise RuntimeError("toy: the last step failed")
        note("end")
        return {{"torch": "the host's (toy)"}}


    def server(python, model, port, device, scratch):
        """toyeng's own OpenAI server: a loopback one (``toy_server.py``) that streams a fixed answer."""
        return [python, str(HERE / "toy_server.py"), str(port)], {{"TOY_SERVER_MODEL": model}}


    def bench(server, settings, doc, *, python, client, work, factor):
        """toyeng's own bench client: run in the engine env's python (it says its toyeng version
        there), it reads back our numbers and texts, so every row agrees with ours."""
        import subprocess

        from vlmpath.serving.engine_client import side_by_side

        said = subprocess.run([python, "-c", "import toyeng; print(toyeng.__version__)"], capture_output=True,
                              text=True, check=True).stdout.strip()
        return [dict(side_by_side(case, {{"request_per_s": case["request_per_s"],
                                         "output_tok_per_s": case["output_tok_per_s"], "input_tok_per_s": None,
                                         "failed": 0, "texts": list(case["outputs"])}}, client, factor),
                     toyeng_in_env=said) for case in doc["cases"]]


    ENGINE = EngineEntry(
        name="toy", package="toyeng", import_name="toyeng", adapter="toy_vlmpath:ToyEngine",
        import_chain=HERE / "toy_import_chain.txt", source_dirs=("src",), seams=("merge", "rows"),
        example_version="1.0", installer=install, checkout_hint="a toyeng checkout's src/ directory",
        server=server, index_release=lambda version: None,  # its release is a local copy, no index
        options=(EngineOption("rows", ("in_order", "reversed"), "in_order",
                              "the order toyeng's merge gets the rows in", own_flag=True),),
        bench_client=BenchClient("toy bench", run="toy_vlmpath:bench"),
        ci_paths=("src/toyeng/**",))


    class ToyEngine:
        """The adapter: the reference routine with toyeng's own merge as the placement."""

        def __init__(self, label, options):
            import toyeng

            if type(options) is not dict or set(options) != {{"rows"}}:  # every declared option, as a plain mapping
                raise TypeError(f"toy: options {{options!r}} are not the entry's one option as a dict")
            self.toyeng, self.label, self.options = toyeng, label, options
            self.version = toyeng.__version__
            self.seams = {{"merge": toyeng.MERGE, "rows": options["rows"]}}

        def routine(self, workload, encoder, pipeline, table, *, cache_bytes, encoder_region=None):
            from contextlib import nullcontext

            from vlmpath.engines.pipelines import DEFAULT_PIPELINE
            from vlmpath.engines.reference import EmbedRoutine

            routine = EmbedRoutine(workload, encoder, DEFAULT_PIPELINE, table, cache_bytes=cache_bytes,
                                   encoder_region=encoder_region or nullcontext)
            merge = self.toyeng.merge
            if self.options["rows"] == "reversed":  # the option, read by the adapter alone
                routine.inject = lambda embeds, mask, rows: merge(embeds, mask, rows.flip(0))
            else:
                routine.inject = merge
            return routine

        def arrive(self, wl, hash_name):
            from vlmpath.suite.measure import arrive

            return arrive(wl, hash_name)
''')

DIST_INFO = "toy_vlmpath-0.1.dist-info"

#: The toy engine's own server: /health, and /v1/chat/completions streaming one fixed answer
#: of as many tokens as asked (``max_tokens``) with its usage, as an OpenAI server does.
SERVER = textwrap.dedent('''\
    import json, sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            n = int(body.get("max_tokens") or 4)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for i in range(n):
                ev = {"choices": [{"delta": {"content": "t%d " % i}}]}
                self.wfile.write(("data: " + json.dumps(ev) + "\\n\\n").encode())
            done = {"choices": [{"delta": {}, "finish_reason": "length"}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": n}}
            self.wfile.write(("data: " + json.dumps(done) + "\\n\\ndata: [DONE]\\n\\n").encode())

    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
''')


def write_toyeng(directory: Path, version: str = "1.0") -> Path:
    """``directory/toyeng/__init__.py`` of ``version``."""
    (directory / "toyeng").mkdir(parents=True, exist_ok=True)
    (directory / "toyeng" / "__init__.py").write_text(TOYENG.format(version=version))
    return directory


def write_toy(root: Path, python: str = sys.executable) -> Path:
    """The plug-in and the release under ``root`` (see the module docstring); returns ``plug/``."""
    release = write_toyeng(root / "release")
    plug = root / "plug"
    plug.mkdir(parents=True)
    (plug / "toy_vlmpath.py").write_text(PLUGIN.format(release=str(release), python=python))
    (plug / "toy_import_chain.txt").write_text("numpy  # toyeng imports nothing else\n")
    (plug / "toy_server.py").write_text(SERVER)
    info = plug / DIST_INFO
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-vlmpath\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vlmpath.engines]\ntoy = toy_vlmpath:ENGINE\n")
    return plug


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy plug-in on this process's path and on the engine worker's (PYTHONPATH)."""
    plug = write_toy(tmp_path / "toy")
    monkeypatch.syspath_prepend(str(plug))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(plug), *filter(None, [os.environ.get("PYTHONPATH")])]))
    yield plug
    sys.modules.pop("toy_vlmpath", None)
    sys.modules.pop("toyeng", None)
