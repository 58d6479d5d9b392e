"""``snake bench loaded``: a teleop drive of the bench robot on a busy computer; did the robot stop?

The rehearsal stack as ``snake.launch.py`` starts it on the bench robot, each node its own
process with its shipped params file of ``config/``, in an isolated DDS domain:
``bench_robot`` (its servos on a pty, stepped against the wall clock, its motion capture),
``bridge_node`` (``config/bridge.yaml``, the port pointed at the bench robot with the launch
files' ``latency_ms`` for it), ``gait_node``
(``config/gait_node.yaml``), the recorder (``snake bag record``) and the live view
(``snake view``). Beside it run ``--busy`` processes that each spin a core
(``while True: pass``), started before the stack: a laptop also running a build and a browser.
The bridge is armed through ``~/arm``; for ``--duration`` seconds a teleop script drives
``cmd_vel`` (forward, left turn, forward, right turn, 15 s each, as the bench robot's teleop
bag: :func:`snake_tools.bench._bench_robot.teleop_script`).

Figures (``--json`` keys), from the ``diagnostics`` the nodes publish, heard by the bench's
own subscriber:

- ``watchdog_trips``: servos whose Bus Watchdog tripped (a joint's entry turning to ``bus
  watchdog tripped``): the bridge was silent past ``watchdog_s``;
- ``tracking_faults`` and ``faults``: entries into ``FAULT`` whose reason is a tracking
  fault, and all of them, with their reasons in ``fault_reasons``;
- ``late_cycles``, ``worst_late_ms``, ``cycle_p99_ms``: the bridge's own count at the end
  (cycles started more than half a period late; the 99th percentile of its last 2,000
  periods);
- ``bench_skips`` and ``bench_sim_per_wall_min``: the bench robot's skips ahead and its
  slowest second (simulated per wall seconds);
- ``bus_loop``: the bridge's scheduling line (``SCHED_FIFO 50 on CPUs [1]``), or why the
  asked ``rt_priority`` was not applied, or ``normal scheduler (rt_priority 0)``;
- ``kernel_workers``: how the kernel's unbound workers (``kworker/u*``) were scheduled at the
  drive's end (:func:`kernel_workers`): they push a serial port's bytes to its reader, and the
  bridge waits for its answers as long as they wait for a CPU;
- ``load_average_1min`` at the start and end, ``busy``, ``cpu_count``, ``duration_s``.

``--rt-priority`` and ``--cpu-affinity`` override the shipped bridge config's (to compare).
The bridge's ``rt_priority`` ``N`` (the flag's, else the shipped config's) also gives every
thread of the bench robot's process ``N - 1``, as the servos it stands in for never wait for
a busy computer, one below the bridge's loop, which they must not keep waiting either.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from snake_core.config_files import config_dir
from snake_tools.bench.stack import (
    StackBenchError,
    _cmd_vel_publisher,
    _domain_id,
    _environment,
    _node_command,
    _Probe,
    _reap,
    _Stack,
    _wait_until,
)
from snake_tools.cli import positive_float
from snake_tools.output import print_json, print_table

_ROBOT = "tsnake"
_DEFAULT_DURATION_S = 300.0
_DEFAULT_BUSY = 8
_CMD_RATE_HZ = 10.0  # Hz, teleop's cmd_vel rate
_BUSY_CODE = "while True: pass"
_BRIDGE = "bridge: bus"
_BENCH = "bench robot: real time"
_TRIPPED = "bus watchdog tripped"


class LoadedArgumentError(ValueError):
    """A bad command-line value (one line, exit 2)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake bench loaded``."""
    p = subparsers.add_parser("loaded", help="teleop drive of the bench robot (bridge, gait, recorder, view) "
                                             "beside busy processes: watchdog trips, faults, late cycles")
    p.add_argument("--duration", type=positive_float, default=_DEFAULT_DURATION_S, help="teleop drive, s")
    p.add_argument("--busy", type=int, default=_DEFAULT_BUSY, help="processes spinning a core each beside the stack")
    p.add_argument("--rt-priority", type=int, default=None,
                   help="the bridge's rt_priority (default: config/bridge.yaml's); the bench robot's is one below")
    p.add_argument("--cpu-affinity", type=int, nargs="*", default=None,
                   help="the bridge's cpu_affinity (default: config/bridge.yaml's)")
    p.add_argument("--logs", type=Path, default=None, help="copy the nodes' logs into this directory")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


class _Watch:
    """What the ``diagnostics`` said during the drive (filled by the probe's thread)."""

    def __init__(self) -> None:
        self.state = ""
        self.faults: list[str] = []
        self.tripped: dict[str, bool] = {}
        self.trips = 0
        self.bridge: dict[str, str] = {}
        self.bench: dict[str, str] = {}
        self.slowest = float("inf")
        self.driving = False

    def take(self, msg: Any) -> None:
        for st in msg.status:
            values = {kv.key: kv.value for kv in st.values}
            if st.name == _BRIDGE:
                self.bridge = values
                state = values.get("state", "")
                if self.driving and state == "FAULT" and self.state != "FAULT":
                    self.faults.append(st.message)
                self.state = state
            elif st.name == _BENCH:
                self.bench = values
                if self.driving:
                    self.slowest = min(self.slowest, float(values.get("sim_per_wall", "nan")))
            elif st.name.startswith("bridge: "):
                tripped = _TRIPPED in st.message
                if self.driving and tripped and not self.tripped.get(st.name, False):
                    self.trips += 1
                self.tripped[st.name] = tripped


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _overrides(workdir: Path, link: str, rt_priority: int | None, cpus: list[int] | None, asked: int) -> Path:
    from snake_ros.following import BENCH_ROBOT_LATENCY_MS

    # The bench robot's pty answers as fast as its Python threads get the CPU: the launch files' margin.
    bridge: dict[str, Any] = {"backend": "dynamixel", "port": link, "robot": _ROBOT,
                              "latency_ms": BENCH_ROBOT_LATENCY_MS}
    if rt_priority is not None:
        bridge["rt_priority"] = rt_priority
    if cpus is not None:
        bridge["cpu_affinity"] = cpus
    # The servos it stands in for wait for no computer, and take no computer from the bridge:
    # one below the bridge's loop (at equal SCHED_FIFO priority its threads kept the loop
    # waiting for the CPU: bus waits up to 1.2 s beside 8 busy processes; one below, 0.11 s).
    bench: dict[str, Any] = {"robot": _ROBOT, "link": link, "rt_priority": max(asked - 1, 1) if asked > 0 else 0}
    overrides = {"/**/bridge_node": bridge, "/**/gait_node": {"robot": _ROBOT}, "/**/bench_robot": bench}
    path = workdir / "loaded_overrides.yaml"
    path.write_text(yaml.safe_dump({k: {"ros__parameters": v} for k, v in overrides.items()}))
    return path


def _bus_loop(log: str, asked: int) -> str:
    """The bridge's scheduling, as its log says it."""
    refused = re.search(r"rt_priority \d+ not applied \(([^)]*)\)", log)
    if refused:
        return f"rt_priority {asked} not applied: {refused.group(1)}"
    line = re.search(r"bus loop: (.*)", log)
    return line.group(1).strip() if line else f"normal scheduler (rt_priority {asked})"


def kernel_workers(proc: Path = Path("/proc")) -> str:
    """How the kernel's unbound workqueue threads (``kworker/u*``) are scheduled, in one line.

    A serial port (a pty, a USB adapter) hands received bytes to its reader through the tty
    flip buffer, pushed by a work item on the kernel's unbound workqueue; its threads keep the
    normal scheduler unless the host raises them (``chrt -f -p 1 PID``, as root), and a busy
    computer keeps them, and so a real-time bus loop's answers, waiting (docs/hardware.md,
    "A busy computer"). Read from ``/proc/PID/stat`` (policy and real-time priority fields).

    Returns:
        ``normal priority (N kworker/u threads)``, or ``SCHED_FIFO 1 for K of N kworker/u
        threads`` (each real-time policy and priority seen), or ``no kworker/u threads seen``.
    """
    names = {os.SCHED_FIFO: "SCHED_FIFO", os.SCHED_RR: "SCHED_RR"}
    realtime: list[str] = []
    total = 0
    for stat in proc.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue   # the thread ended meanwhile
        comm, _, rest = text.partition(" (")[2].rpartition(") ")
        if not comm.startswith("kworker/u"):
            continue
        fields = rest.split()   # fields from the 3rd (state) on: rt_priority is the 40th, policy the 41st
        total += 1
        if len(fields) > 38 and int(fields[38]) in names:
            realtime.append(f"{names[int(fields[38])]} {int(fields[37])}")
    if total == 0:
        return "no kworker/u threads seen"
    if not realtime:
        return f"normal priority ({total} kworker/u threads)"
    return f"{', '.join(sorted(set(realtime)))} for {len(realtime)} of {total} kworker/u threads"


def _drive(probe: _Probe, pub: Any, duration: float, stack: _Stack) -> None:
    from geometry_msgs.msg import TwistStamped

    from snake_tools.bench._bench_robot import teleop_script

    start = time.monotonic()
    next_send = start
    while (now := time.monotonic()) < start + duration:
        if now >= next_send:
            v, w = teleop_script(now - start)
            msg = TwistStamped()
            msg.header.stamp = probe.node.get_clock().now().to_msg()
            msg.twist.linear.x, msg.twist.angular.z = v, w
            pub.publish(msg)
            next_send += 1.0 / _CMD_RATE_HZ
            stack.check_alive()
        time.sleep(max(0.0, min(next_send, start + duration) - time.monotonic()))


def measure(duration: float, busy: int, rt_priority: int | None, cpus: list[int] | None,
            logs: Path | None = None) -> dict[str, Any]:
    """Bring the stack up beside ``busy`` spinning processes, drive, stop; the figures (module docstring)."""
    from diagnostic_msgs.msg import DiagnosticArray

    from snake_ros.dds_profile import PROFILE_ENV, use_snake_profile
    from snake_ros.qos import STATUS_QOS

    cfg = config_dir()
    shipped = yaml.safe_load((cfg / "bridge.yaml").read_text())
    asked = rt_priority if rt_priority is not None else int(
        next(iter(shipped.values()))["ros__parameters"].get("rt_priority", 0))
    spinners: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="bench-loaded-") as tmp, _domain_id() as domain:
        workdir = Path(tmp)
        env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
                   PYTHONUNBUFFERED="1")
        env.pop("ROS_STATIC_PEERS", None)
        use_snake_profile(env)
        profile = env.get(PROFILE_ENV)
        link = str(workdir / "bench_pty")
        overrides = _overrides(workdir, link, rt_priority, cpus, asked)
        stack = _Stack(workdir, env)
        watch = _Watch()
        probe: _Probe | None = None
        load_start = os.getloadavg()[0]
        try:
            spinners = [subprocess.Popen([sys.executable, "-c", _BUSY_CODE]) for _ in range(busy)]
            dds = {PROFILE_ENV: profile} if profile else {}
            with _environment(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", **dds):
                probe = _Probe()
            probe.node.create_subscription(DiagnosticArray, "diagnostics", watch.take, STATUS_QOS)
            stack.start("bench_robot", _node_command("snake_ros.bench_robot_node", [overrides]))
            _wait_until(lambda: Path(link).exists(), stack, f"no bench robot pty at {link}")
            stack.start("bridge_node", _node_command("snake_ros.bridge_node", [cfg / "bridge.yaml", overrides]))
            stack.start("gait_node", _node_command("snake_ros.gait_node", [cfg / "gait_node.yaml", overrides]))
            stack.start("recorder", [sys.executable, "-m", "snake_tools.cli", "bag", "record", "--quiet",
                                     "--out", str(workdir / "bag")])
            stack.start("snake_view", [sys.executable, "-m", "snake_tools.cli", "view", "--port",
                                       str(_free_port())])
            _wait_until(lambda: watch.state == "DISARMED", stack, "the bridge never reported DISARMED")
            probe.arm("/bridge_node/arm", stack)
            pub = _cmd_vel_publisher(probe, stack)
            _wait_until(lambda: watch.state == "ARMED", stack, f"the bridge did not reach ARMED ({watch.state})")
            watch.driving = True
            t0 = time.monotonic()
            _drive(probe, pub, duration, stack)
            window = time.monotonic() - t0
            watch.driving = False
            load_end = os.getloadavg()[0]
            workers = kernel_workers()
            final = dict(watch.bridge)
        finally:
            if probe is not None:
                probe.close()
            for name in reversed(list(stack.procs)):  # one by one: the bridge makes the servos safe first
                if stack.procs[name].popen.poll() is None:
                    stack.procs[name].popen.send_signal(signal.SIGINT)
                    _reap(stack.procs[name].popen)
            for p in spinners:
                p.kill()
                p.wait()
        bridge_log = stack.procs["bridge_node"].log.read_text(errors="replace")
        if logs is not None:
            logs.mkdir(parents=True, exist_ok=True)
            for proc in stack.procs.values():
                shutil.copy(proc.log, logs / proc.log.name)
    return {
        "duration_s": window,
        "busy": busy,
        "watchdog_trips": watch.trips,
        "tracking_faults": sum(1 for f in watch.faults if "tracking" in f),
        "faults": len(watch.faults),
        "fault_reasons": watch.faults,
        "late_cycles": int(final.get("late_cycles", 0)),
        "worst_late_ms": float(final.get("worst_late_ms", "nan")),
        "cycle_p99_ms": float(final.get("cycle_p99_ms", "nan")),
        "bridge_state_at_end": final.get("state", ""),
        "bench_skips": int(watch.bench.get("skips_total", 0)),
        "bench_sim_per_wall_min": watch.slowest if watch.slowest != float("inf") else None,
        "bus_loop": _bus_loop(bridge_log, asked),
        "kernel_workers": workers,
        "load_average_1min": [load_start, load_end],
        "cpu_count": os.cpu_count(),
        "host": socket.gethostname(),
    }


def run(args: argparse.Namespace) -> int:
    """Measure and print the figures."""
    if args.busy < 0:
        raise LoadedArgumentError(f"--busy: must be >= 0, got {args.busy}")
    if args.rt_priority is not None and not 0 <= args.rt_priority <= 99:
        raise LoadedArgumentError(f"--rt-priority: must be in 0..99, got {args.rt_priority}")
    try:
        result = measure(float(args.duration), args.busy, args.rt_priority, args.cpu_affinity, args.logs)
    except StackBenchError as err:
        print(f"snake bench loaded: {err}", file=sys.stderr)
        return 1
    if args.json:
        print_json(result)
        return 0
    print_table([
        ("teleop drive, s", f"{result['duration_s']:.0f} beside {result['busy']} busy processes"),
        ("bus watchdog trips", result["watchdog_trips"]),
        ("tracking faults / all faults", f"{result['tracking_faults']} / {result['faults']}"),
        ("bridge late cycles (worst, ms)", f"{result['late_cycles']} ({result['worst_late_ms']:.1f})"),
        ("bridge cycle period p99, ms", f"{result['cycle_p99_ms']:.1f}"),
        ("bench robot skips (slowest s/s)", f"{result['bench_skips']} ({result['bench_sim_per_wall_min']})"),
        ("bus loop", result["bus_loop"]),
        ("kernel workers (tty bytes)", result["kernel_workers"]),
        ("load average 1 min, start -> end",
         f"{result['load_average_1min'][0]:.1f} -> {result['load_average_1min'][1]:.1f} "
         f"({result['cpu_count']} CPUs, {result['host']})"),
    ])
    return 0
