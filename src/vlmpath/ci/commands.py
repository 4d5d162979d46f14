"""Which arguments do the trusted-CI subcommands (``vlmpath bisect``, ``vlmpath ci alert``) take?

Declared here rather than in ``vlmpath.cli`` only because that module is at its size
limit; ``vlmpath.cli`` registers them like its own (``add_bisect`` into the top-level
subcommands, ``add_ci_commands`` into ``vlmpath ci``). Handlers import their library
lazily, as ``vlmpath.cli`` does, so ``vlmpath --help`` stays cheap.
"""

from __future__ import annotations

import argparse


def add_bisect(sub: argparse._SubParsersAction) -> None:
    """``vlmpath bisect`` (added with the bisect flow)."""


def add_ci_commands(ci: argparse._SubParsersAction) -> None:
    """``vlmpath ci alert`` (added with the alert flow)."""
