"""Joint angle <-> servo ticks: the ONE place where zero offset, direction and units meet.

Servo angle (rad) = direction * joint angle + zero_offset; ticks are counted from
:data:`~snake_hardware.dynamixel.control_table.TICKS_CENTER` at servo angle 0, 4096
ticks per revolution, in both position and extended-position mode.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from snake_core.robot import JointSpec
from snake_hardware.dynamixel import control_table as ct

_TICKS_PER_RAD = ct.TICKS_PER_REV / (2.0 * math.pi)


def joint_to_ticks(joint: JointSpec, angle: float) -> int:
    """Goal Position register value for a joint angle, rad -> ticks (rounded)."""
    servo = joint.direction * angle + joint.zero_offset
    return round(servo * _TICKS_PER_RAD) + ct.TICKS_CENTER


def goal_ticks(joint: JointSpec, angle: float, turn_offset: int = 0,
               limits: tuple[int, int] | None = None) -> int:
    """Goal Position register value for a joint goal, rad, checked against the servo's range.

    The angle is clamped to the joint limits; ``turn_offset`` (ticks, a multiple of 4096)
    is what the backend adds to the Present Position register of an extended-position
    servo to get its unwrapped position, so the register value is the unwrapped goal
    minus it. ``limits`` is :func:`limit_ticks` of the joint if the caller has it
    (position mode; computed here otherwise). Never raises anything but ValueError,
    whatever ``angle`` is.

    Raises:
        ValueError: The angle is not a finite number, or the goal falls outside the
            position limits (position mode) or +-1,048,575 ticks (extended position mode).
    """
    try:
        a = float(angle)
    except (TypeError, ValueError) as err:
        raise ValueError(f"goal {angle!r} is not a number") from err
    if not math.isfinite(a):
        raise ValueError(f"goal {a} is not finite")
    a = joint.clamp(a)
    unwrapped = (joint.direction * a + joint.zero_offset) * _TICKS_PER_RAD + ct.TICKS_CENTER
    span = ct.EXTENDED_RANGE_TICKS + abs(turn_offset)
    if not abs(unwrapped) <= span + 1:
        raise ValueError(f"goal {a} rad is beyond the servo's extended-position range "
                         f"(+-{ct.EXTENDED_RANGE_TICKS} ticks from the present turn count)")
    ticks = round(unwrapped) - turn_offset
    if joint.operating_mode == "position":
        lo, hi = limits if limits is not None else limit_ticks(joint)
        if not lo <= ticks <= hi:
            raise ValueError(f"goal {a} rad gives {ticks} ticks outside the position limits [{lo}, {hi}]")
    elif abs(ticks) > ct.EXTENDED_RANGE_TICKS:
        raise ValueError(f"goal {a} rad gives {ticks} ticks, beyond the extended-position range "
                         f"+-{ct.EXTENDED_RANGE_TICKS} at the present turn count")
    return ticks


class GoalTable:
    """:func:`goal_ticks` for a fixed list of joints, each joint's constants looked up once.

    A bridge converts every joint's goal at every cycle; here the joint's limits, direction,
    zero offset and register range are one tuple per joint, read at construction, and the
    arithmetic is :func:`goal_ticks`'s, operation for operation (so the same ticks; a test
    compares them). It tells a goal that cannot be placed only by ``None``: the caller
    then asks :func:`goal_ticks` for the reason.

    Args:
        joints: The joints, indexed as in :meth:`ticks`.
        limits: Per joint, :func:`limit_ticks` (position mode) or None (extended position).
    """

    def __init__(self, joints: Sequence[JointSpec], limits: Sequence[tuple[int, int] | None]) -> None:
        ext = ct.EXTENDED_RANGE_TICKS
        self._rows = [(j.lower, j.upper, j.direction, j.zero_offset, *(lim if lim is not None else (-ext, ext)))
                      for j, lim in zip(joints, limits, strict=True)]

    def ticks(self, i: int, angle: Any, turn_offset: int = 0) -> int | None:
        """Goal Position register value of joint ``i`` for ``angle``, rad; None where :func:`goal_ticks` raises."""
        lower, upper, direction, zero_offset, lo, hi = self._rows[i]
        try:
            a = float(angle)
        except (TypeError, ValueError):
            return None
        if not math.isfinite(a):
            return None
        a = min(max(a, lower), upper)   # JointSpec.clamp
        unwrapped = (direction * a + zero_offset) * _TICKS_PER_RAD + ct.TICKS_CENTER
        if not abs(unwrapped) <= ct.EXTENDED_RANGE_TICKS + abs(turn_offset) + 1:
            return None
        ticks = round(unwrapped) - turn_offset
        return ticks if lo <= ticks <= hi else None

    def ticks_every(self, angles: Iterable[Any], turn_offsets: Sequence[int]) -> list[int] | None:
        """:meth:`ticks` of every joint in the table's order, or None unless each is a float that is placed.

        The bridge's usual cycle: one pass with :meth:`ticks`'s arithmetic, operation for
        operation, without a call per joint. A goal that is not a finite float, or not
        placed, gives None; the caller then takes :meth:`ticks` joint by joint for the
        reasons.
        """
        out: list[int] = []
        ext = ct.EXTENDED_RANGE_TICKS + 1
        for (lower, upper, direction, zero_offset, lo, hi), angle, turn in zip(
                self._rows, angles, turn_offsets, strict=True):
            if angle.__class__ is not float or not math.isfinite(angle):
                return None
            a = lower if angle < lower else upper if angle > upper else angle   # JointSpec.clamp
            unwrapped = (direction * a + zero_offset) * _TICKS_PER_RAD + ct.TICKS_CENTER
            if not abs(unwrapped) <= ext + abs(turn):
                return None
            ticks = round(unwrapped) - turn
            if not lo <= ticks <= hi:
                return None
            out.append(ticks)
        return out


def ticks_to_joint(joint: JointSpec, ticks: int) -> float:
    """Joint angle, rad, of a Present/Goal Position register value (ticks)."""
    servo = (ticks - ct.TICKS_CENTER) / _TICKS_PER_RAD
    return (servo - joint.zero_offset) * joint.direction


def velocity_to_joint(joint: JointSpec, units: int) -> float:
    """Joint velocity, rad/s, of a Present Velocity value (0.229 rev/min units)."""
    return units * ct.VELOCITY_UNIT_RAD_S * joint.direction


def velocity_to_units(speed: float) -> int:
    """Velocity register value (0.229 rev/min units) for a speed magnitude, rad/s."""
    return round(abs(speed) / ct.VELOCITY_UNIT_RAD_S)


def current_to_effort(joint: JointSpec, raw: int) -> float:
    """Joint effort, N m, estimated from Present Current (or Present Load on XL430).

    Effort = torque constant x current for models reporting current; for models
    reporting load in 0.1 % of stall torque, effort = load x stall torque.
    """
    m = ct.model(joint.model)
    if m.current_unit_a > 0:
        torque = raw * m.current_unit_a * m.torque_constant
    else:
        torque = raw * 1e-3 * m.stall_torque
    return torque * joint.direction


def effort_to_current(joint: JointSpec, effort: float) -> int:
    """Present Current value for a joint effort, N m (inverse of :func:`current_to_effort`)."""
    m = ct.model(joint.model)
    torque = effort * joint.direction
    if m.current_unit_a > 0:
        return round(torque / (m.current_unit_a * m.torque_constant))
    return round(torque / (1e-3 * m.stall_torque))


def limit_ticks(joint: JointSpec) -> tuple[int, int]:
    """(Min, Max) Position Limit register values for a limited joint, ticks.

    The direction may swap which joint limit maps to the servo's minimum. Raises
    ValueError when the range does not fit the position mode's one revolution.
    """
    if not (math.isfinite(joint.lower) and math.isfinite(joint.upper)):
        raise ValueError(f"{joint.name}: continuous joint has no position limits")
    a, b = joint_to_ticks(joint, joint.lower), joint_to_ticks(joint, joint.upper)
    lo, hi = min(a, b), max(a, b)
    if lo < 0 or hi > ct.POSITION_MAX_TICKS:
        raise ValueError(f"{joint.name}: limits [{joint.lower}, {joint.upper}] rad with zero_offset "
                         f"{joint.zero_offset} give ticks [{lo}, {hi}] outside 0..{ct.POSITION_MAX_TICKS}")
    return lo, hi


def to_signed32(value: int) -> int:
    """Interpret an unsigned 32-bit register value as signed."""
    return value - (1 << 32) if value & 0x80000000 else value


def to_signed16(value: int) -> int:
    """Interpret an unsigned 16-bit register value as signed."""
    return value - (1 << 16) if value & 0x8000 else value
