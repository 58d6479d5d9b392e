"""``snake teleop``: keyboard teleop in the terminal, ``cmd_vel`` at a fixed repeat rate.

teleop_twist_keyboard's keys (see :mod:`snake_tools.teleop.keymap`), publishing
``geometry_msgs/TwistStamped`` (``Twist`` with ``--unstamped``) with the held command at
``--rate`` Hz, so that a held command keeps the gait going past its deadman
(``cmd_timeout``). Speeds start at the gait's limits read from ``config/gait_node.yaml``.
A zero twist goes out on every exit: ``Q``, Ctrl-C, Ctrl-D, SIGINT, SIGTERM and SIGHUP
(the terminal or SSH session closing); the terminal's settings are restored.

Header stamps are the host's clock (ROS time, not simulated time); ``--frame-id`` sets
``header.frame_id`` (empty by default, as teleop_twist_keyboard).

``A`` / ``D`` / ``E`` / ``C`` call the bridge's ``~/arm``, ``~/disarm``, ``~/emergency_stop`` and
``~/clear_estop`` (``--bridge`` names the node); the status line shows the bridge's state from its
``diagnostics`` and the last answer. The e-stop key is a convenience, not a safety device: the
service call needs the network and a running bridge (the line says when none answers).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from snake_core.gait.command import TwistLimits
from snake_tools.teleop.keymap import (
    BRIDGE_KEYS,
    HELP,
    Action,
    Keymap,
    TeleopConfigError,
    check_rate,
    gait_limits,
)
from snake_tools.teleop.terminal import RawTerminal

_DEFAULT_RATE_HZ = 20.0  # Hz: 10 messages per 0.5 s gait deadman
_ACK_TIMEOUT_S = 2.0  # s to wait for subscribers to acknowledge the final zero twist
_BRIDGE_POLL_S = 0.1  # s between two looks at the bridge's answers and diagnostics (keeps the repeat rate cheap)
_EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class _Signalled(Exception):  # noqa: N818 (a control-flow signal, not an error)
    """Raised in the main loop by SIGTERM / SIGHUP so that the exit path runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake teleop``."""
    p = subparsers.add_parser(
        "teleop", help="keyboard teleop (teleop_twist_keyboard keys): cmd_vel at a fixed rate, zero on exit")
    p.add_argument("--unstamped", action="store_true",
                   help="publish geometry_msgs/Twist instead of TwistStamped (for gait_node stamped:=false)")
    p.add_argument("--rate", type=float, default=_DEFAULT_RATE_HZ,
                   help="repeat rate of the held command, Hz")
    p.add_argument("--topic", default="cmd_vel", help="topic to publish on")
    p.add_argument("--frame-id", default="", help="header.frame_id of TwistStamped (default empty)")
    p.add_argument("--bridge", default="/bridge_node", help="the bridge node whose services A/D/E/C call")
    p.add_argument("--gait-config", type=Path, default=None,
                   help="the gait node's params file giving the speed limits and deadman (default: the gait "
                        "node's defaults, as in config/gait_node.yaml)")
    p.set_defaults(func=run)


def load_gait_limits(path: Path | None) -> TwistLimits:
    """The gait node's twist limits: its parameter defaults, overridden by a params file if given.

    Raises:
        TeleopConfigError: A bad params file or value, naming the file and the field.
    """
    from snake_ros.gait_node import PARAMETERS
    from snake_ros.parameters import ParameterError, read_params_file

    values = PARAMETERS.defaults()
    if path is None:
        return gait_limits(values, "gait_node defaults")
    try:
        values.update(read_params_file(path, PARAMETERS))
    except ParameterError as err:
        raise TeleopConfigError(str(err)) from err
    return gait_limits(values, str(path))


class BridgeLink:
    """The bridge's services behind the capital keys, and its state from its diagnostics.

    Answers and diagnostics arrive through the node's executor (:meth:`spin`); nothing waits.
    """

    def __init__(self, node: Any, bridge: str) -> None:
        """Create a client per service of :data:`BRIDGE_KEYS` and subscribe ``diagnostics``."""
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from std_srvs.srv import Trigger

        from snake_ros.qos import STATUS_QOS

        self._trigger = Trigger
        base = bridge.rstrip("/")
        self._clients = {name: node.create_client(Trigger, f"{base}/{name}") for name in BRIDGE_KEYS.values()}
        self.state = "not seen"
        self.note = ""
        node.create_subscription(DiagnosticArray, "diagnostics", self._on_diagnostics, STATUS_QOS)
        self._executor = SingleThreadedExecutor(context=node.context)
        self._executor.add_node(node)

    def _on_diagnostics(self, msg: Any) -> None:
        for status in msg.status:
            if status.name == "bridge: bus":
                values = {kv.key: kv.value for kv in status.values}
                self.state = values.get("state") or status.message

    def call(self, service: str) -> None:
        """Call ``~/<service>`` of the bridge; the answer shows in :meth:`text` once it arrives."""
        client = self._clients[service]
        if not client.service_is_ready():
            self.note = f"{service}: no bridge answers on {client.srv_name}"
            return
        self.note = f"{service}: sent"
        future = client.call_async(self._trigger.Request())

        def done(f: Any) -> None:
            answer = f.result()
            self.note = f"{service}: {'done' if answer.success else 'refused: ' + answer.message}"

        future.add_done_callback(done)

    def spin(self) -> None:
        """Take what has arrived (answers, diagnostics; at most two), without waiting."""
        for _ in range(2):
            self._executor.spin_once(timeout_sec=0.0)

    def text(self) -> str:
        """The bridge's state and the last answer, for the status line."""
        return self.state + (f" ({self.note})" if self.note else "")

    def close(self) -> None:
        """Stop the executor (the node is destroyed by its owner)."""
        self._executor.shutdown()


class _ExitSignals:
    """SIGTERM / SIGHUP while the loop runs: :class:`_Signalled`; once the exit path has begun: recorded.

    A hang-up closes the terminal and sends SIGHUP: the loop may see the closed terminal first
    and end, and the signal then lands in the exit path. Raised there it would cut the exit path
    short, the zero twist included; recorded, it sets the exit status.

    Attributes:
        running: Whether a signal raises (the loop runs) or is recorded (the exit path has begun).
        signum: The first exit signal received, or None.
    """

    def __init__(self) -> None:
        self.running = True
        self.signum: int | None = None

    def handler(self, signum: int, frame: FrameType | None) -> None:
        for s in _EXIT_SIGNALS:  # one is enough: a second must not cut the exit path short
            signal.signal(s, signal.SIG_IGN)
        self.signum = signum
        if self.running:
            raise _Signalled(signum)


@contextmanager
def _exit_on_signals() -> Iterator[_ExitSignals]:
    """SIGTERM and SIGHUP handled by an :class:`_ExitSignals` for the life of the block."""
    exits = _ExitSignals()
    previous = {s: signal.signal(s, exits.handler) for s in _EXIT_SIGNALS}
    try:
        yield exits
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def run(args: argparse.Namespace) -> int:
    """Read keys and publish until a quit key, a signal or a closed terminal."""
    import rclpy
    from geometry_msgs.msg import Twist, TwistStamped
    from rclpy.duration import Duration
    from rclpy.exceptions import InvalidTopicNameException
    from rclpy.signals import SignalHandlerOptions
    from rclpy.validate_topic_name import validate_topic_name

    from snake_ros.qos import COMMAND_QOS

    limits = load_gait_limits(args.gait_config)
    rate_hz = check_rate(args.rate, limits.timeout)
    try:
        validate_topic_name(args.topic)
    except InvalidTopicNameException as err:
        raise TeleopConfigError(f"--topic: {args.topic!r} is not a valid topic name") from err
    keymap = Keymap(limits.max_linear, limits.max_angular)
    term = RawTerminal(sys.stdin.fileno(), sys.stdout)
    term.check()  # refuse before any ROS start-up

    context = rclpy.Context()
    # Our own handlers: rclpy's would shut the context down before the zero twist goes out.
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("snake_teleop", context=context)
    link: BridgeLink | None = None
    try:
        msg_type = Twist if args.unstamped else TwistStamped
        pub = node.create_publisher(msg_type, args.topic, COMMAND_QOS)

        def publish(command: tuple[float, float]) -> None:
            msg: Any = msg_type()
            twist = msg if args.unstamped else msg.twist
            if not args.unstamped:
                msg.header.stamp = node.get_clock().now().to_msg()
                msg.header.frame_id = args.frame_id
            twist.linear.x, twist.angular.z = command
            pub.publish(msg)

        link = BridgeLink(node, args.bridge)
        print(HELP, flush=True)
        reason = "interrupted"  # unless the loop or a signal says otherwise (SIGINT, an error)
        code = 0
        with _exit_on_signals() as exits:
            try:
                with term:
                    term.show(keymap.status_line(rate_hz, pub.topic_name, link.text()))
                    reason = _loop(term, keymap, publish, rate_hz, pub.topic_name, link)
                exits.running = False   # the loop is over: a signal from here on is recorded
            except _Signalled as sig:   # (its handler ignores any further exit signal)
                reason, code = sig.args[0], 128 + sig.signum
            finally:
                exits.running = False   # from here a signal is recorded: the zero twist goes out
                publish((0.0, 0.0))
                acked = pub.wait_for_all_acked(Duration(seconds=_ACK_TIMEOUT_S))
                if code == 0 and exits.signum is not None:   # it came as the loop ended (a hang-up) or since
                    reason, code = signal.Signals(exits.signum).name, 128 + exits.signum
                term.write(f"\r\n{reason}: published a zero twist on {pub.topic_name}"
                           f"{'' if acked else ' (not acknowledged by every subscriber)'}\r\n")
        return code
    finally:
        if link is not None:
            link.close()
        node.destroy_node()
        rclpy.shutdown(context=context)


def _loop(term: RawTerminal, keymap: Keymap, publish: Callable[[tuple[float, float]], None], rate_hz: float,
          topic: str, link: BridgeLink) -> str:
    """Publish the held command every ``1 / rate_hz`` s and apply keys in between.

    The schedule is absolute (message k at ``t0 + k / rate_hz``), so the rate holds on
    average however long a key takes; after a stall it restarts from now rather than
    sending a burst.

    Returns:
        Why it ended: ``"quit"`` or ``"terminal closed"``.
    """
    period = 1.0 / rate_hz
    due = time.monotonic()
    poll = due
    while True:
        now = time.monotonic()
        if now >= due:
            publish(keymap.state.command)
            due += period
            if due <= now:
                due = now + period
        keys = term.read_keys(due - time.monotonic())
        if keys is None:
            return "terminal closed"
        for key in keys:
            action = keymap.press(key)
            if action is Action.QUIT:
                return "quit"
            if action is Action.BRIDGE:
                link.call(BRIDGE_KEYS[key])
        shown = link.text()
        if keys or time.monotonic() >= poll:
            link.spin()
            poll = time.monotonic() + _BRIDGE_POLL_S
        if keys or link.text() != shown:
            term.show(keymap.status_line(rate_hz, topic, link.text()))
