"""The generated MJCF is pinned: any change to the twin's physics shows up as a changed XML string.

The hashes below are the SHA-256 of ``build_mjcf`` output for every shipped robot on every shipped
world (and with no world), produced by the generator whose servo model is derived from the servo
model files (``config/servos/``, through ``snake_core.twin_params``: the XM430-W350 at the robot
YAML's registers, its factory ones, and 12 V) and whose contact model is the private constants of
``snake_hardware.sim.mjcf``. A twin built without a ``twin:`` calibration block must keep
producing exactly these strings; a deliberate change of the default physics (a servo model file
or the registers too) updates them here, in the same commit, so a reviewer sees it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from snake_core.robot import load_robot
from snake_hardware.sim.mjcf import build_mjcf
from snake_hardware.sim.worlds import load_world

ROOT = Path(__file__).resolve().parents[3]

PINNED: dict[tuple[str, str | None], str] = {
    ("tsnake", None): "adf011fbdea5feae585c0751fd5534278e4b108425c22894b5cbc3946e0b7210",
    ("tsnake", "flat"): "4a6604af8a6593bdd30b23e5fbddae05ffde9623cf824c6128c5e42b6d5538b4",
    ("tsnake", "pegs"): "ba52fc0e1635c7f014553e66475dfb8c0954284864340acd525e8ab87488f2f3",
    ("tsnake", "uneven"): "a1e27e137ada71d5b613064415b1efe9c04c6d748d2c9f3785005387f252c828",
    ("wheeled_snake", None): "2cc2f34180cc454b83b04871d830068e06a4330126dc8e99e7203aab153d0e77",
    ("wheeled_snake", "flat"): "adeca06964475c850a09e7bceb42f21523443b746cd210070f8db6cd82dfa468",
    ("wheeled_snake", "pegs"): "d46353dbf2b34bac9ea5aa963156ec00b7dc700bb1282780eb36b6bae67311b1",
    ("wheeled_snake", "uneven"): "769e2c85c9c426ed833ddcf0fb23a753c88f8846e585128816955598650cdef7",
}


def test_every_shipped_pair_is_pinned() -> None:
    robots = {p.stem for p in (ROOT / "config" / "robots").glob("*.yaml")}
    worlds = {p.stem for p in (ROOT / "config" / "worlds").glob("*.yaml")} | {None}
    assert {(r, w) for r in robots for w in worlds} == set(PINNED)


@pytest.mark.parametrize(("robot", "world"), sorted(PINNED, key=str))
def test_mjcf_unchanged(robot: str, world: str | None) -> None:
    model = load_robot(ROOT / "config" / "robots" / f"{robot}.yaml")
    w = load_world(ROOT / "config" / "worlds" / f"{world}.yaml") if world else None
    xml = build_mjcf(model, w)
    assert hashlib.sha256(xml.encode()).hexdigest() == PINNED[(robot, world)]
