"""The ``snake`` command as a child process of this interpreter's environment."""

from __future__ import annotations

import sys
from pathlib import Path


def snake_command(*args: str) -> list[str]:
    """Argv that runs ``snake ARGS...`` as a child of this interpreter's environment.

    It is the console script installed beside ``sys.executable``, else ``python -m snake_tools.cli``
    (a source checkout without the script installed). The script beside the interpreter is preferred
    to one found on ``PATH``, so a child runs with its parent's environment and package versions.
    """
    exe = Path(sys.executable).with_name("snake")
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "snake_tools.cli"]
    return [*base, *args]
