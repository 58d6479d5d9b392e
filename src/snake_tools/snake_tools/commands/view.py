"""``snake view``: watch the robot live in Foxglove or Lichtblick (Foxglove WebSocket protocol).

Serves the stack's topics on ``ws://127.0.0.1:PORT`` (:mod:`snake_tools.live_view`): open a
connection to it in the app ("Open connection", Foxglove WebSocket) and load
``config/foxglove_layout.json`` for the panels. Clients may offer either name of the protocol
(``foxglove.websocket.v1`` or ``foxglove.sdk.v1``; :mod:`snake_tools.view_handshake`); a refused
one is one line on stderr naming what it offered. ``--allow-commands`` offers arm / disarm /
e-stop / clear-estop as services the app can call (off by default; see docs/security.md). Ctrl-C or
SIGTERM stops it with an exit line and exit code 0 (its normal end, as a node's).
"""

from __future__ import annotations

import argparse
import sys

from snake_tools.cli import int_at_least
from snake_tools.cli_signals import Terminated

_DEFAULT_PORT = 8765  # the apps' default connection string


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake view``."""
    p = subparsers.add_parser("view", help="live view for Foxglove / Lichtblick (Foxglove WebSocket server)")
    p.add_argument("--robot", default="tsnake", help="robot name or YAML path (the body drawn)")
    p.add_argument("--port", type=int_at_least(1), default=_DEFAULT_PORT, help="TCP port on 127.0.0.1")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; another address exposes the view to that network)")
    p.add_argument("--bridge", default="/bridge_node", help="the bridge node the command services call")
    p.add_argument("--mocap-topic", default="mocap/head_pose",
                   help="the head's motion-capture pose (geometry_msgs/PoseStamped), e.g. /vrpn_mocap/snake_head/pose")
    p.add_argument("--allow-commands", action="store_true",
                   help="offer /bridge/arm, /bridge/disarm, /bridge/emergency_stop, /bridge/clear_estop "
                        "as services the app can call")
    p.set_defaults(func=run)


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Start the server and the node; serve until Ctrl-C."""
    import foxglove
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    from snake_core.robot import load_robot
    from snake_tools.live_view import LiveView, command_services, make_channels
    from snake_tools.view_handshake import HandshakeRelay

    robot = load_robot(args.robot)
    if args.port > 65535:
        raise ValueError(f"--port: {args.port} is not a TCP port (1-65535)")
    context = rclpy.Context()
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)  # Ctrl-C: KeyboardInterrupt
    node = rclpy.create_node("snake_view", context=context)
    # One thread spins the node; a service the app calls waits on the server's thread for the answer
    # that this one delivers. (rclpy's MultiThreadedExecutor, spun once at a time, re-polled queued
    # callbacks without waiting and took most of a core: snake bench view, docs/benchmarks.md.)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    server = relay = None
    try:
        view = LiveView(node, robot, make_channels(), args.bridge, args.mocap_topic)
        services = command_services(view) if args.allow_commands else []
        server = foxglove.start_server(  # on a free loopback port, reached only through the relay
            name=f"snake view ({robot.name})", host="127.0.0.1", port=0,
            capabilities=[foxglove.Capability.Services] if services else [],
            supported_encodings=["json"], services=services)
        try:
            relay = HandshakeRelay(args.host, args.port, server.port, _log)
            relay.start()
        except OSError as err:  # port in use, address not on this host
            raise OSError(f"--port {args.port}: cannot serve on {args.host}: {err}") from err
        try:  # from the line that says it serves on: a signal after it is the normal end
            print(f"snake view: serving {robot.name} on ws://{args.host}:{relay.port} (Foxglove / Lichtblick: "
                  f"Open connection > Foxglove WebSocket; layout config/foxglove_layout.json); "
                  f"commands {'allowed' if services else 'off'}", flush=True)
            while context.ok():  # a bounded wait, so that Ctrl-C's KeyboardInterrupt is raised here
                executor.spin_once(timeout_sec=0.2)
        except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM (snake_tools.cli_signals): the normal end
            _log(f"snake view: stopped ({'SIGTERM' if isinstance(stop, Terminated) else 'SIGINT'}); "
                 f"served ws://{args.host}:{relay.port}")
        return 0
    finally:
        if relay is not None:
            relay.stop()
        if server is not None:
            server.stop()
        executor.shutdown()
        node.destroy_node()
        if context.ok():
            rclpy.shutdown(context=context)
        sys.stdout.flush()
