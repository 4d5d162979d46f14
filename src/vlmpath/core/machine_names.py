"""What may a machine be called?

A machine name is a results directory of asv's store and a column of every comparison, so
it is letters, digits, ``.``, ``_`` and ``-`` (at most 64, not starting with a separator).
``MachineName`` is such a name, parsed once where it enters: ``--machine`` (the CLI),
``VLMPATH_MACHINE`` (``measure.platform.machine_name``); an artifact's machine
(``pr.artifact``) is checked against ``MACHINE_NAME`` as the hostile input it is. It is a
``str``, so it goes into paths and messages as the name itself.
"""

from __future__ import annotations

import re

from vlmpath.core.errors import VlmpathError

MACHINE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class MachineName(str):
    """A usable machine name (``MachineName.parse``)."""

    __slots__ = ()

    @classmethod
    def parse(cls, text: object, *, given: str = "--machine") -> MachineName:
        """``text`` as a machine name; otherwise one line naming ``given`` and the rule."""
        if isinstance(text, cls):
            return text
        if not isinstance(text, str) or not MACHINE_NAME.match(text):
            shown = f"{given}{text!r}" if given.endswith("=") else f"{given} {text!r}"
            raise VlmpathError(f"{shown} is not usable as a machine name (a results directory): use "
                               "letters, digits, '.', '_' and '-' only, at most 64 characters")
        return cls(text)
