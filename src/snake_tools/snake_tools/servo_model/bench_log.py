"""Bench logs of one servo on a pendulum, in BAM's published JSON format, read strictly.

The format of Rhoban/bam's recorder (``bam/dynamixel/record.py``; its logs in
``bam/data.bak/raw/``): a header ``mass`` (kg), ``length`` (m), ``kp`` (Position P Gain
register), ``vin`` (V), ``motor``, ``trajectory``, and ``entries``, one per sample, each with
``timestamp`` (s), ``position`` and ``goal_position`` (rad), ``torque_enable`` and, where
recorded, ``input_volts`` (V; else the header's ``vin`` is used). Other keys (``speed``,
``load``, ``temp``) are read by nothing. Every problem is one line naming the file and field.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.servo.pendulum import BenchLog

BAM_MOTORS = {"xl330": "XL330-M288", "xl320": "XL-320", "mx64": "MX-64", "mx106": "MX-106"}
"""BAM's motor names -> the servo model names of ``config/servos/``."""
_HEADER = ("mass", "length", "kp", "motor", "entries")
_COLUMNS = ("timestamp", "position", "goal_position", "torque_enable")
_MAX_P_GAIN = 16383  # Position P Gain register range (e-Manual)
_MIN_SAMPLES = 20
_MAX_BYTES = 64 * 1024 * 1024


class BenchLogError(ValueError):
    """A bench log that cannot be fitted (one line naming the file and the field)."""


def read_bam_log(path: Path, model: str | None = None) -> BenchLog:
    """Read one BAM JSON log.

    Args:
        path: The file.
        model: The servo model the fit is for; a log of another motor is refused.

    Raises:
        BenchLogError: Unreadable, a field missing or out of range, time not increasing, or a
            log of another servo model.
    """

    def fail(field: str, msg: str) -> BenchLogError:
        return BenchLogError(f"{path}: {field}: {msg}")

    try:
        if path.stat().st_size > _MAX_BYTES:
            raise fail("<file>", f"larger than {_MAX_BYTES // 2**20} MiB")
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BenchLogError(f"{path}: not a readable JSON bench log ({err})") from err
    if not isinstance(data, dict):
        raise fail("<top>", "expected a JSON object with a header and entries")
    for key in _HEADER:
        if key not in data:
            raise fail(key, "missing (a BAM log has mass, length, kp, motor, entries)")
    motor = data["motor"]
    known = BAM_MOTORS.get(str(motor), str(motor))
    if model is not None and known != model:
        raise fail("motor", f"a log of {motor!r} ({known}), not of {model}")
    mass = _positive(data["mass"], "mass", fail, 100.0)
    length = _positive(data["length"], "length", fail, 10.0)
    kp = data["kp"]
    if not isinstance(kp, (int, float)) or isinstance(kp, bool) or kp != int(kp) or not 0 < kp <= _MAX_P_GAIN:
        raise fail("kp", f"must be a Position P Gain register value in 1..{_MAX_P_GAIN}, got {kp!r}")
    vin = data.get("vin")
    entries = data["entries"]
    if not isinstance(entries, list) or len(entries) < _MIN_SAMPLES:
        raise fail("entries", f"need a list of at least {_MIN_SAMPLES} samples")
    columns = list(_COLUMNS) + (["input_volts"] if all(isinstance(e, dict) and "input_volts" in e
                                                       for e in entries) else [])
    if "input_volts" not in columns and vin is None:
        raise fail("vin", "missing, and the entries have no input_volts")
    values: dict[str, list[float]] = {c: [] for c in columns}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise fail(f"entries[{i}]", "expected an object")
        for c in columns:
            if c not in entry:
                raise fail(f"entries[{i}].{c}", "missing")
            v = entry[c]
            if isinstance(v, bool):
                v = float(v)
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                raise fail(f"entries[{i}].{c}", f"expected a finite number, got {v!r}")
            values[c].append(float(v))
    t = np.array(values["timestamp"])
    if np.any(np.diff(t) <= 0.0):
        raise fail("entries.timestamp", f"not increasing (sample {int(np.argmin(np.diff(t))) + 1})")
    volts = (np.array(values["input_volts"]) if "input_volts" in values
             else np.full(len(t), _positive(vin, "vin", fail, 48.0)))
    if np.any(volts <= 0.0):
        raise fail("entries.input_volts", "a supply voltage <= 0")
    return BenchLog(name=path.name, mass=mass, length=length, p_gain=float(kp), time=t,
                    position=np.array(values["position"]), goal=np.array(values["goal_position"]),
                    torque_enable=np.array(values["torque_enable"]), voltage=volts,
                    trajectory=str(data.get("trajectory", "")), motor=known)


def _positive(value: Any, field: str, fail: Any, high: float) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 < value <= high:
        raise fail(field, f"must be a number in (0, {high:g}], got {value!r}")
    return float(value)
