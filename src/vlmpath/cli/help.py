"""How does ``vlmpath --help`` show the names a user may pass?

``HelpParser`` adds the preset, strategy and pipeline names (``suite.inputs.names_for_help``)
to the help of ``vlmpath`` and ``vlmpath measure``, read from the registries only when
help is shown: they import torch, which other commands may not need.
"""

from __future__ import annotations

import argparse


class HelpParser(argparse.ArgumentParser):
    def format_help(self) -> str:
        if self.epilog is None and self.prog.split()[-1] in ("vlmpath", "measure"):
            from vlmpath.suite.inputs import names_for_help

            self.formatter_class = argparse.RawDescriptionHelpFormatter  # keep the name lines
            self.epilog = names_for_help()
        return super().format_help()
