"""Process plumbing shared by the nodes' ``main`` functions.

:func:`run_node` is every node's ``main``: ``--help`` from the node's parameter
table, params files checked before rcl reads them, one FATAL line and exit code 2
for a configuration the node cannot start with, and an exit path that runs the
node's safe-exit action (hold or relax the servos, stop the robot, publish a final
status) while the ROS context is still valid, on Ctrl-C and on SIGTERM alike. Every node
process runs with the snake Fast DDS profile unless it was given one
(:mod:`snake_ros.dds_profile`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import rclpy
import yaml
from rclpy.context import Context
from rclpy.duration import Duration
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from snake_core.errors import SnakeCoreError
from snake_ros.dds_profile import use_snake_profile
from snake_ros.parameters import ParameterError, ParameterTable, read_params_file

EXIT_OK = 0
EXIT_BROKEN_PIPE = 1  # stdout's reader closed the pipe early (``--help | head -1``)
EXIT_BAD_CONFIG = 2

# Wall-clock bound on one executor wait: how soon a SIGINT/SIGTERM is acted upon.
_SIGNAL_POLL_S = 0.1
# Wall-clock bound, all publishers together, on waiting for subscribers to acknowledge the exit
# messages (one shared deadline: a node with many publishers must still exit promptly).
_EXIT_ACK_S = 1.0

# The start-up look for a running node of the same name: it ends once the nodes already running
# have been discovered and no new one appeared for DUPLICATE_SETTLE_S (discovery takes 0.1 to 0.6 s
# on a loaded 2-core machine), at the latest after DUPLICATE_WAIT_S (an empty graph); its poll period.
DUPLICATE_WAIT_S = 1.5
DUPLICATE_SETTLE_S = 0.3
_GRAPH_POLL_S = 0.02

EXECUTORS = ("single", "events")
"""Executors a process can spin its nodes with: rclpy's SingleThreadedExecutor (every node's
default), or rclpy's experimental EventsExecutor (event queue in C++, far less Python work per
wake-up; :mod:`snake_ros.robot_stack` offers it)."""

N = TypeVar("N", bound=Node)


class StartupError(ValueError):
    """A problem with the command line or a params file, found before rcl starts."""


def _split_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``argv`` (program name excluded) split into the node's own arguments and the ROS ones.

    The ROS arguments are those between ``--ros-args`` and ``--`` (or the end), all such groups.
    """
    user: list[str] = []
    ros: list[str] = []
    inside = False
    for arg in list(argv)[1:]:
        if arg == "--ros-args":
            inside = True
        elif arg == "--" and inside:
            inside = False
        else:
            (ros if inside else user).append(arg)
    return user, ros


def _option_values(ros_args: Sequence[str], long: str, short: str | None = None) -> list[str]:
    values = []
    for k, arg in enumerate(ros_args):
        if arg in (long, short) and k + 1 < len(ros_args):
            values.append(ros_args[k + 1])
        elif arg.startswith(long + "="):
            values.append(arg.split("=", 1)[1])
    return values


def _effective_node_name(ros_args: Sequence[str], default: str) -> str:
    name = default
    for rule in _option_values(ros_args, "--remap", "-r"):
        key, _, value = rule.partition(":=")
        if key.rpartition(":")[2] == "__node" and value:
            name = value
    return name


def check_param_overrides(argv: Sequence[str], table: ParameterTable | None, node_name: str) -> None:
    """Check every ``-p``/``--param`` of ``argv``, each occurrence, before rcl keeps only one of them.

    rcl parses each rule's value as YAML and, for a name given several times, hands the node
    only one; a wrong value given before or after a good one would then be dropped
    silently (``-p auto_arm:=true -p auto_arm:=flase`` starting armed). Every occurrence is
    checked here the way the node checks its parameters (type, range, choices). A rule
    ``node:name:=value`` counts only for the node it names. Names the table does not know
    are left to the node (an unknown override stops it at declaration).

    Raises:
        StartupError: one line naming the parameter and the value, for the first bad one.
    """
    if table is None:
        return
    name = _effective_node_name(_split_args(argv)[1], node_name)
    for rule in _option_values(_split_args(argv)[1], "--param", "-p"):
        key, sep, text = rule.partition(":=")
        if not sep:
            continue   # rcl refuses a rule without ':=' itself
        target, _, param = key.rpartition(":")
        if target and target.lstrip("/").rpartition("/")[2] != name:
            continue
        if param not in table:
            continue
        try:
            value = yaml.safe_load(text) if text else ""
        except yaml.YAMLError:
            value = text
        problem = table[param].problem(value)
        if problem is not None:
            raise StartupError(f"parameter {param} (command line -p {rule}): {problem}")


def _effective_namespace(ros_args: Sequence[str]) -> str:
    namespace = "/"
    for rule in _option_values(ros_args, "--remap", "-r"):
        key, _, value = rule.partition(":=")
        if key.rpartition(":")[2] == "__ns" and value:
            namespace = value if value.startswith("/") else "/" + value
    return namespace


def running_duplicates(context: Context, names: Sequence[tuple[str, str]], wait_s: float,
                       settle_s: float = 0.0) -> list[str]:
    """Which of ``names`` ((name, namespace) pairs) already run on the graph, by fully qualified name.

    A hidden probe node (its name starts with ``_``) watches the graph while discovery shows
    the nodes already running: it stops as soon as one of ``names`` shows up, once other nodes
    were seen and none appeared for ``settle_s`` seconds (discovery has settled), or after
    ``wait_s`` seconds (an empty graph). Built before the process's own nodes, so nothing of
    theirs (a bus opened, a service offered) exists while a duplicate would be found. The probe
    ignores the process's ``--ros-args`` (``use_global_arguments=False``): a ``-r __node:=NAME``
    there renames every node of the process and would make the probe the duplicate it looks for.
    """
    probe = rclpy.create_node(f"_snake_name_check_{os.getpid()}", context=context, use_global_arguments=False,
                              start_parameter_services=False, enable_rosout=False)
    wanted = {(name, namespace) for name, namespace in names}
    try:
        start = time.monotonic()
        seen: set[tuple[str, str]] = set()
        changed = start
        while True:
            now = time.monotonic()
            graph = {pair for pair in probe.get_node_names_and_namespaces() if not pair[0].startswith("_")}
            found = wanted & graph
            if graph - seen:
                seen |= graph
                changed = now
            settled = bool(seen) and now - changed >= settle_s
            if found or settled or now - start >= wait_s:
                return sorted(f"{ns.rstrip('/')}/{name}" for name, ns in found)
            time.sleep(_GRAPH_POLL_S)
    finally:
        probe.destroy_node()


def check_params_files(argv: Sequence[str], table: ParameterTable | None, node_name: str) -> None:
    """Check every ``--params-file`` of ``argv`` before rcl parses it (see :func:`read_params_file`).

    Raises:
        StartupError: the first problem found, one line naming the file and the field.
    """
    ros_args = _split_args(argv)[1]
    name = _effective_node_name(ros_args, node_name)
    for path_text in _option_values(ros_args, "--params-file"):
        try:
            read_params_file(path_text, table, name)
        except ParameterError as err:
            raise StartupError(str(err)) from err


def make_executor(kind: str, context: Context) -> Executor:
    """An executor of ``kind`` (see :data:`EXECUTORS`) on ``context``.

    Raises:
        ValueError: an unknown kind (the message names the choices).
    """
    if kind == "single":
        return SingleThreadedExecutor(context=context)
    if kind == "events":
        from rclpy.experimental import EventsExecutor  # rclpy's event-driven executor, still experimental

        return EventsExecutor(context=context)
    raise ValueError(f"executor {kind!r}: must be one of {', '.join(EXECUTORS)}")


def spin(nodes: Node | Sequence[Node], stop: threading.Event, executor_kind: str = "single") -> None:
    """Spin ``nodes`` (one node, or several on one executor) until ``stop`` is set or the context shuts down."""
    group = [nodes] if isinstance(nodes, Node) else list(nodes)
    context = group[0].context
    executor = make_executor(executor_kind, context)
    for node in group:
        executor.add_node(node)
    try:
        while not stop.is_set() and rclpy.ok(context=context):
            executor.spin_once(timeout_sec=_SIGNAL_POLL_S)
    except ExternalShutdownException:
        pass
    finally:
        for node in group:
            executor.remove_node(node)
        executor.shutdown(timeout_sec=0.0)


@dataclass(frozen=True)
class NodeSpec:
    """One node of a process: how to build it, its safe-exit action and its parameter table."""

    factory: Callable[[], Node]
    on_exit: Callable[[Any], str | None] | None = None
    parameters: ParameterTable | None = None


def run_node(factory: Callable[[], N], args: list[str] | None = None,
             on_exit: Callable[[N], str | None] | None = None,
             parameters: ParameterTable | None = None) -> int:
    """Init rclpy, build the node with ``factory``, spin it, clean up; the exit code.

    ``--help`` (outside ``--ros-args``) prints the node's parameters from
    ``parameters`` and exits 0 without starting anything (1, without a traceback,
    when the reader closed the pipe early). A bad configuration (a
    params file, a parameter value, an error of the core such as a robot YAML
    field) is one FATAL line on stderr and exit code 2, not a traceback. SIGINT and
    SIGTERM only set a flag that the spin loop checks between waits, so
    ``on_exit(node)`` (hold or relax the servos, publish a stop or a final status)
    runs while the context is still valid, then the node is destroyed and rclpy
    shut down. A signal that arrives while the node is being built ends the
    process right after it, through the same exit path.
    """
    return run_nodes([NodeSpec(factory, on_exit, parameters)], args)


def run_nodes(specs: Sequence[NodeSpec], args: list[str] | None = None, executor: str = "single") -> int:
    """:func:`run_node` for several nodes in one process, spun by one executor; the exit code.

    Every params file is checked against every node's table before rcl starts (a file's
    blocks for the other nodes are left to them). The nodes are built in order; if one
    cannot start, the exit actions of those already built run (in reverse order) and the
    exit code is 2. On exit the nodes' exit actions run in reverse order of building
    (the bridge, built first, makes the servos safe last, after the gait's final hold).
    ``executor`` is one of :data:`EXECUTORS`.
    """
    argv = list(sys.argv if args is None else args)
    user = _split_args(argv)[0]
    if "-h" in user or "--help" in user:
        try:
            texts = [spec.parameters.help(Path(argv[0]).name) for spec in specs if spec.parameters is not None]
            print("\n\n".join(texts) if texts else "usage: see README.md")
            sys.stdout.flush()  # a closed pipe (``--help | head -1``) shows here, not at interpreter exit
        except BrokenPipeError:
            return _stdout_closed()
        return EXIT_OK
    try:
        for spec in specs:
            node_name = spec.parameters.node_name if spec.parameters else ""
            check_params_files(argv, spec.parameters, node_name)
            check_param_overrides(argv, spec.parameters, node_name)
    except StartupError as err:
        _fatal(str(err))
        return EXIT_BAD_CONFIG

    stop = threading.Event()
    previous: dict[int, Any] = {}
    why: list[str] = []

    def request_stop(signum: int, frame: FrameType | None) -> None:
        if not why:
            why.append(signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[int(sig)] = signal.signal(sig, request_stop)
    try:
        use_snake_profile()  # read by Fast DDS when rcl creates this process's participant
        try:
            rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
        except Exception as err:  # rcl refused the command line (its own parser)
            _fatal(f"cannot start: {str(err).splitlines()[0]}")
            return EXIT_BAD_CONFIG
        built: list[tuple[Node, NodeSpec]] = []
        try:
            try:
                ros_args = _split_args(argv)[1]
                namespace = _effective_namespace(ros_args)
                own = [(_effective_node_name(ros_args, spec.parameters.node_name), namespace)
                       for spec in specs if spec.parameters is not None]
                running = running_duplicates(rclpy.get_default_context(), own, DUPLICATE_WAIT_S,
                                             DUPLICATE_SETTLE_S) if own else []
                if running:
                    _fatal(f"cannot start: a node named {running[0]} already runs (one node per name; "
                           "stop it or start this one under another name with -r __node:=NAME)")
                    return EXIT_BAD_CONFIG
                for spec in specs:
                    try:
                        built.append((spec.factory(), spec))
                    except (SnakeCoreError, ValueError) as err:
                        name = spec.parameters.node_name if spec.parameters is not None else ""
                        _fatal(f"cannot start {name or 'node'}: {err}")
                        return EXIT_BAD_CONFIG
                spin([node for node, _ in built], stop, executor)
            finally:
                _exit_all(built, why[0] if why else "the ROS context shut down")
        finally:
            rclpy.try_shutdown()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return EXIT_OK


def _exit_all(built: list[tuple[Node, NodeSpec]], why: str) -> None:
    """Run the exit actions (reverse order of building), then destroy every node, whatever fails.

    Every node logs one line on the way out: what stopped it (``why``) and what its exit
    action says it left behind (the bridge: what the servos were left in).
    """
    if not built:
        return
    node, spec = built[-1]
    try:
        try:
            left = None
            if spec.on_exit is not None and rclpy.ok(context=node.context):
                left = spec.on_exit(node)
                _flush(node)
            line = f"exiting ({why})" + (f": {left}" if left else "")
            try:
                node.get_logger().info(line)
            except Exception:   # the logger is gone with the context: the line still goes out
                print(f"[INFO] [{node.get_name()}]: {line}", file=sys.stderr, flush=True)
        finally:
            node.destroy_node()
    finally:
        _exit_all(built[:-1], why)


def _flush(node: Node) -> None:
    """Give reliable subscribers a bounded time (``_EXIT_ACK_S`` in all) to acknowledge the exit messages."""
    deadline = time.monotonic() + _EXIT_ACK_S
    for publisher in list(node.publishers):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        publisher.wait_for_all_acked(Duration(seconds=left))


def _stdout_closed() -> int:
    """Exit code 1 after the stdout reader closed the pipe, with nothing more written to it.

    The recipe of the Python documentation's "Note on SIGPIPE" (``signal`` module): stdout
    is pointed at ``os.devnull`` so the interpreter's final flush cannot fail again.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


def _fatal(text: str) -> None:
    print(f"[FATAL] {' '.join(text.split())}", file=sys.stderr, flush=True)
