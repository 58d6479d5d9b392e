"""Strict world files, and the core's servo tables kept equal to the Dynamixel control tables.

The robot loader's checks against the servo (position range of the limits) are also held
against the bridge's own conversion here, where both the core and the Dynamixel code are
importable.

A misspelt block of a world file (``spwan``, ``obstacle``) must not leave the robot at the
origin or the field empty: every bad file fails at load in ONE line naming the file, the
field and, for a typo, the closest valid key.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from snake_core.errors import RobotConfigError, WorldConfigError
from snake_core.robot import (
    BAUD_RATES,
    EXTENDED_MODE_TICKS,
    POSITION_MODE_TICKS,
    SERVO_MODELS,
    SERVO_RANGES,
    TICKS_CENTER,
    TICKS_PER_REV,
    load_robot,
    resolve_robot_path,
    robot_from_dict,
)
from snake_hardware.dynamixel import control_table as ct
from snake_hardware.dynamixel import conversion as cv
from snake_hardware.sim.worlds import load_world, resolve_world_path, world_from_dict

Mutation = Callable[[dict[str, Any]], None]


def _shipped(name: str) -> dict[str, Any]:
    return yaml.safe_load(resolve_world_path(name).read_text())


def _rename(block: str | None, old: str, new: str) -> Mutation:
    def mutate(d: dict[str, Any]) -> None:
        target = d if block is None else d[block]
        target[new] = target.pop(old)
    return mutate


def _set(block: str, key: str, value: Any) -> Mutation:
    def mutate(d: dict[str, Any]) -> None:
        d[block][key] = value
    return mutate


# (world, mutation, fragments the one-line error must contain)
_CASES: list[tuple[str, str, Mutation, tuple[str, ...]]] = [
    ("spwan", "flat", _rename(None, "spawn", "spwan"), ("spwan: unknown key", "did you mean `spawn`?")),
    ("yaww", "flat", _rename("spawn", "yaw", "yaww"), ("spawn.yaww", "did you mean `yaw`?")),
    ("obstacle", "pegs", _rename(None, "obstacles", "obstacle"),
     ("obstacle: unknown key", "did you mean `obstacles`?")),
    ("peg", "pegs", lambda d: d["obstacles"].update(peg=d["obstacles"].pop("pegs")),
     ("obstacles.peg", "did you mean `pegs`?")),
    ("diamter", "pegs", lambda d: d["obstacles"]["pegs"].update(diamter=d["obstacles"]["pegs"].pop("diameter")),
     ("obstacles.pegs.diamter", "did you mean `diameter`?")),
    ("frction", "flat", _rename("ground", "friction", "frction"), ("ground.frction", "did you mean `friction`?")),
    ("xy_jiter", "flat", _rename("spawn", "xy_jitter", "xy_jiter"), ("spawn.xy_jiter", "did you mean `xy_jitter`?")),
    ("heightfield key on a plane", "flat", _set("ground", "resolution", 0.05),
     ("ground.resolution", "plane ground")),
    ("height_sdt", "uneven", _rename("ground", "height_std", "height_sdt"), ("ground.height_sdt", "`height_std`")),
    ("ground type typo", "flat", _set("ground", "type", "plain"), ("ground.type", "did you mean `plane`?")),
    ("negative size", "flat", _set("ground", "size", [-1.0, 20.0]), ("ground.size", "positive")),
    ("string friction", "flat", _set("ground", "friction", "high"), ("ground.friction", "'high'")),
    ("NaN yaw", "flat", _set("spawn", "yaw", math.nan), ("spawn.yaw", "finite")),
    ("negative jitter", "flat", _set("spawn", "yaw_jitter", -0.1), ("spawn.yaw_jitter", ">= 0")),
    ("spawn off the ground", "flat", _set("spawn", "x", 50.0), ("spawn.x", "outside")),
    ("negative peg diameter", "pegs", lambda d: d["obstacles"]["pegs"].update(diameter=-0.06),
     ("obstacles.pegs.diameter", "positive")),
    ("peg centre not a pair", "pegs", lambda d: d["obstacles"]["pegs"]["centres"].__setitem__(2, [0.8]),
     ("obstacles.pegs.centres[2]", "[x, y]")),
    ("missing name", "flat", lambda d: d.pop("name"), ("name:", "non-empty string")),
    ("missing ground", "flat", lambda d: d.pop("ground"), ("ground: missing",)),
    ("missing seed", "uneven", lambda d: d["ground"].pop("seed"), ("ground.seed",)),
    ("spawn not a mapping", "flat", lambda d: d.update(spawn=[0, 0]), ("spawn: expected a mapping",)),
    # the robot's head must not start inside a peg, nor within 3 sigma of its spawn jitter of one
    ("spawn inside a peg", "pegs", lambda d: d["spawn"].update(x=0.81, y=0.01),
     ("spawn: (0.81, 0.01) is 0.014 m from the axis of peg obstacles.pegs.centres[2] (0.8, 0)", "inside it")),
    ("spawn just inside a peg's edge", "pegs", lambda d: d["spawn"].update(x=0.4, y=0.221),
     ("spawn:", "0.029 m from the axis of peg obstacles.pegs.centres[0]", "within 0.030 m")),
    ("spawn jitter reaches a peg", "pegs", lambda d: d["spawn"].update(x=0.4, y=0.0, xy_jitter=0.08),
     ("spawn:", "0.250 m from the axis of peg obstacles.pegs.centres[0]", "within 0.270 m", "3 x xy_jitter")),
]


@pytest.mark.parametrize(("world", "mutate", "fragments"), [c[1:] for c in _CASES], ids=[c[0] for c in _CASES])
def test_bad_world_fails_in_one_line(tmp_path: Path, world: str, mutate: Mutation, fragments: tuple[str, ...]) -> None:
    data = copy.deepcopy(_shipped(world))
    mutate(data)
    path = tmp_path / "world.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(WorldConfigError) as info:
        load_world(path)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"{path}: "), msg
    for fragment in fragments:
        assert fragment in msg, f"{fragment!r} not in {msg!r}"


@pytest.mark.parametrize(("content", "fragment"), [(b"name: flat\nground: {type: plane\n", "YAML error"),
                                                   (b"name: a\nname: b\n", "duplicate key 'name'"),
                                                   (b"", "empty world description"),
                                                   (b"# to do\n", "no YAML content")])
def test_unparsable_world_fails_in_one_line(tmp_path: Path, content: bytes, fragment: str) -> None:
    path = tmp_path / "world.yaml"
    path.write_bytes(content)
    with pytest.raises(WorldConfigError) as info:
        load_world(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value) and fragment in str(info.value)


def test_missing_world_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(WorldConfigError) as info:
        load_world(tmp_path / "absent.yaml")
    assert "\n" not in str(info.value) and "absent.yaml" in str(info.value)


@pytest.mark.parametrize("name", sorted(p.stem for p in resolve_world_path("flat").parent.glob("*.yaml")))
def test_every_shipped_world_loads_with_what_it_says(name: str) -> None:
    raw = _shipped(name)
    world = load_world(name)
    assert world.name == raw["name"] and world.ground_type == raw["ground"]["type"]
    assert world.spawn.yaw == pytest.approx(raw.get("spawn", {}).get("yaw", 0.0))
    pegs = raw.get("obstacles", {}).get("pegs")
    assert (world.pegs is None) == (pegs is None)
    if pegs is not None:
        assert world.pegs is not None and world.pegs.centres.tolist() == pegs["centres"]


def test_core_servo_models_are_the_control_tables() -> None:
    """The core checks models without importing snake_hardware: its list must be the tables' list."""
    assert sorted(SERVO_MODELS) == sorted(ct.MODELS)
    assert sorted(BAUD_RATES) == sorted(ct.BAUD_INDEX.values())


def test_core_servo_ranges_are_the_control_tables() -> None:
    """The loader's speed, torque and tick ranges per model are those the bridge converts with."""
    for name, rng in SERVO_RANGES.items():
        model = ct.MODELS[name]
        assert rng.max_velocity == pytest.approx(model.max_velocity, rel=1e-12), name
        assert rng.stall_torque == pytest.approx(model.stall_torque, rel=1e-12), name
    assert (TICKS_PER_REV, TICKS_CENTER) == (ct.TICKS_PER_REV, ct.TICKS_CENTER)
    assert POSITION_MODE_TICKS == (0, ct.POSITION_MAX_TICKS)
    assert EXTENDED_MODE_TICKS == (-ct.EXTENDED_RANGE_TICKS, ct.EXTENDED_RANGE_TICKS)


def test_the_loader_accepts_a_position_joint_exactly_when_the_bridge_can_set_its_limits() -> None:
    """Independent check of the limit rule: the bridge's own conversion (``limit_ticks``) is the oracle.

    Seeded random limits, offsets and directions on one position-mode joint: the robot
    YAML loads if and only if the Dynamixel backend can write its Min/Max Position Limit
    registers, so no file passes the loader and then fails on the bus (or the reverse).
    """
    raw = yaml.safe_load(resolve_robot_path("tsnake").read_text())
    base = load_robot("tsnake", calibrated=False).joint("m1_dorsal")
    rng = np.random.default_rng(7)
    outcomes = set()
    for _ in range(400):
        lower = float(rng.uniform(-3.5, 0.5))
        upper = lower + float(rng.uniform(0.1, 3.5))
        offset = round(float(rng.uniform(-math.pi, math.pi)), 4)
        direction = int(rng.choice([-1, 1]))
        data = copy.deepcopy(raw)
        data["joints"][0].update(lower=lower, upper=upper, zero_offset=offset, direction=direction)
        try:
            cv.limit_ticks(dataclasses.replace(base, lower=lower, upper=upper, zero_offset=offset,
                                               direction=direction))
            bridge_ok = True
        except ValueError:
            bridge_ok = False
        try:
            robot_from_dict(data)
            loader_ok = True
        except RobotConfigError as err:
            loader_ok = False
            assert "position range" in str(err), str(err)
        assert loader_ok == bridge_ok, (lower, upper, offset, direction)
        outcomes.add(bridge_ok)
    assert outcomes == {True, False}  # both sides of the rule were exercised


def test_a_peg_field_without_a_spawn_block_is_not_refused_for_a_peg_at_the_origin() -> None:
    """Generated fields (``snake experiment follow``) place the robot themselves: the default spawn is not theirs."""
    data = copy.deepcopy(_shipped("pegs"))
    data.pop("spawn")
    data["obstacles"]["pegs"]["centres"].append([0.0, 0.0])
    world = world_from_dict(data)
    assert world.pegs is not None and [0.0, 0.0] in world.pegs.centres.tolist()
    data["spawn"] = {"x": 0.0, "y": 0.0}
    with pytest.raises(WorldConfigError, match="centres\\[8\\]"):
        world_from_dict(data)
