"""Figures of the experiments: where a matplotlib figure is written.

Not a command (the leading underscore keeps it out of ``snake experiment``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def savefig(fig: Any, out: Path, name: str) -> str:
    """Save a matplotlib figure as PNG into ``out``; returns the path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    fig.savefig(path, dpi=120)
    return str(path)
