"""Shared output helpers for the ``snake`` subcommands."""

from __future__ import annotations

import json
import math
import sys
from typing import Any


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    # A numpy value exists only where numpy was imported: a command that never imported it
    # (one that only starts other processes) does not pay for it here.
    np = sys.modules.get("numpy")
    if np is None:
        return None if isinstance(value, float) and not math.isfinite(value) else value
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, (np.floating, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def print_json(data: dict[str, Any]) -> None:
    """Print one JSON object (numpy types converted, non-finite floats as null)."""
    print(json.dumps(_jsonable(data), indent=2, sort_keys=False))


def print_table(rows: list[tuple[str, Any]], title: str | None = None) -> None:
    """Print ``name: value`` rows aligned, for humans."""
    if title:
        print(title)
    width = max((len(k) for k, _ in rows), default=0)
    for key, value in rows:
        text = f"{value:.6g}" if isinstance(value, float) else value
        print(f"  {key:<{width}}  {text}")
