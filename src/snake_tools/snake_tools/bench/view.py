"""``snake bench view``: what ``snake view`` costs beside the running stack, with 0, 1 and 5 clients.

The twin (``twin_node``, tsnake, flat world), the rolling gait (``gait_node`` on the twin's
clock, 50 Hz) and ``snake view`` run as separate processes in an isolated DDS domain, started
the way :mod:`snake_tools.bench.stack` starts its nodes; a small process publishes ``cmd_vel``
(forward, 0.05 m/s, 10 Hz) so that the snake moves (the gait stops without commands). The
bench then connects Foxglove WebSocket protocol clients to the view: the ``websockets``
library offering the subprotocol ``foxglove.websocket.v1`` (the name the Foxglove and
Lichtblick apps offer), each subscribing to every advertised channel and reading every
message, in threads of the bench's own process (their cost is not the view's).

The view's scene carries the head's trail, which grows by one point per scene (20 Hz) up to
:data:`snake_tools.live_view.TRAIL_POINTS` (2000, so 100 s), and the view's work grows with it. The
windows therefore start once a scene with a full trail has reached a client (``warmup_s``: from the
view's serving line to then), the steady state of a view left open; ``--no-warmup`` measures from the
start instead (a quick check whose figures rise window by window).

For each client count (0 and those of ``--clients``), ``--runs`` windows of ``--duration`` s,
the counts taken in turn (0, 1, 5, 0, 1, 5, ...) so that a change of the host's load weighs
on each alike. Before a window the clients of that count are connected and each has received a
message (the window measures serving, not the handshake); after it they are closed.

Figures (``--json``), per client count under ``by_clients`` (median, min, max and the runs):

- ``cpu_percent``: the ``snake view`` process's user + system CPU time over the window (all its
  threads, ``/proc/<pid>/stat``), % of one core;
- ``rss_mb``: its ``VmRSS`` at the window's end, MiB;
- ``stack_cpu_percent``: the twin's and the gait's processes together, % of one core;
- ``messages_per_s_per_client``: messages each client received per second (0 without clients).

``cpu_percent_per_client`` per count N: (median CPU with N clients - median CPU with none) / N,
% of one core; ``cpu_percent_per_client_max`` the largest of them, against
``goal_cpu_percent_per_client`` (5 %); ``rss_mb_per_client`` likewise for the memory;
``stack_cpu_ratio_max_clients`` the twin's and the gait's median CPU with the most clients over
that with none (1: the stack beside the view is unaffected); ``load_average_1_5_15`` the host's load
averages at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from snake_tools.bench.stack import StackBenchError, _domain_id, _Stack, cpu_seconds, memory_mib
from snake_tools.cli import count, positive_float
from snake_tools.output import print_json, print_table

GOAL_CPU_PERCENT_PER_CLIENT = 5.0
"""% of one core a client may add to ``snake view``."""
SUBPROTOCOL = "foxglove.websocket.v1"
"""The name the Foxglove and Lichtblick apps offer for the Foxglove WebSocket protocol."""
_DEFAULT_DURATION_S = 10.0  # s, one measurement window
_DEFAULT_CLIENTS = (1, 5)
_ROBOT = "tsnake"
_RATE_HZ = 50  # Hz, the gait's tick
_START_TIMEOUT_S = 120.0  # s, failure bound on the view's "serving" line and a client's first message
_RECV_S = 0.5  # s, longest wait of a client's receive (it checks its stop flag in between)
_POLL_S = 0.05  # s, between two checks of a condition waited on
_MESSAGE_DATA = 0x01  # opcode of a binary server message carrying a subscribed channel's data
_DRIVE_CODE = """
import rclpy
from rclpy.executors import ExternalShutdownException
from geometry_msgs.msg import TwistStamped
from snake_ros.qos import COMMAND_QOS
rclpy.init()
node = rclpy.create_node("bench_view_drive")
pub = node.create_publisher(TwistStamped, "cmd_vel", COMMAND_QOS)
def send():
    msg = TwistStamped()
    msg.twist.linear.x = 0.05
    pub.publish(msg)
node.create_timer(0.1, send)
try:
    rclpy.spin(node)
except (KeyboardInterrupt, ExternalShutdownException):
    pass
"""
"""The ``cmd_vel`` driver's process: forward at 0.05 m/s, 10 Hz, until SIGINT."""


class ViewBenchArgumentError(ValueError):
    """A bad ``snake bench view`` flag; the message names it."""


def _client_counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"need counts like 1,5, got {text!r}") from None
    if not counts or any(n < 1 for n in counts):
        raise argparse.ArgumentTypeError(f"need counts of at least 1, got {text!r}")
    return tuple(sorted(set(counts)))


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake bench view``."""
    p = subparsers.add_parser("view", help="snake view beside the twin and the gait: CPU and RSS with 0, 1 and 5 "
                                           "Foxglove WebSocket clients")
    p.add_argument("--clients", type=_client_counts, default=",".join(map(str, _DEFAULT_CLIENTS)), metavar="N,N",
                   help="client counts measured besides 0 (default 1,5)")
    p.add_argument("--duration", type=positive_float, default=_DEFAULT_DURATION_S, help="one window, s")
    p.add_argument("--runs", type=count, default=3, help="windows per client count (median, min, max)")
    p.add_argument("--no-warmup", dest="warmup", action="store_false",
                   help="measure from the start, not once the scene's trail is full (a quick check)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


class Client:
    """A Foxglove WebSocket protocol client that subscribes to every channel and counts the messages."""

    def __init__(self, port: int, watch_trail: bool = False) -> None:
        from websockets.sync.client import connect

        self._exit = ExitStack()  # the connection as a context manager, closed by close()
        self.ws = self._exit.enter_context(connect(f"ws://127.0.0.1:{port}",
                                                   subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
                                                   open_timeout=_START_TIMEOUT_S))
        self.messages = 0
        self.channels: set[int] = set()
        self.trail_points = 0  # with watch_trail: points of the head's trail in the last scene received
        self._scene: int | None = None  # the /robot/scene channel's id, with watch_trail
        self._watch_trail = watch_trail
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _subscribe(self, channels: list[dict[str, Any]]) -> None:
        for c in channels:
            if c["topic"] == "/robot/scene":
                self._scene = c["id"]
        new = [c["id"] for c in channels if c["id"] not in self.channels]
        self.channels.update(new)
        if new:
            self.ws.send(json.dumps({"op": "subscribe",
                                     "subscriptions": [{"id": c, "channelId": c} for c in new]}))

    def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            while not self._stop.is_set():
                try:
                    frame = self.ws.recv(timeout=_RECV_S)
                except TimeoutError:
                    continue
                if isinstance(frame, str):
                    msg = json.loads(frame)
                    if msg.get("op") == "advertise":
                        self._subscribe(msg["channels"])
                elif frame[0] == _MESSAGE_DATA:
                    sub, _log_time = struct.unpack_from("<IQ", frame, 1)  # subscription id = channel id
                    self.messages += 1
                    if self._watch_trail and sub == self._scene:
                        self.trail_points = _trail_points(json.loads(frame[13:]))
        except ConnectionClosed as err:
            if not self._stop.is_set():
                self.error = err
        except Exception as err:  # reported by the bench, not lost in the thread
            self.error = err

    def close(self) -> None:
        """Close the connection and end the reading thread."""
        self._stop.set()
        self._exit.close()
        self._thread.join()


def _trail_points(scene: dict[str, Any]) -> int:
    """Points of the head's trail in a ``foxglove.SceneUpdate`` of ``snake view``."""
    for entity in scene.get("entities", []):
        if entity.get("id") == "head_trajectory":
            return sum(len(line.get("points", [])) for line in entity.get("lines", []))
    return 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _node_command(executable: str, params: dict[str, str]) -> list[str]:
    """``python -m snake_ros.EXECUTABLE --ros-args -p k:=v ...`` (the tree on ``PYTHONPATH`` runs)."""
    cmd = [sys.executable, "-m", f"snake_ros.{executable}", "--ros-args"]
    for key, value in params.items():
        cmd += ["-p", f"{key}:={value}"]
    return cmd


def _wait(done: Callable[[], bool], stack: _Stack, failure: str) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while not done():
        stack.check_alive()
        if time.monotonic() > deadline:
            raise StackBenchError(failure)
        time.sleep(_POLL_S)


def _stats(values: list[float]) -> dict[str, Any]:
    return {"median": float(np.median(values)), "min": min(values), "max": max(values), "runs": values}


def _window(stack: _Stack, port: int, n: int, duration: float) -> dict[str, float]:
    """One window with ``n`` clients: the view's CPU % and RSS, the stack's CPU %, messages/s per client."""
    view = stack.procs["snake_view"].popen.pid
    others = [p.popen.pid for name, p in stack.procs.items() if name in ("twin_node", "gait_node")]
    clients: list[Client] = []
    try:
        for _ in range(n):
            clients.append(Client(port))
        _wait(lambda: all(c.messages > 0 or c.error for c in clients), stack,
              f"a client received nothing within {_START_TIMEOUT_S:g} s")
        counts0 = [c.messages for c in clients]
        cpu0, stack0, t0 = cpu_seconds(view), sum(cpu_seconds(p) for p in others), time.monotonic()
        end = t0 + duration
        while time.monotonic() < end:  # the processes are watched through the window
            stack.check_alive()
            time.sleep(min(_RECV_S, max(0.0, end - time.monotonic())))
        cpu1, stack1, t1 = cpu_seconds(view), sum(cpu_seconds(p) for p in others), time.monotonic()
        counts1 = [c.messages for c in clients]
        rss, _peak = memory_mib(view)
    finally:
        for c in clients:
            c.close()
    errors = [repr(c.error) for c in clients if c.error is not None]
    if errors:
        raise StackBenchError(f"a client failed: {errors[0]}")
    window = t1 - t0
    received = [(b - a) / window for a, b in zip(counts0, counts1, strict=True)]
    return {"cpu_percent": 100.0 * (cpu1 - cpu0) / window, "rss_mb": rss,
            "stack_cpu_percent": 100.0 * (stack1 - stack0) / window,
            "messages_per_s_per_client": float(np.mean(received)) if received else 0.0,
            "messages_per_s_min_client": min(received) if received else 0.0, "window_s": window}


def _warm_up(stack: _Stack, port: int) -> None:
    """Until a client has received a scene whose trail is full (:data:`snake_tools.live_view.TRAIL_POINTS`)."""
    from snake_tools.live_view import SCENE_PERIOD_S, TRAIL_POINTS

    client = Client(port, watch_trail=True)
    deadline = time.monotonic() + _START_TIMEOUT_S + TRAIL_POINTS * SCENE_PERIOD_S
    try:
        while client.trail_points < TRAIL_POINTS:
            stack.check_alive()
            if client.error is not None:
                raise StackBenchError(f"the warm-up client failed: {client.error!r}")
            if time.monotonic() > deadline:
                raise StackBenchError(f"the scene's trail has {client.trail_points} of {TRAIL_POINTS} points "
                                      f"{_START_TIMEOUT_S:g} s after it could have been full")
            time.sleep(_RECV_S)
    finally:
        client.close()


def measure(clients: tuple[int, ...], duration: float, runs: int, warmup: bool = True) -> dict[str, Any]:
    """Start the twin, the gait, the driver and ``snake view``; the figures (see the module docstring)."""
    counts = (0, *clients)
    with tempfile.TemporaryDirectory(prefix="bench-view-") as tmp, _domain_id() as domain:
        env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
                   PYTHONUNBUFFERED="1")
        env.pop("ROS_STATIC_PEERS", None)
        stack = _Stack(Path(tmp), env)
        load_start = list(os.getloadavg())
        samples: dict[int, list[dict[str, float]]] = {n: [] for n in counts}
        try:
            stack.start("twin_node", _node_command("twin_node", {"robot": _ROBOT, "world": "flat"}))
            stack.start("gait_node", _node_command("gait_node", {"use_sim_time": "true", "robot": _ROBOT,
                                                                 "gait": "rolling", "rate_hz": str(_RATE_HZ)}))
            stack.start("drive", [sys.executable, "-c", _DRIVE_CODE])
            port = _free_port()
            view = stack.start("snake_view", [sys.executable, "-m", "snake_tools.cli", "view", "--port", str(port),
                                              "--robot", _ROBOT], stdout=subprocess.PIPE)
            assert view.popen.stdout is not None
            line = view.popen.stdout.readline().decode()  # "snake view: serving ..." once the relay listens
            if "serving" not in line:
                stack.check_alive()
                raise StackBenchError(f"snake view printed {line.strip()!r}, not its serving line")
            serving = time.monotonic()
            if warmup:
                _warm_up(stack, port)
            warmup_s = time.monotonic() - serving
            for _ in range(runs):
                for n in counts:
                    samples[n].append(_window(stack, port, n, duration))
        finally:
            stack.stop()
        load_end = list(os.getloadavg())
    by_clients = {str(n): {key: _stats([s[key] for s in samples[n]])
                           for key in ("cpu_percent", "rss_mb", "stack_cpu_percent", "messages_per_s_per_client",
                                       "messages_per_s_min_client")}
                  for n in counts}
    idle = by_clients["0"]
    per_client = {str(n): (by_clients[str(n)]["cpu_percent"]["median"] - idle["cpu_percent"]["median"]) / n
                  for n in clients}
    rss_per_client = {str(n): (by_clients[str(n)]["rss_mb"]["median"] - idle["rss_mb"]["median"]) / n
                      for n in clients}
    worst = max(per_client.values())
    return {
        "clients": list(counts),
        "duration_s": duration,
        "runs": runs,
        "subprotocol": SUBPROTOCOL,
        "warmup": warmup,
        "warmup_s": warmup_s,
        "by_clients": by_clients,
        "cpu_percent_idle": idle["cpu_percent"]["median"],
        "cpu_percent_max_clients": by_clients[str(max(clients))]["cpu_percent"]["median"],
        "rss_mb_max_clients": by_clients[str(max(clients))]["rss_mb"]["median"],
        "cpu_percent_per_client": per_client,
        "cpu_percent_per_client_max": worst,
        "rss_mb_per_client": rss_per_client,
        "stack_cpu_ratio_max_clients": (by_clients[str(max(clients))]["stack_cpu_percent"]["median"]
                                        / idle["stack_cpu_percent"]["median"]),
        "goal_cpu_percent_per_client": GOAL_CPU_PERCENT_PER_CLIENT,
        "within_goal": worst <= GOAL_CPU_PERCENT_PER_CLIENT,
        "load_average_1_5_15": {"start": load_start, "end": load_end},
        "cpu_count": os.cpu_count(),
    }


def run(args: argparse.Namespace) -> int:
    """Measure and print the figures."""
    result = measure(tuple(args.clients), float(args.duration), int(args.runs), bool(args.warmup))
    if args.json:
        print_json(result)
        return 0
    rows: list[tuple[str, Any]] = [("warm-up (trail filled), s", f"{result['warmup_s']:.0f}" if result["warmup"]
                                    else "none (--no-warmup)")]
    for n, fig in result["by_clients"].items():
        cpu, rss = fig["cpu_percent"], fig["rss_mb"]
        rows.append((f"{n} client(s): view CPU %, RSS MiB [min, max]",
                     f"{cpu['median']:.1f} [{cpu['min']:.1f}, {cpu['max']:.1f}], "
                     f"{rss['median']:.0f} [{rss['min']:.0f}, {rss['max']:.0f}]"))
        rows.append((f"{n} client(s): twin + gait CPU %, messages/s per client",
                     f"{fig['stack_cpu_percent']['median']:.1f}, {fig['messages_per_s_per_client']['median']:.0f}"))
    for n, value in result["cpu_percent_per_client"].items():
        rows.append((f"CPU % of one core per client ({n} clients)", f"{value:.2f}"))
    rows.append(("goal: per client at most, %", f"{GOAL_CPU_PERCENT_PER_CLIENT:g} "
                                                f"({'met' if result['within_goal'] else 'NOT met'})"))
    loads = result["load_average_1_5_15"]
    rows.append(("load average 1/5/15 min start; end", f"{loads['start']}; {loads['end']}"))
    print_table(rows, title=f"snake bench view (median [min, max] of {result['runs']} windows of "
                            f"{result['duration_s']:g} s)")
    return 0
