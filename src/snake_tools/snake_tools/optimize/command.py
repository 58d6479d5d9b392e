"""The command a gait study compares gaits at, and what a gait gains apart from its command.

A gait's speed grows with its command (the phase rates of the rolling gait, the wave
speed of conical sidewinding, the serpenoid's frequency), so a speed search that also
moves the command finds faster commands, not better gaits. A study that compares gaits
holds one ``cmd_vel`` (v m/s, omega rad/s) for every trial: the gait's own twist mapping
(:class:`snake_core.gait.reduction.TwistMapping`, read from the robot YAML, not from the
searched coefficients) turns it into the same native command for every trial, as the gait
node does on the robot.

:func:`shares` splits a gain into the gait's part (both at the same command) and the
command's part (the best gait at its own command against it at the compared one):
``best@own / default@c = (best@c / default@c) * (best@own / best@c)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from snake_core.robot import RobotModel

COMMANDS: dict[str, tuple[str, ...]] = {"rolling": ("omega_h", "omega_t"), "conical": ("omega_s", "taper"),
                                        "serpenoid": ("omega", "head_offset")}
"""Native command entries of a trial's parameters, per gait (rad/s; taper -, head offset rad)."""

_PRESET = re.compile(r"at cmd_vel v=(?P<v>\S+) m/s, omega=(?P<w>\S+) rad/s \(native: (?P<native>[^)]*)\)")


class StudyCommandError(ValueError):
    """A stored study was made at another command (or searched the command): one line."""


@dataclass(frozen=True)
class CommandPoint:
    """The command every trial of a study runs at.

    Attributes:
        v: Commanded linear speed, m/s.
        omega: Commanded yaw rate, rad/s.
        native: The gait's native command for it (names of :data:`COMMANDS`).
    """

    v: float
    omega: float
    native: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly: ``cmd_vel`` (``v_m_s``, ``omega_rad_s``) and the ``native`` command."""
        return {"cmd_vel": {"v_m_s": self.v, "omega_rad_s": self.omega}, "native": dict(self.native)}

    def text(self) -> str:
        """``cmd_vel v=0.05 m/s, omega=0 rad/s (native: omega_h=1, omega_t=1)``."""
        native = ", ".join(f"{k}={v!r}" for k, v in self.native.items())
        return f"cmd_vel v={self.v!r} m/s, omega={self.omega!r} rad/s (native: {native})"


def command_point(robot: RobotModel, gait: str, default_native: dict[str, float],
                  cmd_vel: tuple[float, float] | None = None) -> CommandPoint:
    """The command of a study: ``cmd_vel`` through the gait's twist mapping, else the defaults' command.

    Args:
        robot: The robot (its YAML's mapping coefficients).
        gait: Gait name.
        default_native: The defaults' native command (``snake optimize gait``'s ``defaults``).
        cmd_vel: (v m/s, omega rad/s), or None for the twist of ``default_native``.
    """
    from snake_core.gait import make_gait

    mapping = make_gait(gait, robot).mapping
    names = COMMANDS[gait]
    if cmd_vel is None:
        v, w = mapping.to_twist(tuple(float(default_native[k]) for k in names))
        return CommandPoint(float(v), float(w), {k: float(default_native[k]) for k in names})
    native = mapping.to_command(float(cmd_vel[0]), float(cmd_vel[1]))
    return CommandPoint(float(cmd_vel[0]), float(cmd_vel[1]), {k: float(x) for k, x in zip(names, native,
                                                                                           strict=False)})


def check_study(study: Any, point: CommandPoint | None) -> None:
    """Record the study's command in its user attributes, or refuse a study made at another one.

    Args:
        study: The Optuna study (new or resumed).
        point: The command every trial runs at, or None when the command is searched.

    Raises:
        StudyCommandError: The study's trials ran at another command, or searched it.
    """
    stored = study.user_attrs.get("cmd_vel", "searched" if study.trials else None)
    wanted = "searched" if point is None else [point.v, point.omega]
    if stored is None:
        study.set_user_attr("cmd_vel", wanted)
        return
    if stored != wanted:
        def say(x: Any) -> str:
            return "a searched command" if x == "searched" else f"cmd_vel v={x[0]:g} m/s, omega={x[1]:g} rad/s"
        raise StudyCommandError(f"study {study.study_name!r} compares gaits at {say(stored)}, not {say(wanted)}: "
                                "give --study-name for a new study (gaits are only compared at one command)")


def shares(default_at_c: float, best_at_c: float, best_at_own: float) -> dict[str, float | None]:
    """The gain of the best trial over the defaults, split into the gait's and the command's part.

    Args:
        default_at_c: The defaults' value at the compared command.
        best_at_c: The best coefficients' value at the compared command.
        best_at_own: The best coefficients' value at their own command.

    Returns:
        ``gait_ratio`` (best@c / default@c), ``command_ratio`` (best@own / best@c) and
        ``total_ratio`` (their product); None where a denominator is 0.
    """
    def ratio(a: float, b: float) -> float | None:
        return a / b if b else None

    gait, command = ratio(best_at_c, default_at_c), ratio(best_at_own, best_at_c)
    return {"gait_ratio": gait, "command_ratio": command,
            "total_ratio": gait * command if gait is not None and command is not None else None}


def preset_note(name: str, gait: str, objective: str, value: float, point: CommandPoint | None) -> str:
    """The line a preset's ``description`` ends with: what it was found at (read back by :func:`preset_command`)."""
    where = point.text() if point is not None else "a searched command"
    return f"gait preset {name}: gaits.{gait} found by snake optimize gait ({objective} {value:.6g}) at {where}"


def preset_command(robot: RobotModel) -> CommandPoint | None:
    """The command a preset (a robot YAML written by ``--write-preset``) was found at, from its description.

    Returns:
        The command, or None when the description names none (not a preset, or a searched command).
    """
    m = _PRESET.search(robot.description)
    if m is None:
        return None
    native = {}
    for part in m.group("native").split(", "):
        key, _, value = part.partition("=")
        native[key] = float(value)
    return CommandPoint(float(m.group("v")), float(m.group("w")), native)
