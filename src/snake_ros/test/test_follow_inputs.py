"""Inputs of the follow loop: the serpenoid gait steered by ``head_offset``; a y-up motion-capture frame."""

from __future__ import annotations

import math

import pytest
from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import PoseStamped, TwistStamped
from nav_msgs.msg import Path
from scipy.spatial.transform import Rotation
from std_msgs.msg import Float64

from snake_core.robot import load_robot
from snake_ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_PUB_QOS, STATUS_QOS

pytestmark = pytest.mark.graph


def _values(status: DiagnosticStatus) -> dict[str, float]:
    return {kv.key: float(kv.value) for kv in status.values}


def test_serpenoid_gait_takes_a_fresh_head_offset_over_the_cmd_vel_turn(ros):
    serpenoid = load_robot("wheeled_snake").gait("serpenoid")
    node = ros.start("gait_node", {"robot": "wheeled_snake", "gait": "serpenoid", "cmd_timeout": 0.5,
                                   "max_linear": 0.15, "max_angular": 1.0, "max_angular_accel": 100.0})
    state = ros.collect(DiagnosticStatus, "gait_state", STATUS_QOS)
    cmd = ros.node.create_publisher(TwistStamped, "cmd_vel", COMMAND_QOS)
    offset = ros.node.create_publisher(Float64, "head_offset", COMMAND_QOS)
    assert ros.spin_until(lambda: cmd.get_subscription_count() > 0 and offset.get_subscription_count() > 0), \
        ros.log_of(node)
    twist = TwistStamped()
    twist.twist.linear.x, twist.twist.angular.z = 0.1, 0.4

    def native(offset_value: float | None) -> dict[str, float] | None:
        twist.header.stamp = ros.node.get_clock().now().to_msg()
        cmd.publish(twist)
        if offset_value is not None:
            offset.publish(Float64(data=offset_value))
        ros.spin_for(0.05)
        return _values(state[-1]) if state else None

    # head_offset given: it is the gait's offset (clipped to offset_max); cmd_vel still sets the wave
    want = -serpenoid["offset_max"]
    assert ros.spin_until(lambda: (v := native(-5.0)) is not None and v["head_offset"] == pytest.approx(want)), \
        ros.log_of(node)
    wave = 0.1 / serpenoid["k"]  # omega = v / k once the speed ramp is done
    assert ros.spin_until(lambda: (v := native(0.3)) is not None and v["head_offset"] == pytest.approx(0.3)
                          and v["omega"] == pytest.approx(wave, rel=1e-6))
    # no head_offset for longer than cmd_timeout: the cmd_vel turn again, turn_gain x yaw rate
    turn = serpenoid["turn_gain"] * 0.4
    assert ros.spin_until(lambda: (v := native(None)) is not None and v["head_offset"] == pytest.approx(turn))


def test_y_up_capture_frame_is_turned_to_the_z_up_world(ros):
    """OptiTrack's y-up frame: a head yawed +90 deg about the vertical (y) axis faces world +y."""
    proc = ros.start("path_follower", {"mocap_y_up": True, "reference_offset": 0.5, "yaw_offset": 0.0,
                                       "angle_tau": 0.0, "kd": 0.0, "goal_tolerance": 0.1})
    status = ros.collect(DiagnosticStatus, "follower_status", STATUS_QOS)
    plan = ros.node.create_publisher(Path, "plan", LATCHED_QOS)
    pose = ros.node.create_publisher(PoseStamped, "mocap/head_pose", SENSOR_PUB_QOS)
    assert ros.spin_until(lambda: pose.get_subscription_count() > 0), ros.log_of(proc)
    goal = PoseStamped()
    goal.pose.position.y = 0.55  # world: 0.05 m beyond the tracked point (0, 0.5)
    start = PoseStamped()
    start.pose.orientation.w = 1.0
    path = Path(poses=[start, goal])
    path.header.frame_id = "world"
    plan.publish(path)
    msg = PoseStamped()
    msg.pose.position.y = 0.03  # 3 cm above the floor in the y-up frame
    q = Rotation.from_euler("y", math.pi / 2).as_quat()  # head x axis: x_m -> -z_m, i.e. world +y
    msg.pose.orientation.x, msg.pose.orientation.y, msg.pose.orientation.z, msg.pose.orientation.w = \
        (float(v) for v in q)

    def reached() -> bool:
        pose.publish(msg)
        ros.spin_for(0.05)
        return any(s.message == "goal_reached" for s in status)

    assert ros.spin_until(reached), ros.log_of(proc)
