"""The follow loop of follow.launch.py in the twin: twin + gait + planner + follower processes over DDS.

The processes, parameters and params files are those of
:func:`snake_ros.following.follow_nodes`, which the launch file starts too, with the twin
paced on the wall clock (at a quarter of real time). Not lock-step: there the twin and
the gait race ahead of the follower and the planner, which run on their own, as fast as
the CPU lets them, so a loaded machine would starve the follower of simulated time (its
commands then arrive late in simulated time and the gait's deadman stops the robot).
Paced, every node sees the same clock a robot would, with margin to spare. A goal
straight ahead of the tracked point must be reached for both robots: the wheeled snake
with the serpenoid gait steered by ``head_offset``, the T-Snake with ``cmd_vel`` to its
rolling gait, tracking its drive centre 0.63 m along the body.

The launch file's default layout, the gait node, the planner and the follower in one
``robot_stack`` process beside the twin (:func:`snake_ros.following.one_process`), must plan
from the tracked point and command ``cmd_vel`` towards a goal.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import PoseStamped, TwistStamped
from nav_msgs.msg import Path as PathMsg
from std_msgs.msg import Float64

from snake_core.following.head_pose import pose_from_rigid_body
from snake_core.following.loop import reference_pose
from snake_core.robot import load_robot
from snake_ros.following import follow_nodes, one_process
from snake_ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS, STATUS_QOS

pytestmark = pytest.mark.graph

_GOAL_AHEAD = {"wheeled_snake": 0.6, "tsnake": 0.5}  # m, straight ahead of the tracked point
_LOOP_BOUND_S = 600.0  # s (wall): a failure bound only, for a loaded machine
# Simulated seconds per wall second. Below real time, so that the follower and the planner,
# which run on their own, keep their real-time margin when the machine is loaded several
# times over (at real time a loaded machine leaves the wheeled snake's head-offset steering
# late, and it drifts sideways).
_SIM_SPEED = 0.25


def _start_loop(ros, repo_root: Path, tmp_path: Path, robot: str) -> dict[str, object]:
    procs = {}
    for spec in follow_nodes(robot, "twin", "", twin_mode="fast"):
        params = dict(spec.params)
        if spec.name == "twin_node":
            params["speed_factor"] = _SIM_SPEED
        override = tmp_path / f"{spec.name}.yaml"
        override.write_text(yaml.safe_dump({spec.name: {"ros__parameters": params}}))
        args = [a for f in spec.params_files for a in ("--params-file", str(repo_root / "config" / f))]
        args += ["--params-file", str(override)]  # after the shipped file, as in the launch file
        for src, dst in spec.remappings:
            args += ["-r", f"{src}:={dst}"]
        procs[spec.name] = ros.start(spec.executable, name=spec.name, extra_args=args)
    return procs


def _planar(msg: PoseStamped) -> tuple[float, float, float]:
    p, q = msg.pose.position, msg.pose.orientation
    return pose_from_rigid_body([p.x, p.y, p.z], [q.x, q.y, q.z, q.w])


# The wheeled snake steers by the head offset, whose effect depends on when in the wave it
# arrives: with two full test suites sharing the 2 cores it drifted sideways and got stuck
# (passes alone and beside a busy loop), so it runs with `-m slow` only.
@pytest.mark.parametrize("robot", [pytest.param("wheeled_snake", marks=pytest.mark.slow), "tsnake"])
def test_follow_loop_of_the_launch_file_reaches_a_goal_in_the_twin(ros, repo_root, tmp_path, robot):
    presets = load_robot(robot).following_presets
    truth = ros.collect(PoseStamped, "ground_truth/head_pose", SENSOR_QOS)
    plans = ros.collect(PathMsg, "plan", LATCHED_QOS)
    status = ros.collect(DiagnosticStatus, "follower_status", STATUS_QOS)
    offsets = ros.collect(Float64, "head_offset", COMMAND_QOS)
    procs = _start_loop(ros, repo_root, tmp_path, robot)

    def logs() -> str:
        return "\n".join(f"--- {n}\n{ros.log_of(p)[-3000:]}" for n, p in procs.items())

    assert ros.spin_until(lambda: len(truth) > 0, timeout=120.0), logs()
    x, y, yaw = _planar(truth[-1])
    rx, ry, heading = reference_pose((x, y, yaw + presets.yaw_offset), presets.yaw_offset, presets.reference_offset)
    goal = np.array([rx, ry]) + _GOAL_AHEAD[robot] * np.array([math.cos(heading), math.sin(heading)])
    pub = ros.node.create_publisher(PoseStamped, "goal_pose", COMMAND_QOS)
    msg = PoseStamped()
    msg.header.frame_id = "world"
    msg.pose.position.x, msg.pose.position.y = float(goal[0]), float(goal[1])
    msg.pose.orientation.w = 1.0

    def planned_from_the_tracked_point() -> bool:
        # The planner starts from the tracked point once it has a head pose: resend until then.
        if plans and len(plans[-1].poses) >= 2:
            first = plans[-1].poses[0].pose.position
            if math.hypot(first.x - rx, first.y - ry) < 0.05:
                return True
        if pub.get_subscription_count() > 0:
            pub.publish(msg)
            ros.spin_for(0.5)
        return False

    assert ros.spin_until(planned_from_the_tracked_point, timeout=120.0), logs()
    assert ros.spin_until(lambda: any(s.message == "goal_reached" for s in status), timeout=_LOOP_BOUND_S), logs()
    assert not any(s.message in ("stuck", "stalled") for s in status)
    # The true tracked point (ground truth, not the follower's estimate) is at the goal.
    ros.spin_for(0.2)
    x, y, yaw = _planar(truth[-1])
    tx, ty, _ = reference_pose((x, y, yaw), 0.0, presets.reference_offset)
    tolerance = presets.follower_config().goal_tolerance
    assert math.hypot(tx - goal[0], ty - goal[1]) < tolerance + 0.1
    # The serpenoid robot was steered by the head offset, the T-Snake by cmd_vel alone.
    assert (len(offsets) > 0) == (presets.drive == "offset")


def _start_one_process(ros, repo_root: Path, tmp_path: Path, robot: str) -> dict[str, object]:
    """The twin in its own process, the gait, planner and follower in one robot_stack process, as launched."""
    own, stack = one_process(follow_nodes(robot, "twin", "", twin_mode="fast"))
    assert stack is not None
    procs = {}
    for spec in own:
        params = dict(spec.params, speed_factor=_SIM_SPEED) if spec.name == "twin_node" else dict(spec.params)
        override = tmp_path / f"{spec.name}.yaml"
        override.write_text(yaml.safe_dump({spec.name: {"ros__parameters": params}}))
        args = [a for f in spec.params_files for a in ("--params-file", str(repo_root / "config" / f))]
        procs[spec.name] = ros.start(spec.executable, name=spec.name,
                                     extra_args=[*args, "--params-file", str(override)])
    override = tmp_path / "robot_stack.yaml"
    override.write_text(yaml.safe_dump({f"/**/{n}": {"ros__parameters": v} for n, v in stack.overrides.items()}))
    args = [a for f in stack.params_files for a in ("--params-file", str(repo_root / "config" / f))]
    args += ["--params-file", str(override)]  # after the shipped files, as in the launch file
    for src, dst in stack.remappings:
        args += ["-r", f"{src}:={dst}"]
    procs["robot_stack"] = ros.start("robot_stack", extra_args=[*args, "--", *stack.arguments])
    return procs


def test_one_process_follow_stack_plans_and_commands_cmd_vel_for_a_goal(ros, repo_root, tmp_path):
    """follow.launch.py's default layout: one robot_stack process plans from the tracked point and drives."""
    robot = "tsnake"
    presets = load_robot(robot).following_presets
    truth = ros.collect(PoseStamped, "ground_truth/head_pose", SENSOR_QOS)
    plans = ros.collect(PathMsg, "plan", LATCHED_QOS)
    commands = ros.collect(TwistStamped, "cmd_vel", COMMAND_QOS)
    procs = _start_one_process(ros, repo_root, tmp_path, robot)

    def logs() -> str:
        return "\n".join(f"--- {n}\n{ros.log_of(p)[-3000:]}" for n, p in procs.items())

    assert ros.spin_until(lambda: len(truth) > 0, timeout=120.0), logs()
    x, y, yaw = _planar(truth[-1])
    rx, ry, heading = reference_pose((x, y, yaw + presets.yaw_offset), presets.yaw_offset, presets.reference_offset)
    goal = np.array([rx, ry]) + _GOAL_AHEAD[robot] * np.array([math.cos(heading), math.sin(heading)])
    pub = ros.node.create_publisher(PoseStamped, "goal_pose", COMMAND_QOS)
    msg = PoseStamped()
    msg.header.frame_id = "world"
    msg.pose.position.x, msg.pose.position.y = float(goal[0]), float(goal[1])
    msg.pose.orientation.w = 1.0

    def planned_from_the_tracked_point() -> bool:
        if plans and len(plans[-1].poses) >= 2:
            first, last = plans[-1].poses[0].pose.position, plans[-1].poses[-1].pose.position
            if math.hypot(first.x - rx, first.y - ry) < 0.05 and math.hypot(last.x - goal[0], last.y - goal[1]) < 0.05:
                return True
        if pub.get_subscription_count() > 0:  # the planner needs a head pose first: resend until it plans
            pub.publish(msg)
            ros.spin_for(0.5)
        return False

    assert ros.spin_until(planned_from_the_tracked_point, timeout=120.0), logs()
    # The goal is straight ahead: the follower drives forwards (the T-Snake by cmd_vel alone).
    assert ros.spin_until(lambda: any(c.twist.linear.x > 0.0 for c in commands), timeout=_LOOP_BOUND_S), logs()
    # The three nodes are one process: the twin and the robot_stack are all that was started.
    # Names reach the graph apart from the endpoints whose messages flowed: waited for.
    assert ros.spin_until(lambda: {"gait_node", "planner_node", "path_follower", "twin_node"}
                          <= set(ros.node.get_node_names())), ros.node.get_node_names()
    assert set(procs) == {"twin_node", "robot_stack"}
    for name in ("robot_stack", "twin_node"):
        assert ros.stop(procs[name]) == 0, logs()
    assert "Traceback" not in logs()
