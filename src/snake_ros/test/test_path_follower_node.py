"""Graph tests of the path follower node: real process over DDS (the ``ros`` fixture)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import Pose, PoseArray, PoseStamped, TwistStamped
from nav_msgs.msg import Path
from scipy.spatial.transform import Rotation
from std_msgs.msg import Float64

from snake_core.following.follower import FollowerConfig, PathFollower
from snake_ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_PUB_QOS, STATUS_QOS
from snake_ros.transforms import path_msg, pose_msg

pytestmark = pytest.mark.graph

TEMPLATE = np.array([[0.024, 0.0, 0.0], [0.096, 0.014, 0.0], [0.096, -0.014, 0.0]])


def start(ros, **params):
    base = {"output": "both", "rate_hz": 20, "pose_timeout": 0.5, "yaw_offset": 0.0, "angle_tau": 0.0,
            "kd": 0.0, "kp": 1.0}
    base.update(params)
    proc = ros.start("path_follower", base)
    cmds = ros.collect(TwistStamped, "cmd_vel", COMMAND_QOS)
    offsets = ros.collect(Float64, "head_offset", COMMAND_QOS)
    status = ros.collect(DiagnosticStatus, "follower_status", STATUS_QOS)
    plan = ros.node.create_publisher(Path, "plan", LATCHED_QOS)
    pose = ros.node.create_publisher(PoseStamped, "mocap/head_pose", SENSOR_PUB_QOS)
    assert ros.spin_until(lambda: pose.get_subscription_count() > 0 and plan.get_subscription_count() > 0), \
        ros.log_of(proc)
    return proc, plan, pose, cmds, offsets, status


def test_head_pose_gives_the_core_pd_command_and_dropout_stops(ros):
    proc, plan, pose, cmds, offsets, status = start(ros)
    plan.publish(path_msg([(0.0, 0.0), (5.0, 0.0)]))
    head = (0.0, -0.3, 0.0)  # path to the left of the head
    # with kd = 0 and no angle filter the command is P * Delta-theta of the core follower
    ref = PathFollower(FollowerConfig(kp=1.0, kd=0.0, angle_tau=0.0))
    ref.set_path(np.array([[0.0, 0.0], [5.0, 0.0]]))
    want = ref.update(0.0, head)

    def commanded() -> bool:
        # The pose again until the answer is heard on both outputs: the follower commands only while
        # poses are fresh, and its volatile publishers may match the probe after the first poses.
        pose.publish(pose_msg(*head))
        ros.spin_for(0.05)
        return (len(cmds) > 0 and abs(cmds[-1].twist.angular.z - want.angular) < 1e-9
                and len(offsets) > 0 and offsets[-1].data == pytest.approx(want.head_offset))

    assert ros.spin_until(commanded), ros.log_of(proc)
    assert cmds[-1].twist.linear.x == pytest.approx(want.linear)
    assert offsets[-1].data == pytest.approx(want.head_offset)
    assert want.angular > 0 and want.head_offset < 0
    # A status sent while following: every no_pose after it comes from the pose dropout (the
    # follower also says no_pose before its first pose).
    assert ros.spin_until(lambda: any(s.message == "following" for s in status)), ros.log_of(proc)
    followed = max(i for i, s in enumerate(status) if s.message == "following")
    # stop publishing poses: after the timeout the command is zero and the status says no_pose
    assert ros.spin_until(lambda: len(cmds) > 0 and cmds[-1].twist.linear.x == 0.0 and
                          cmds[-1].twist.angular.z == 0.0)
    assert ros.spin_until(lambda: any(s.message == "no_pose" for s in status[followed + 1:]))


def test_marker_triangle_pose_and_outlier_rejection(ros):
    proc, plan, _pose, cmds, _offsets, status = start(ros)
    markers = ros.node.create_publisher(PoseArray, "mocap/markers", SENSOR_PUB_QOS)
    assert ros.spin_until(lambda: markers.get_subscription_count() > 0)
    plan.publish(path_msg([(0.0, 0.0), (0.0, 5.0)]))
    rot = Rotation.from_euler("z", math.pi / 2)  # head facing +y, along the path

    def send(offset):
        arr = PoseArray()
        for p in rot.apply(TEMPLATE) + offset:
            q = Pose()
            q.position.x, q.position.y, q.position.z = (float(v) for v in p)
            arr.poses.append(q)
        markers.publish(arr)

    def moving() -> bool:
        # The markers again until the command is heard (it flows only while the pose is fresh).
        send(np.array([0.0, 0.0, 0.1]))
        ros.spin_for(0.05)
        return len(cmds) > 0 and cmds[-1].twist.linear.x > 0.1

    assert ros.spin_until(moving), ros.log_of(proc)
    assert abs(cmds[-1].twist.angular.z) < 0.2
    for _ in range(5):
        send(np.array([3.0, 0.0, 0.1]))  # a 3 m jump in 50 ms: rejected
        ros.spin_for(0.05)

    def rejected():
        vals = [{kv.key: kv.value for kv in s.values} for s in status]
        return bool(vals) and int(vals[-1]["mocap_rejected_jump"]) >= 3

    assert ros.spin_until(rejected)
    assert abs(cmds[-1].twist.angular.z) < 0.2  # still heading along the path, not towards x = 3


def test_empty_plan_stops_and_bad_output_parameter_refused(ros):
    from rcl_interfaces.msg import Parameter as ParameterMsg
    from rcl_interfaces.msg import ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    proc, plan, pose, cmds, _offsets, status = start(ros)
    plan.publish(path_msg([(0.0, 0.0), (5.0, 0.0)]))

    def with_pose(done: Callable[[], bool]) -> Callable[[], bool]:
        # The pose again and again while waiting: the follower commands only while poses are fresh,
        # and a pose dropout would give a zero command of its own.
        def check() -> bool:
            pose.publish(pose_msg(0.0, 0.0, 0.0))
            ros.spin_for(0.05)
            return done()
        return check

    assert ros.spin_until(with_pose(lambda: len(cmds) > 0 and cmds[-1].twist.linear.x > 0)), ros.log_of(proc)
    plan.publish(path_msg([]))
    # The zero command of the empty plan: the status idle, not no_pose (a dropout), says which it is.
    assert ros.spin_until(with_pose(lambda: cmds[-1].twist.linear.x == 0.0 and status[-1].message == "idle")), \
        ros.log_of(proc)
    req = SetParameters.Request()
    req.parameters = [ParameterMsg(name="lookahead", value=ParameterValue(type=ParameterType.PARAMETER_DOUBLE,
                                                                          double_value=-1.0)),
                      ParameterMsg(name="output", value=ParameterValue(type=ParameterType.PARAMETER_STRING,
                                                                       string_value="warp"))]
    answer = ros.call(SetParameters, "/path_follower/set_parameters", req)
    assert answer is not None
    assert not any(r.successful for r in answer.response.results)


def test_both_nodes_start_from_the_shipped_parameter_file(ros, repo_root):
    params_file = str(repo_root / "config" / "path_following.yaml")
    planner = ros.start("planner_node", extra_args=["--params-file", params_file])
    follower = ros.start("path_follower", extra_args=["--params-file", params_file])
    status = ros.collect(DiagnosticStatus, "follower_status", STATUS_QOS)
    plans = ros.collect(Path, "plan", LATCHED_QOS)
    goal = ros.node.create_publisher(PoseStamped, "goal_pose", COMMAND_QOS)
    assert ros.spin_until(lambda: goal.get_subscription_count() > 0), ros.log_of(planner)
    goal.publish(pose_msg(2.4, 0.1, 0.0))
    assert ros.spin_until(lambda: len(plans) > 0 and len(plans[-1].poses) >= 2), ros.log_of(planner)
    # the follower has the plan but no head pose yet: it reports no_pose
    assert ros.spin_until(lambda: any(s.message == "no_pose" for s in status)), ros.log_of(follower)
