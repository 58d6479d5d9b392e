"""The robot's nodes in one process: several rclpy nodes spun by one executor.

    ros2 run snake_ros robot_stack --ros-args --params-file config/bridge.yaml --params-file config/gait_node.yaml

Each node keeps its name, topics, services, parameters and safe-exit action; only the
process is shared, which saves what every rclpy process pays by itself (its DDS
participant with its discovery traffic and threads, the interpreter and its imports, an
executor waking for its own timers). The params files are the nodes' own (every
``--params-file`` is checked against every node's table; each node takes its own block).
A ``-p name:=value`` override goes to the nodes of the process that have that parameter
(rewritten as rcl's node-scoped ``-p node:name:=value``, one per such node); a name that
no node of the process has is one FATAL line and exit code 2. ``-p node:name:=value``
gives a value to one node, and ROS's own parameters (``use_sim_time``, ...) reach every node.
``--help`` describes the process and lists every chosen node's parameters.

``--nodes`` (outside ``--ros-args ... --``) picks the nodes, built in that order (default: the
bridge, the gait node and the two monitors, the bridge first; the follow loop's planner_node and
path_follower are there to choose too). On exit their safe-exit actions run in reverse order, so
the gait holds its last shape before the bridge makes the servos safe. The nodes share one
thread: a slow callback of one delays the others' (a monitor's evaluation takes from
microseconds to a few milliseconds; the bridge's cycle period is 10 ms).

``--executor`` picks what spins them: ``events`` (the default), rclpy's EventsExecutor, or
``single``, the SingleThreadedExecutor every node uses by itself. The EventsExecutor keeps its
event queue and timers in C++; the SingleThreadedExecutor rebuilds its wait set in Python from
every service, timer, subscription and event handler of every node at every wake-up, about
400 times a second here: half of the process's time (docs/benchmarks.md has the measurements).
rclpy still calls the EventsExecutor experimental; what it is known to do differently is
covered: timer events it queued behind a slow callback run back to back, and the bridge's goal
shaper moves the goals by the time actually elapsed, so such a burst never outruns the
velocity limit (docs/hardware.md); a timer reset (the gait node's prompt tick) leaves the other
timers running (tested). ``--executor single`` is the fallback, with the same behaviour at
about twice the CPU.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from snake_ros.parameters import ParameterTable, did_you_mean
from snake_ros.runtime import EXECUTORS, EXIT_BAD_CONFIG, EXIT_BROKEN_PIPE, EXIT_OK, NodeSpec, run_nodes


def _bridge() -> NodeSpec:
    from snake_ros.bridge_node import PARAMETERS, BridgeNode

    return NodeSpec(BridgeNode, BridgeNode.shutdown_safely, PARAMETERS)


def _gait() -> NodeSpec:
    from snake_ros.gait_node import PARAMETERS, GaitNode

    return NodeSpec(GaitNode, GaitNode.stop_safely, PARAMETERS)


def _singularity() -> NodeSpec:
    from snake_ros.singularity_node import PARAMETERS, SingularityNode

    return NodeSpec(SingularityNode, SingularityNode.stop_safely, PARAMETERS)


def _slippage() -> NodeSpec:
    from snake_ros.slippage_node import PARAMETERS, SlippageNode

    return NodeSpec(SlippageNode, SlippageNode.stop_safely, PARAMETERS)


def _planner() -> NodeSpec:
    from snake_ros.planner_node import PARAMETERS, PlannerNode

    return NodeSpec(PlannerNode, PlannerNode.stop_safely, PARAMETERS)


def _follower() -> NodeSpec:
    from snake_ros.path_follower_node import PARAMETERS, PathFollowerNode

    return NodeSpec(PathFollowerNode, PathFollowerNode.stop_safely, PARAMETERS)


NODES: dict[str, Callable[[], NodeSpec]] = {
    "bridge_node": _bridge,
    "gait_node": _gait,
    "singularity_monitor": _singularity,
    "slippage_monitor": _slippage,
    "planner_node": _planner,
    "path_follower": _follower,
}
"""The nodes ``robot_stack`` can run, by node name, in their building order."""

DEFAULT_NODES = ("bridge_node", "gait_node", "singularity_monitor", "slippage_monitor")
"""The nodes run without ``--nodes``: the robot stack of ``snake.launch.py``, the bridge first.

The follow loop's planner and path follower join them with ``--nodes`` (``follow.launch.py``
runs ``bridge_node,gait_node,planner_node,path_follower``: the follower, which commands
motion, built last and stopped first)."""

_NODES_FLAG = "--nodes"
_EXECUTOR_FLAG = "--executor"
_PARAM_FLAGS = ("-p", "--param")  # rcl's parameter override option
_ROS_PARAMETERS = ("use_sim_time", "qos_overrides.", "start_type_description_service")  # every node has them
_PROGRAM = "robot_stack"


class NodeListError(ValueError):
    """A bad ``--nodes`` or ``--executor`` value (one line naming the flag)."""


class ParameterRouteError(ValueError):
    """A ``-p name:=value`` whose name no node of the process has (one line naming it)."""


def _own_options(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """(``--nodes`` / ``--executor`` values outside the ``--ros-args`` groups, the other arguments in order).

    A ``--ros-args`` group runs to ``--`` or the end, as rcl reads it.
    """
    rest: list[str] = []
    given: dict[str, str] = {}
    inside = False
    k = 0
    while k < len(argv):
        arg = argv[k]
        flag, eq, value = arg.partition("=")
        if arg == "--ros-args":
            inside = True
        elif arg == "--" and inside:
            inside = False
        elif not inside and flag in (_NODES_FLAG, _EXECUTOR_FLAG):
            if not eq:
                if k + 1 >= len(argv):
                    raise NodeListError(f"{flag}: needs a value")
                value, k = argv[k + 1], k + 1
            given[flag] = value
            k += 1
            continue
        rest.append(arg)
        k += 1
    return given, rest


def select_nodes(argv: list[str]) -> tuple[list[str], str, list[str]]:
    """(node names of ``--nodes``, executor of ``--executor``, ``argv`` without those flags).

    ``--nodes a,b`` (or ``--nodes=a,b``) and ``--executor single|events``, outside the
    ``--ros-args ... --`` groups; absent: every node of :data:`DEFAULT_NODES` in its order, ``events``.

    Raises:
        NodeListError: an unknown or repeated node name, an empty list, an unknown executor.
    """
    given, rest = _own_options(argv)
    executor = given.get(_EXECUTOR_FLAG, "events")
    if executor not in EXECUTORS:
        raise NodeListError(f"{_EXECUTOR_FLAG}: must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    spec = given.get(_NODES_FLAG)
    if spec is None:
        return list(DEFAULT_NODES), executor, rest
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in NODES]
    if not names or unknown or len(set(names)) != len(names):
        raise NodeListError(f"{_NODES_FLAG}: need distinct names among {', '.join(NODES)}, got {spec!r}")
    return names, executor, rest


def route_parameters(argv: list[str], tables: dict[str, ParameterTable]) -> list[str]:
    """``argv`` with each ``-p name:=value`` of its ``--ros-args`` groups given to the nodes that have ``name``.

    Every such override becomes one node-scoped ``-p node:name:=value`` per node of ``tables``
    (node name -> parameter table) that declares ``name``. Overrides already scoped to a node
    (``node:name:=value``) and ROS's own parameters, which every node has, are left as they are.

    Raises:
        ParameterRouteError: no node of ``tables`` has the parameter.
    """
    out: list[str] = []
    inside = False
    k = 0
    while k < len(argv):
        arg = argv[k]
        if arg == "--ros-args":
            inside = True
        elif arg == "--" and inside:
            inside = False
        elif inside and arg in _PARAM_FLAGS and k + 1 < len(argv):
            name, sep, value = argv[k + 1].partition(":=")
            if sep and ":" not in name and not name.startswith(_ROS_PARAMETERS):
                owners = [node for node, table in tables.items() if name in table.names]
                if not owners:
                    known = [n for table in tables.values() for n in table.names]
                    raise ParameterRouteError(
                        f"-p {name}: not a parameter of any node of this process ({', '.join(tables)})"
                        f"{did_you_mean(name, known)}")
                for node in owners:
                    out += [arg, f"{node}:{name}:={value}"]
                k += 2
                continue
        out.append(arg)
        k += 1
    return out


def help_text(specs: dict[str, NodeSpec]) -> str:
    """``robot_stack --help``: the process's own options, how parameters reach the nodes, each node's table."""
    lines = [
        f"usage: {_PROGRAM} [{_NODES_FLAG} NAME,...] [{_EXECUTOR_FLAG} {'|'.join(EXECUTORS)}] "
        "[--ros-args --params-file FILE ... -p NAME:=VALUE ...]",
        "",
        "The robot's nodes in one process, spun by one executor; each node keeps its name, topics, "
        "services, parameters and safe-exit action.",
        "",
        "options:",
        f"  {_NODES_FLAG} NAME,...   nodes to run, built in that order, among {','.join(NODES)} "
        f"(default: {','.join(DEFAULT_NODES)})",
        f"  {_EXECUTOR_FLAG} KIND    single: rclpy's SingleThreadedExecutor; events: rclpy's EventsExecutor "
        "(default: events)",
        "  -h, --help         this text",
        "",
        "parameters: every --params-file is checked against every node; each node takes its own block.",
        "  -p NAME:=VALUE goes to every node below that has NAME; a NAME none has is refused (exit code 2).",
        "  -p NODE:NAME:=VALUE goes to that node only.",
    ]
    for spec in specs.values():
        if spec.parameters is not None:
            table = spec.parameters.help(_PROGRAM).splitlines()
            start = next(i for i, line in enumerate(table) if line.startswith("parameters of "))
            lines += ["", *table[start:]]
    return "\n".join(lines)


def _user_args(argv: list[str]) -> list[str]:
    """The arguments outside the ``--ros-args ... --`` groups."""
    out, inside = [], False
    for arg in argv:
        if arg == "--ros-args":
            inside = True
        elif arg == "--" and inside:
            inside = False
        elif not inside:
            out.append(arg)
    return out


def main(args: list[str] | None = None) -> int:
    """Run the chosen nodes (``--nodes``, default :data:`DEFAULT_NODES`) in this process until Ctrl-C or SIGTERM."""
    argv = list(sys.argv if args is None else args)
    try:
        names, executor, rest = select_nodes(argv[1:])
    except NodeListError as err:
        print(f"[FATAL] {err}", file=sys.stderr, flush=True)
        return EXIT_BAD_CONFIG
    specs = {name: NODES[name]() for name in names}
    if {"-h", "--help"} & set(_user_args(rest)):
        try:
            print(help_text(specs))
            sys.stdout.flush()  # a closed pipe (``--help | head -1``) shows here
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)  # as the runtime does: nothing more to a closed stdout
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
            return EXIT_BROKEN_PIPE
        return EXIT_OK
    tables = {name: spec.parameters for name, spec in specs.items() if spec.parameters is not None}
    try:
        rest = route_parameters(rest, tables)
    except ParameterRouteError as err:
        print(f"[FATAL] {err}", file=sys.stderr, flush=True)
        return EXIT_BAD_CONFIG
    return run_nodes(list(specs.values()), [argv[0], *rest], executor)


if __name__ == "__main__":
    raise SystemExit(main())
