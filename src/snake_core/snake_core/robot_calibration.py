"""Loading a robot: its YAML found by name or path, checked, and its calibration laid over it.

:func:`load_robot` is the loader every node and command uses. Measured gait coefficients
and the twin's physics live apart from the nominal description, one file per calibration
target (``config/calibration/<robot>/<target>.yaml``, :func:`calibration_path`):
:func:`apply_calibration` overlays a file's ``gaits``, :func:`load_twin_params` reads its
``twin:`` block, :func:`describe_calibration` and :func:`calibration_targets` say which
files there are. Bad files raise :class:`~snake_core.errors.RobotConfigError`, one line
naming the file and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from snake_core import config_files
from snake_core.config_files import DEFAULT_CALIBRATION_TARGET, calibration_target
from snake_core.errors import RobotConfigError
from snake_core.robot_model import RobotModel
from snake_core.robot_yaml import _check_segments, _gait_values, robot_from_dict  # an overlay's gait checks
from snake_core.schema import check_keys, load_yaml, mapping, suggest
from snake_core.twin_params import TwinParams, parse_twin_block

_CALIBRATION_KEYS = ("gaits", "provenance", "twin")


def load_robot(path: str | Path, calibrated: bool = True, target: str | None = None) -> RobotModel:
    """Load and validate a robot description.

    Measured gait coefficients live apart from the nominal description, one file per
    calibration target (:func:`calibration_path`: the twin's apart from each real
    robot's, written by ``snake experiment calibrate`` / ``snake bag calibrate`` with
    their provenance); when that file exists and ``calibrated`` is true, its ``gaits``
    entries override the description's.

    Args:
        path: A YAML file, or a robot name looked up in the workspace's ``config/robots``.
        calibrated: Apply the calibration file if there is one.
        target: Calibration target (see :func:`calibration_target`).

    Returns:
        The validated model.

    Raises:
        RobotConfigError: The file is missing, unreadable or has an invalid field.
    """
    p = resolve_robot_path(path)
    data = load_yaml(p, RobotConfigError, "robot description")
    robot = robot_from_dict(data, source=p)
    if calibrated:
        robot = apply_calibration(robot, calibration_path(robot.name, target))
    return robot


def calibration_path(robot_name: str, target: str | None = None) -> Path:
    """Where the calibration of ``robot_name`` for ``target`` is kept.

    ``config/calibration/<robot>/<target>.yaml`` (target: :func:`calibration_target`).
    For the default target, a file in the older single-file layout
    ``config/calibration/<robot>.yaml`` is used when the per-target file is absent.
    """
    name = calibration_target(target)
    base = config_files.config_dir(RobotConfigError) / config_files.SUBDIRS["calibration"]
    path = base / robot_name / f"{name}.yaml"
    legacy = base / f"{robot_name}.yaml"
    if name == DEFAULT_CALIBRATION_TARGET and not path.is_file() and legacy.is_file():
        return legacy
    return path


def describe_calibration(robot_name: str, target: str | None = None) -> str:
    """One line saying which calibration ``load_robot(robot_name, target=target)`` applies.

    For a node's start-up log, e.g. ``calibration 'twin' of tsnake: config/calibration/
    tsnake/twin.yaml (snake experiment calibrate --write, 2026-11-21)``, or ``calibration
    'lab' of tsnake: none (no file ...): nominal coefficients of the robot YAML``.
    """
    name = calibration_target(target)
    path = calibration_path(robot_name, name)
    if not path.is_file():
        return f"calibration {name!r} of {robot_name}: none (no file {path}): nominal coefficients of the robot YAML"
    try:
        prov = (load_yaml(path, RobotConfigError, "calibration") or {}).get("provenance") or {}
    except (RobotConfigError, AttributeError):
        prov = {}
    how = ", ".join(str(prov[k]) for k in ("command", "date") if isinstance(prov, Mapping) and k in prov)
    return f"calibration {name!r} of {robot_name}: {path}" + (f" ({how})" if how else "")


def calibration_targets(robot_name: str) -> list[str]:
    """Names of the calibration targets that have a file for ``robot_name``."""
    base = config_files.config_dir(RobotConfigError) / config_files.SUBDIRS["calibration"] / robot_name
    return sorted(p.stem for p in base.glob("*.yaml")) if base.is_dir() else []


def load_twin_params(robot_name: str | RobotModel, target: str | None = None, must_exist: bool = False
                     ) -> tuple[TwinParams, Path | None]:
    """The twin's physics (``twin:`` block) of a calibration target, and the file it came from.

    Args:
        robot_name: The robot's name (``tsnake``), or the robot.
        target: Calibration target (:func:`calibration_target`; default ``twin``).
        must_exist: Refuse a target without a file (else: the defaults, and ``None`` as path).

    Returns:
        The parameters (the defaults when the file has no ``twin:`` block) and the file read.

    Raises:
        RobotConfigError: A target without a file (when ``must_exist``; the existing targets
            named), or a bad block (one line, file and field).
    """
    joints = None
    if isinstance(robot_name, RobotModel):
        joints = [j.name for j in robot_name.joints]
        robot_name = robot_name.name
    name = calibration_target(target)
    path = calibration_path(robot_name, name)
    if not path.is_file():
        if must_exist:
            known = calibration_targets(robot_name)
            raise RobotConfigError(f"calibration target {name!r} of {robot_name}: no file {path} "
                                   f"(targets: {', '.join(known) if known else 'none'})")
        return TwinParams(), None
    data = load_yaml(path, RobotConfigError, "calibration")

    def fail(field_name: str, msg: str) -> RobotConfigError:
        return RobotConfigError(f"{path}: {field_name}: {msg}")

    data = mapping(data, "", fail, required=False)
    check_keys(data, _CALIBRATION_KEYS, "", fail, " of a calibration file")
    return parse_twin_block(data.get("twin"), str(path), joints), path


def apply_calibration(robot: RobotModel, path: Path) -> RobotModel:
    """Overlay the ``gaits`` entries of a calibration file (if it exists) on ``robot``.

    The file has ``gaits`` (per gait, the measured coefficients), ``provenance`` (a
    free-form record of how they were measured, not read by the code) and ``twin`` (the
    twin's physics, :func:`load_twin_params`; validated here as well).

    Raises:
        RobotConfigError: Unknown key, a gait the robot does not have, a coefficient
            the gait does not know, or a value out of range (one line, file and field).
    """
    if not path.is_file():
        return robot
    data = load_yaml(path, RobotConfigError, "calibration")

    def fail(field_name: str, msg: str) -> RobotConfigError:
        return RobotConfigError(f"{path}: {field_name}: {msg}")

    data = mapping(data, "", fail, required=False)
    check_keys(data, _CALIBRATION_KEYS, "", fail, " of a calibration file")
    mapping(data.get("provenance"), "provenance", fail, required=False)
    # read by load_twin_params; a bad block (or a joint the robot lacks) fails every loader
    parse_twin_block(data.get("twin"), str(path), [j.name for j in robot.joints])
    overlay = mapping(data.get("gaits"), "gaits", fail, required=False)
    gaits = {k: dict(v) for k, v in robot.gaits.items()}
    for gait_name, values in overlay.items():
        if gait_name not in gaits:
            raise fail(f"gaits.{gait_name}", f"not a gait of {robot.name}{suggest(gait_name, gaits, 'gaits')}")
        block = mapping(values, f"gaits.{gait_name}", fail)
        gaits[gait_name].update(_gait_values(gait_name, block, f"gaits.{gait_name}", fail))
    _check_segments(gaits, robot.body, fail)
    return RobotModel(robot.name, robot.kind, robot.description, robot.body, robot.joints, robot.bus, gaits,
                      robot.source, robot.following)


def resolve_robot_path(path: str | Path) -> Path:
    """Turn a robot name (``tsnake``) or a path into an existing YAML path."""
    return config_files.resolve("robot", path, RobotConfigError)
