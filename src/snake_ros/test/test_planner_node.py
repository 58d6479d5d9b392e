"""Graph tests of the planner node: real process over DDS (the ``ros`` fixture)."""

from __future__ import annotations

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import Pose, PoseArray, PoseStamped
from nav_msgs.msg import OccupancyGrid, Path
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from snake_core.following.planning.gvg import Arena, pegs_to_discs
from snake_core.following.planning.planner import PlannerConfig, plan_shortest
from snake_hardware.sim.worlds import load_world
from snake_ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_PUB_QOS, STATUS_QOS

pytestmark = pytest.mark.graph


def goal_msg(x, y):
    msg = PoseStamped()
    msg.header.frame_id = "world"
    msg.pose.position.x, msg.pose.position.y = float(x), float(y)
    msg.pose.orientation.w = 1.0
    return msg


def start(ros, **params):
    base = {"world": "pegs", "start": [0.0, 0.0]}
    base.update(params)
    proc = ros.start("planner_node", base)
    plans = ros.collect(Path, "plan", LATCHED_QOS)
    status = ros.collect(DiagnosticStatus, "planner_status", STATUS_QOS)
    markers = ros.collect(MarkerArray, "planner_markers", LATCHED_QOS)
    goal = ros.node.create_publisher(PoseStamped, "goal_pose", COMMAND_QOS)
    # The status is volatile and published once per goal: its publisher must have matched the probe.
    assert ros.spin_until(lambda: goal.get_subscription_count() > 0 and ros.matched("planner_status")), (
        ros.log_of(proc))
    return proc, goal, plans, status, markers


def points(path: Path) -> np.ndarray:
    return np.array([[p.pose.position.x, p.pose.position.y] for p in path.poses]).reshape(-1, 2)


def test_goal_from_world_pegs_gives_the_core_plan_and_markers(ros):
    proc, goal, plans, status, markers = start(ros)

    def answered() -> bool:
        # The same goal again until its OK status is heard: the status is volatile and sent once per
        # goal, and the probe matching its publisher does not prove the publisher has matched the probe.
        goal.publish(goal_msg(2.4, 0.1))
        ros.spin_for(0.1)
        return any(s.level == DiagnosticStatus.OK for s in status)

    assert ros.spin_until(answered), ros.log_of(proc)
    assert ros.spin_until(lambda: len(plans) > 0 and len(points(plans[-1])) >= 2), ros.log_of(proc)
    world = load_world("pegs")
    half = 0.5 * ros_world_width()
    want = plan_shortest(pegs_to_discs(world.pegs.centres, world.pegs.diameter),
                         Arena(-world.size_x / 2, world.size_x / 2, -world.size_y / 2, world.size_y / 2),
                         [0.0, 0.0], [2.4, 0.1], PlannerConfig(half_width=half, margin=0.02))
    np.testing.assert_allclose(points(plans[-1]), want.points, atol=1e-9)
    assert plans[-1].header.frame_id == "world"
    assert ros.spin_until(lambda: any(m.ns == "plan" for arr in markers for m in arr.markers))
    ns = {m.ns for arr in markers for m in arr.markers}
    assert {"pegs", "graph", "plan"} <= ns
    pegs_marker = next(m for arr in markers for m in arr.markers if m.ns == "pegs")
    assert len(pegs_marker.points) == len(world.pegs.centres)
    ok = [s for s in status if s.level == DiagnosticStatus.OK]
    assert ok and float({kv.key: kv.value for kv in ok[-1].values}["length_m"]) == pytest.approx(want.length, 1e-3)


def ros_world_width():
    from snake_core.robot import load_robot

    return float(load_robot("wheeled_snake").wheeled_body.width)


def test_goal_inside_a_peg_gives_an_error_and_an_empty_plan(ros):
    proc, goal, plans, status, _ = start(ros)
    def refused() -> bool:
        # The goal again until the refusal is heard: the probe matching the status publisher
        # does not prove the publisher has matched the probe yet (discovery runs both ways).
        goal.publish(goal_msg(0.80, 0.0))  # centre of a peg in pegs.yaml
        ros.spin_for(0.1)
        return any(s.level == DiagnosticStatus.ERROR for s in status)

    assert ros.spin_until(refused), ros.log_of(proc)
    err = next(s for s in status if s.level == DiagnosticStatus.ERROR)
    assert "inside" in err.message
    assert ros.spin_until(lambda: len(plans) > 0)
    assert len(plans[-1].poses) == 0


def test_pegs_topic_map_and_replan_service(ros):
    proc, goal, plans, _status, markers = start(ros, world="''", arena=[-1.0, 3.0, -1.5, 1.5])
    pegs_pub = ros.node.create_publisher(PoseArray, "pegs", LATCHED_QOS)
    map_pub = ros.node.create_publisher(OccupancyGrid, "map", LATCHED_QOS)
    # a wall of occupied cells across x = 1 m with a gap at y in [0.5, 0.8] m
    grid = OccupancyGrid()
    grid.info.resolution = 0.05
    grid.info.width, grid.info.height = 10, 60
    grid.info.origin.position.x, grid.info.origin.position.y = 0.75, -1.5
    grid.info.origin.orientation.w = 1.0
    cells = np.zeros((60, 10), dtype=int)
    cells[:, 5] = 100
    cells[40:46, 5] = 0
    grid.data = cells.ravel().tolist()
    map_pub.publish(grid)
    arr = PoseArray()
    arr.poses = [Pose() for _ in range(2)]
    arr.poses[0].position.x, arr.poses[0].position.y = 2.0, 0.6
    arr.poses[1].position.x, arr.poses[1].position.y = 2.0, -0.6
    pegs_pub.publish(arr)

    def scene_taken() -> bool:
        # The planner re-publishes its latched markers when it takes the pegs and when it takes the map:
        # both are in once one marker array shows the two pegs and the map's obstacles.
        return any(any(m.ns == "map_obstacles" for m in a.markers)
                   and any(m.ns == "pegs" and len(m.points) == 2 for m in a.markers) for a in markers)

    assert ros.spin_until(scene_taken), ros.log_of(proc)
    goal.publish(goal_msg(2.5, 0.0))
    assert ros.spin_until(lambda: len(plans) > 0 and len(points(plans[-1])) >= 2), ros.log_of(proc)
    pts = points(plans[-1])
    # the plan crosses x = 1.025 m through the gap
    k = int(np.argmax(pts[:, 0] > 1.025))
    y = np.interp(1.025, pts[k - 1:k + 1, 0], pts[k - 1:k + 1, 1])
    assert 0.5 <= y <= 0.8
    # replan from a new head position
    head = ros.node.create_publisher(PoseStamped, "mocap/head_pose", SENSOR_PUB_QOS)
    assert ros.spin_until(lambda: head.get_subscription_count() > 0)

    def replanned_from_the_head() -> bool:
        # The planner subscribes head poses best effort: one sent before its side of discovery is
        # done is dropped unseen. Send the head pose, replan, and again until a plan starts there.
        head.publish(goal_msg(0.0, 0.5))
        ros.spin_for(0.1)
        n = len(plans)
        answer = ros.call(Trigger, "/replan", Trigger.Request())
        assert answer is not None and answer.response.success, ros.log_of(proc)
        assert ros.spin_until(lambda: len(plans) > n)
        return bool(np.allclose(points(plans[-1])[0], [0.0, 0.5]))

    assert ros.spin_until(replanned_from_the_head), ros.log_of(proc)
    np.testing.assert_allclose(points(plans[-1])[0], [0.0, 0.5])


def test_bad_mode_parameter_is_refused(ros):
    proc, *_ = start(ros)
    req = SetParameters.Request()
    req.parameters = [ParameterMsg(name="mode", value=ParameterValue(type=ParameterType.PARAMETER_STRING,
                                                                     string_value="teleport"))]
    answer = ros.call(SetParameters, "/planner_node/set_parameters", req)
    assert answer is not None, ros.log_of(proc)
    res = answer.response.results[0]
    assert not res.successful
    assert "mode" in res.reason


def test_a_goal_in_another_frame_is_refused_naming_the_frame(ros):
    proc, goal, plans, status, _markers = start(ros, world="''")
    other = goal_msg(1.0, 0.0)
    other.header.frame_id = "map"

    def refused_heard() -> bool:
        # Again until heard: the status is volatile and sent once per goal, and the probe matching its
        # publisher does not prove the publisher has matched the probe.
        goal.publish(other)
        ros.spin_for(0.1)
        return any(s.level == DiagnosticStatus.ERROR for s in status)

    assert ros.spin_until(refused_heard), ros.log_of(proc)
    refused = next(s for s in status if s.level == DiagnosticStatus.ERROR)
    assert "'map'" in refused.message and "'world'" in refused.message
    assert "goal refused" in ros.log_of(proc) and "'map'" in ros.log_of(proc)
    assert not any(len(p.poses) for p in plans)  # nothing planned towards the misread goal
    # An empty frame is taken as the planning frame (a bare ros2 topic pub), as is the planning frame itself.
    bare = goal_msg(1.0, 0.0)
    bare.header.frame_id = ""
    goal.publish(bare)
    assert ros.spin_until(lambda: any(len(p.poses) >= 2 for p in plans)), ros.log_of(proc)
    np.testing.assert_allclose(points(next(p for p in plans if len(p.poses) >= 2))[-1], [1.0, 0.0])
