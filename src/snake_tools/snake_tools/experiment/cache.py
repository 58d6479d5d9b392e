"""Per-process cache of what every trial loads: robot models, twin physics and worlds.

A worker process runs many trials of one study or experiment, each of which used to parse
the same robot YAML (and its calibration overlay) and world YAML again: for a short gait
trial that parsing was a fifth of its time. Here each is loaded once per process and file
version: the key is the trial's spec (robot or world name or path, calibration target)
together with the files' modification stamps (``st_mtime_ns``, size), so an edited file is
read again, also by a long-lived ``dask worker``. The cached objects are frozen dataclasses
(:class:`~snake_core.robot.RobotModel`, :class:`~snake_core.twin_params.TwinParams`,
:class:`~snake_hardware.sim.worlds.World`), so sharing them between trials cannot carry
state from one trial into the next: a trial gets exactly what a fresh load would give.
"""

from __future__ import annotations

import functools
from pathlib import Path

from snake_core.robot import (
    RobotModel,
    calibration_path,
    calibration_target,
    load_robot,
    load_twin_params,
    resolve_robot_path,
)
from snake_core.twin_params import TwinParams
from snake_hardware.sim.worlds import World, load_world, resolve_world_path

_ENTRIES = 32  # file versions kept per kind (a study uses one robot and one world)

Stamp = tuple[int, int] | None
"""A file's ``(st_mtime_ns, st_size)``, None when it does not exist."""


def _stamp(path: Path) -> Stamp:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def robot(path: str | Path) -> RobotModel:
    """:func:`snake_core.robot.load_robot` of ``path`` (calibrated, the current target), once per file version."""
    p = resolve_robot_path(path)
    target = calibration_target()
    name = _robot_name(str(p), _stamp(p))
    return _robot(str(p), _stamp(p), target, _stamp(calibration_path(name, target)))


def twin_params(robot_name: str) -> TwinParams:
    """:func:`snake_core.robot.load_twin_params` of ``robot_name`` (the current target), once per file version."""
    target = calibration_target()
    return _twin_params(robot_name, target, _stamp(calibration_path(robot_name, target)))


def world(path: str | Path) -> World:
    """:func:`snake_hardware.sim.worlds.load_world` of ``path``, once per file version."""
    p = resolve_world_path(path)
    return _world(str(p), _stamp(p))


def clear() -> None:
    """Forget every cached entry."""
    for f in (_robot_name, _robot, _twin_params, _world):
        f.cache_clear()


@functools.lru_cache(maxsize=_ENTRIES)
def _robot_name(path: str, stamp: Stamp) -> str:
    return load_robot(path, calibrated=False).name


@functools.lru_cache(maxsize=_ENTRIES)
def _robot(path: str, stamp: Stamp, target: str, calibration: Stamp) -> RobotModel:
    return load_robot(path, target=target)


@functools.lru_cache(maxsize=_ENTRIES)
def _twin_params(robot_name: str, target: str, calibration: Stamp) -> TwinParams:
    return load_twin_params(robot_name, target)[0]


@functools.lru_cache(maxsize=_ENTRIES)
def _world(path: str, stamp: Stamp) -> World:
    return load_world(path)
