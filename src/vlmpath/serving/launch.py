"""How is a model server started, known to be up, and stopped with nothing left behind?

``launched(kind, model, ...)`` is a context manager: it checks the model directory and the
port first (one line naming either, exit 2), starts the server in its own process group
with its log in a file, waits for ``/health`` (bounded by ``startup_timeout_s``; a server
that exits first is one line naming the model directory and the log's last line), yields
a ``Server``, and on the way out (normal, error or Ctrl-C) sends SIGTERM to the whole group,
waits, then SIGKILL: no process outlives it.

Kinds: ``transformers`` (``transformers serve``, CPU or GPU), and the engines whose registry
entry has a ``server`` recipe (command line and environment: ``engines/known/NAME.py``):
``vllm`` (vLLM's own OpenAI server; run on this CPU from a ``vllm==X+cpu`` server env) and
``sglang`` (documented flags, not run on a CPU). ``python`` is the interpreter to run it
with: an engine environment's (``vlmpath engine install``) for sglang and vLLM. ``pythonpath`` is put first on the
server's ``PYTHONPATH``: a side's patched tree (or a planted fault) is served that way,
never by editing the installed packages.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from vlmpath.core.errors import VlmpathError
from vlmpath.serving.client import get_json

#: A Python exception's own line (``RuntimeError: ...``, ``vllm.v1.engine.exceptions.EngineDeadError: ...``),
#: wherever a log prefix puts it.
_EXCEPTION_LINE = re.compile(r"\b[A-Za-z_][\w.]*(?:Error|Exception): \S")
#: The server that is no engine of the registry: ``transformers serve``.
TRANSFORMERS = "transformers"


def kinds() -> tuple[str, ...]:
    """``--launch``'s choices: ``transformers`` and every registered engine (its entry's
    ``server`` recipe says how it starts; an engine without one is refused by ``recipe``).
    Read from the registry, never listed here: a new engine is a new choice."""
    from vlmpath.engines import registry

    return (TRANSFORMERS, *registry.names())


def _check_kind(kind: str) -> None:
    if kind not in kinds():
        raise VlmpathError(f"--launch {kind!r}: use one of {', '.join(kinds())}")
#: The folder whose ``sitecustomize`` plants a fault in a server process (``--plant``).
PLANT_SITE = Path(__file__).resolve().parent / "plant_site"
#: How long a stopping server gets between SIGTERM and SIGKILL.
STOP_GRACE_S = 10.0


@dataclass
class Server:
    """A server to send requests to; ``proc`` is None for one we did not start (``--server``)."""

    url: str
    kind: str
    model: str | None              # the model name requests carry (None: the server's only one)
    proc: subprocess.Popen | None = None
    log: Path | None = None
    command: tuple[str, ...] = ()
    model_dir: str | None = None
    ready_s: float | None = None   # launch to the first healthy answer (a server we started)
    started: float | None = None   # time.monotonic() at launch

    def rss_bytes(self) -> int | None:
        """Resident memory of the server's whole process group now (API server, engine core,
        workers; Linux ``/proc``), None for one we did not start or off Linux."""
        if self.proc is None or not os.path.isdir("/proc"):
            return None
        total = 0
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat", encoding="ascii", errors="replace") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[2]) == self.proc.pid:  # the process group (field 5 of stat)
                    total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")  # rss pages (field 24)
            except (OSError, IndexError, ValueError):
                continue
        return total

    def exited(self) -> int | None:
        """The exit code when a server we started has died, else None."""
        return None if self.proc is None else self.proc.poll()

    def log_tail(self, n: int = 3) -> str:
        if self.log is None or not self.log.exists():
            return ""
        lines = [ln for ln in self.log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
        return " | ".join(ln.strip()[:200] for ln in lines[-n:])

    def why_it_died(self) -> str:
        """The root cause in the log: the first exception line after its first traceback
        (``RuntimeError: shape mismatch ...``; the engine's "EngineDeadError: see above" and
        the shutdown warnings come after it), else its last line."""
        if self.log is None or not self.log.exists():
            return ""
        lines = [ln.strip() for ln in self.log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
        first_tb = next((i for i, ln in enumerate(lines) if "Traceback (most recent call last)" in ln), None)
        if first_tb is not None:
            cause = next((ln for ln in lines[first_tb:] if _EXCEPTION_LINE.search(ln)), None)
            if cause is not None:
                return cause[:300]
        return (lines or [""])[-1][:300]


def extra_body(kind: str, max_tokens: int) -> dict:
    """Request fields that make a kind of server generate exactly ``max_tokens`` (no early stop)."""
    if kind == TRANSFORMERS:
        # Unknown fields are refused there (422); its own generation_config field is not.
        return {"generation_config": json.dumps({"max_new_tokens": max_tokens, "min_new_tokens": max_tokens,
                                                 "do_sample": False})}
    return {"ignore_eos": True, "stream_options": {"include_usage": True}}


def command(kind: str, python: str, model: str, port: int, device: str) -> list[str]:
    """The server's command line (``recipe``'s)."""
    return recipe(kind, python, model, port, device)[0]


def recipe(kind: str, python: str, model: str, port: int, device: str,
           scratch: str | os.PathLike[str] = "") -> tuple[list[str], dict[str, str]]:
    """The server's command line and the variables it needs: ``transformers serve`` here,
    an engine's from its registry entry (``EngineEntry.server``: flags and environment live
    with the engine, ``engines/known/NAME.py``)."""
    if kind == TRANSFORMERS:
        cmd = [python, "-m", "transformers.cli.transformers", "serve", model, "--host", "127.0.0.1",
               "--port", str(port), "--trust-remote-code", "--device", device, "--log-level", "warning"]
        return cmd + (["--dtype", "float32"] if device == "cpu" else []), {}
    _check_kind(kind)
    from vlmpath.engines import registry

    serve = registry.get(kind).server
    if serve is None:
        raise VlmpathError(f"--launch {kind!r}: the {kind} engine entry has no server recipe")
    argv, env = serve(python, model, port, device, str(scratch))
    return list(argv), dict(env)


def delay_seconds(spec: str) -> float | None:
    """S of a ``delay:S`` plant (0 < S <= 60), else None: one reading for every plant site."""
    if not spec.startswith("delay:"):
        return None
    try:
        s = float(spec[6:])
    except ValueError:
        return None
    return s if 0 < s <= 60 else None


def check_plant(spec: str) -> str:
    """``shift``, ``delay:S`` (0 < S <= 60) or ``exit:N``, else one line naming ``--plant``."""
    if spec == "shift":
        return spec
    if delay_seconds(spec) is not None:
        return spec
    if spec.startswith("exit:") and spec[5:].isdigit() and int(spec[5:]) < 10_000:
        return spec
    raise VlmpathError(f"--plant {spec!r}: use shift (image rows shifted by one), delay:S "
                       "(S seconds, 0-60, before each generate call) or exit:N (die at call N+1)")


def check_model_dir(model: str) -> Path:
    p = Path(model)
    if not (p / "config.json").is_file():
        raise VlmpathError(f"--model {model}: not a model directory (no config.json); write one with "
                           "`vlmpath serve-bench --write-tiny-model DIR` or pass a local checkpoint")
    return p.resolve()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_port(port: int) -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            raise VlmpathError(f"--port {port}: 127.0.0.1:{port} is in use ({exc.strerror}); pass another "
                               "--port (or none: a free one is picked) or stop what holds it") from None


def wait_healthy(server: Server, timeout_s: float, started: float | None = None) -> None:
    """Poll ``/health`` until it answers 200 (``ready_s`` set from ``started``, a monotonic time)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        code = server.exited()
        if code is not None:
            raise VlmpathError(f"--model {server.model_dir}: "
                               f"the {server.kind} server exited with code {code} before it was up "
                               f"(log {server.log}: {server.log_tail() or 'empty'})")
        status, _ = get_json(server.url, "/health", timeout_s=2.0)
        if status == 200:
            if started is not None:
                server.ready_s = round(time.monotonic() - started, 1)
            return
        time.sleep(0.25)
    raise VlmpathError(f"the {server.kind} server at {server.url} did not answer /health within "
                       f"{timeout_s:g} s (log {server.log}: {server.log_tail() or 'empty'}); pass a longer "
                       "--startup-timeout")


def stop(server: Server) -> None:
    """SIGTERM the server's process group, then SIGKILL after ``STOP_GRACE_S``; reaps it."""
    proc = server.proc
    if proc is None:
        return
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # The leader is gone; children of the group may not be (an engine's workers).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        return


def _engine_plants(kind: str):
    """The module that plants faults in engine ``kind``'s own code (``edits(spec)``,
    ``plant_overlay(python, spec, out)``), None for transformers or an engine without one."""
    if kind == TRANSFORMERS:
        return None
    import importlib

    from vlmpath.engines import registry

    name = registry.get(kind).server_plants
    return importlib.import_module(name) if name else None


@contextlib.contextmanager
def launched(kind: str, model: str, *, log_dir: str | os.PathLike[str], python: str | None = None,
             port: int | None = None, device: str = "cpu", pythonpath: Sequence[str] = (),
             startup_timeout_s: float = 120.0, env: dict[str, str] | None = None,
             plant: str | None = None, wait: bool = True) -> Iterator[Server]:
    """Start a ``kind`` server for ``model``, wait until it is up, yield it, stop it (module doc).
    ``plant``: a planted fault loaded into this server only: for vLLM an overlay of its own
    code (``engine_plants``), else ``plant_site`` (transformers' model code).
    ``wait=False``: yield it at once (the caller waits: ``wait_healthy``), so several servers
    start side by side."""
    _check_kind(kind)
    # An engine whose entry names its plants (``EngineEntry.server_plants``: vLLM's) is planted
    # in its own code, an overlay; any other server through transformers' model code.
    plants = _engine_plants(kind) if plant is not None else None
    engine_plant = plants is not None
    if plant is not None:
        if plants is not None:
            plants.edits(plant)
        else:
            check_plant(plant)
            pythonpath = [str(PLANT_SITE), *pythonpath]
    mdir = check_model_dir(model)
    if port is None:
        port = free_port()
    else:
        check_port(port)
    if plants is not None:
        tag = "".join(c if c.isalnum() else "-" for c in plant)
        pythonpath = [str(plants.plant_overlay(python or sys.executable, plant,
                                               Path(log_dir) / f"overlay-{tag}-{port}").resolve()), *pythonpath]
    log = Path(log_dir) / f"server-{kind}-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(log_dir) / f"scratch-{kind}-{port}"  # the server's own caches (VLLM_CACHE_ROOT), kept
    cmd, recipe_env = recipe(kind, python or sys.executable, str(mdir), port, device, scratch.resolve())
    child_env = dict(os.environ if env is None else env)
    child_env.update(recipe_env)
    child_env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    if plant is not None and not engine_plant:
        child_env["VLMPATH_SERVE_PLANT"] = plant
    if pythonpath:
        child_env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), child_env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=child_env, start_new_session=True)
    server = Server(url=f"http://127.0.0.1:{port}", kind=kind,
                    model=None if kind == "transformers" else str(mdir), proc=proc, log=log, command=tuple(cmd),
                    model_dir=str(mdir))
    server.started = started
    try:
        if wait:
            wait_healthy(server, startup_timeout_s, started)
        yield server
    finally:
        stop(server)


def attached(url: str, kind: str, model: str | None, timeout_s: float = 10.0) -> Server:
    """A server someone else runs (``--server URL``); refused in one line when it does not answer."""
    server = Server(url=url.rstrip("/"), kind=kind, model=model)
    status, why = get_json(server.url, "/health", timeout_s)
    if status != 200:
        status2, why2 = get_json(server.url, "/v1/models", timeout_s)
        if status2 != 200:
            raise VlmpathError(f"--server {url}: no OpenAI-compatible server answers there "
                               f"(/health: {status or why}, /v1/models: {status2 or why2})")
    return server
