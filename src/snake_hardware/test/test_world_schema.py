"""Strict world files, and the core's servo tables kept equal to the Dynamixel control tables.

A misspelt block of a world file (``spwan``, ``obstacle``) must not leave the robot at the
origin or the field empty: every bad file fails at load in ONE line naming the file, the
field and, for a typo, the closest valid key.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from snake_core.errors import WorldConfigError
from snake_core.robot import BAUD_RATES, SERVO_MODELS
from snake_hardware.dynamixel import control_table as ct
from snake_hardware.sim.worlds import load_world, resolve_world_path

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
                                                   (b"", "expected a mapping")])
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
