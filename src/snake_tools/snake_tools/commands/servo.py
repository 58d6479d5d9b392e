"""``snake servo``: bring-up helper that measures every joint's ``zero_offset``.

Put the robot in its zero pose (every joint straight, horns as in the YAML), then run
``snake servo --robot tsnake --port /dev/ttyUSB0``. The servos are opened through the
bridge's own Dynamixel backend (so the same checks and the same rad <-> ticks
conversion apply), torque stays off, present positions are read and each joint's
servo angle is printed as its new ``zero_offset`` (servo angle at joint zero, rad;
continuous joints wrapped to (-pi, pi]). ``--write PATH`` writes a copy of the robot
YAML with these offsets, refusing when a limited joint's range would no longer fit
the servo's one-turn position mode (re-mount that horn first).
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import TypedDict

import yaml

from snake_core.angles import wrap_to_pi
from snake_tools.cli import int_at_least, positive_float

_DECIMALS = 4  # rad, 1e-4 rad is 0.07 tick


class _OffsetRow(TypedDict):
    """One joint's measurement: ``zero_offset`` and ``previous`` in rad, ``note`` empty when it fits."""

    joint: str
    servo_id: int
    zero_offset: float
    previous: float
    note: str


class ServoToolError(ValueError):
    """A bad flag or a result that cannot be written; the message names it."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake servo``."""
    p = subparsers.add_parser("servo", help="read present positions (torque off) and print / write zero_offset values")
    p.add_argument("--robot", default="tsnake", help="robot name or YAML path (default tsnake)")
    p.add_argument("--port", default=None, help="serial port (default: the robot YAML's bus.port)")
    p.add_argument("--baud-rate", type=int, default=None, help="bps (default: the robot YAML's bus.baud_rate)")
    p.add_argument("--latency-ms", type=positive_float, default=1.0, help="USB latency timer, ms")
    p.add_argument("--retries", type=int_at_least(0), default=2,
                   help="extra attempts per bus transaction (default 2; more on a loaded computer)")
    p.add_argument("--write", default=None, metavar="PATH", help="write a copy of the robot YAML with the new offsets")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Open the bus, read present positions with torque off, print or write the offsets."""
    from snake_core.robot import load_robot, resolve_robot_path
    from snake_hardware.backend import BackendError
    from snake_hardware.dynamixel import conversion as cv
    from snake_hardware.dynamixel.backend import DynamixelBackend, DynamixelSettings
    from snake_tools.output import print_json

    source = resolve_robot_path(args.robot)
    robot = load_robot(source, calibrated=False)
    bus = yaml.safe_load(source.read_text()).get("bus", {}) or {}
    port = args.port or bus.get("port", "/dev/ttyUSB0")
    baud = args.baud_rate or int(bus.get("baud_rate", 4_000_000))
    if args.latency_ms <= 0:
        raise ServoToolError("--latency-ms: must be > 0")
    backend = DynamixelBackend(robot, DynamixelSettings(port=port, baud_rate=baud, latency_ms=args.latency_ms,
                                                           retries=args.retries))
    try:
        backend.open()   # torque off on every servo
        reading = backend.read()
    except BackendError as err:
        raise ServoToolError(f"--port {port}: {err}") from err
    finally:
        backend.close()
    rows: list[_OffsetRow] = []
    misfits: list[str] = []
    for j, angle in zip(robot.joints, reading.position.tolist(), strict=True):
        servo_angle = j.direction * angle + j.zero_offset
        offset = round(wrap_to_pi(servo_angle) if j.continuous else servo_angle, _DECIMALS)
        note = ""
        if not j.continuous:
            try:
                cv.limit_ticks(replace(j, zero_offset=offset))
            except ValueError as err:
                note = str(err)
                misfits.append(j.name)
        rows.append(_OffsetRow(joint=j.name, servo_id=j.servo_id, zero_offset=offset,
                               previous=j.zero_offset, note=note))
    written = None
    if args.write:
        if misfits:
            raise ServoToolError(f"--write: not written, the limits of {', '.join(misfits)} do not fit one "
                                 "servo turn with the measured offsets (re-mount those horns)")
        written = write_offsets(source, Path(args.write), {r["joint"]: r["zero_offset"] for r in rows})
    if args.json:
        print_json({"robot": robot.name, "port": port, "joints": rows,
                    "written": str(written) if written else None})
    else:
        print(f"# {robot.name} on {port}: zero_offset = servo angle at joint zero, rad (torque off)")
        for r in rows:
            line = (f"{r['joint']:<12} id {r['servo_id']:>3}  zero_offset {r['zero_offset']:+.4f}"
                    f"  (was {r['previous']:+.4f})")
            print(line + (f"  ! {r['note']}" if r["note"] else ""))
        if written:
            print(f"# written: {written}")
    return 0


def write_offsets(source: Path, out: Path, offsets: dict[str, float]) -> Path:
    """Copy of the robot YAML at ``out`` with each joint's ``zero_offset`` set; comments are kept.

    Joints must be one-line flow mappings (``- {name: m1_dorsal, ...}``), as in the
    shipped robot files. The copy is loaded back and checked before returning.
    """
    from snake_core.robot import robot_from_dict

    if out.resolve() == source.resolve():
        raise ServoToolError(f"--write: give a new path, not the robot file itself ({source})")
    text = source.read_text()
    for name, value in offsets.items():
        line = re.compile(r"^(?P<head>[ \t]*-[ \t]*\{[^}\n]*\bname:[ \t]*" + re.escape(name)
                          + r"\b[^}\n]*?)(?P<tail>[ \t]*\})", re.MULTILINE)
        m = line.search(text)
        if m is None:
            raise ServoToolError(f"--write: joint {name} is not a one-line {{name: ...}} entry in {source}")
        head = m.group("head")
        if re.search(r"\bzero_offset:", head):
            head = re.sub(r"\bzero_offset:[ \t]*[^,}]+", f"zero_offset: {value}", head)
        else:
            head = f"{head}, zero_offset: {value}"
        text = text[:m.start()] + head + m.group("tail") + text[m.end():]
    robot = robot_from_dict(yaml.safe_load(text), source=out)
    for j in robot.joints:
        if j.name in offsets and not math.isclose(j.zero_offset, offsets[j.name], abs_tol=1e-12):
            raise ServoToolError(f"--write: {j.name}.zero_offset did not come out as {offsets[j.name]}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return out
