"""Graph tests of the follower's stop reasons: stalled (zero command, blocked branch, replan), goal reached."""

from __future__ import annotations

import math

import pytest
from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import PoseStamped, TwistStamped
from nav_msgs.msg import Path
from std_srvs.srv import Trigger

from snake_ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_PUB_QOS, STATUS_QOS
from snake_ros.transforms import path_msg, pose_msg

pytestmark = pytest.mark.graph

_REFUSAL = "goal: unreachable with 0.700 m clearance"  # what the fake planner answers


def _start(ros, **params):
    base = {"output": "cmd_vel", "yaw_offset": 0.0, "angle_tau": 0.0, "kd": 0.0, "pose_timeout": 5.0,
            "stuck_time": 600.0, **params}
    proc = ros.start("path_follower", base)
    cmds = ros.collect(TwistStamped, "cmd_vel", COMMAND_QOS)
    status = ros.collect(DiagnosticStatus, "follower_status", STATUS_QOS)
    blocked = ros.collect(Path, "blocked_branch", COMMAND_QOS)
    plan = ros.node.create_publisher(Path, "plan", LATCHED_QOS)
    pose = ros.node.create_publisher(PoseStamped, "mocap/head_pose", SENSOR_PUB_QOS)
    assert ros.spin_until(lambda: pose.get_subscription_count() > 0 and plan.get_subscription_count() > 0
                          and all(ros.matched(t) for t in ("follower_status", "blocked_branch", "cmd_vel"))), \
        ros.log_of(proc)
    return proc, plan, pose, cmds, status, blocked


def test_orbiting_without_progress_is_stalled_with_a_zero_command_and_a_refused_replan(ros):
    calls = []

    def refuse(_req, resp):
        calls.append(True)
        resp.success, resp.message = False, _REFUSAL
        return resp

    ros.node.create_service(Trigger, "replan", refuse)
    proc, plan, pose, cmds, status, blocked = _start(ros, stall_time=3600.0, stall_progress=0.05,
                                                     stall_distance=0.5)
    plan.publish(path_msg([(0.0, 0.0), (5.0, 0.0)]))
    angle = [math.pi / 2]

    def orbit() -> bool:
        # Around a peg at (1, 0), 0.2 m radius, 0.03 m per pose: moving, never past x = 1.2 m.
        a = angle[0]
        pose.publish(pose_msg(1.0 + 0.2 * math.cos(a), 0.2 * math.sin(a), a + math.pi / 2))
        angle[0] += 0.15
        ros.spin_for(0.05)
        return any(s.message == "stalled" for s in status)

    assert ros.spin_until(orbit, timeout=120.0), ros.log_of(proc)
    stalled = next(s for s in status if s.message == "stalled")
    assert stalled.level == DiagnosticStatus.WARN
    assert "travelled" in {kv.key: kv.value for kv in stalled.values}["stop_reason"]
    assert ros.spin_until(lambda: len(cmds) > 0 and cmds[-1].twist.linear.x == 0.0
                          and cmds[-1].twist.angular.z == 0.0), ros.log_of(proc)
    assert ros.spin_until(lambda: len(blocked) > 0), ros.log_of(proc)
    ends = [(p.pose.position.x, p.pose.position.y) for p in blocked[-1].poses]
    assert ends == [(0.0, 0.0), (5.0, 0.0)]
    assert ros.spin_until(lambda: len(calls) > 0 and "replan refused" in ros.log_of(proc)), ros.log_of(proc)
    log = ros.log_of(proc)
    assert "stalled on branch" in log and "replan requested" in log and _REFUSAL in log


def test_goal_reached_is_logged_once_with_the_position(ros):
    proc, plan, pose, _cmds, status, _blocked = _start(ros)
    plan.publish(path_msg([(0.0, 0.0), (1.0, 0.0)]))

    def reached(n: int):
        def check() -> bool:
            pose.publish(pose_msg(0.95, 0.0, 0.0))
            ros.spin_for(0.05)
            return sum(s.message == "goal_reached" for s in status) >= n
        return check

    assert ros.spin_until(reached(1)), ros.log_of(proc)
    assert ros.spin_until(reached(10)), ros.log_of(proc)  # nine more ticks at the goal
    log = ros.log_of(proc)
    assert log.count("goal reached") == 1
    assert "goal reached at (0.950, 0.000) m after" in log
