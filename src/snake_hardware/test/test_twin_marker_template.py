"""The twin's head markers are the robot YAML's ``following.marker_template``, and the follower's fit accepts them."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from snake_core.following.follower import FollowerStatus
from snake_core.following.loop import run_follow_loop
from snake_core.following.synthetic_mocap import MocapConfig, MocapModel
from snake_core.gait import make_gait
from snake_core.robot import load_robot
from snake_hardware.sim.twin import SimTwin

_TWIN_NODE_NOISE_M = 0.0005  # m, twin_node's default mocap_position_noise_m
_TWIN_NODE_ORIENTATION_NOISE_RAD = 0.002  # rad, twin_node's default mocap_orientation_noise_rad


def _markers_in_head_frame(twin: SimTwin) -> np.ndarray:
    pos, quat = twin.head_pose()  # quat (w, x, y, z)
    rot = Rotation.from_quat([quat[1], quat[2], quat[3], quat[0]])
    return rot.inv().apply(twin.head_markers() - pos)


@pytest.mark.parametrize("robot", ["tsnake", "wheeled_snake"])
def test_the_twin_carries_the_markers_of_its_robot_yaml(robot: str) -> None:
    model = load_robot(robot)
    twin = SimTwin(model, "flat")
    twin.set_targets(np.full(len(twin.joint_names), 0.3))
    twin.advance(0.5)  # moved and turned: the markers ride on the head
    np.testing.assert_allclose(_markers_in_head_frame(twin), np.array(model.following_presets.marker_template),
                               atol=1e-9)


def _loop(template: np.ndarray):
    model = load_robot("tsnake")
    twin = SimTwin(model, "flat")
    presets = model.following_presets
    dt = 0.02
    mocap = MocapModel(MocapConfig(position_noise_m=_TWIN_NODE_NOISE_M,
                                   orientation_noise_rad=_TWIN_NODE_ORIENTATION_NOISE_RAD, rate_hz=1.0 / dt),
                       np.random.default_rng(0))
    pos, _ = twin.head_pose()
    path = np.array([pos[:2], pos[:2] + np.array([0.0, 5.0])])
    return run_follow_loop(twin, make_gait(presets.gait, model), path, template, drive=presets.drive,
                           yaw_offset=presets.yaw_offset, reference_offset=presets.reference_offset, dt=dt,
                           time_limit=3.0, follower=presets.follower_config(), mocap=mocap)


def test_the_follower_fit_accepts_the_tsnake_markers_of_the_twin() -> None:
    res = _loop(np.array(load_robot("tsnake").following_presets.marker_template))
    assert res.status is FollowerStatus.FOLLOWING  # ran the whole 3 s on measured poses
    assert res.mocap["rejected_fit"] == 0
    assert res.mocap["accepted"] >= 140  # 150 captures in 3 s at 50 Hz, all but the start-up few


def test_the_wheeled_snake_template_does_not_fit_the_tsnake_markers() -> None:
    res = _loop(np.array(load_robot("wheeled_snake").following_presets.marker_template))
    assert res.mocap["accepted"] == 0
    assert res.mocap["rejected_fit"] > 100
