"""Robot descriptions: one YAML per robot is the single source of truth.

A description gives the body dimensions, the joints (names, types, limits, servo
IDs, zero offsets, directions), the servo bus and the gait defaults. The URDF, the
MuJoCo model, the bridge's servo table and the gait geometry are all derived from
the :class:`RobotModel` loaded here, so no dimension is written twice.

Bad files raise :class:`~snake_core.errors.RobotConfigError` naming the file and
the offending field, e.g. ``tsnake.yaml: joints[3].servo_id: duplicate id 4``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from snake_core.errors import RobotConfigError

_KINDS = ("tsnake", "planar_wheeled")
_JOINT_TYPES = ("dorsal", "twist", "lateral")
_OPERATING_MODES = ("position", "extended_position", "velocity")
_MAX_SERVO_ID = 252  # Protocol 2.0: 253 is reserved, 254 is broadcast


@dataclass(frozen=True)
class JointSpec:
    """One actuated joint of the robot.

    Attributes:
        name: Joint name used in ``joint_states`` / ``joint_commands``.
        type: ``dorsal``, ``twist`` or ``lateral``.
        index: Position in the robot's joint list (head to tail).
        servo_id: Dynamixel ID on the bus.
        model: Servo model name (e.g. ``XM430-W350``).
        axis: Rotation axis in the parent link frame (x forward, z up).
        lower: Lower position limit, rad (``-inf`` for continuous joints).
        upper: Upper position limit, rad (``+inf`` for continuous joints).
        velocity: Velocity limit, rad/s.
        effort: Torque limit, N m.
        continuous: True for joints that turn without end (T-Snake twist joints).
        operating_mode: ``position``, ``extended_position`` or ``velocity``.
        zero_offset: Servo angle at joint zero, rad.
        direction: +1 or -1, sign between joint angle and servo angle.
    """

    name: str
    type: str
    index: int
    servo_id: int
    model: str
    axis: tuple[float, float, float]
    lower: float
    upper: float
    velocity: float
    effort: float
    continuous: bool
    operating_mode: str
    zero_offset: float
    direction: int

    def clamp(self, position: float) -> float:
        """Clamp a target position to the joint's limits, rad."""
        return min(max(position, self.lower), self.upper)


@dataclass(frozen=True)
class RobotModel:
    """A robot description loaded from its YAML file.

    Attributes:
        name: Robot name.
        kind: ``tsnake`` or ``planar_wheeled``.
        description: One line of text.
        body: Body dimensions, validated per kind (see the YAML files in ``config/robots``).
        joints: Actuated joints, head to tail.
        bus: Servo bus settings (port, baud rate, protocol).
        gaits: Gait defaults per gait name.
        source: Path of the file the model was loaded from (``None`` if built in memory).
    """

    name: str
    kind: str
    description: str
    body: Mapping[str, Any]
    joints: tuple[JointSpec, ...]
    bus: Mapping[str, Any]
    gaits: Mapping[str, Mapping[str, Any]]
    source: Path | None = field(default=None, compare=False)

    @property
    def joint_names(self) -> list[str]:
        """Joint names, head to tail."""
        return [j.name for j in self.joints]

    def joint(self, name: str) -> JointSpec:
        """The joint called ``name``; raises ``KeyError`` if there is none."""
        for j in self.joints:
            if j.name == name:
                return j
        raise KeyError(f"{self.name}: no joint named {name!r}")

    def joints_of_type(self, joint_type: str) -> list[JointSpec]:
        """Joints of one type (``dorsal``, ``twist``, ``lateral``), head to tail."""
        return [j for j in self.joints if j.type == joint_type]

    def gait(self, gait_name: str) -> Mapping[str, Any]:
        """Gait defaults for ``gait_name``; raises RobotConfigError if absent."""
        try:
            return self.gaits[gait_name]
        except KeyError as err:
            raise RobotConfigError(f"{self._where()}: gaits.{gait_name}: missing") from err

    # --- T-Snake geometry -------------------------------------------------------
    @property
    def length(self) -> float:
        """Body length, m (L = n L0 for the T-Snake, sum of link lengths otherwise)."""
        if self.kind == "tsnake":
            return float(self.body["n_modules"] * self.body["module_length"])
        return float(np.sum(self.link_lengths))

    def joint_arc_positions(self) -> np.ndarray:
        """Arc-length position s_i of every joint along the backbone, m (T-Snake only).

        Module m (0-based) spans [m L0, (m+1) L0]; its joints sit at the module's
        ``joint_positions`` (003 Sec. III-D, Fig. 5).
        """
        if self.kind != "tsnake":
            raise RobotConfigError(f"{self._where()}: joint arc positions are defined for tsnake only")
        l0 = float(self.body["module_length"])
        order = list(self.body["joint_order"])
        offsets = list(self.body["joint_positions"])
        out = []
        for j in self.joints:
            module = j.index // len(order)
            out.append(module * l0 + offsets[order.index(j.type)])
        return np.asarray(out, dtype=float)

    # --- planar wheeled snake geometry (002) -------------------------------------
    @property
    def wheel_d(self) -> np.ndarray:
        """d_i: wheel position from each link's front joint, m (002 Fig. 2)."""
        return np.asarray(self.body["wheel_d"], dtype=float)

    @property
    def wheel_l(self) -> np.ndarray:
        """l_i: wheel position to each link's rear joint, m (002 Fig. 2)."""
        return np.asarray(self.body["wheel_l"], dtype=float)

    @property
    def link_lengths(self) -> np.ndarray:
        """Link lengths, m: L_i = d_i + l_i for the wheeled snake, L0 for T-Snake modules."""
        if self.kind == "tsnake":
            return np.full(int(self.body["n_modules"]), float(self.body["module_length"]))
        return self.wheel_d + self.wheel_l

    def _where(self) -> str:
        return str(self.source.name) if self.source else self.name


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
    try:
        data = yaml.safe_load(p.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise RobotConfigError(f"{p}: cannot read robot description: {err}") from err
    robot = robot_from_dict(data, source=p)
    if calibrated:
        robot = apply_calibration(robot, calibration_path(robot.name, target))
    return robot


DEFAULT_CALIBRATION_TARGET = "twin"
"""Calibration target used when none is given: the MuJoCo twin's coefficients."""

CALIBRATION_TARGET_ENV = "SNAKE_CALIBRATION_TARGET"
"""Environment variable naming the calibration target (e.g. a real robot's name)."""


def calibration_target(target: str | None = None) -> str:
    """The calibration target: ``target``, else ``$SNAKE_CALIBRATION_TARGET``, else ``twin``.

    Raises:
        RobotConfigError: The name is not a plain file name (letters, digits, ``_``, ``-``, ``.``).
    """
    import os
    import re

    name = target or os.environ.get(CALIBRATION_TARGET_ENV) or DEFAULT_CALIBRATION_TARGET
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name):
        raise RobotConfigError(f"calibration target {name!r}: use letters, digits, '_', '-' or '.'")
    return name


def calibration_path(robot_name: str, target: str | None = None) -> Path:
    """Where the calibration of ``robot_name`` for ``target`` is kept.

    ``config/calibration/<robot>/<target>.yaml`` (target: :func:`calibration_target`).
    For the default target, a file in the older single-file layout
    ``config/calibration/<robot>.yaml`` is used when the per-target file is absent.
    """
    name = calibration_target(target)
    path = config_dir() / "calibration" / robot_name / f"{name}.yaml"
    legacy = config_dir() / "calibration" / f"{robot_name}.yaml"
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
        prov = (yaml.safe_load(path.read_text()) or {}).get("provenance") or {}
    except (OSError, yaml.YAMLError, AttributeError):
        prov = {}
    how = ", ".join(str(prov[k]) for k in ("command", "date") if isinstance(prov, Mapping) and k in prov)
    return f"calibration {name!r} of {robot_name}: {path}" + (f" ({how})" if how else "")


def apply_calibration(robot: RobotModel, path: Path) -> RobotModel:
    """Overlay the ``gaits`` entries of a calibration file (if it exists) on ``robot``.

    Raises:
        RobotConfigError: The file names a gait or coefficient the robot does not have,
            or a value that is not a finite number.
    """
    if not path.is_file():
        return robot
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise RobotConfigError(f"{path}: cannot read calibration: {err}") from err
    gaits = {k: dict(v) for k, v in robot.gaits.items()}
    overlay = data.get("gaits", {})
    if not isinstance(overlay, Mapping):
        raise RobotConfigError(f"{path.name}: gaits: expected a mapping")
    for gait_name, values in overlay.items():
        if gait_name not in gaits or not isinstance(values, Mapping):
            raise RobotConfigError(f"{path.name}: gaits.{gait_name}: not a gait of {robot.name}")
        for key, value in values.items():
            if key not in gaits[gait_name]:
                raise RobotConfigError(f"{path.name}: gaits.{gait_name}.{key}: not a coefficient of that gait")
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise RobotConfigError(f"{path.name}: gaits.{gait_name}.{key}: must be a finite number")
            gaits[gait_name][key] = float(value)
    return RobotModel(robot.name, robot.kind, robot.description, robot.body, robot.joints, robot.bus, gaits,
                      robot.source)


def resolve_robot_path(path: str | Path) -> Path:
    """Turn a robot name (``tsnake``) or a path into an existing YAML path."""
    return resolve_config_file(path, "robots", "robot", RobotConfigError)


def resolve_config_file(path: str | Path, subdir: str, noun: str, error: type[Exception]) -> Path:
    """Turn a name (looked up in ``config/<subdir>/<name>.yaml``) or a YAML path into an existing file.

    Raises:
        error: Neither exists; the message names the path tried.
    """
    p = Path(path)
    if p.suffix in (".yaml", ".yml"):
        if not p.is_file():
            raise error(f"{p}: {noun} file not found")
        return p
    candidate = config_dir() / subdir / f"{path}.yaml"
    if not candidate.is_file():
        raise error(f"{noun} {str(path)!r}: no file {candidate}")
    return candidate


def config_dir() -> Path:
    """The workspace's ``config/`` directory.

    Resolution order: ``$SNAKE_CONFIG_DIR``; the installed share directory when the
    package is installed by colcon (``share/snake_core/config``); the source tree.
    """
    import os

    env = os.environ.get("SNAKE_CONFIG_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "config" / "robots").is_dir():
            return parent / "config"
        share = parent / "share" / "snake_core" / "config"
        if (share / "robots").is_dir():
            return share
    raise RobotConfigError("cannot find the config/ directory; set SNAKE_CONFIG_DIR")


def robot_from_dict(data: Any, source: Path | None = None) -> RobotModel:
    """Validate a parsed robot description (see :func:`load_robot`)."""
    where = source.name if source else "<robot>"

    def fail(field_name: str, msg: str) -> RobotConfigError:
        return RobotConfigError(f"{where}: {field_name}: {msg}")

    if not isinstance(data, Mapping):
        raise fail("<top>", "expected a mapping")
    name = _req(data, "name", str, fail)
    kind = _req(data, "kind", str, fail)
    if kind not in _KINDS:
        raise fail("kind", f"{kind!r} is not one of {_KINDS}")
    body = _req(data, "body", Mapping, fail)
    _validate_body(kind, body, fail)
    types = _req(data, "joint_types", Mapping, fail)
    raw_joints = _req(data, "joints", list, fail)
    if not raw_joints:
        raise fail("joints", "empty")
    joints = tuple(_joint(i, rj, types, fail) for i, rj in enumerate(raw_joints))
    _check_unique(joints, fail)
    if kind == "tsnake":
        order = list(body["joint_order"])
        expected = int(body["n_modules"]) * len(order)
        if len(joints) != expected:
            raise fail("joints", f"{len(joints)} joints, n_modules x joint_order needs {expected}")
        for j in joints:
            want = order[j.index % len(order)]
            if j.type != want:
                raise fail(f"joints[{j.index}].type", f"{j.type!r}, joint_order needs {want!r}")
    else:
        n_links = int(body["n_links"])
        if len(joints) != n_links - 1:
            raise fail("joints", f"{len(joints)} joints for {n_links} links, need {n_links - 1}")
    bus = data.get("bus", {}) or {}
    if not isinstance(bus, Mapping):
        raise fail("bus", "expected a mapping")
    gaits = data.get("gaits", {}) or {}
    if not isinstance(gaits, Mapping):
        raise fail("gaits", "expected a mapping")
    return RobotModel(
        name=name,
        kind=kind,
        description=str(data.get("description", "")),
        body=dict(body),
        joints=joints,
        bus=dict(bus),
        gaits={k: dict(v) for k, v in gaits.items()},
        source=source,
    )


def _req(data: Mapping[str, Any], key: str, typ: type | tuple[type, ...], fail: Any) -> Any:
    if key not in data:
        raise fail(key, "missing")
    value = data[key]
    if not isinstance(value, typ):
        raise fail(key, f"expected {getattr(typ, '__name__', typ)}, got {type(value).__name__}")
    return value


def _positive(body: Mapping[str, Any], key: str, fail: Any) -> float:
    value = body.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise fail(f"body.{key}", f"must be a positive number, got {value!r}")
    return float(value)


def _validate_body(kind: str, body: Mapping[str, Any], fail: Any) -> None:
    if kind == "tsnake":
        n = body.get("n_modules")
        if not isinstance(n, int) or n < 1:
            raise fail("body.n_modules", f"must be a positive integer, got {n!r}")
        l0 = _positive(body, "module_length", fail)
        _positive(body, "radius", fail)
        _positive(body, "module_mass", fail)
        order = body.get("joint_order")
        if not isinstance(order, list) or sorted(order) != sorted(set(order)) or not set(order) <= set(_JOINT_TYPES):
            raise fail("body.joint_order", f"must list distinct types from {_JOINT_TYPES}, got {order!r}")
        pos = body.get("joint_positions")
        if not isinstance(pos, list) or len(pos) != len(order):
            raise fail("body.joint_positions", f"must give one position per joint_order entry, got {pos!r}")
        if any(not isinstance(x, (int, float)) or not 0.0 <= x < l0 for x in pos) or list(pos) != sorted(pos):
            raise fail("body.joint_positions", f"must be increasing and within [0, module_length), got {pos!r}")
    else:
        n = body.get("n_links")
        if not isinstance(n, int) or n < 2:
            raise fail("body.n_links", f"must be an integer >= 2, got {n!r}")
        for key in ("wheel_d", "wheel_l"):
            v = body.get(key)
            if not isinstance(v, list) or len(v) != n:
                raise fail(f"body.{key}", f"must be a list of {n} values (one per link), got {v!r}")
            for i, x in enumerate(v):
                if not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
                    raise fail(f"body.{key}[{i}]", f"must be a finite number >= 0, got {x!r}")
        for i, (d, ll) in enumerate(zip(body["wheel_d"], body["wheel_l"], strict=True)):
            if d + ll <= 0:
                raise fail(f"body.wheel_d[{i}]", "link length d_i + l_i must be positive")
        for key in ("width", "wheel_radius", "link_mass"):
            _positive(body, key, fail)


def _joint(i: int, raw: Any, types: Mapping[str, Any], fail: Any) -> JointSpec:
    where = f"joints[{i}]"
    if not isinstance(raw, Mapping):
        raise fail(where, "expected a mapping")
    jtype = raw.get("type")
    if jtype not in _JOINT_TYPES:
        raise fail(f"{where}.type", f"{jtype!r} is not one of {_JOINT_TYPES}")
    if jtype not in types:
        raise fail(f"joint_types.{jtype}", "missing")
    merged: dict[str, Any] = {**types[jtype], **raw}
    name = merged.get("name")
    if not isinstance(name, str) or not name:
        raise fail(f"{where}.name", "must be a non-empty string")
    sid = merged.get("servo_id")
    if not isinstance(sid, int) or isinstance(sid, bool) or not 0 <= sid <= _MAX_SERVO_ID:
        raise fail(f"{where}.servo_id", f"must be an integer in [0, {_MAX_SERVO_ID}], got {sid!r}")
    axis = merged.get("axis")
    if not isinstance(axis, Sequence) or len(axis) != 3:
        raise fail(f"{where}.axis", f"must be 3 numbers, got {axis!r}")
    a = np.asarray(axis, dtype=float)
    if not np.isclose(np.linalg.norm(a), 1.0):
        raise fail(f"{where}.axis", f"must be a unit vector, got {axis!r}")
    continuous = bool(merged.get("continuous", False))
    lower, upper = -math.inf, math.inf
    if not continuous:
        for key in ("lower", "upper"):
            v = merged.get(key)
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                raise fail(f"{where}.{key}", f"must be a finite number (or set continuous: true), got {v!r}")
        lower, upper = float(merged["lower"]), float(merged["upper"])
        if not lower < upper:
            raise fail(f"{where}.lower", f"lower {lower} must be below upper {upper}")
    for key in ("velocity", "effort"):
        limit = merged.get(key)
        if not isinstance(limit, (int, float)) or not math.isfinite(limit) or limit <= 0:
            raise fail(f"{where}.{key}", f"must be a positive number, got {limit!r}")
    mode = merged.get("operating_mode", "position")
    if mode not in _OPERATING_MODES:
        raise fail(f"{where}.operating_mode", f"{mode!r} is not one of {_OPERATING_MODES}")
    if continuous and mode == "position":
        raise fail(f"{where}.operating_mode", "a continuous joint needs extended_position or velocity mode")
    direction = merged.get("direction", 1)
    if direction not in (1, -1):
        raise fail(f"{where}.direction", f"must be 1 or -1, got {direction!r}")
    offset = merged.get("zero_offset", 0.0)
    if not isinstance(offset, (int, float)) or not math.isfinite(offset):
        raise fail(f"{where}.zero_offset", f"must be a finite number, got {offset!r}")
    model = merged.get("model")
    if not isinstance(model, str):
        raise fail(f"{where}.model", f"must be a servo model name, got {model!r}")
    return JointSpec(
        name=name,
        type=jtype,
        index=i,
        servo_id=sid,
        model=model,
        axis=(float(a[0]), float(a[1]), float(a[2])),
        lower=float(lower),
        upper=float(upper),
        velocity=float(merged["velocity"]),
        effort=float(merged["effort"]),
        continuous=continuous,
        operating_mode=mode,
        zero_offset=float(offset),
        direction=int(direction),
    )


def _check_unique(joints: Sequence[JointSpec], fail: Any) -> None:
    seen_names: dict[str, int] = {}
    seen_ids: dict[int, int] = {}
    for j in joints:
        if j.name in seen_names:
            raise fail(f"joints[{j.index}].name", f"duplicate name {j.name!r} (also joints[{seen_names[j.name]}])")
        if j.servo_id in seen_ids:
            other = seen_ids[j.servo_id]
            raise fail(f"joints[{j.index}].servo_id", f"duplicate id {j.servo_id} (also joints[{other}])")
        seen_names[j.name] = j.index
        seen_ids[j.servo_id] = j.index
