"""Planner and follower as the follow launch runs them: robot presets, latched topics, diagnostics, TF, viewer."""

from __future__ import annotations

import math

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PoseArray, PoseStamped
from nav_msgs.msg import Path
from rcl_interfaces.srv import GetParameters
from scipy.spatial.transform import Rotation
from sensor_msgs.msg import JointState

from snake_core.frames import TransformFields
from snake_core.robot import load_robot
from snake_ros.following import follow_nodes, follower_presets
from snake_ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_PUB_QOS, SENSOR_QOS, STATUS_QOS
from snake_ros.transforms import path_msg, transform_msg

_VOLATILE = COMMAND_QOS  # an ordinary publisher: reliable, volatile


def _params(ros, node: str, names: list[str]) -> dict[str, object]:
    client = ros.node.create_client(GetParameters, f"/{node}/get_parameters")
    assert ros.spin_until(client.service_is_ready, timeout=30.0)
    answer = ros.call(GetParameters, f"/{node}/get_parameters", GetParameters.Request(names=names))
    assert answer is not None, f"/{node}/get_parameters: no answer"
    out = {}
    for name, v in zip(names, answer.response.values, strict=True):
        out[name] = {1: v.bool_value, 2: v.integer_value, 3: v.double_value, 4: v.string_value}[v.type]
    return out


def test_transform_message_carries_the_core_fields():
    fields = TransformFields("world", "head", 3_250_000_001, (1.0, -2.0, 0.5), (0.0, 0.0, 0.6, 0.8))
    msg = transform_msg(fields)
    assert (msg.header.frame_id, msg.child_frame_id) == ("world", "head")
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (3, 250_000_001)
    t, r = msg.transform.translation, msg.transform.rotation
    assert (t.x, t.y, t.z, r.x, r.y, r.z, r.w) == (1.0, -2.0, 0.5, 0.0, 0.0, 0.6, 0.8)


def test_launch_specs_follow_the_robot_presets():
    tsnake = {s.name: s for s in follow_nodes("tsnake", "dynamixel", mocap_topic="/vrpn_mocap/head/pose")}
    assert list(tsnake) == ["bridge_node", "gait_node", "planner_node", "path_follower"]  # hardware first
    assert tsnake["gait_node"].params["gait"] == "rolling"
    assert "use_sim_time" not in tsnake["bridge_node"].params  # hardware never runs on simulated time
    assert not any("use_sim_time" in s.params for s in tsnake.values())
    for name in ("planner_node", "path_follower"):
        assert tsnake[name].remappings == (("mocap/head_pose", "/vrpn_mocap/head/pose"),)
    twin = {s.name: s for s in follow_nodes("wheeled_snake", "twin", "pegs")}
    assert twin["twin_node"].params["world"] == twin["planner_node"].params["world"] == "pegs"
    assert all(s.params.get("use_sim_time") for n, s in twin.items() if n != "twin_node")
    assert "use_sim_time" not in twin["twin_node"].params  # the twin is the clock
    assert twin["gait_node"].params["gait"] == "serpenoid"
    assert follower_presets(load_robot("wheeled_snake").following_presets)["output"] == "both"
    # one source of world -> head: the twin's ground truth, or the follower's measured pose
    assert twin["path_follower"].params["publish_tf"] is False and tsnake["path_follower"].params["publish_tf"]
    with pytest.raises(ValueError, match="backend"):
        follow_nodes("tsnake", "mujoco")


@pytest.mark.graph
def test_follower_takes_the_robot_presets_and_an_override_wins(ros):
    proc = ros.start("path_follower", {"robot": "tsnake", "kp": 0.9})
    diag = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    names = ["output", "yaw_offset", "reference_offset", "max_linear", "angle_tau", "kp", "lookahead"]
    got = _params(ros, "path_follower", names)
    presets = load_robot("tsnake").following_presets
    assert got["output"] == "cmd_vel"
    assert got["yaw_offset"] == pytest.approx(presets.yaw_offset)
    assert got["reference_offset"] == pytest.approx(0.63)
    assert (got["max_linear"], got["angle_tau"]) == (0.092, 2.0)
    assert got["kp"] == 0.9  # given with -p: wins over the preset and the default
    assert got["lookahead"] == 0.4  # not in the presets: the table's default
    # status for the diagnostic aggregator: named after the node, the robot as hardware id
    assert ros.spin_until(lambda: len(diag) > 0), ros.log_of(proc)
    entry = diag[-1].status[0]
    assert (entry.name, entry.hardware_id) == ("path_follower: path following", "tsnake")
    assert "TF off" in ros.log_of(proc)  # tf2_msgs is not on PyPI: said once, the node runs


@pytest.mark.graph
def test_reference_offset_parameter_is_accepted_and_moves_the_tracked_point(ros):
    """-p reference_offset: the follower steers the point 0.5 m along the head's x axis."""
    proc = ros.start("path_follower", {"reference_offset": 0.5, "yaw_offset": 0.0, "angle_tau": 0.0, "kd": 0.0,
                                       "kp": 1.0, "goal_tolerance": 0.1})
    status = ros.collect(DiagnosticStatus, "follower_status", STATUS_QOS)
    plan = ros.node.create_publisher(Path, "plan", LATCHED_QOS)
    pose = ros.node.create_publisher(PoseStamped, "mocap/head_pose", SENSOR_PUB_QOS)
    assert ros.spin_until(lambda: pose.get_subscription_count() > 0), ros.log_of(proc)
    plan.publish(path_msg([(0.0, 0.0), (0.55, 0.0)]))
    # head at the origin facing +x: the tracked point is at (0.5, 0), within 0.1 m of the goal
    msg = PoseStamped()
    msg.pose.orientation.w = 1.0

    def reached() -> bool:
        pose.publish(msg)
        ros.spin_for(0.05)
        return any(s.message == "goal_reached" for s in status)

    assert ros.spin_until(reached), ros.log_of(proc)


@pytest.mark.graph
def test_a_volatile_plan_publisher_reaches_the_follower_and_a_latched_one_is_heard_once(ros):
    plan_latched = ros.node.create_publisher(Path, "plan", LATCHED_QOS)
    plan_latched.publish(path_msg([(0.0, 0.0), (1.0, 0.0)]))  # before the follower exists
    proc = ros.start("path_follower")
    status = ros.collect(DiagnosticStatus, "follower_status", STATUS_QOS)
    # the latched plan arrives late (transient local) and only once (two subscriptions)
    assert ros.spin_until(lambda: "following a plan of 2 waypoints" in ros.log_of(proc)), ros.log_of(proc)
    assert ros.spin_until(lambda: any(s.message == "no_pose" for s in status))
    volatile = ros.node.create_publisher(Path, "plan", _VOLATILE)
    assert ros.spin_until(lambda: volatile.get_subscription_count() > 0), ros.log_of(proc)
    volatile.publish(path_msg([]))  # an empty plan from a volatile publisher stops the follower
    assert ros.spin_until(lambda: "empty plan: stopped" in ros.log_of(proc)), ros.log_of(proc)
    assert ros.spin_until(lambda: status[-1].message == "idle")
    volatile.publish(path_msg([(0.0, 0.0), (0.0, 1.0), (1.0, 1.0)]))
    assert ros.spin_until(lambda: "following a plan of 3 waypoints" in ros.log_of(proc)), ros.log_of(proc)
    log = ros.log_of(proc)
    assert log.count("following a plan of 2 waypoints") == 1 and log.count("following a plan of 3 waypoints") == 1
    assert "incompatible" not in log.lower()  # the unmatched transient-local reader is no news to the user


@pytest.mark.graph
def test_planner_plans_the_tsnake_footprint_from_its_tracked_point(ros):
    proc = ros.start("planner_node", {"robot": "tsnake"})
    plans = ros.collect(Path, "plan", LATCHED_QOS)
    diag = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    got = _params(ros, "planner_node", ["half_width", "reference_offset"])
    assert got == {"half_width": 0.68, "reference_offset": 0.63}
    head = ros.node.create_publisher(PoseStamped, "mocap/head_pose", SENSOR_PUB_QOS)
    goal = ros.node.create_publisher(PoseStamped, "goal_pose", COMMAND_QOS)
    yaw = 0.7
    q = Rotation.from_euler("z", yaw).as_quat()
    h = PoseStamped()
    h.pose.position.x, h.pose.position.y, h.pose.position.z = 1.0, 2.0, 0.03
    h.pose.orientation.x, h.pose.orientation.y, h.pose.orientation.z, h.pose.orientation.w = (float(v) for v in q)
    g = PoseStamped()
    g.pose.position.x, g.pose.position.y = 3.0, 2.0
    want = np.array([1.0, 2.0]) + 0.63 * np.array([math.cos(yaw), math.sin(yaw)])

    def planned() -> bool:
        if plans and len(plans[-1].poses) >= 2:
            p = plans[-1].poses[0].pose.position
            if np.allclose([p.x, p.y], want, atol=1e-6):
                return True
        # No plan yet, or one from the `start` parameter (the goal came before a best-effort
        # head pose got through): send both again.
        if head.get_subscription_count() and goal.get_subscription_count():
            head.publish(h)
            ros.spin_for(0.1)
            goal.publish(g)
            ros.spin_for(0.3)
        return False

    assert ros.spin_until(planned), ros.log_of(proc)
    assert "half-width 0.680 m" in ros.log_of(proc)

    def planner_entry() -> bool:
        return any(s.name == "planner_node: planner" and s.hardware_id == "tsnake" and "plan" in s.message
                   and s.level == DiagnosticStatus.OK for a in diag for s in a.status)

    assert ros.spin_until(planner_entry), ros.log_of(proc)


@pytest.mark.graph
def test_a_volatile_pegs_publisher_reaches_the_planner(ros):
    from geometry_msgs.msg import Pose, PoseArray
    from visualization_msgs.msg import MarkerArray

    proc = ros.start("planner_node")
    markers = ros.collect(MarkerArray, "planner_markers", LATCHED_QOS)
    pegs = ros.node.create_publisher(PoseArray, "pegs", _VOLATILE)
    assert ros.spin_until(lambda: pegs.get_subscription_count() > 0), ros.log_of(proc)
    arr = PoseArray()
    for x in (0.5, 1.0, 1.5):
        p = Pose()
        p.position.x = x
        arr.poses.append(p)
    pegs.publish(arr)

    def three_pegs() -> bool:
        return any(len(m.points) == 3 for a in markers for m in a.markers if m.ns == "pegs")

    assert ros.spin_until(three_pegs), ros.log_of(proc)


@pytest.mark.graph
def test_twin_viewer_without_a_display_warns_once_and_runs_headless(ros, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    states = ros.collect(JointState, "joint_states", SENSOR_QOS)
    proc = ros.start("twin_node", {"viewer": True, "mode": "fast", "mocap_rate_hz": 0.0})
    assert ros.spin_until(lambda: len(states) > 20), ros.log_of(proc)
    log = ros.log_of(proc)
    assert log.count("viewer: no display") == 1, log
    assert proc.poll() is None


@pytest.mark.graph
def test_the_twins_tsnake_markers_are_fitted_by_the_follower_of_the_shipped_params_file(ros, repo_root):
    status = ros.collect(DiagnosticStatus, "follower_status", STATUS_QOS)
    marker_msgs = ros.collect(PoseArray, "mocap/markers", SENSOR_QOS)
    twin = ros.start("twin_node", {"robot": "tsnake", "mode": "fast"})
    follower = ros.start("path_follower", extra_args=["--params-file",
                                                      str(repo_root / "config" / "path_following.yaml")])

    def counters() -> dict[str, int]:
        values = {kv.key: kv.value for kv in status[-1].values} if status else {}
        return {k: int(values.get(k, 0)) for k in ("mocap_accepted", "mocap_rejected_fit")}

    # Both the rigid body and the markers reach the follower; every marker sample is fitted, none refused.
    assert ros.spin_until(lambda: len(marker_msgs) >= 50 and counters()["mocap_accepted"] >= 50, timeout=120.0), \
        ros.log_of(twin) + ros.log_of(follower)
    assert counters()["mocap_rejected_fit"] == 0
