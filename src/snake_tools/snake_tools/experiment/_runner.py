"""Glue for the experiments: a gait in the loop of the MuJoCo twin, with a recorded trace.

Not a command (the leading underscore keeps it out of ``snake experiment``). The math
of the analysis lives in :mod:`snake_core.analysis`; the physics in
:mod:`snake_hardware.sim`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from snake_core.analysis import body_heading
from snake_core.control import CONTROL_PERIOD_S
from snake_core.errors import WorldConfigError
from snake_core.gait import Gait
from snake_core.robot import RobotModel
from snake_core.schema import load_yaml
from snake_core.urdf import link_names
from snake_hardware.sim.twin import SimTwin
from snake_hardware.sim.worlds import World, load_world, resolve_world_path, world_from_dict

CONTROL_DT = CONTROL_PERIOD_S  # s


@dataclass
class Trace:
    """What one run recorded, one row per control period."""

    t: list[float] = field(default_factory=list)
    head: list[np.ndarray] = field(default_factory=list)
    com: list[np.ndarray] = field(default_factory=list)
    heading: list[float] = field(default_factory=list)
    command: list[tuple[float, ...]] = field(default_factory=list)

    def arrays(self) -> dict[str, np.ndarray]:
        """The trace as arrays; ``heading`` unwrapped."""
        return {
            "t": np.asarray(self.t),
            "head": np.asarray(self.head),
            "com": np.asarray(self.com),
            "heading": np.unwrap(np.asarray(self.heading)),
        }


def world_with_seed(name: str, seed: int, feature_length: float | None = None) -> World:
    """A world file with its terrain seed (and bump size, m) replaced; flat worlds unchanged."""
    path = resolve_world_path(name)
    data = load_yaml(Path(path), WorldConfigError, "world description")
    ground = data.get("ground") if isinstance(data, dict) else None
    if isinstance(ground, dict) and ground.get("type") == "heightfield":
        data["ground"]["seed"] = int(seed)
        if feature_length is not None:
            data["ground"]["feature_length"] = float(feature_length)
        return world_from_dict(data, source=Path(path))
    return load_world(path)


class GaitRun:
    """Runs a gait on a twin under a command policy and records a :class:`Trace`.

    Args:
        twin: The simulation.
        gait: A gait for the twin's robot.
    """

    def __init__(self, twin: SimTwin, gait: Gait) -> None:
        self.twin, self.gait = twin, gait
        m = twin.model
        self._bodies = np.array([mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n) for n in link_names(twin.robot)])
        self.trace = Trace()

    def body_points(self) -> np.ndarray:
        """World positions of the body links, head to tail, m."""
        return self.twin.data.xpos[self._bodies].copy()

    def run(self, policy: Callable[[GaitRun], tuple[float, ...] | None], max_time: float) -> bool:
        """Step until ``policy`` returns None (done: True) or ``max_time`` s pass (False)."""
        tw = self.twin
        t_end = tw.time + max_time
        while tw.time < t_end - 1e-9:
            self._record()
            command = policy(self)
            if command is None:
                return True
            self.trace.command.append(tuple(command))
            q = self.gait.step(CONTROL_DT, command)
            tw.set_targets(q)
            tw.step(tw.substeps)
        self._record()
        return False

    def _record(self) -> None:
        tw = self.twin
        self.trace.t.append(tw.time)
        self.trace.head.append(tw.head_pose()[0][:2])
        self.trace.com.append(tw.centre_of_mass()[:2])
        self.trace.heading.append(body_heading(self.body_points()))

    # helpers for policies
    def heading_change(self) -> float:
        """Unwrapped body heading change since the start of the trace, rad."""
        h = np.unwrap(np.asarray(self.trace.heading))
        return float(h[-1] - h[0])

    def com_displacement(self) -> float:
        """Planar distance of the centre of mass from where the trace started, m."""
        return float(np.linalg.norm(self.trace.com[-1] - self.trace.com[0]))


def make_twin(robot: RobotModel, world: World | str | None, seed: int = 0) -> SimTwin:
    """A twin at the world's spawn pose, 003's control period."""
    twin = SimTwin(robot, world, control_dt=CONTROL_DT)
    twin.reset(seed=seed)
    return twin


def savefig(fig: Any, out: Path, name: str) -> str:
    """Save a matplotlib figure as PNG into ``out``; returns the path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    fig.savefig(path, dpi=120)
    return str(path)
