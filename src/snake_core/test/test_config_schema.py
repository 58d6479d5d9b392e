"""Strict configuration files of the core: robot descriptions, calibrations, slippage case studies.

Each bad file must fail at load with ONE line ``<file>: <field path>: <problem>`` that
names the entry and, for a typo, the closest valid key; a typo must never fall back to
a default. The tables mutate the shipped files, so every case differs from a file that
loads by exactly one fault.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from snake_core.errors import ConfigError, RobotConfigError
from snake_core.robot import apply_calibration, calibration_path, load_robot, resolve_robot_path
from snake_core.slippage.model import SlippageError
from snake_core.slippage.studies import default_config_path, load_case_study

Mutation = Callable[[dict[str, Any]], None]


def _shipped(name: str) -> dict[str, Any]:
    return yaml.safe_load(resolve_robot_path(name).read_text())


def _write(tmp_path: Path, data: Any, name: str = "robot.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _assert_one_line(err: Exception, path: Path, *fragments: str) -> None:
    """The message is one line, starts with the file and contains every fragment (literally)."""
    msg = str(err)
    assert "\n" not in msg, msg
    assert msg.startswith(f"{path}: "), msg
    for fragment in fragments:
        assert fragment in msg, f"{fragment!r} not in {msg!r}"


def _set(*keys: Any, value: Any) -> Mutation:
    def mutate(d: dict[str, Any]) -> None:
        target = d
        for k in keys[:-1]:
            target = target[k]
        target[keys[-1]] = value
    return mutate


def _drop(*keys: Any) -> Mutation:
    def mutate(d: dict[str, Any]) -> None:
        target = d
        for k in keys[:-1]:
            target = target[k]
        del target[keys[-1]]
    return mutate


# (mutation of tsnake.yaml, fragments the one-line error must contain)
_TSNAKE_CASES: list[tuple[str, Mutation, tuple[str, ...]]] = [
    # typos: the key, the entry (joint by index and name) and the suggestion
    ("joint directon", _set("joints", 3, "directon", value=-1),
     ("joints[3].directon", "unknown key", "m2_dorsal", "did you mean `direction`?")),
    ("joint zero_ofset", _set("joints", 3, "zero_ofset", value=0.3),
     ("joints[3].zero_ofset", "m2_dorsal", "did you mean `zero_offset`?")),
    ("joint uper", _set("joints", 5, "uper", value=0.5), ("joints[5].uper", "m2_lateral", "did you mean `upper`?")),
    ("joint type default efort", _set("joint_types", "dorsal", "efort", value=4.1),
     ("joint_types.dorsal.efort", "did you mean `effort`?")),
    ("unknown joint type", _set("joint_types", "dorsl", value={}), ("joint_types.dorsl", "did you mean `dorsal`?")),
    ("top-level joint_type", lambda d: d.update(joint_type=d.pop("joint_types")),
     ("joint_type: unknown key", "did you mean `joint_types`?")),
    ("body module_lenght", _set("body", "module_lenght", value=0.2),
     ("body.module_lenght", "did you mean `module_length`?")),
    ("bus baudrate", _set("bus", "baudrate", value=57600), ("bus.baudrate", "did you mean `baud_rate`?")),
    ("gait coefficient k_aa", _set("gaits", "rolling", "k_aa", value=0.02),
     ("gaits.rolling.k_aa", "gait rolling", "did you mean `k_a`?")),
    ("unknown gait", _set("gaits", "rollin", value={"k": 1.0}),
     ("gaits.rollin", "unknown gait", "did you mean `rolling`?")),
    # wrong types
    ("servo_id string", _set("joints", 3, "servo_id", value="4"), ("joints[3].servo_id", "must be an integer", "'4'")),
    ("servo_id bool", _set("joints", 3, "servo_id", value=True), ("joints[3].servo_id", "must be an integer")),
    ("lower string", _set("joints", 0, "lower", value="low"), ("joints[0].lower", "finite number", "m1_dorsal")),
    ("continuous string", _set("joints", 1, "continuous", value="yes"), ("joints[1].continuous", "true or false")),
    ("n_modules float", _set("body", "n_modules", value=6.5), ("body.n_modules", "positive integer")),
    ("joints not a list", _set("joints", value={"a": 1}), ("joints: expected list",)),
    ("body not a mapping", _set("body", value=[1, 2]), ("body: expected Mapping",)),
    ("wrap flag number", _set("gaits", "rolling", "wrap_when_translating", value=1),
     ("gaits.rolling.wrap_when_translating", "true or false")),
    # ranges: inverted limits, negative lengths, NaN
    ("inverted limits", lambda d: d["joints"][0].update(lower=1.0, upper=-1.0),
     ("joints[0].lower", "lower 1.0 must be below upper -1.0", "m1_dorsal")),
    ("equal limits", lambda d: d["joints"][2].update(lower=0.5, upper=0.5), ("joints[2].lower", "must be below")),
    ("inverted type limits", lambda d: d["joint_types"]["lateral"].update(lower=1.0, upper=0.0),
     ("joint_types.lateral.lower", "must be below", "m1_lateral")),
    ("negative module length", _set("body", "module_length", value=-0.2), ("body.module_length", "> 0", "-0.2")),
    ("zero radius", _set("body", "radius", value=0.0), ("body.radius", "> 0")),
    ("negative velocity", _set("joints", 4, "velocity", value=-1.0), ("joints[4].velocity", "> 0", "m2_twist")),
    ("NaN zero offset", _set("joints", 6, "zero_offset", value=math.nan),
     ("joints[6].zero_offset", "finite", "m3_dorsal")),
    ("NaN type upper", _set("joint_types", "lateral", "upper", value=math.nan),
     ("joint_types.lateral.upper", "finite")),
    ("inf gait coefficient", _set("gaits", "conical", "k", value=math.inf), ("gaits.conical.k", "finite")),
    ("negative gait coefficient", _set("gaits", "reduction", "k", value=-0.05), ("gaits.reduction.k", "> 0")),
    ("servo id out of range", _set("joints", 0, "servo_id", value=253), ("joints[0].servo_id", "<= 252")),
    ("direction 2", _set("joints", 2, "direction", value=2), ("joints[2].direction", "1 or -1")),
    ("limits on a continuous joint", _set("joints", 1, "lower", value=-1.0), ("joints[1].lower", "continuous joint")),
    # duplicates
    ("duplicate servo id", _set("joints", 3, "servo_id", value=1),
     ("joints[3].servo_id", "duplicate id 1", "joints[0]", "m2_dorsal")),
    ("duplicate joint name", _set("joints", 5, "name", value="m1_dorsal"), ("joints[5].name", "duplicate name")),
    # missing fields
    ("missing name", _drop("name"), ("name: missing",)),
    ("missing body", _drop("body"), ("body: missing",)),
    ("missing servo_id", _drop("joints", 4, "servo_id"), ("joints[4].servo_id", "missing", "m2_twist")),
    ("missing type velocity", _drop("joint_types", "dorsal", "velocity"),
     ("joint_types.dorsal.velocity", "missing", "m1_dorsal")),
    ("missing gait coefficient", _drop("gaits", "rolling", "k_theta"), ("gaits.rolling.k_theta", "missing")),
    ("missing joint", lambda d: d["joints"].pop(), ("joints: 17 joints",)),
    # servo models and the bus, against the control tables
    ("unknown servo model", _set("joints", 3, "model", value="XM999"),
     ("joints[3].model", "unknown servo model 'XM999'", "m2_dorsal", "XM430-W350")),
    ("servo model typo", _set("joint_types", "twist", "model", value="XM430-W35"),
     ("joint_types.twist.model", "did you mean `XM430-W350`?", "m1_twist")),
    ("unknown baud rate", _set("bus", "baud_rate", value=123456), ("bus.baud_rate", "123456")),
    ("baud rate string", _set("bus", "baud_rate", value="4000000"), ("bus.baud_rate",)),
    ("protocol 1.0", _set("bus", "protocol", value=1.0), ("bus.protocol", "Protocol 2.0")),
    ("bad operating mode", _set("joints", 0, "operating_mode", value="positon"),
     ("joints[0].operating_mode", "did you mean `position`?")),
    ("bad kind", _set("kind", value="tsnak"), ("kind", "did you mean `tsnake`?")),
    # what the hardware can do: limits, speeds, torques and offsets against the servo model
    ("position limit beyond the servo", _set("joints", 0, "upper", value=10.0),
     ("joints[0].upper", "10 rad", "XM430-W350's position range", "m1_dorsal")),
    ("type limit beyond the servo", _set("joint_types", "lateral", "lower", value=-3.3),
     ("joint_types.lateral.lower", "position range", "m1_lateral")),
    ("zero offset pushes a limit out", _set("joints", 0, "zero_offset", value=2.0),
     ("joints[0].zero_offset", "upper 1.5708 rad is servo angle 3.5708", "zero_offset 2", "m1_dorsal")),
    ("reversed joint pushed out", lambda d: d["joints"][0].update(direction=-1, zero_offset=-2.0),
     ("joints[0].zero_offset", "upper 1.5708 rad is servo angle -3.5708", "direction -1")),
    ("own limit named before own direction", lambda d: d["joints"][0].update(direction=-1, lower=-1.0, upper=3.2),
     ("joints[0].upper", "upper 3.2 rad is servo angle -3.2 rad")),
    ("extended-position limit beyond 256 turns", lambda d: d["joints"][0].update(
        operating_mode="extended_position", upper=2000.0), ("joints[0].upper", "extended_position range")),
    ("velocity 1e9", _set("joints", 4, "velocity", value=1e9),
     ("joints[4].velocity", "1e+09 rad/s is faster than the XM430-W350", "m2_twist")),
    ("velocity above a slower model", _set("joints", 0, "model", value="XH430-W350"),
     ("joint_types.dorsal.velocity", "4.8 rad/s is faster than the XH430-W350", "3.142", "m1_dorsal")),
    ("effort above the stall torque", _set("joints", 2, "effort", value=10.0),
     ("joints[2].effort", "10 N m", "4.1 N m stall torque")),
    ("zero offset 100", _set("joints", 1, "zero_offset", value=100),
     ("joints[1].zero_offset", "100 rad", "[-pi, pi]", "m1_twist")),
    ("type zero offset 4", _set("joint_types", "twist", "zero_offset", value=-4.0),
     ("joint_types.twist.zero_offset", "-4 rad", "m1_twist")),
    # names ROS accepts
    ("joint name with a space", _set("joints", 0, "name", value="m1 dorsal"),
     ("joints[0].name", "'m1 dorsal' is not a ROS name")),
    ("joint name starting with a digit", _set("joints", 3, "name", value="2_dorsal"),
     ("joints[3].name", "not a ROS name")),
    ("joint name with a slash", _set("joints", 5, "name", value="m2/lateral"), ("joints[5].name", "not a ROS name")),
    # the rolling gait's buffer: head_end < tail_start <= body length
    ("inverted buffer boundaries", lambda d: d["gaits"]["rolling"].update(head_end=0.8, tail_start=0.5),
     ("gaits.rolling.head_end", "0.8 m must be before tail_start 0.5 m")),
    ("empty buffer", lambda d: d["gaits"]["rolling"].update(head_end=0.6, tail_start=0.6),
     ("gaits.rolling.head_end", "before tail_start")),
    ("buffer beyond the tail", _set("gaits", "rolling", "tail_start", value=1.5),
     ("gaits.rolling.tail_start", "1.5 m lies beyond the body's end (1.233 m)")),
    # servo registers: known keys, integers within the register's range (the model's for the limits)
    ("register typo", _set("joint_types", "dorsal", "registers", "position_p_gian", value=800),
     ("joint_types.dorsal.registers.position_p_gian", "unknown key", "did you mean `position_p_gain`?")),
    ("negative P gain on a joint", _set("joints", 4, "registers", value={"position_p_gain": -1}),
     ("joints[4].registers.position_p_gain", "[0, 16383]", "got -1", "m2_twist")),
    ("P gain beyond its register", _set("joint_types", "lateral", "registers", "position_d_gain", value=16384),
     ("joint_types.lateral.registers.position_d_gain", "[0, 16383]", "got 16384")),
    ("fractional profile velocity", _set("joints", 0, "registers", value={"profile_velocity": 1.5}),
     ("joints[0].registers.profile_velocity", "integer", "got 1.5")),
    ("PWM Limit beyond full duty", _set("joint_types", "twist", "registers", "pwm_limit", value=886),
     ("joint_types.twist.registers.pwm_limit", "[0, 885]", "got 886")),
    ("Current Limit beyond the model's", _set("joints", 2, "registers", value={"current_limit": 1194}),
     ("joints[2].registers.current_limit", "[0, 1193]", "XM430-W350", "got 1194")),
    ("Current Limit on a model without one",
     lambda d: d["joints"][0].update(model="XL430-W250", velocity=5.9, effort=1.5),
     ("joint_types.dorsal.registers.current_limit", "XL430-W250 has no Current Limit register", "m1_dorsal")),
    ("registers not a mapping", _set("joint_types", "dorsal", "registers", value=[800]),
     ("joint_types.dorsal.registers", "expected a mapping")),
]


@pytest.mark.parametrize(("mutate", "fragments"), [c[1:] for c in _TSNAKE_CASES], ids=[c[0] for c in _TSNAKE_CASES])
def test_bad_tsnake_file_fails_in_one_line(tmp_path: Path, mutate: Mutation, fragments: tuple[str, ...]) -> None:
    data = copy.deepcopy(_shipped("tsnake"))
    load_robot(_write(tmp_path, data))  # the unmodified copy loads
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(RobotConfigError) as info:
        load_robot(path)
    _assert_one_line(info.value, path, *fragments)


_WHEELED_CASES: list[tuple[str, Mutation, tuple[str, ...]]] = [
    ("negative wheel_d", _set("body", "wheel_d", 2, value=-0.01), ("body.wheel_d[2]", ">= 0")),
    ("tsnake key on a wheeled body", _set("body", "n_modules", value=3),
     ("body.n_modules", "planar_wheeled body")),
    ("wheel_radius typo", lambda d: d["body"].update(wheel_raduis=d["body"].pop("wheel_radius")),
     ("body.wheel_raduis", "did you mean `wheel_radius`?")),
    ("serpenoid typo", _set("gaits", "serpenoid", "amplitud", value=0.6),
     ("gaits.serpenoid.amplitud", "did you mean `amplitude`?")),
    ("NaN link mass", _set("body", "link_mass", value=math.nan), ("body.link_mass",)),
]


@pytest.mark.parametrize(("mutate", "fragments"), [c[1:] for c in _WHEELED_CASES], ids=[c[0] for c in _WHEELED_CASES])
def test_bad_wheeled_file_fails_in_one_line(tmp_path: Path, mutate: Mutation, fragments: tuple[str, ...]) -> None:
    data = copy.deepcopy(_shipped("wheeled_snake"))
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(RobotConfigError) as info:
        load_robot(path)
    _assert_one_line(info.value, path, *fragments)


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        (b"name: x\n  kind: [\n", ("line 2", "YAML error")),
        (b"joints: [\n", ("YAML error",)),
        (b"name: a\nname: b\n", ("duplicate key 'name'", "line 2")),
        (b"\xff\xfe\x00garbage", ("cannot read robot description",)),
        (b"", ("empty robot description", "no YAML content")),
        (b"# only a comment\n\n", ("empty robot description", "no YAML content")),
        (b"- a\n- b\n", ("<top>: expected a mapping, got list",)),
    ],
    ids=["syntax", "unclosed", "duplicate key", "not utf-8", "empty", "comments only", "list"],
)
def test_unparsable_robot_file_fails_in_one_line(tmp_path: Path, content: bytes, fragments: tuple[str, ...]) -> None:
    path = tmp_path / "robot.yaml"
    path.write_bytes(content)
    with pytest.raises(RobotConfigError) as info:
        load_robot(path)
    _assert_one_line(info.value, path, *fragments)


def test_a_huge_robot_file_is_refused_before_it_is_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """50 MB of valid YAML: one line naming the file and the bound, and the parser never runs."""
    from snake_core import schema

    path = tmp_path / "huge.yaml"
    line = yaml.safe_dump(_shipped("tsnake"), sort_keys=False).encode()
    with path.open("wb") as out:
        out.write(line)
        out.write(b"# padding\n" * (50_000_000 // 10))
    assert path.stat().st_size > 50_000_000 > schema.MAX_FILE_BYTES

    def parse(*_: Any, **__: Any) -> Any:
        raise AssertionError("the file was parsed")

    monkeypatch.setattr(schema.yaml, "load", parse)
    with pytest.raises(RobotConfigError) as info:
        load_robot(path)
    _assert_one_line(info.value, path, "robot description larger than 1024 KiB", "not read")


def test_a_file_at_the_size_bound_is_read(tmp_path: Path) -> None:
    """The bound refuses only what is larger: the shipped robot padded with comments up to it loads."""
    from snake_core.schema import MAX_FILE_BYTES

    text = resolve_robot_path("tsnake").read_bytes()
    path = tmp_path / "padded.yaml"
    path.write_bytes(text + b"#" * (MAX_FILE_BYTES - len(text) - 1) + b"\n")
    assert path.stat().st_size == MAX_FILE_BYTES
    assert load_robot(path, calibrated=False).name == "tsnake"
    path.write_bytes(path.read_bytes() + b"\n")
    with pytest.raises(RobotConfigError, match="larger than"):
        load_robot(path, calibrated=False)


def test_duplicate_key_inside_a_joint_is_refused(tmp_path: Path) -> None:
    """PyYAML alone keeps the last of two equal keys; the loader must refuse them instead."""
    text = resolve_robot_path("tsnake").read_text().replace(
        "{name: m2_dorsal, type: dorsal, servo_id: 4}", "{name: m2_dorsal, type: dorsal, servo_id: 4, servo_id: 19}")
    assert yaml.safe_load(text)["joints"][3]["servo_id"] == 19  # what a plain load would silently do
    path = tmp_path / "robot.yaml"
    path.write_text(text)
    with pytest.raises(RobotConfigError, match=r"duplicate key 'servo_id'"):
        load_robot(path)


def test_missing_or_unreadable_robot_file_is_one_line(tmp_path: Path) -> None:
    for path in (tmp_path / "absent.yaml", tmp_path / "dir.yaml"):
        if path.name == "dir.yaml":
            path.mkdir()
        with pytest.raises(RobotConfigError) as info:
            load_robot(path)
        assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_the_suggestion_is_the_closest_valid_key(tmp_path: Path) -> None:
    """Independent check of the suggestion: the valid key at the smallest edit distance."""
    valid = ["axis", "lower", "upper", "velocity", "effort", "continuous", "model", "operating_mode", "zero_offset",
             "direction", "name", "type", "servo_id"]

    def distance(a: str, b: str) -> int:  # Levenshtein
        row = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            prev, row[0] = row[0], i
            for j, cb in enumerate(b, 1):
                prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
        return row[-1]

    for typo in ("directon", "zero_ofset", "uper", "lowr", "velocty", "efort", "servoid", "continous", "operating_mod"):
        data = copy.deepcopy(_shipped("tsnake"))
        data["joints"][0][typo] = 1
        with pytest.raises(RobotConfigError) as info:
            load_robot(_write(tmp_path, data))
        best = min(valid, key=lambda k: distance(typo, k))
        assert f"did you mean `{best}`?" in str(info.value), (typo, str(info.value))


@pytest.mark.parametrize("name", ["tsnake", "wheeled_snake"])
@pytest.mark.parametrize("calibrated", [True, False])
def test_every_shipped_robot_loads(name: str, calibrated: bool) -> None:
    robot = load_robot(name, calibrated=calibrated)
    raw = _shipped(name)
    assert robot.joint_names == [j["name"] for j in raw["joints"]]
    assert set(robot.gaits) == set(raw["gaits"])


# --- calibration overlay ------------------------------------------------------------
_CALIBRATION_CASES = [
    ("gait:\n  reduction: {k: 0.04}\n", ("gait: unknown key", "did you mean `gaits`?")),
    ("gaits:\n  reduction: {kk: 0.04}\n", ("gaits.reduction.kk", "did you mean `k`?")),
    ("gaits:\n  reduction: {d_prim: 1.0}\n", ("gaits.reduction.d_prim", "did you mean `d_prime`?")),
    ("gaits:\n  reducton: {k: 0.04}\n", ("gaits.reducton", "not a gait of tsnake", "did you mean `reduction`?")),
    ("gaits:\n  serpenoid: {k: 0.04}\n", ("gaits.serpenoid", "not a gait of tsnake")),
    ("gaits:\n  reduction: {k: .nan}\n", ("gaits.reduction.k", "finite")),
    ("gaits:\n  reduction: {k: -0.04}\n", ("gaits.reduction.k", "> 0")),
    ("gaits:\n  reduction: {k: fast}\n", ("gaits.reduction.k", "'fast'")),
    ("gaits:\n  reduction: 0.04\n", ("gaits.reduction", "expected a mapping")),
    ("gaits: [1]\n", ("gaits", "expected a mapping")),
    ("provenance: yesterday\n", ("provenance", "expected a mapping")),
    ("gaits:\n  reduction: {k: 0.04\n", ("YAML error",)),
    ("", ("empty calibration", "no YAML content")),
    ("# measured later\n", ("empty calibration", "no YAML content")),
    ("gaits:\n  rolling: {head_end: 0.9}\n", ("gaits.rolling.head_end", "0.9 m must be before tail_start 0.7485 m")),
]


@pytest.mark.parametrize(("text", "fragments"), _CALIBRATION_CASES, ids=[c[0][:24] for c in _CALIBRATION_CASES])
def test_bad_calibration_fails_in_one_line(tmp_path: Path, text: str, fragments: tuple[str, ...]) -> None:
    path = tmp_path / "tsnake.yaml"
    path.write_text(text)
    with pytest.raises(RobotConfigError) as info:
        apply_calibration(load_robot("tsnake", calibrated=False), path)
    _assert_one_line(info.value, path, *fragments)


def test_shipped_calibration_overlays_its_values() -> None:
    raw = yaml.safe_load(calibration_path("tsnake").read_text())
    robot = load_robot("tsnake")
    for gait_name, values in raw["gaits"].items():
        for key, value in values.items():
            assert robot.gait(gait_name)[key] == pytest.approx(value)


# --- slippage case studies ---------------------------------------------------------------
def _studies() -> str:
    return default_config_path().read_text()


_SLIPPAGE_CASES: list[tuple[str, Callable[[str], str], str, tuple[str, ...]]] = [
    ("block key typo", lambda t: t.replace("  n_directions: 96", "  n_direction: 96"), "case_study_2",
     ("case_study_2.n_direction", "did you mean `n_directions`?")),
    ("anchor key typo", lambda t: t.replace("  link_mass: 1.0", "  link_mas: 1.0"), "case_study_1",
     ("table_1.link_mas", "did you mean `link_mass`?")),
    ("kappa typo", lambda t: t.replace("  kappa: 100.0", "  kapa: 100.0"), "case_study_1",
     ("table_1.kapa", "did you mean `kappa`?")),
    ("negative link length", lambda t: t.replace("link_length: 0.15", "link_length: -0.15"), "case_study_1",
     ("table_1.link_length", "> 0")),
    ("string mass", lambda t: t.replace("link_mass: 1.0", "link_mass: heavy"), "case_study_1",
     ("table_1.link_mass", "'heavy'")),
    ("NaN inertia", lambda t: t.replace("link_inertia: 0.002", "link_inertia: .nan"), "case_study_1",
     ("table_1.link_inertia", "finite")),
    ("zero joints", lambda t: t.replace("n_joints: 3", "n_joints: 0"), "case_study_2",
     ("case_study_2.n_joints", "integer >= 1")),
    ("radius above 1", lambda t: t.replace("radii: [0.5, 1.0]", "radii: [0.5, 1.5]"), "case_study_2",
     ("case_study_2.radii[1]", "<= 1")),
    ("inverted joint range", lambda t: t.replace("joint_min_deg: -135       # deg\n  joint_max_deg: 135        # deg\n"
                                                 "  joint_step_deg: 10        # deg -> 28^3",
                                                 "joint_min_deg: 135\n  joint_max_deg: -135\n"
                                                 "  joint_step_deg: 10  # 28^3"),
     "case_study_2", ("case_study_2.joint_min_deg", "must not exceed")),
    ("contact side 2", lambda t: t.replace("contact_side: 1", "contact_side: 2"), "case_study_1",
     ("table_1.contact_side", "1 or -1")),
    ("figure angles vs joints", lambda t: t.replace("figure_q_deg: [-135, -135]", "figure_q_deg: [-135]"),
     "case_study_1", ("case_study_1.figure_q_deg", "n_joints = 2")),
    ("block name typo", lambda t: t, "case_study_3", ("case_study_3", "no such case study block", "did you mean")),
    ("missing required", lambda t: t.replace("  link_mass: 1.0", ""), "case_study_1",
     ("case_study_1.link_mass", "missing")),
    ("yaml error", lambda t: t.replace("case_study_1:", "case_study_1: ["), "case_study_1", ("YAML error",)),
]


@pytest.mark.parametrize(("edit", "block", "fragments"), [c[1:] for c in _SLIPPAGE_CASES],
                         ids=[c[0] for c in _SLIPPAGE_CASES])
def test_bad_case_study_fails_in_one_line(tmp_path: Path, edit: Callable[[str], str], block: str,
                                          fragments: tuple[str, ...]) -> None:
    text = edit(_studies())
    assert text != _studies() or block == "case_study_3", "the edit did not apply"
    path = tmp_path / "studies.yaml"
    path.write_text(text)
    with pytest.raises(SlippageError) as info:
        load_case_study(block, path)
    _assert_one_line(info.value, path, *fragments)


def test_case_study_ignores_node_parameter_blocks_and_loads_every_shipped_block(tmp_path: Path) -> None:
    data = yaml.safe_load(_studies())
    blocks = [k for k, v in data.items() if k.startswith("case_study_")]
    assert blocks
    for name in blocks:
        assert load_case_study(name) == data[name]
    # A node's params block in the same file is not a case study: not checked against the study keys.
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text(_studies() + "\n/**/slippage_monitor:\n  ros__parameters:\n    scenario: 3\n")
    assert load_case_study(blocks[0], mixed) == data[blocks[0]]


def test_missing_case_study_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SlippageError) as info:
        load_case_study("case_study_1", tmp_path / "absent.yaml")
    assert "\n" not in str(info.value) and re.search(r"absent\.yaml: .*not found", str(info.value))


def test_config_errors_are_value_errors() -> None:
    """The CLI turns ValueError into one line and exit 2: every config error must be one."""
    assert issubclass(RobotConfigError, ConfigError) and issubclass(ConfigError, ValueError)
    assert issubclass(SlippageError, ValueError)


def test_the_fast_loader_reads_every_shipped_file_as_the_pure_python_loader_does() -> None:
    """SAFE_LOADER (libyaml's parser where PyYAML has it) against PyYAML's own parser, on every shipped YAML file."""
    from snake_core.schema import SAFE_LOADER

    root = Path(__file__).resolve().parents[3] / "config"
    files = sorted(root.rglob("*.yaml"))
    assert len(files) > 10
    for path in files:
        text = path.read_text()
        assert yaml.load(text, Loader=SAFE_LOADER) == yaml.load(text, Loader=yaml.SafeLoader), path
