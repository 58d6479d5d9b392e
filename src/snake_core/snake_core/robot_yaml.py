"""Reading a robot YAML: the strict schema and the checks that turn it into a RobotModel.

A description gives the body dimensions, the joints (names, types, limits, servo
IDs, zero offsets, directions), the servo bus and the gait defaults.
:func:`robot_from_dict` checks a parsed file and builds the
:class:`~snake_core.robot_model.RobotModel` from it; the private ``_...`` helpers check
one block each. Finding and reading the file and laying its calibration over it is
:mod:`snake_core.robot_calibration`'s part.

Bad files raise :class:`~snake_core.errors.RobotConfigError`, one line naming the file
and the offending field, e.g. ``tsnake.yaml: joints[3].servo_id: duplicate id 4``. The
schema is strict (see :mod:`snake_core.schema` for why it is hand-written): unknown keys
are errors with the closest valid name, servo models must have a control table
(:data:`SERVO_MODELS`), limits must be ordered and finite, names and IDs unique.

Values are also checked against what the hardware can do (:data:`SERVO_RANGES`): joint
limits inside the servo's position range once mapped through ``direction`` and
``zero_offset`` (one revolution in position mode), velocities and efforts within the
model's no-load speed and stall torque, zero offsets within one turn, joint names that
ROS accepts, and the rolling gait's buffer boundaries in order along the body.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.errors import RobotConfigError
from snake_core.following.follower import FollowerConfig
from snake_core.robot_model import (
    BAUD_RATES,
    EXTENDED_MODE_TICKS,
    POSITION_MODE_TICKS,
    SERVO_MODELS,
    SERVO_RANGES,
    SERVO_REGISTERS,
    TICKS_CENTER,
    TICKS_PER_REV,
    ZERO_OFFSET_RANGE,
    FollowingPresets,
    JointSpec,
    RobotBody,
    RobotModel,
    ServoRegisters,
    TSnakeBody,
    WheeledBody,
    servo_ticks,
)
from snake_core.schema import Fail, check_keys, is_number, mapping, number, require, suggest
from snake_core.servo.model import ServoModelError, ServoSpec, load_servo_model

_JOINT_TYPES = ("dorsal", "twist", "lateral")
_OPERATING_MODES = ("position", "extended_position", "velocity")
_MAX_SERVO_ID = 252  # Protocol 2.0: 253 is reserved, 254 is broadcast
_PROTOCOL = 2.0  # Dynamixel protocol version the bridge speaks

_JOINT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a ROS name token: what joint_states and TF frames accept
# The schema of a robot description: allowed keys per block (see config/robots/*.yaml; the
# body keys are the fields of the body dataclasses, _BODY_KEYS below).
_TOP_KEYS = ("name", "description", "kind", "body", "joint_types", "joints", "bus", "gaits", "following")
_JOINT_FIELDS = ("axis", "lower", "upper", "velocity", "effort", "continuous", "model", "operating_mode",
                 "zero_offset", "direction", "registers")  # settable per joint type and per joint
_JOINT_KEYS = ("name", "type", "servo_id", *_JOINT_FIELDS)
_BUS_KEYS = ("port", "baud_rate", "protocol")
# Path-following presets (optional ``following:`` block; every key but the last two required).
_FOLLOWING_KEYS = ("gait", "drive", "yaw_offset", "reference_offset", "half_width", "follower", "marker_template")
_SEGMENT_TOLERANCE = 1e-9  # m, rounding of the YAML's decimals in the segment-balance check
_MIN_TRIANGLE_AREA2 = 1e-6  # m^2, twice the smallest marker-triangle area a pose fit can use
_MARKERS = 3  # head markers of the mocap template (the twin's three marker sites)
_DRIVES = ("offset", "cmd_vel")
# Gait coefficients: rule per key ("positive", "non_negative", "number", "bool", "positive_or_null").
_GAIT_COEFFICIENTS: dict[str, dict[str, str]] = {
    "rolling": {"k_a": "positive", "k_b": "positive", "k_theta": "positive", "head_end": "non_negative",
                "tail_start": "positive", "dt": "positive", "reset_threshold": "positive",
                "wrap_when_translating": "bool"},
    "reduction": {"k": "positive", "d_prime": "positive_or_null", "omega_max": "positive",
                  "omega_c_ratio": "non_negative"},
    "conical": {"amplitude_dorsal": "non_negative", "amplitude_lateral": "non_negative", "spatial_frequency": "number",
                "phase_offset": "number", "taper_max": "non_negative", "k": "positive", "curvature_max": "positive",
                "omega_max": "positive"},
    "serpenoid": {"amplitude": "non_negative", "spatial_frequency": "number", "temporal_frequency": "number",
                  "omega_max": "positive", "k": "positive", "turn_gain": "number", "offset_max": "non_negative"},
}
_GAIT_REQUIRED = {  # read without a default by the gaits (snake_core.gait)
    "rolling": ("k_a", "k_b", "k_theta", "head_end", "tail_start"),
    "reduction": ("k", "omega_max"),
    "conical": tuple(_GAIT_COEFFICIENTS["conical"]),
    "serpenoid": ("amplitude", "spatial_frequency", "temporal_frequency", "omega_max"),
}


# Robot kinds and the keys of their ``body:`` block: the fields of the kind's body dataclass.
_BODY_TYPES: dict[str, type[TSnakeBody] | type[WheeledBody]] = {"tsnake": TSnakeBody, "planar_wheeled": WheeledBody}
_KINDS = tuple(_BODY_TYPES)
_BODY_KEYS = {kind: tuple(f.name for f in dataclasses.fields(cls)) for kind, cls in _BODY_TYPES.items()}


def robot_from_dict(data: Any, source: Path | None = None) -> RobotModel:
    """Validate a parsed robot description (see :func:`~snake_core.robot_calibration.load_robot`).

    Every key is checked against the schema (``_TOP_KEYS``, ``_BODY_KEYS``,
    ``_JOINT_KEYS``, ``_BUS_KEYS``, ``_GAIT_COEFFICIENTS``): an unknown key is an error
    with the closest valid name, so a typo can never fall back to a default.

    Raises:
        RobotConfigError: One line, ``<file>: <field path>: <problem>``.
    """
    where = str(source) if source else "<robot>"

    def fail(field_name: str, msg: str) -> RobotConfigError:
        return RobotConfigError(f"{where}: {field_name}: {msg}")

    data = mapping(data, "", fail)
    check_keys(data, _TOP_KEYS, "", fail)
    name = _req(data, "name", str, fail)
    if not name:
        raise fail("name", "must be a non-empty string")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise fail("description", f"expected a string, got {type(description).__name__}")
    kind = _req(data, "kind", str, fail)
    if kind not in _KINDS:
        raise fail("kind", f"{kind!r} is not one of {_KINDS}{suggest(kind, _KINDS, 'kinds')}")
    body = _req(data, "body", Mapping, fail)
    _validate_body(kind, body, fail)
    types = _req(data, "joint_types", Mapping, fail)
    check_keys(types, _JOINT_TYPES, "joint_types", fail, " (joint types)")
    for jtype, defaults in types.items():
        check_keys(mapping(defaults, f"joint_types.{jtype}", fail), _JOINT_FIELDS, f"joint_types.{jtype}", fail,
                   f" of joint type {jtype}")
    raw_joints = _req(data, "joints", list, fail)
    if not raw_joints:
        raise fail("joints", "empty")
    specs: dict[str, ServoSpec] = {}  # servo models read for this file, by name
    joints = tuple(_joint(i, rj, types, fail, specs) for i, rj in enumerate(raw_joints))
    _check_unique(joints, fail)
    if kind == "tsnake":
        order = list(body["joint_order"])
        expected = int(body["n_modules"]) * len(order)
        if len(joints) != expected:
            raise fail("joints", f"{len(joints)} joints, n_modules x joint_order needs {expected}")
        for j in joints:
            want = order[j.index % len(order)]
            if j.type != want:
                raise fail(f"joints[{j.index}].type", f"{j.type!r}, joint_order needs {want!r} (joint {j.name})")
    else:
        n_links = int(body["n_links"])
        if len(joints) != n_links - 1:
            raise fail("joints", f"{len(joints)} joints for {n_links} links, need {n_links - 1}")
    bus = mapping(data.get("bus"), "bus", fail, required=False)
    _validate_bus(bus, fail)
    gaits = mapping(data.get("gaits"), "gaits", fail, required=False)
    checked: dict[str, dict[str, Any]] = {}
    for gait_name, values in gaits.items():
        if gait_name not in _GAIT_COEFFICIENTS:
            raise fail(f"gaits.{gait_name}", f"unknown gait{suggest(gait_name, _GAIT_COEFFICIENTS, 'gaits')}")
        block = mapping(values, f"gaits.{gait_name}", fail)
        require(block, _GAIT_REQUIRED[gait_name], f"gaits.{gait_name}", fail)
        checked[gait_name] = _gait_values(gait_name, block, f"gaits.{gait_name}", fail)
    typed_body = _body(kind, body)
    _check_segments(checked, typed_body, fail)
    following = _following(data.get("following"), checked, fail) if "following" in data else None
    return RobotModel(
        name=name,
        kind=kind,
        description=description,
        body=typed_body,
        joints=joints,
        bus=dict(bus),
        gaits=checked,
        source=source,
        following=following,
    )


def _following(raw: Any, gaits: Mapping[str, Any], fail: Fail) -> FollowingPresets:
    """Check the ``following:`` block (:class:`FollowingPresets`); all keys but ``follower`` required."""
    block = mapping(raw, "following", fail)
    check_keys(block, _FOLLOWING_KEYS, "following", fail, " of the following presets")
    require(block, _FOLLOWING_KEYS[:-2], "following", fail)
    gait = block["gait"]
    if gait not in gaits:
        raise fail("following.gait", f"{gait!r} is not a gait of this robot{suggest(gait, gaits, 'gaits')}")
    drive = block["drive"]
    if drive not in _DRIVES:
        raise fail("following.drive", f"{drive!r} is not one of {_DRIVES}{suggest(drive, _DRIVES, 'values')}")
    values = {k: number(block[k], f"following.{k}", fail, low=0.0 if k == "half_width" else None,
                        low_open=k == "half_width") for k in ("yaw_offset", "reference_offset", "half_width")}
    follower = mapping(block.get("follower"), "following.follower", fail, required=False)
    fields = [f.name for f in dataclasses.fields(FollowerConfig)]
    check_keys(follower, fields, "following.follower", fail, " of the follower")
    gains = {k: number(v, f"following.follower.{k}", fail) for k, v in follower.items()}
    try:
        FollowerConfig(**gains)
    except ValueError as err:
        raise fail("following.follower", str(err)) from err
    return FollowingPresets(gait=gait, drive=drive, follower=gains, marker_template=_marker_template(block, fail),
                            **values)


def _marker_template(block: Mapping[str, Any], fail: Fail) -> tuple[tuple[float, float, float], ...] | None:
    """``following.marker_template``: three non-collinear (x, y, z) head markers, m (or None when absent)."""
    raw = block.get("marker_template")
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) != _MARKERS or any(not isinstance(p, list) or len(p) != 3 for p in raw):
        raise fail("following.marker_template", f"need {_MARKERS} markers as [x, y, z] lists (m, head frame)")
    pts = tuple((number(p[0], f"following.marker_template[{i}]", fail),
                 number(p[1], f"following.marker_template[{i}]", fail),
                 number(p[2], f"following.marker_template[{i}]", fail)) for i, p in enumerate(raw))
    a, b, c = (np.array(p) for p in pts)
    if float(np.linalg.norm(np.cross(b - a, c - a))) < _MIN_TRIANGLE_AREA2:
        raise fail("following.marker_template", "the markers are collinear: a fit needs a triangle")
    return pts


def _body_length(body: RobotBody) -> float:
    """Body length, m (:attr:`RobotModel.length` of a model with this body)."""
    if isinstance(body, TSnakeBody):
        return body.n_modules * body.module_length
    return float(sum(body.wheel_d) + sum(body.wheel_l))


def _check_segments(gaits: Mapping[str, Mapping[str, Any]], body: RobotBody, fail: Fail) -> None:
    """The rolling gait's buffer boundaries in order along the body, and the two segments balanced.

    ``0 <= L_h < L_t <= L``: the buffer between the head and tail segments has length
    ``L_t - L_h`` (003 Eq. 8, the phase ramps across it), so it must be positive, and both
    boundaries lie on the body. The head segment ``[0, L_h]`` and the tail segment ``[L_t, L]``
    are the two wheels of the reduced differential drive (003 Eq. 9-10, track ``d' = s_t - s_h``):
    their lengths may differ by at most one module (``L0``), so that boundaries left at another
    body's values (``n_modules`` changed, ``head_end`` not) are refused instead of turning at a
    fraction of the command.
    """
    roll = gaits.get("rolling")
    if not roll or "head_end" not in roll or "tail_start" not in roll:
        return
    length = _body_length(body)
    head_end, tail_start = float(roll["head_end"]), float(roll["tail_start"])
    if not head_end < tail_start:
        raise fail("gaits.rolling.head_end", f"{head_end:g} m must be before tail_start {tail_start:g} m "
                                             "(the buffer between them has length tail_start - head_end)")
    if tail_start > length:
        raise fail("gaits.rolling.tail_start", f"{tail_start:g} m lies beyond the body's end ({length:g} m)")
    if isinstance(body, TSnakeBody):
        head, tail = head_end, length - tail_start
        if abs(head - tail) > body.module_length + _SEGMENT_TOLERANCE:
            raise fail("gaits.rolling.head_end",
                       f"head segment {head:.4g} m (0 to head_end) and tail segment {tail:.4g} m (tail_start to "
                       f"the {length:.4g} m end, {body.n_modules} modules) differ by more than one module "
                       f"({body.module_length:g} m): set head_end and tail_start for {body.n_modules} modules "
                       f"(snake robot new --modules {body.n_modules} writes them)")


def _gait_values(gait_name: str, values: Mapping[str, Any], path: str, fail: Fail) -> dict[str, Any]:
    """Check the coefficients of one gait against ``_GAIT_COEFFICIENTS``; numbers as floats."""
    schema = _GAIT_COEFFICIENTS[gait_name]
    check_keys(values, schema, path, fail, f" of gait {gait_name}")
    out: dict[str, Any] = {}
    for key, value in values.items():
        rule, field_path = schema[key], f"{path}.{key}"
        if rule == "bool":
            if not isinstance(value, bool):
                raise fail(field_path, f"must be true or false, got {value!r}")
            out[key] = value
        elif rule == "positive_or_null" and value is None:
            out[key] = None
        else:
            low = None if rule == "number" else 0.0
            out[key] = number(value, field_path, fail, low=low, low_open=rule.startswith("positive"))
    return out


def _validate_bus(bus: Mapping[str, Any], fail: Fail) -> None:
    check_keys(bus, _BUS_KEYS, "bus", fail)
    port = bus.get("port", "")
    if not isinstance(port, str):
        raise fail("bus.port", f"must be a device path string, got {port!r}")
    baud = bus.get("baud_rate", BAUD_RATES[0])
    if isinstance(baud, bool) or baud not in BAUD_RATES:
        raise fail("bus.baud_rate", f"must be one of the servos' baud rates {BAUD_RATES}, got {baud!r}")
    if "protocol" in bus and (not is_number(bus["protocol"]) or bus["protocol"] != _PROTOCOL):
        raise fail("bus.protocol", f"only Dynamixel Protocol {_PROTOCOL} is supported, got {bus['protocol']!r}")


def _req(data: Mapping[str, Any], key: str, typ: type | tuple[type, ...], fail: Fail) -> Any:
    if key not in data:
        raise fail(key, "missing")
    value = data[key]
    if not isinstance(value, typ):
        raise fail(key, f"expected {getattr(typ, '__name__', typ)}, got {type(value).__name__}")
    return value


def _positive(body: Mapping[str, Any], key: str, fail: Fail) -> float:
    if key not in body:
        raise fail(f"body.{key}", "missing")
    return number(body[key], f"body.{key}", fail, low=0.0, low_open=True)


def _validate_body(kind: str, body: Mapping[str, Any], fail: Fail) -> None:
    check_keys(body, _BODY_KEYS[kind], "body", fail, f" of a {kind} body")
    if kind == "tsnake":
        n = body.get("n_modules")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
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
        if any(not is_number(x) or not 0.0 <= x < l0 for x in pos) or list(pos) != sorted(pos):
            raise fail("body.joint_positions", f"must be increasing and within [0, module_length), got {pos!r}")
    else:
        n = body.get("n_links")
        if not isinstance(n, int) or isinstance(n, bool) or n < 2:
            raise fail("body.n_links", f"must be an integer >= 2, got {n!r}")
        for key in ("wheel_d", "wheel_l"):
            v = body.get(key)
            if not isinstance(v, list) or len(v) != n:
                raise fail(f"body.{key}", f"must be a list of {n} values (one per link), got {v!r}")
            for i, x in enumerate(v):
                number(x, f"body.{key}[{i}]", fail, low=0.0)
        for i, (d, ll) in enumerate(zip(body["wheel_d"], body["wheel_l"], strict=True)):
            if d + ll <= 0:
                raise fail(f"body.wheel_d[{i}]", "link length d_i + l_i must be positive")
        for key in ("width", "wheel_radius", "link_mass"):
            _positive(body, key, fail)


def _body(kind: str, body: Mapping[str, Any]) -> RobotBody:
    """The typed body of a block :func:`_validate_body` accepted (numbers as floats, lists as tuples)."""
    if kind == "tsnake":
        return TSnakeBody(
            n_modules=int(body["n_modules"]), module_length=float(body["module_length"]),
            joint_order=tuple(str(t) for t in body["joint_order"]),
            joint_positions=tuple(float(x) for x in body["joint_positions"]),
            radius=float(body["radius"]), module_mass=float(body["module_mass"]))
    return WheeledBody(
        n_links=int(body["n_links"]), wheel_d=tuple(float(x) for x in body["wheel_d"]),
        wheel_l=tuple(float(x) for x in body["wheel_l"]), width=float(body["width"]),
        wheel_radius=float(body["wheel_radius"]), link_mass=float(body["link_mass"]))


def _joint(i: int, raw: Any, types: Mapping[str, Any], fail: Fail, specs: dict[str, ServoSpec]) -> JointSpec:
    where = f"joints[{i}]"
    raw = mapping(raw, where, fail)
    label = raw.get("name") if isinstance(raw.get("name"), str) and raw.get("name") else f"#{i}"
    check_keys(raw, _JOINT_KEYS, where, fail, f" in joint {label}")
    jtype = raw.get("type")
    if jtype not in _JOINT_TYPES:
        raise fail(f"{where}.type", f"{jtype!r} is not one of {_JOINT_TYPES}{suggest(jtype, _JOINT_TYPES, 'types')}")
    if jtype not in types:
        raise fail(f"joint_types.{jtype}", f"missing (used by joint {label})")
    merged: dict[str, Any] = {**types[jtype], **raw}

    def jfail(key: str, msg: str) -> Exception:
        # A value set on the joint is named there; one inherited from its type, in joint_types.
        path = f"{where}.{key}" if key in raw or key not in _JOINT_FIELDS else f"joint_types.{jtype}.{key}"
        return fail(path, f"{msg} (joint {label})")

    name = merged.get("name")
    if not isinstance(name, str) or not name:
        raise fail(f"{where}.name", "must be a non-empty string")
    if not _JOINT_NAME.fullmatch(name):
        raise fail(f"{where}.name", f"{name!r} is not a ROS name: use letters, digits and '_', "
                                    "not starting with a digit")
    if "servo_id" not in merged:
        raise jfail("servo_id", "missing")
    sid = int(number(merged["servo_id"], "servo_id", jfail, low=0, high=_MAX_SERVO_ID, integer=True))
    axis = merged.get("axis")
    if not isinstance(axis, Sequence) or isinstance(axis, str) or len(axis) != 3 or not all(map(is_number, axis)):
        raise jfail("axis", f"must be 3 numbers, got {axis!r}")
    a = np.asarray(axis, dtype=float)
    if not np.isclose(np.linalg.norm(a), 1.0):
        raise jfail("axis", f"must be a unit vector, got {axis!r}")
    continuous = merged.get("continuous", False)
    if not isinstance(continuous, bool):
        raise jfail("continuous", f"must be true or false, got {continuous!r}")
    lower, upper = -math.inf, math.inf
    if continuous:
        for key in ("lower", "upper"):
            if key in merged:
                raise jfail(key, "a continuous joint has no position limits (remove it or set continuous: false)")
    else:
        for key in ("lower", "upper"):
            if key not in merged:
                raise jfail(key, "missing (or set continuous: true)")
        lower = number(merged["lower"], "lower", jfail)
        upper = number(merged["upper"], "upper", jfail)
        if not lower < upper:
            raise jfail("lower", f"lower {lower} must be below upper {upper}")
    limits = {}
    for key in ("velocity", "effort"):
        if key not in merged:
            raise jfail(key, "missing")
        limits[key] = number(merged[key], key, jfail, low=0.0, low_open=True)
    mode = merged.get("operating_mode", "position")
    if mode not in _OPERATING_MODES:
        raise jfail("operating_mode",
                    f"{mode!r} is not one of {_OPERATING_MODES}{suggest(mode, _OPERATING_MODES, 'modes')}")
    if continuous and mode == "position":
        raise jfail("operating_mode", "a continuous joint needs extended_position or velocity mode")
    direction = merged.get("direction", 1)
    if isinstance(direction, bool) or direction not in (1, -1):
        raise jfail("direction", f"must be 1 or -1, got {direction!r}")
    offset = number(merged.get("zero_offset", 0.0), "zero_offset", jfail)
    model = merged.get("model")
    if "model" not in merged:
        raise jfail("model", "missing")
    if model not in SERVO_MODELS:
        raise jfail("model",
                    f"unknown servo model {model!r} (no control table){suggest(model, SERVO_MODELS, 'models')}")
    _check_servo_range(model, mode, continuous, lower, upper, limits, offset, int(direction), set(raw), jfail)
    if model not in specs:
        try:
            specs[model] = load_servo_model(model)
        except ServoModelError as err:
            raise jfail("model", f"{model}: its servo model file: {err}") from err
    registers = _registers(types[jtype].get("registers"), raw.get("registers"), specs[model], where,
                           f"joint_types.{jtype}", label, fail)
    return JointSpec(
        name=name,
        type=jtype,
        index=i,
        servo_id=sid,
        model=model,
        axis=(float(a[0]), float(a[1]), float(a[2])),
        lower=float(lower),
        upper=float(upper),
        velocity=limits["velocity"],
        effort=limits["effort"],
        continuous=continuous,
        operating_mode=mode,
        zero_offset=float(offset),
        direction=int(direction),
        registers=registers,
    )


def _registers(type_block: Any, joint_block: Any, spec: ServoSpec, where: str, type_where: str, label: str,
               fail: Fail) -> ServoRegisters:
    """A joint's ``registers:``: its type's keys, the joint's over them, the model's factory values for the rest.

    Each value must be an integer in its register's range (:data:`SERVO_REGISTERS`; PWM Limit
    up to the model's ``pwm_full``, Current Limit up to its factory Current Limit, the e-Manual's
    maximum). A bad value is named where it is written: ``joints[i].registers.<key>`` or
    ``joint_types.<type>.registers.<key>``.
    """
    values = ServoRegisters.factory(spec).as_dict()
    highs = {key: rng[2] for key, rng in SERVO_REGISTERS.items()}
    highs["pwm_limit"] = int(spec.firmware.pwm_full)
    highs["current_limit"] = spec.firmware.factory.current_limit
    for block_where, raw in ((type_where, type_block), (where, joint_block)):
        path = f"{block_where}.registers"
        block = mapping(raw, path, fail, required=False)
        check_keys(block, tuple(SERVO_REGISTERS), path, fail, f" of a servo's registers (joint {label})")
        for key, value in block.items():
            if key == "current_limit" and highs[key] == 0 and value != 0:
                raise fail(f"{path}.{key}", f"{value!r}: the {spec.model} has no Current Limit register; "
                                            f"leave it out or write 0 (joint {label})")
            low = SERVO_REGISTERS[key][1]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= highs[key]:
                raise fail(f"{path}.{key}", f"must be an integer in [{low}, {highs[key]}] ({spec.model}'s register "
                                            f"range), got {value!r} (joint {label})")
            values[key] = value
    return ServoRegisters(**values)


def _check_servo_range(model: str, mode: str, continuous: bool, lower: float, upper: float,
                       limits: Mapping[str, float], offset: float, direction: int, own: set[str],
                       jfail: Fail) -> None:
    """Refuse a joint its servo cannot follow: speed, torque, zero offset and limits against the model.

    The servo angle of a joint angle q is ``direction * q + zero_offset`` (the bridge's
    conversion); the limits of a position-mode joint must map inside the one revolution
    of the Min/Max Position Limit registers, those of an extended-position joint inside
    its +-256 turns. A limit inherited from the joint type but moved out of range by the
    joint's own ``zero_offset`` or ``direction`` is reported at that joint field
    (``own``: the keys set on the joint itself).
    """
    rng = SERVO_RANGES[model]
    if limits["velocity"] > rng.max_velocity:
        raise jfail("velocity", f"{limits['velocity']:g} rad/s is faster than the {model} can turn "
                                f"({rng.max_velocity:.3f} rad/s no-load at its recommended supply)")
    if limits["effort"] > rng.stall_torque:
        raise jfail("effort", f"{limits['effort']:g} N m is more than the {model} can give "
                              f"({rng.stall_torque:g} N m stall torque at its recommended supply)")
    lo_offset, hi_offset = ZERO_OFFSET_RANGE
    if not lo_offset <= offset <= hi_offset:
        raise jfail("zero_offset", f"{offset:g} rad is not a horn angle within one turn: must be in "
                                   f"[-pi, pi] rad (the servo angle at joint zero, as `snake servo` reads it)")
    if continuous or mode == "velocity":
        return
    lo_ticks, hi_ticks = POSITION_MODE_TICKS if mode == "position" else EXTENDED_MODE_TICKS
    for key, q in (("lower", lower), ("upper", upper)):
        servo = direction * q + offset
        if not lo_ticks <= servo_ticks(servo) <= hi_ticks:
            span = 2.0 * math.pi / TICKS_PER_REV
            blame = next((k for k in (key, "zero_offset", "direction") if k in own), key)
            raise jfail(blame, f"{key} {q:g} rad is servo angle {servo:g} rad (direction {direction}, zero_offset "
                             f"{offset:g}), beyond the {model}'s {mode} range [{(lo_ticks - TICKS_CENTER) * span:.4f}, "
                             f"{(hi_ticks - TICKS_CENTER) * span:.4f}] rad")


def _check_unique(joints: Sequence[JointSpec], fail: Fail) -> None:
    seen_names: dict[str, int] = {}
    seen_ids: dict[int, int] = {}
    for j in joints:
        if j.name in seen_names:
            raise fail(f"joints[{j.index}].name", f"duplicate name {j.name!r} (also joints[{seen_names[j.name]}])")
        if j.servo_id in seen_ids:
            other = seen_ids[j.servo_id]
            raise fail(f"joints[{j.index}].servo_id",
                       f"duplicate id {j.servo_id} (also joints[{other}]) (joint {j.name})")
        seen_names[j.name] = j.index
        seen_ids[j.servo_id] = j.index
