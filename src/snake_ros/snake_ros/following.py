"""Pieces the path-following nodes share: robot presets as parameters, latched subscriptions, the node set.

- :func:`apply_robot_presets`: the ``following:`` block of the robot YAML
  (:class:`snake_core.robot.FollowingPresets`) becomes parameter values of a node, except
  where a params file or ``-p`` gave the parameter (those win), so ``robot:=tsnake`` is enough.
- :func:`subscribe_latched`: a subscription to a latched topic (``plan``, ``pegs``, ``map``)
  that gets the last message of a transient-local publisher *and* connects to an ordinary
  volatile one (module docstring of :mod:`snake_ros.qos`; the choice is explained there).
- :func:`follow_nodes`: the processes of the closed loop (hardware or twin, gait, planner,
  follower) with their parameters and remappings, from robot, backend, world and mocap
  topic. ``launch/follow.launch.py`` and the graph test of the loop start exactly these.
- :func:`one_process`: the same loop with the robot's nodes (bridge, gait, planner, follower)
  in one ``robot_stack`` process (:class:`StackSpec`), as ``follow.launch.py`` starts it by
  default; the twin and the bench robot, which stand for the robot, keep their own processes.
"""

from __future__ import annotations

import os
import tempfile
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import serialize_message

from snake_core.robot import FollowingPresets, load_robot
from snake_ros.parameters import ParameterError
from snake_ros.qos import LATCHED_QOS

BACKENDS = ("twin", "emulated", "dynamixel")
"""What moves the joints in the follow loop: the MuJoCo twin or the bridge (emulated servos or a U2D2)."""

_VOLATILE_LATCHED_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                                   reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
_SEEN_DEPTH = 4  # recent messages remembered to drop the copy arriving on the second subscription


def follower_output(presets: FollowingPresets) -> str:
    """The path follower's ``output`` for a robot's drive.

    ``cmd_vel`` drives the T-Snake's differential drive; ``offset`` (serpenoid) needs both:
    ``cmd_vel`` gives the wave frequency (forward speed) and ``head_offset`` the turn
    (001 Sec. IV), which ``gait_node`` takes over the cmd_vel turn while it is fresh.
    """
    return "cmd_vel" if presets.drive == "cmd_vel" else "both"


def follower_presets(presets: FollowingPresets) -> dict[str, Any]:
    """Parameters of ``path_follower`` set by the robot's presets."""
    return {"output": follower_output(presets), "yaw_offset": float(presets.yaw_offset),
            "reference_offset": float(presets.reference_offset),
            **{k: float(v) for k, v in presets.follower.items()},
            **({"marker_template": [float(v) for p in presets.marker_template for v in p]}
               if presets.marker_template is not None else {})}


def planner_presets(presets: FollowingPresets) -> dict[str, Any]:
    """Parameters of ``planner_node`` set by the robot's presets."""
    return {"half_width": float(presets.half_width), "reference_offset": float(presets.reference_offset)}


def apply_robot_presets(node: Node, values: Mapping[str, Any]) -> dict[str, Any]:
    """Set parameters from the robot's presets where no override gave them.

    Call after the parameters are declared, before the on-set callbacks are added (rclpy
    still checks types and ranges against the descriptors).

    Args:
        node: The node.
        values: Parameter name -> preset value.

    Returns:
        The presets that were applied (name -> value).

    Raises:
        ParameterError: A preset rclpy refuses (type or range), naming the parameter.
    """
    given = set(node._parameter_overrides)  # params files and -p arguments of this node
    applied = {k: v for k, v in values.items() if k not in given}
    for name, value in applied.items():
        result = node.set_parameters([Parameter(name, value=value)])[0]
        if not result.successful:
            raise ParameterError(f"parameter {name}: robot preset {value!r} refused: {result.reason}")
    return applied


def subscribe_latched(node: Node, msg_type: Any, topic: str, callback: Callable[[Any], None]) -> None:
    """Subscribe a latched topic so that every publisher connects, each message handled once.

    Two subscriptions: transient-local (gets the last message of a transient-local
    publisher that published before this node started) and volatile (matches every
    publisher, volatile ones included; DDS never matches a transient-local reader with a
    volatile writer). A message from a transient-local publisher arrives on both: the
    second copy (byte-identical, among the last few) is dropped. A volatile publisher that
    sends the very same message twice in a row is therefore heard once. A volatile
    publisher's messages arrive through the volatile reader; the transient-local one never
    matches it, by design, and says nothing about it (a node of the stack does not report
    it from the publishing side either: :mod:`snake_ros.stack_node`; a node outside the
    stack may log once that the transient-local reader is incompatible).
    """
    seen: deque[bytes] = deque(maxlen=_SEEN_DEPTH)

    def once(msg: Any) -> None:
        data = serialize_message(msg)
        if data in seen:
            return
        seen.append(data)
        callback(msg)

    # The transient-local reader and a volatile writer never match, by design: no warning about it here.
    quiet = SubscriptionEventCallbacks(incompatible_qos=lambda _event: None)
    node.create_subscription(msg_type, topic, once, LATCHED_QOS, event_callbacks=quiet)
    node.create_subscription(msg_type, topic, once, _VOLATILE_LATCHED_QOS)


@dataclass(frozen=True)
class NodeSpec:
    """One process of the follow loop.

    Attributes:
        executable: Console script of ``snake_ros``.
        name: Node name.
        params: Parameters (applied after the params files).
        params_files: ``config/`` file names whose ``/**/<node>`` or ``<node>`` block applies.
        remappings: ``(from, to)`` topic remappings.
    """

    executable: str
    name: str
    params: dict[str, Any] = field(default_factory=dict)
    params_files: tuple[str, ...] = ()
    remappings: tuple[tuple[str, str], ...] = ()


def follow_nodes(robot: str, backend: str, world: str = "", mocap_topic: str = "mocap/head_pose",
                 twin_mode: str = "realtime", bench_seed: int = 0, lifted: bool = False) -> list[NodeSpec]:
    """The closed loop of path following (001 Sec. IV) as processes, hardware first.

    Args:
        robot: Robot name or YAML path; its ``following:`` presets pick the gait and the
            follower's output, and the nodes read the rest from it.
        backend: ``twin`` (MuJoCo twin, simulated time and synthetic motion capture),
            ``emulated`` or ``dynamixel`` (the bridge; motion capture from ``mocap_topic``).
            ``emulated`` runs the bench robot (:func:`bench_robot_nodes`) where it models the
            robot's kind, else the bridge's in-process servo emulator.
        world: World of the twin and pegs of the planner (``config/worlds`` name or a YAML path;
            '' : none, the planner then takes pegs from the ``pegs`` topic or the ``map``).
        mocap_topic: Where the head's rigid-body pose comes from (vrpn_mocap:
            ``/vrpn_mocap/<body>/pose``; the twin: ``mocap/head_pose``).
        twin_mode: ``realtime``, ``fast`` or ``lockstep`` (twin only).
        bench_seed: Seed of the bench robot's drawn variation (bench robot only).
        lifted: The bench robot held by its head (bench robot only).

    Returns:
        The processes: twin, bridge (after the bench robot when there is one), gait, planner, follower.

    Raises:
        ValueError: An unknown backend.
        RobotConfigError: A bad robot file (one line).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend: must be one of {', '.join(BACKENDS)}, got {backend!r}")
    presets = load_robot(robot).following_presets
    sim = backend == "twin"
    timed = {"use_sim_time": True} if sim else {}
    mocap = (("mocap/head_pose", mocap_topic),) if mocap_topic != "mocap/head_pose" else ()
    if sim:
        hardware = NodeSpec("twin_node", "twin_node", {"robot": robot, "world": world or "flat", "mode": twin_mode,
                                                       "lockstep_prime": twin_mode == "lockstep"},
                            ("twin_node.yaml",))
        hardware_nodes = [hardware]
    elif backend == "emulated" and bench_robot_models(robot):
        hardware_nodes = bench_robot_nodes(robot, world, mocap_topic, bench_seed, lifted)
    else:
        hardware_nodes = [NodeSpec("bridge_node", "bridge_node", {"robot": robot, "backend": backend},
                                   ("bridge.yaml",))]
    limits = presets.follower_config()
    gait = NodeSpec("gait_node", "gait_node", {"robot": robot, "gait": presets.gait, **timed,
                                               "max_linear": limits.max_linear, "max_angular": limits.max_angular},
                    ("gait_node.yaml",))
    planner = NodeSpec("planner_node", "planner_node", {"robot": robot, "world": world, **timed},
                       ("path_following.yaml",), mocap)
    # world -> head on /tf: the twin's ground truth, or on the robot the measured pose (one publisher per frame)
    follower = NodeSpec("path_follower", "path_follower", {"robot": robot, **timed, "publish_tf": not sim},
                        ("path_following.yaml",), mocap)
    return [*hardware_nodes, gait, planner, follower]


STACK_NODES = ("bridge_node", "gait_node", "planner_node", "path_follower")
"""The follow loop's nodes that run on the robot's computer: one ``robot_stack`` process can host them."""


@dataclass(frozen=True)
class StackSpec:
    """Nodes of the follow loop in one ``robot_stack`` process (one executor, one DDS participant).

    Attributes:
        nodes: The nodes' own specs, in building order (hardware first, the follower last).
    """

    nodes: tuple[NodeSpec, ...]

    @property
    def arguments(self) -> list[str]:
        """``robot_stack``'s own arguments: ``--nodes`` with the node names in building order."""
        return ["--nodes", ",".join(spec.name for spec in self.nodes)]

    @property
    def params_files(self) -> tuple[str, ...]:
        """Every node's ``config/`` params files, each once, in the nodes' order (each node takes its block)."""
        return tuple(dict.fromkeys(f for spec in self.nodes for f in spec.params_files))

    @property
    def overrides(self) -> dict[str, dict[str, Any]]:
        """Each node's parameters (applied after the params files), by node name."""
        return {spec.name: dict(spec.params) for spec in self.nodes}

    @property
    def remappings(self) -> tuple[tuple[str, str], ...]:
        """Each node's remappings scoped to that node (rcl's ``node:from:=to``): the others keep the topic."""
        return tuple((f"{spec.name}:{src}", dst) for spec in self.nodes for src, dst in spec.remappings)


def one_process(specs: list[NodeSpec]) -> tuple[list[NodeSpec], StackSpec | None]:
    """Split :func:`follow_nodes`'s processes into (those that stay their own, the ``robot_stack`` process).

    The nodes of :data:`STACK_NODES` go into one ``robot_stack`` process, in their order; the
    twin and the bench robot stand for the robot and keep their own processes, started first.

    Args:
        specs: The processes of :func:`follow_nodes` (or :func:`bench_robot_nodes`).

    Returns:
        The processes of their own, in order, and the stack process (``None`` if no node is hosted).
    """
    own = [spec for spec in specs if spec.name not in STACK_NODES]
    hosted = tuple(spec for spec in specs if spec.name in STACK_NODES)
    return own, (StackSpec(hosted) if hosted else None)


BENCH_ROBOT_KINDS = ("tsnake",)
BENCH_ROBOT_LATENCY_MS = 20.0
"""The bridge's ``latency_ms`` on the bench robot's pty, ms (the emulated backend's margin too)."""
"""Robot kinds the bench robot (``snake_hardware.emulator.body``) models."""


def bench_robot_models(robot: str) -> bool:
    """Whether the bench robot models ``robot`` (name or YAML path)."""
    return load_robot(robot).kind in BENCH_ROBOT_KINDS


def bench_robot_port(robot: str) -> str:
    """The pty link of a launch's bench robot: one per robot and user, in the temp directory."""
    name = Path(robot).stem if robot.endswith((".yaml", ".yml")) else robot
    return str(Path(tempfile.gettempdir()) / f"snake_bench_{name}_{os.getuid()}")


def bench_robot_nodes(robot: str, world: str = "", mocap_topic: str = "mocap/head_pose",
                      seed: int = 0, lifted: bool = False) -> list[NodeSpec]:
    """The bench robot and the bridge on its pty (the ``dynamixel`` backend, as on the robot).

    The bench robot publishes its motion capture on ``mocap_topic``; the bridge arms by
    itself (unattended, as the emulated backend does), with a latency timer of
    :data:`BENCH_ROBOT_LATENCY_MS`: the bench robot serves its bus from a process whose
    physics thread shares the interpreter, and on a loaded machine answers late by more than
    the read timeout of a U2D2's 1 ms timer. ``world``, ``seed`` (which robot: its drawn
    variation) and ``lifted`` (held by the head) are the bench robot's parameters.
    """
    port = bench_robot_port(robot)
    mocap = (("mocap/head_pose", mocap_topic),) if mocap_topic != "mocap/head_pose" else ()
    bench = NodeSpec("bench_robot", "bench_robot", {"robot": robot, "world": world, "seed": seed, "lifted": lifted,
                                                    "link": port},
                     ("bench_robot.yaml",), mocap)
    bridge = NodeSpec("bridge_node", "bridge_node", {"robot": robot, "backend": "dynamixel", "port": port,
                                                     "auto_arm": True, "latency_ms": BENCH_ROBOT_LATENCY_MS},
                      ("bridge.yaml",))
    return [bench, bridge]
