"""The core's chain kinematics against MuJoCo's own body positions (two independent implementations)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from snake_core.kinematics import chain_points
from snake_core.robot import load_robot
from snake_core.urdf import link_names
from snake_hardware.sim.twin import SimTwin


@pytest.mark.parametrize("name", ["tsnake", "wheeled_snake"])
def test_chain_points_match_mujoco_bodies(name):
    robot = load_robot(name)
    twin = SimTwin(robot, "flat")
    rng = np.random.default_rng(7)
    lo = np.array([max(j.lower, -1.2) for j in robot.joints])
    hi = np.array([min(j.upper, 1.2) for j in robot.joints])
    q = rng.uniform(lo, hi)
    twin.reset(targets=q, pose=(0.3, -0.2, 0.7))
    pos, quat = twin.base_pose()
    points = chain_points(robot, pos, quat, twin.joint_positions())
    bodies = [mujoco.mj_name2id(twin.model, mujoco.mjtObj.mjOBJ_BODY, n) for n in link_names(robot)]
    # Each child link's frame origin is its joint: points[1:-1] are the bodies after the head.
    assert np.abs(points[1:-1] - twin.data.xpos[bodies[1:]]).max() < 1e-6
    assert np.abs(points[0] - twin.data.xpos[bodies[0]]).max() < 1e-6
