"""The generated MJCF is pinned: any change to the twin's physics shows up as a changed XML string.

The hashes below are the SHA-256 of ``build_mjcf`` output for every shipped robot on every shipped
world (and with no world), produced by the generator whose servo and contact model are the private
constants of ``snake_hardware.sim.mjcf``. A twin built without a ``twin:`` calibration block must keep
producing exactly these strings; a deliberate change of the default physics updates them here, in
the same commit, so a reviewer sees it.
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
    ("tsnake", None): "11864a55d6722c6d08e10689617f908051c0e5e3a13cbfd910ac0d4ceb62901f",
    ("tsnake", "flat"): "227106342774b8f0398bad09c623ee997ba38ca4dd15340d876bba1bd51d8d3f",
    ("tsnake", "pegs"): "071705ee25ef61d89e8490deecb2882a6fcc229f6fc60c55702dc479f7ae136f",
    ("tsnake", "uneven"): "8b95a92a414c011dc74343b9791ce1d1a6dcc674ead10fad69a21acdcb3231fd",
    ("wheeled_snake", None): "a6c1d056a6adba526e1fc326adc7bc79022e710024707afa1cdf9540dcde92d1",
    ("wheeled_snake", "flat"): "c6cd79634b40bfae91d52093e4b5f436fbc4ae23fc8fef835a5d8aa7bafdf6d2",
    ("wheeled_snake", "pegs"): "6383b48ff6d34971c8af43636f8decccecb326d3ba2b1931caf2f3a8691fd5b9",
    ("wheeled_snake", "uneven"): "3edfd5fd3e5dd44f7c79a47861a1443b34e88d9a3dd6c50482f9e02e9209f303",
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
