"""The robot's nodes in one process: several rclpy nodes spun by one executor.

    ros2 run snake_ros robot_stack --ros-args --params-file config/bridge.yaml --params-file config/gait_node.yaml

Each node keeps its name, topics, services, parameters and safe-exit action; only the
process is shared, which saves what every rclpy process pays by itself (its DDS
participant with its discovery traffic and threads, the interpreter and its imports, an
executor waking for its own timers). The params files are the nodes' own (every
``--params-file`` is checked against every node's table; each node takes its own block);
a ``-p name:=value`` override reaches every node of the process and is refused by the
nodes that do not have that parameter, so give per-node values in a params file.

``--nodes`` (outside ``--ros-args ... --``) picks the nodes, built in that order (default: all
four, the bridge first); ``--executor events`` spins them with rclpy's experimental
EventsExecutor instead of the SingleThreadedExecutor every node uses by itself (far less
Python work per wake-up; docs/benchmarks.md says what it saves). On exit their safe-exit
actions run in reverse order, so the gait holds its last shape before the bridge makes the
servos safe. The nodes share one thread: a slow callback of one delays the others' (a
monitor's evaluation takes from microseconds to a few milliseconds; the bridge's cycle
period is 10 ms).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from snake_ros.runtime import EXECUTORS, EXIT_BAD_CONFIG, NodeSpec, run_nodes


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


NODES: dict[str, Callable[[], NodeSpec]] = {
    "bridge_node": _bridge,
    "gait_node": _gait,
    "singularity_monitor": _singularity,
    "slippage_monitor": _slippage,
}
"""The nodes ``robot_stack`` can run, by node name, in their default building order."""

_NODES_FLAG = "--nodes"
_EXECUTOR_FLAG = "--executor"


class NodeListError(ValueError):
    """A bad ``--nodes`` or ``--executor`` value (one line naming the flag)."""


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
    ``--ros-args ... --`` groups; absent: every node of :data:`NODES` in its order, ``single``.

    Raises:
        NodeListError: an unknown or repeated node name, an empty list, an unknown executor.
    """
    given, rest = _own_options(argv)
    executor = given.get(_EXECUTOR_FLAG, "single")
    if executor not in EXECUTORS:
        raise NodeListError(f"{_EXECUTOR_FLAG}: must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    spec = given.get(_NODES_FLAG)
    if spec is None:
        return list(NODES), executor, rest
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in NODES]
    if not names or unknown or len(set(names)) != len(names):
        raise NodeListError(f"{_NODES_FLAG}: need distinct names among {', '.join(NODES)}, got {spec!r}")
    return names, executor, rest


def main(args: list[str] | None = None) -> int:
    """Run the chosen nodes (``--nodes``, default all) in this process until Ctrl-C or SIGTERM."""
    argv = list(sys.argv if args is None else args)
    try:
        names, executor, rest = select_nodes(argv[1:])
    except NodeListError as err:
        print(f"[FATAL] {err}", file=sys.stderr, flush=True)
        return EXIT_BAD_CONFIG
    return run_nodes([NODES[name]() for name in names], [argv[0], *rest], executor)


if __name__ == "__main__":
    raise SystemExit(main())
