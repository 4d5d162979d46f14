"""Which values of its options does an engine run with, and is what was asked for one of them?

An engine's entry declares its options (``registry.EngineOption``: name, choices, default).
A run's choice travels as a plain mapping ``{name: value}``: given on the command line
(``--engine-option NAME=VALUE``, repeatable; an option with ``own_flag`` also as
``--ENGINE-NAME VALUE``), carried by the options records and the case sets, checked here
against the one engine that runs (``resolve``), recorded in every case record
(``CaseRecord.engine_options``) and handed to the adapter untouched: generic code never
reads a value. ``resolve`` is where a name the engine does not declare, or a value not among
its choices, is refused in one line naming the option and the choices; it is applied where
the engine becomes known (the CLI's ``measure``, the engine PR once the checkout is found)
and again in the worker, where the mapping crossed a process boundary.
"""

from __future__ import annotations

from collections.abc import Mapping

from vlmpath.core.errors import EngineOptionError, VlmpathError, did_you_mean

FLAG = "--engine-option"


def said(name: str, value: str) -> str:
    """How the command line gives one option: ``--engine-option runner=v2``."""
    return f"{FLAG} {name}={value}"


def parse_assignment(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` of ``--engine-option`` (an argparse ``type``); anything else one line."""
    name, sep, value = str(text).partition("=")
    if not sep or not name.strip() or not value.strip():
        raise VlmpathError(f"{FLAG} {text!r} is not NAME=VALUE: write e.g. {FLAG} runner=v1 "
                           "(the engine's entry declares its options)")
    return name.strip(), value.strip()


def given(pairs) -> dict[str, str]:
    """The ``(name, value)`` pairs of the command line as one mapping; a name given twice
    with two values is refused."""
    out: dict[str, str] = {}
    for name, value in pairs or ():
        if out.get(name, value) != value:
            raise VlmpathError(f"{FLAG} {name} is given twice ({out[name]}, {value}): give it once")
        out[name] = value
    return out


def own_flag(engine: str, option: str) -> str:
    """An option's flag of its own (``own_flag``): ``--ENGINE-NAME`` (``--vllm-runner``)."""
    return f"--{engine}-{option}"


def declaring(name: str) -> list[str]:
    """The engines whose entries declare option ``name`` (for the error of an engine that does not)."""
    from vlmpath.engines import registry

    out = []
    for engine in registry.names():
        try:
            if registry.get(engine).option(name) is not None:
                out.append(engine)
        except VlmpathError:  # a broken plug-in says so where it is used, not in another's error
            continue
    return out


def resolve(entry, asked: Mapping[str, str], label: str | None = None) -> dict[str, str]:
    """Every option ``entry`` declares with its value: ``asked``'s where given, else the
    default. ``entry`` None is the reference routine, which takes none. A name the engine
    does not declare or a value not among its choices: one ``EngineOptionError`` line."""
    asked = dict(asked or {})
    who = label or (entry.name if entry is not None else "reference")
    if entry is None:
        if asked:
            name, value = next(iter(asked.items()))
            by = declaring(name)
            raise EngineOptionError(f"{said(name, value)}: the reference routine takes no engine options; "
                                    + (f"name an engine that declares {name!r} (--engine {by[0]}==X)" if by
                                       else "leave it out"))
        return {}
    names = [o.name for o in entry.options]
    for name, value in asked.items():
        opt = entry.option(name)
        if opt is None:
            takes = f"its options are {', '.join(names)}" if names else "it takes no engine options"
            raise EngineOptionError(f"{said(name, value)}: engine {who} has no option {name!r}"
                                    f"{did_you_mean(name, names)} ({takes}); leave it out")
        if value not in opt.choices:
            raise EngineOptionError(f"{said(name, value)}: engine {entry.name}'s option {name!r} is one of "
                                    f"{', '.join(opt.choices)}{did_you_mean(value, list(opt.choices))}")
    return {o.name: asked.get(o.name, o.default) for o in entry.options}


def resolve_for(spec, asked: Mapping[str, str]) -> dict[str, str]:
    """``resolve`` for the engine an ``EngineSpec`` names (the reference: none)."""
    from vlmpath.engines import registry

    return resolve(None if spec.in_process else registry.get(spec.name), asked, spec.label)
