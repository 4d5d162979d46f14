"""Which engines bring their own serving bench client, and where does each one run?

An engine's entry names its client (``registry.BenchClient``): one that runs (``run``:
``"module:function"``, e.g. vLLM's ``vllm bench serve`` in ``serving.engine_client``), or one
that is never run, with the reason (sglang's). ``serve-bench --engine-client`` offers
``auto``, ``none`` and every engine whose client runs (``runnable``); a chosen client runs in
the newest complete environment of its engine (``interpreter``), ``auto`` runs each one that
has an environment and says "not run" for the others. Nothing here knows an engine by name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from vlmpath.core.errors import VlmpathError

AUTO, NONE = "auto", "none"


@dataclass(frozen=True)
class Client:
    """One engine's client as a run asks for it: the interpreter it runs in (None: not
    installed, ``label`` says why) and the label its rows carry."""

    engine: str
    name: str             # the entry's ``bench_client.label``
    python: str | None
    label: str
    run: Callable | None  # ``(server, settings, doc, *, python, client, work, factor) -> rows``


def _entries():
    from vlmpath.engines import registry

    out = []
    for name in registry.names():
        try:
            entry = registry.get(name)
        except VlmpathError:  # a broken plug-in is refused where it is named, not here
            continue
        if entry.bench_client is not None:
            out.append(entry)
    return out


def runnable() -> list[str]:
    """The engines whose own bench client vlmpath runs (``--engine-client NAME`` choices)."""
    return [e.name for e in _entries() if e.bench_client.run]


def choices() -> list[str]:
    return [AUTO, *runnable(), NONE]


def interpreter(entry, home: str | None = None) -> tuple[str | None, str]:
    """(python, label) of the newest complete environment of ``entry``'s engine; (None, why not)."""
    from vlmpath.engines.envs import newest_env

    env = newest_env(home, entry.name)
    if env is None:
        return None, (f"not run: no complete {entry.name} engine env (`vlmpath engine install {entry.example}`, "
                      "or pass --engine-home)")
    return str(env.python), f"{entry.bench_client.label} {env.spec.version}"


def _load(spec: str) -> Callable:
    module, _, func = spec.partition(":")
    found = getattr(importlib.import_module(module), func, None)
    if not callable(found):
        raise VlmpathError(f"bench client {spec!r} is not a function: fix the engine entry's bench_client")
    return found


def chosen(asked: str, home: str | None = None) -> tuple[list[Client], list[dict]]:
    """The clients ``--engine-client asked`` runs, and the ``not run`` rows of the clients
    that never run (``auto`` only); a named client that is not installed is refused in one line."""
    if asked == NONE:
        return [], []
    entries = _entries()
    if asked != AUTO and asked not in [e.name for e in entries if e.bench_client.run]:
        raise VlmpathError(f"--engine-client {asked}: no registered engine brings a bench client of that name; "
                           f"choose one of {', '.join(choices())}")
    clients = []
    for e in entries:
        if not e.bench_client.run or asked not in (AUTO, e.name):
            continue
        python, label = interpreter(e, home)
        if python is None and asked == e.name:
            raise VlmpathError(f"--engine-client {asked}: {label.removeprefix('not run: ')}")
        clients.append(Client(e.name, e.bench_client.label, python, label, _load(e.bench_client.run) if python else None))
    never = [{"client": e.bench_client.label, "not_run": e.bench_client.not_run}
             for e in entries if asked == AUTO and not e.bench_client.run]
    return clients, never
