"""Planner node: pegs / occupancy map + goal in, a path over the generalized Voronoi graph out (001 Sec. III, V).

Thin wrapper around :mod:`snake_core.following.planning`: collects the obstacles (pegs of a world file in
``config/worlds`` or from the ``pegs`` topic; obstacle cells of the ``map`` occupancy grid), takes
the start from the head pose and the goal from ``goal_pose``, plans (clearance-aware shortest
path, or the paper's depth-first search with branches tested in the viscous model) and
publishes the plan and markers.

The robot's footprint is the half-width its moving body sweeps around the tracked point
(``half_width``), and the start is that tracked point: ``reference_offset`` along the head
frame's x axis from the measured head pose. Both come from the ``following:`` presets of the
robot YAML unless a params file or ``-p`` gives them. Status goes out on ``planner_status``
and, for the diagnostic aggregator and rqt_robot_monitor, on ``diagnostics``
(``DiagnosticArray``, ``<node>: planner``, at ``diagnostics_rate_hz``). ``pegs`` and ``map``
are subscribed so that transient-local and volatile publishers both connect
(:func:`snake_ros.following.subscribe_latched`).

Topics:
    goal_pose (geometry_msgs/PoseStamped, in): goal, as RViz's goal tool publishes it; plans at once.
        Its ``header.frame_id`` must be ``frame_id`` or empty: a goal in another frame (``map``,
        ``odom``) is refused with an ERROR status naming the frame (no transform is looked up).
    mocap/head_pose (geometry_msgs/PoseStamped, in): head pose; its position is the start
        (until one arrives, the ``start`` parameter is used).
    pegs (geometry_msgs/PoseArray, in): peg centres (positions), replacing the world file's pegs;
        diameter from ``peg_diameter``.
    map (nav_msgs/OccupancyGrid, in, transient local): obstacle cells (value >= ``occupied_threshold``).
    blocked_branch (nav_msgs/Path, in): two poses = a branch found impassable (from the
        path follower's stuck or stall detection); left out of every later plan.
    plan (nav_msgs/Path, out, latched): the path in ``frame_id``; an empty path when planning fails.
    planner_markers (visualization_msgs/MarkerArray, out, latched): pegs, the graph, the plan.
    planner_status (diagnostic_msgs/DiagnosticStatus, out): OK with length / clearance / timing, or
        ERROR with the reason (goal inside a peg, outside the arena, unreachable...).

Services:
    replan (std_srvs/Trigger): plan again to the last goal from the current head position.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point, PoseArray, PoseStamped
from nav_msgs.msg import OccupancyGrid, Path
from rcl_interfaces.msg import SetParametersResult
from rclpy.clock import Clock, ClockType
from rclpy.parameter import Parameter
from std_srvs.srv import Trigger
from visualization_msgs.msg import Marker, MarkerArray

from snake_core.errors import SnakeCoreError
from snake_core.following.head_pose import MocapError, pose_from_rigid_body
from snake_core.following.loop import reference_pose
from snake_core.following.planning.dfs import plan_dfs
from snake_core.following.planning.gvg import Arena, Discs, build_gvg, default_arena, grid_to_discs, pegs_to_discs
from snake_core.following.planning.planner import Plan, PlannerConfig, plan_shortest
from snake_core.robot import load_robot
from snake_ros.following import apply_robot_presets, planner_presets, subscribe_latched
from snake_ros.parameters import Param, ParameterTable
from snake_ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS, STATUS_QOS
from snake_ros.runtime import run_node
from snake_ros.stack_node import StackNode
from snake_ros.transforms import mocap_pose, path_msg

_MODES = ("shortest", "dfs")
_MAX_GRAPH_MARKER_EDGES = 20000  # edges drawn at most (RViz stays responsive)
_ARENA_MARGIN_M = 0.5  # m, default arena: obstacles' and points' box grown by this plus the required clearance


_PLANNER = PlannerConfig()  # the defaults live in the core's dataclass

PARAMETERS = ParameterTable("planner_node", [
    Param("robot", "wheeled_snake", "robot name in config/robots or a YAML path; its following: presets give "
          "half_width and reference_offset unless set", read_only=True),
    Param("half_width", 0.03, "half-width of the band the moving body sweeps around the tracked point: the "
          "footprint planned with, m", lo=1e-3, hi=10.0),
    Param("reference_offset", 0.0, "the start (tracked point) lies this far along the head frame's x axis from the "
          "measured head, m",
          lo=-10.0, hi=10.0),
    Param("mocap_y_up", False, "the head pose comes in a y-up frame (OptiTrack's default): turn it to z-up"),
    Param("diagnostics_rate_hz", 1.0, "rate of the planner's entry on /diagnostics, Hz (wall clock)", lo=0.1,
          hi=50.0, read_only=True),
    Param("world", "", "world name in config/worlds or a YAML path giving pegs and arena ('': none)",
          read_only=True),
    Param("mode", "shortest", "planner", choices=_MODES),
    Param("frame_id", "world", "frame of plan and markers"),
    Param("margin", _PLANNER.margin, "clearance beyond the robot's half-width, m", lo=0.0, hi=1.0),
    Param("clearance_weight", _PLANNER.clearance_weight, "clearance term of the edge cost", lo=0.0, hi=100.0),
    Param("peg_diameter", 0.06, "diameter of pegs from the pegs topic, m", lo=1e-3, hi=2.0),
    Param("arena", [0.0, 0.0, 0.0, 0.0], "[xmin, xmax, ymin, ymax] m; all zero: the world's ground, else the "
          "box of obstacles, start and goal + 0.5 m + the required clearance"),
    Param("start", [0.0, 0.0], "start [x, y] m until a head pose arrives"),
    Param("occupied_threshold", 50, "map cells >= this value (0..100) are obstacles", lo=0, hi=100),
    Param("unknown_occupied", False, "treat unknown (-1) map cells as obstacles"),
    Param("dfs_min_speed", 0.03, "DFS: branch speed threshold, m/s", lo=1e-4, hi=10.0),
    Param("dfs_links", 9, "DFS: links of the simulated snake", lo=2, hi=64),
], summary="Plans head paths over the generalized Voronoi graph of the pegs and the map (001); publishes a "
           "latched plan.")


def _check_vectors(values: dict[str, Any]) -> None:
    """Refuse an ``arena`` or ``start`` of the wrong shape (the table checks the types).

    Raises:
        ValueError: naming the parameter.
    """
    if "arena" in values:
        v = [float(x) for x in values["arena"]]
        if len(v) != 4 or not all(math.isfinite(x) for x in v) or (any(v) and not (v[0] < v[1] and v[2] < v[3])):
            raise ValueError(f"parameter arena: must be [xmin, xmax, ymin, ymax] with min < max, or all zero; "
                             f"got {v}")
    if "start" in values:
        v = [float(x) for x in values["start"]]
        if len(v) != 2 or not all(math.isfinite(x) for x in v):
            raise ValueError(f"parameter start: must be [x, y] in m, got {v}")


def _yaw(q: Any) -> float:
    return math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))


class PlannerNode(StackNode):
    """Plans head paths over the generalized Voronoi graph of the pegs and the map."""

    def __init__(self) -> None:
        super().__init__("planner_node")
        params = PARAMETERS.declare(self)
        _check_vectors(params)
        robot = load_robot(self.get_parameter("robot").value)
        apply_robot_presets(self, planner_presets(robot.following_presets))
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.robot_name = robot.name
        self.world_pegs = np.zeros((0, 2))
        self.world_diameter = 0.06
        self.world_arena: Arena | None = None
        world = str(self.get_parameter("world").value)
        if world:
            from snake_hardware.sim.worlds import load_world

            w = load_world(world)
            if w.pegs is not None:
                self.world_pegs, self.world_diameter = w.pegs.centres, w.pegs.diameter
            self.world_arena = Arena(-w.size_x / 2, w.size_x / 2, -w.size_y / 2, w.size_y / 2)
        self.topic_pegs: np.ndarray | None = None
        self.map_discs = Discs.empty()
        self.start: np.ndarray | None = None
        self.goal: np.ndarray | None = None
        self.blocked: list[tuple[np.ndarray, np.ndarray]] = []
        self.plans = 0
        self.failures = 0

        self.pub_plan = self.create_publisher(Path, "plan", LATCHED_QOS)
        self.pub_markers = self.create_publisher(MarkerArray, "planner_markers", LATCHED_QOS)
        self.pub_status = self.create_publisher(DiagnosticStatus, "planner_status", STATUS_QOS)
        self.pub_diag = self.create_publisher(DiagnosticArray, "diagnostics", STATUS_QOS)
        self._last_status: DiagnosticStatus | None = None
        self.create_subscription(PoseStamped, "goal_pose", self._on_goal, COMMAND_QOS)
        self.create_subscription(PoseStamped, "mocap/head_pose", self._on_head, SENSOR_QOS)
        subscribe_latched(self, PoseArray, "pegs", self._on_pegs)
        subscribe_latched(self, OccupancyGrid, "map", self._on_map)
        self.create_subscription(Path, "blocked_branch", self._on_blocked, COMMAND_QOS)
        self.create_service(Trigger, "replan", self._on_replan)
        self._publish_markers(None)
        steady = Clock(clock_type=ClockType.STEADY_TIME)  # runs on simulated time before the first /clock too
        self.create_timer(1.0 / float(params["diagnostics_rate_hz"]), self._publish_diagnostics, clock=steady)
        self.get_logger().info(f"planner for {robot.name}: {len(self.world_pegs)} pegs from world {world or '-'}, "
                               f"half-width {self.half_width:.3f} m, tracked point "
                               f"{float(self.get_parameter('reference_offset').value):g} m along the head")

    @property
    def half_width(self) -> float:
        """Half-width of the footprint planned with, m."""
        return float(self.get_parameter("half_width").value)

    # ---------------------------------------------------------------- parameters
    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        changes = {p.name: p.value for p in params}
        reason = PARAMETERS.check(changes)
        if reason is None:
            try:
                _check_vectors(changes)
            except ValueError as err:
                reason = str(err)
        return SetParametersResult(successful=reason is None, reason=reason or "")

    # ---------------------------------------------------------------- inputs
    def _on_head(self, msg: PoseStamped) -> None:
        position, quat = mocap_pose(msg, bool(self.get_parameter("mocap_y_up").value))
        try:
            x, y, yaw = pose_from_rigid_body(position, quat)
        except MocapError:
            return
        x, y, _ = reference_pose((x, y, yaw), 0.0, float(self.get_parameter("reference_offset").value))
        self.start = np.array([x, y])

    def _on_pegs(self, msg: PoseArray) -> None:
        pts = np.array([[p.position.x, p.position.y] for p in msg.poses]).reshape(-1, 2)
        self.topic_pegs = pts[np.isfinite(pts).all(axis=1)]
        self._publish_markers(None)

    def _on_map(self, msg: OccupancyGrid) -> None:
        info = msg.info
        data = np.asarray(msg.data, dtype=np.int16)
        if data.size != info.width * info.height or info.resolution <= 0:
            self.get_logger().warning(f"map ignored: {data.size} cells for {info.width} x {info.height}")
            return
        origin = (info.origin.position.x, info.origin.position.y, _yaw(info.origin.orientation))
        self.map_discs = grid_to_discs(data.reshape(info.height, info.width), info.resolution, origin,
                                       threshold=int(self.get_parameter("occupied_threshold").value),
                                       unknown_occupied=bool(self.get_parameter("unknown_occupied").value))
        self._publish_markers(None)

    def _on_blocked(self, msg: Path) -> None:
        if len(msg.poses) >= 2:
            a, b = msg.poses[0].pose.position, msg.poses[-1].pose.position
            self.blocked.append((np.array([a.x, a.y]), np.array([b.x, b.y])))
            self.get_logger().info(f"branch ({a.x:.2f}, {a.y:.2f}) -> ({b.x:.2f}, {b.y:.2f}) blocked")

    def _on_goal(self, msg: PoseStamped) -> None:
        frame, planning = msg.header.frame_id, str(self.get_parameter("frame_id").value)
        if frame not in ("", planning):
            # No transform is looked up: a goal in another frame (map, odom...) would land elsewhere.
            reason = f"goal refused: it is in frame {frame!r}, the planner plans in {planning!r} (no transform)"
            self.failures += 1
            self.get_logger().error(reason)
            self._status(DiagnosticStatus.ERROR, reason, {"goal_frame": frame})
            return
        self.goal = np.array([msg.pose.position.x, msg.pose.position.y])
        self._plan()

    def _on_replan(self, _req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
        if self.goal is None:
            resp.success, resp.message = False, "no goal yet"
            return resp
        self.get_logger().info(f"replan requested: planning again from the head with {len(self.blocked)} "
                               "blocked branch(es)")
        plan, err = self._plan()
        resp.success = plan is not None
        resp.message = err if plan is None else f"{len(plan.points)} waypoints, {plan.length:.3f} m"
        return resp

    # ---------------------------------------------------------------- planning
    def _scene(self) -> tuple[Discs, np.ndarray, float]:
        pegs = self.topic_pegs if self.topic_pegs is not None else self.world_pegs
        diameter = float(self.get_parameter("peg_diameter").value) if self.topic_pegs is not None \
            else self.world_diameter
        discs = pegs_to_discs(pegs, diameter) if len(pegs) else Discs.empty()
        if len(self.map_discs):
            discs = discs + self.map_discs
        return discs, pegs, diameter

    def _arena(self, discs: Discs, start: np.ndarray, goal: np.ndarray, clearance: float) -> Arena:
        v = [float(x) for x in self.get_parameter("arena").value]
        if any(v):
            return Arena(*v)
        if self.world_arena is not None:
            return self.world_arena
        # Walls beyond the footprint's clearance, so that a wide robot fits between them and the goal.
        return default_arena(discs, start, goal, margin=_ARENA_MARGIN_M + clearance)

    def _plan(self) -> tuple[Plan | None, str]:
        assert self.goal is not None
        start = self.start if self.start is not None else np.array(self.get_parameter("start").value, dtype=float)
        discs, pegs, _ = self._scene()
        config = PlannerConfig(half_width=self.half_width, margin=float(self.get_parameter("margin").value),
                               clearance_weight=float(self.get_parameter("clearance_weight").value))
        mode = str(self.get_parameter("mode").value)
        t0 = time.perf_counter()
        try:
            arena = self._arena(discs, start, self.goal, config.required_clearance)
            if mode == "dfs":
                from snake_core.following.viscous.closed_loop import ViscousBranchTester, ViscousClosedLoop

                loop = ViscousClosedLoop(int(self.get_parameter("dfs_links").value), pegs)
                tester = ViscousBranchTester(loop, float(self.get_parameter("dfs_min_speed").value))
                plan = plan_dfs(discs, arena, start, self.goal, tester, config, self.blocked)
            else:
                plan = plan_shortest(discs, arena, start, self.goal, config, self.blocked)
        except SnakeCoreError as exc:
            self.failures += 1
            self.get_logger().error(f"no plan: {exc}")
            self.pub_plan.publish(self._path_msg(np.zeros((0, 2))))
            self._status(DiagnosticStatus.ERROR, f"no plan: {exc}", {})
            return None, str(exc)
        ms = 1e3 * (time.perf_counter() - t0)
        self.plans += 1
        self.pub_plan.publish(self._path_msg(plan.points))
        self._publish_markers(plan, discs, arena, config.required_clearance)
        self._status(DiagnosticStatus.OK, f"{plan.mode} plan: {len(plan.points)} waypoints",
                     {"length_m": f"{plan.length:.4f}", "min_clearance_m": f"{plan.min_clearance:.4f}",
                      "plan_ms": f"{ms:.1f}", "blocked_branches": str(len(self.blocked)),
                      **{k: f"{v:.4g}" for k, v in plan.stats.items()}})
        self.get_logger().info(f"{plan.mode} plan: {len(plan.points)} waypoints, {plan.length:.3f} m, {ms:.1f} ms")
        return plan, ""

    # ---------------------------------------------------------------- outputs
    def _status(self, level: bytes, message: str, values: dict[str, str]) -> None:
        st = DiagnosticStatus(name="planner_node", message=message)
        st.level = level
        st.values = [KeyValue(key=k, value=v) for k, v in {"plans": str(self.plans),
                                                           "failures": str(self.failures), **values}.items()]
        self._last_status = st
        self.pub_status.publish(st)

    def _publish_diagnostics(self) -> None:
        """The planner's entry on /diagnostics (for the aggregator and rqt_robot_monitor)."""
        last = self._last_status or DiagnosticStatus(level=DiagnosticStatus.OK, message="waiting for a goal")
        entry = DiagnosticStatus(level=last.level, name=f"{self.get_name()}: planner", message=last.message,
                                 hardware_id=self.robot_name, values=last.values)
        arr = DiagnosticArray(status=[entry])
        arr.header.stamp = self.get_clock().now().to_msg()
        self.pub_diag.publish(arr)

    def _path_msg(self, points: np.ndarray) -> Path:
        return path_msg(points, str(self.get_parameter("frame_id").value), self.get_clock().now().to_msg())

    def _publish_markers(self, plan: Plan | None, discs: Discs | None = None, arena: Arena | None = None,
                         clearance: float = 0.0) -> None:
        frame = str(self.get_parameter("frame_id").value)
        stamp = self.get_clock().now().to_msg()

        def marker(ns: str, mid: int, mtype: int) -> Marker:
            m = Marker(ns=ns, id=mid, type=mtype, action=Marker.ADD)
            m.header.frame_id, m.header.stamp = frame, stamp
            m.pose.orientation.w = 1.0
            return m

        _, pegs, diameter = self._scene()
        out = []
        pm = marker("pegs", 0, Marker.SPHERE_LIST)
        pm.scale.x = pm.scale.y = pm.scale.z = float(diameter)
        pm.color.r, pm.color.g, pm.color.b, pm.color.a = 0.9, 0.2, 0.2, 1.0
        pm.points = [Point(x=float(x), y=float(y), z=0.0) for x, y in pegs]
        out.append(pm)
        if len(self.map_discs):
            cm = marker("map_obstacles", 3, Marker.CUBE_LIST)
            cm.scale.x = cm.scale.y = float(self.map_discs.radii[0] * math.sqrt(2.0))
            cm.scale.z = 0.01
            cm.color.r = cm.color.g = cm.color.b = 0.3
            cm.color.a = 1.0
            cm.points = [Point(x=float(x), y=float(y), z=0.0) for x, y in self.map_discs.centres]
            out.append(cm)
        if discs is not None and arena is not None and len(discs):
            g = build_gvg(discs, arena, clearance)
            gm = marker("graph", 1, Marker.LINE_LIST)
            gm.scale.x = 0.005
            gm.color.b, gm.color.a = 1.0, 0.6
            for u, v in list(g.edges)[:_MAX_GRAPH_MARKER_EDGES]:
                a, b = g.nodes[u]["pos"], g.nodes[v]["pos"]
                gm.points += [Point(x=float(a[0]), y=float(a[1])), Point(x=float(b[0]), y=float(b[1]))]
            out.append(gm)
        if plan is not None:
            lm = marker("plan", 2, Marker.LINE_STRIP)
            lm.scale.x = 0.015
            lm.color.g, lm.color.a = 0.8, 1.0
            lm.points = [Point(x=float(x), y=float(y), z=0.01) for x, y in plan.points]
            out.append(lm)
        self.pub_markers.publish(MarkerArray(markers=out))


    def stop_safely(self) -> None:
        """Safe exit: a final ``planner_status`` (STALE) so that no one reads the last plan's status as live."""
        self.pub_status.publish(DiagnosticStatus(level=DiagnosticStatus.STALE, name="planner_node",
                                                 message="stopped: planner exiting"))
        self.get_logger().info("planner stopped")


def main(args: list[str] | None = None) -> int:
    """Run the planner until shutdown; its last status says it stopped."""
    return run_node(PlannerNode, args, on_exit=PlannerNode.stop_safely, parameters=PARAMETERS)


if __name__ == "__main__":
    raise SystemExit(main())
