"""The one rule for a name that becomes part of a file path: letters, digits and ``_``.

Robot names (``config/robots/<robot>.yaml``, ``config/calibration/<robot>/``), calibration
targets (``config/calibration/<robot>/<target>.yaml``) and gait presets all become file or
folder names. A name outside the rule could leave its folder (``../evil``), hide (``.x``),
hold a separator or a space, or break the YAML comment that records it; it is refused with
one line before anything is written. Standard library only.
"""

from __future__ import annotations

import re

from snake_core.errors import SnakeCoreError

NAME_RULE = "letters, digits and '_'"
"""The rule in words, for help texts and errors."""

_NAME = re.compile(r"[A-Za-z0-9_]+")


class BadNameError(SnakeCoreError, ValueError):
    """A name that becomes part of a path breaks :data:`NAME_RULE`; the message names what and which."""


def check_name(what: str, name: str, error: type[Exception] = BadNameError) -> str:
    """``name`` if it follows :data:`NAME_RULE`.

    Args:
        what: What the name is, as the user gave it (e.g. ``"robot name"``, ``"--target"``).
        name: The name.
        error: Exception class raised (a ``ValueError`` subclass, so the CLI prints one line).

    Returns:
        ``name`` unchanged.

    Raises:
        error: The name is empty or holds anything but letters, digits and ``_``.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise error(f"{what} {name!r}: use {NAME_RULE} only (it becomes a file name)")
    return name
