"""``snake bench stack``: what the robot stack costs a computer, per node, over a steady window.

The robot stack runs as it does on the robot, each node its own process started the way
``ros2 run`` starts it (the node's module with the shipped params file of ``config/``), in
an isolated DDS domain (a ``ROS_DOMAIN_ID`` no other test or bench run holds,
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``):

- ``snake servo-emulator`` in its own process stands in for the robot's servos (it is
  reported apart: on the robot the servos do this work);
- ``bridge_node`` with ``backend:=dynamixel`` on the emulator's pty, armed through its
  ``~/arm`` service;
- ``gait_node`` (rolling gait at its file's 50 Hz), with its acceleration limits raised
  to their upper bounds (100 m/s^2, 100 rad/s^2) so that a step of ``cmd_vel`` is a step
  of the gait's speed within one tick;
- ``singularity_monitor`` (watching the first joints of the stack's robot with the
  geometry of its file's robot) and ``slippage_monitor``.

By default the four nodes run in one ``robot_stack`` process, as ``snake.launch.py`` ships
them (its ``one_process:=true`` default); ``--processes`` runs each node in its own process
instead (``snake.launch.py``'s ``one_process:=false``). The ``robot_stack`` process is spun by
the executor of ``--executor``: ``events`` (the default, as the launch files' ``executor``
argument ships it), rclpy's EventsExecutor, or ``single``, rclpy's SingleThreadedExecutor, as
every node alone spins.

Figures (``--json`` keys):

- ``startup_s`` per node: from the process start (``Popen``) to the first message on
  the node's output topic (``joint_states``, ``joint_commands``, ``singularity_margin``,
  ``slippage/ratio``), seen by a subscriber that was listening before. The nodes start
  one after the other, each once the previous one has published.
- ``startup_floor_s``: the same measure for a process that only imports the four nodes'
  modules, starts rclpy and publishes at once (no parameters, bus, node checks): the least
  a node's first message can take on this host, measured before the stack starts.
- ``cpu_percent`` per process: % of one core over the ``--duration`` window, from
  the user + system times in ``/proc/<pid>/stat``; ``cpu_percent_total`` sums the
  robot's processes (not the emulator).
- ``rss_mb`` (``VmRSS`` at the window's end) and ``rss_peak_mb`` (``VmHWM``), MiB
  (2^20 bytes), per process; ``rss_mb_total`` sums the robot's processes.
- ``latency_ms_p50`` / ``latency_ms_p99``: during the window, ``cmd_vel`` steps from 0 to
  ``max_linear`` and back, each value held ``_HALF_PERIOD_S`` plus a seeded uniform draw
  below ``_JITTER_S`` (one gait period: the steps sample every phase of the gait's and the
  bridge's timers instead of one, which a fixed period would lock to); the latency of a step is from
  just before it is published to the first Goal Position write that changes a servo's
  goal, as reported by the emulator's ``--goal-log`` hook (both on the host's monotonic
  clock). A step is counted only when every goal was unchanged for ``_QUIET_S`` before
  it (the robot had come to rest).

The window starts after every node has published, the bridge is armed and the probe's
start-up subscriptions are gone; only the ``cmd_vel`` publisher stays.

The listening subscriber runs with the Fast DDS profile every node process gets
(:mod:`snake_ros.dds_profile`: the snake profile unless the environment gives one), as
another node of the stack would; ``dds_profile`` in the figures names the file given to
the processes in ``FASTDDS_DEFAULT_PROFILES_FILE`` (None: none).
"""

from __future__ import annotations

import argparse
import bisect
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import yaml

from snake_core.config_files import config_dir
from snake_core.robot import load_robot
from snake_ros import service_call
from snake_tools.cli import positive_float
from snake_tools.dds_domain import claim_domain_id
from snake_tools.output import print_json, print_table

_DEFAULT_DURATION_S = 60.0  # s, measurement window
_ROBOT = "tsnake"  # robot of the shipped bridge and gait params files
_SINGULARITY_ROBOT = "wheeled_snake"  # passive-wheel model the bench's singularity monitor evaluates
_ACCEL_MAX = 100.0  # m/s^2 and rad/s^2: the upper bound of gait_node's acceleration limits
_HALF_PERIOD_S = 0.25  # s, cmd_vel holds each value (0, then max_linear) at least this long
_JITTER_S = 0.02  # s, plus a uniform draw in [0, this): the steps land at every phase of the 50 Hz gait tick
_SEED = 0  # of the jitter draws
_QUIET_S = 0.1  # s, goals unchanged this long before a step for it to count
_CMD_RATE_HZ = 20.0  # Hz, cmd_vel republished (the gait's deadman wants one within cmd_timeout)
_START_TIMEOUT_S = 120.0  # s, failure bound on one node's start (a node that never publishes)
_ARM_TIMEOUT_S = 60.0  # s, failure bound on the arm service's answer
_ARM_RESEND_S = 10.0  # s, an unanswered arm request is sent again after this long
_STOP_TIMEOUT_S = 20.0  # s, failure bound on a process's exit after SIGINT
_SPIN_S = 0.01  # s, longest wait of the probe's executor
_MIB = 1024.0  # kB per MiB (/proc status sizes are in kB)

# Node -> (module, output topic watched for its start-up).
_NODES = {
    "bridge_node": ("snake_ros.bridge_node", "joint_states"),
    "gait_node": ("snake_ros.gait_node", "joint_commands"),
    "singularity_monitor": ("snake_ros.singularity_node", "singularity_margin"),
    "slippage_monitor": ("snake_ros.slippage_node", "slippage/ratio"),
}
_PARAMS_FILES = {"bridge_node": "bridge.yaml", "gait_node": "gait_node.yaml",
                 "singularity_monitor": "singularity_monitor.yaml", "slippage_monitor": "slippage_monitor.yaml"}
_EMULATOR = "servo_emulator"
_FLOOR = "bench_startup_floor"  # the start-up floor's process, node and topic
# The start-up floor's process: ``python -c _FLOOR_CODE NAME MODULE...`` imports the modules,
# then publishes on topic NAME from a node NAME every 5 ms until SIGINT.
_FLOOR_CODE = """
import importlib, sys
for module in sys.argv[2:]:
    importlib.import_module(module)
import rclpy
from rclpy.executors import ExternalShutdownException
from sensor_msgs.msg import JointState
from snake_ros.qos import SENSOR_PUB_QOS
rclpy.init()
node = rclpy.create_node(sys.argv[1])
pub = node.create_publisher(JointState, sys.argv[1], SENSOR_PUB_QOS)
node.create_timer(0.005, lambda: pub.publish(JointState()))
try:
    rclpy.spin(node)
except (KeyboardInterrupt, ExternalShutdownException):
    pass
"""
EXECUTORS = ("single", "events")
"""``--executor`` choices: those of ``snake_ros.runtime.EXECUTORS`` (not imported: no rclpy at CLI start-up)."""
DEFAULT_EXECUTOR = "events"
"""The executor ``robot_stack`` and the launch files' ``executor`` argument default to."""


class StackArgumentError(ValueError):
    """A bad ``snake bench stack`` flag; the message names it."""


class StackBenchError(RuntimeError):
    """The stack did not come up (a node exited or never published); the message says which."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake bench stack``."""
    p = subparsers.add_parser("stack", help="robot stack (bridge on the emulator, gait, monitors): CPU, RSS, "
                                            "start-up per node, cmd_vel -> Goal Position latency")
    p.add_argument("--duration", type=positive_float, default=_DEFAULT_DURATION_S,
                   help="measurement window, s")
    layout = p.add_mutually_exclusive_group()
    layout.add_argument("--one-process", dest="processes", action="store_false",
                        help="the four nodes in one robot_stack process (one executor): the shipped layout, "
                             "the default")
    layout.add_argument("--processes", dest="processes", action="store_true",
                        help="each node in its own process (snake.launch.py's one_process:=false)")
    p.add_argument("--executor", choices=EXECUTORS, default=None,
                   help="executor of the robot_stack process (default: events, as the launch files ship it; "
                        "not with --processes)")
    p.set_defaults(processes=False)  # the one-process layout unless --processes
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


# ----------------------------------------------------------------------------- /proc
def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads), s, from ``/proc/<pid>/stat``."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "; fields[0] is field 3 (state)
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5), clock ticks
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def memory_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of process ``pid``, MiB, from ``/proc/<pid>/status``."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = float(rest.split()[0]) / _MIB  # kB
    return values["VmRSS"], values["VmHWM"]


def step_latencies(steps: list[float], changes: list[float], quiet: float) -> list[float]:
    """Per step: time from the step to the first goal change after it, s.

    Args:
        steps: times of the cmd_vel steps, s (monotonic clock).
        changes: sorted times of the goal changes, s (same clock).
        quiet: a step counts only when no goal changed within this long before it, s.

    Returns:
        One latency per counted step that was followed by a change (before the next step).
    """
    out = []
    for k, t0 in enumerate(steps):
        i = bisect.bisect_right(changes, t0)
        if i > 0 and changes[i - 1] > t0 - quiet:
            continue  # the robot was still moving: not a step from rest
        end = steps[k + 1] if k + 1 < len(steps) else float("inf")
        if i < len(changes) and changes[i] < end:
            out.append(changes[i] - t0)
    return out


def first_log_stamp(text: str, node: str) -> float | None:
    """Wall-clock stamp of ``node``'s first log line in an rclpy console log, s (None: no line)."""
    match = re.search(r"^\[\w+\] \[(\d+\.\d+)\] \[" + re.escape(node) + r"\]", text, re.MULTILINE)
    return float(match.group(1)) if match else None


def read_goal_log(path: Path) -> list[float]:
    """Sorted times of the goal changes of an emulator ``--goal-log`` file, s."""
    times = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            times.append(float(parts[0]))
    return sorted(times)


# ----------------------------------------------------------------------------- processes
@contextmanager
def _domain_id() -> Iterator[int]:
    """A DDS domain ID no other test or bench run on this host holds (:mod:`snake_tools.dds_domain`)."""
    try:
        domain, handle = claim_domain_id()
    except RuntimeError as err:
        raise StackBenchError(str(err)) from err
    try:
        yield domain
    finally:
        handle.close()


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    """``os.environ`` with ``values`` set, restored afterwards (the caller's process keeps its own domain)."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen[bytes]
    started: float  # time.monotonic() just before Popen, s
    started_wall: float  # time.time() just before Popen, s (the clock of the nodes' log stamps)
    log: Path
    nodes: list[str] = field(default_factory=list)


class _Stack:
    """The processes of one benchmark run; every one is stopped on exit."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.workdir = workdir
        self.env = env
        self.procs: dict[str, _Proc] = {}

    def start(self, name: str, cmd: list[str], nodes: list[str] | None = None,
              stdout: int | IO[bytes] | None = None) -> _Proc:
        log = self.workdir / f"{name}.log"
        fh = log.open("wb")
        started, started_wall = time.monotonic(), time.time()
        popen = subprocess.Popen(cmd, stdout=stdout if stdout is not None else fh, stderr=fh, env=self.env)
        proc = _Proc(name, popen, started, started_wall, log, nodes or [])
        self.procs[name] = proc
        return proc

    def finish(self, name: str) -> None:
        """Stop process ``name`` (SIGINT) and forget it: it is in no figure of the window."""
        proc = self.procs.pop(name)
        proc.popen.send_signal(signal.SIGINT)
        _reap(proc.popen)

    def check_alive(self) -> None:
        for proc in self.procs.values():
            if proc.popen.poll() is not None:
                tail = proc.log.read_text(errors="replace").strip().splitlines()[-3:]
                raise StackBenchError(f"{proc.name} exited with {proc.popen.returncode}: {' | '.join(tail)}")

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            if proc.popen.poll() is None:
                proc.popen.send_signal(signal.SIGINT)
        for proc in self.procs.values():
            _reap(proc.popen)


def _reap(popen: subprocess.Popen[bytes]) -> None:
    """Wait for a process told to stop; kill it after ``_STOP_TIMEOUT_S``."""
    try:
        popen.wait(timeout=_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        popen.kill()
        popen.wait()


def _node_command(module: str, params: list[Path]) -> list[str]:
    cmd = [sys.executable, "-m", module, "--ros-args"]
    for path in params:
        cmd += ["--params-file", str(path)]
    return cmd


def _bench_params(workdir: Path, port: str) -> Path:
    """The bench's overrides, one block per node, applied after the shipped files."""
    robot = load_robot(_ROBOT)
    # The monitor's passive-wheel model (the wheeled snake's) evaluated on the T-Snake's first joints: the
    # T-Snake itself has no passive wheels, so the shipped file leaves the monitor quiet.
    links = len(load_robot(_SINGULARITY_ROBOT).joint_names) + 1
    overrides = {
        "/**/bridge_node": {"backend": "dynamixel", "port": port, "robot": _ROBOT},
        "/**/gait_node": {"robot": _ROBOT, "max_linear_accel": _ACCEL_MAX, "max_angular_accel": _ACCEL_MAX},
        "/**/singularity_monitor": {"robot": _SINGULARITY_ROBOT, "joints": robot.joint_names[:links - 1]},
    }
    path = workdir / "bench_overrides.yaml"
    path.write_text(yaml.safe_dump({k: {"ros__parameters": v} for k, v in overrides.items()}))
    return path


class _Probe:
    """The bench's own rclpy node: start-up subscriptions, the arm call, the cmd_vel steps."""

    def __init__(self) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self.rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(f"bench_stack_{os.getpid()}", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.first: dict[str, float] = {}
        self._subs: list[Any] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=_SPIN_S)

    def watch(self, topic: str, msg_type: Any, qos: Any) -> None:
        def seen(_msg: Any, topic: str = topic) -> None:
            self.first.setdefault(topic, time.monotonic())

        self._subs.append(self.node.create_subscription(msg_type, topic, seen, qos))

    def _destroy(self, subscriptions: Sequence[Any] = (), clients: Sequence[Any] = ()) -> None:
        """Destroy subscriptions and clients of the probe's node, with the spinning thread stopped.

        An entity destroyed while the executor's thread adds it to a wait set ends that
        thread (rclpy's ``InvalidHandle``), and nothing would be spun after it.
        """
        self._stop.set()
        self._thread.join()
        for sub in subscriptions:
            self.node.destroy_subscription(sub)
        for client in clients:
            self.node.destroy_client(client)
        self._stop.clear()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def unwatch(self) -> None:
        """Destroy the start-up subscriptions."""
        self._destroy(subscriptions=self._subs)
        self._subs.clear()

    def arm(self, service: str, stack: _Stack) -> str:
        from std_srvs.srv import Trigger

        client: Any = self.node.create_client(Trigger, service)
        deadline = time.monotonic() + _ARM_TIMEOUT_S
        while not client.wait_for_service(timeout_sec=0.5):
            stack.check_alive()
            if time.monotonic() > deadline:
                raise StackBenchError(f"{service}: no service")
        # The bridge answers a copy sent again after a lost answer with "already armed".
        answer = service_call.call(client, Trigger.Request(), service_call.threaded, deadline,
                                   resend_s=_ARM_RESEND_S, alive=stack.check_alive)
        self._destroy(clients=[client])
        if answer is None:
            raise StackBenchError(f"{service}: no answer")
        result = answer.response
        message = str(result.message)
        if not (result.success or (answer.resent and message.startswith("already armed"))):
            raise StackBenchError(f"{service} refused: {message}")
        return message

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.executor.shutdown(timeout_sec=0.0)
        self.node.destroy_node()
        self.rclpy.try_shutdown(context=self.context)


def _wait_until(done: Callable[[], bool], stack: _Stack, failure: str) -> None:
    """Poll ``done`` while every process of ``stack`` lives; ``failure`` after ``_START_TIMEOUT_S``."""
    deadline = time.monotonic() + _START_TIMEOUT_S
    while not done():
        stack.check_alive()
        if time.monotonic() > deadline:
            raise StackBenchError(failure)
        time.sleep(_SPIN_S)


def _wait_first(probe: _Probe, topic: str, stack: _Stack) -> float:
    _wait_until(lambda: topic in probe.first, stack, f"nothing on {topic} within {_START_TIMEOUT_S:g} s")
    return probe.first[topic]


def _wait_gone(probe: _Probe, node: str, stack: _Stack) -> None:
    """Until the probe's graph no longer holds ``node`` (whose process has exited)."""
    _wait_until(lambda: node not in probe.node.get_node_names(), stack,
                f"{node} still in the graph {_START_TIMEOUT_S:g} s after it exited")


def _cmd_vel_publisher(probe: _Probe, stack: _Stack) -> Any:
    """The probe's cmd_vel publisher, once the gait node's subscription has matched it."""
    from geometry_msgs.msg import TwistStamped

    from snake_ros.qos import COMMAND_QOS

    pub = probe.node.create_publisher(TwistStamped, "cmd_vel", COMMAND_QOS)
    _wait_until(lambda: pub.get_subscription_count() >= 1, stack,
                f"no subscriber of cmd_vel within {_START_TIMEOUT_S:g} s")
    return pub


def _drive(probe: _Probe, pub: Any, duration: float, speed: float, stack: _Stack) -> list[float]:
    """Publish cmd_vel for ``duration`` s, stepping 0 <-> ``speed``; the times of the 0 -> speed steps."""
    from geometry_msgs.msg import TwistStamped

    steps: list[float] = []
    start = time.monotonic()
    end = start + duration
    rng = np.random.default_rng(_SEED)
    value, next_switch, next_send, stepped = 0.0, start + _HALF_PERIOD_S, start, False
    while True:
        now = time.monotonic()
        if now >= end:
            break
        if now >= next_switch:
            value = speed if value == 0.0 else 0.0
            stepped = value != 0.0
            next_switch += _HALF_PERIOD_S + float(rng.uniform(0.0, _JITTER_S))
            next_send = now
        if now >= next_send:
            msg = TwistStamped()
            msg.header.stamp = probe.node.get_clock().now().to_msg()
            msg.twist.linear.x = value
            if stepped:
                steps.append(time.monotonic())
                stepped = False
            pub.publish(msg)
            next_send += 1.0 / _CMD_RATE_HZ
            stack.check_alive()
        time.sleep(max(0.0, min(next_switch, next_send, end) - time.monotonic()))
    return steps


def measure(duration: float, one_process: bool, executor: str = DEFAULT_EXECUTOR) -> dict[str, Any]:
    """Bring the stack up, measure over ``duration`` s, stop it; the figures (see the module docstring)."""
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64

    from snake_ros.dds_profile import PROFILE_ENV, use_snake_profile
    from snake_ros.qos import COMMAND_QOS, SENSOR_QOS, STATUS_QOS

    cfg = config_dir()
    robot = load_robot(_ROBOT)
    ids = ",".join(str(j.servo_id) for j in robot.joints)
    models = {j.model for j in robot.joints}
    if len(models) != 1:
        raise StackBenchError(f"{_ROBOT}: the emulator command serves one servo model, the robot has {models}")
    with tempfile.TemporaryDirectory(prefix="bench-stack-") as tmp, _domain_id() as domain:
        workdir = Path(tmp)
        env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
                   PYTHONUNBUFFERED="1")
        env.pop("ROS_STATIC_PEERS", None)
        use_snake_profile(env)  # the nodes would set the same
        profile = env.get(PROFILE_ENV)
        stack = _Stack(workdir, env)
        goal_log = workdir / "goals.log"
        load_start = os.getloadavg()[0]
        probe: _Probe | None = None
        try:
            emu = stack.start(_EMULATOR, [sys.executable, "-m", "snake_tools.cli", "servo-emulator", "--ids", ids,
                                          "--model", models.pop(), "--goal-log", str(goal_log)],
                              stdout=subprocess.PIPE)
            assert emu.popen.stdout is not None
            port = emu.popen.stdout.readline().decode().strip()
            if not port.startswith("/dev/"):
                stack.check_alive()
                raise StackBenchError(f"servo-emulator printed {port!r}, not a pty path")
            overrides = _bench_params(workdir, port)
            dds = {PROFILE_ENV: profile} if profile else {}
            with _environment(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", **dds):
                probe = _Probe()  # its DDS participant reads them when it is created
            types = {"joint_states": (JointState, SENSOR_QOS), "joint_commands": (JointState, COMMAND_QOS),
                     "singularity_margin": (Float64, STATUS_QOS), "slippage/ratio": (Float64, STATUS_QOS)}
            for topic, (msg_type, qos) in types.items():
                probe.watch(topic, msg_type, qos)
            probe.watch(_FLOOR, JointState, SENSOR_QOS)
            floor = stack.start(_FLOOR, [sys.executable, "-c", _FLOOR_CODE, _FLOOR, *(m for m, _ in _NODES.values())])
            floor_s = _wait_first(probe, _FLOOR, stack) - floor.started
            stack.finish(_FLOOR)
            _wait_gone(probe, _FLOOR, stack)  # the stack starts on a settled graph
            startup: dict[str, float] = {}
            if one_process:
                files = [cfg / _PARAMS_FILES[n] for n in _NODES] + [overrides]
                cmd = _node_command("snake_ros.robot_stack", files)
                cmd[3:3] = ["--executor", executor]  # before --ros-args
                proc = stack.start("robot_stack", cmd, list(_NODES))
                for node, (_, topic) in _NODES.items():
                    startup[node] = _wait_first(probe, topic, stack) - proc.started
            else:
                for node, (module, topic) in _NODES.items():
                    proc = stack.start(node, _node_command(module, [cfg / _PARAMS_FILES[node], overrides]), [node])
                    startup[node] = _wait_first(probe, topic, stack) - proc.started
            probe.unwatch()
            armed = probe.arm("/bridge_node/arm", stack)
            gait = yaml.safe_load((cfg / _PARAMS_FILES["gait_node"]).read_text())
            speed = float(next(iter(gait.values()))["ros__parameters"]["max_linear"])
            pub = _cmd_vel_publisher(probe, stack)  # matched first: no step is lost to discovery
            pids = {name: p.popen.pid for name, p in stack.procs.items()}
            cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
            t0 = time.monotonic()
            steps = _drive(probe, pub, duration, speed, stack)
            cpu1 = {name: cpu_seconds(pid) for name, pid in pids.items()}
            window = time.monotonic() - t0
            memory = {name: memory_mib(pid) for name, pid in pids.items()}
            load_end = os.getloadavg()[0]
        finally:
            if probe is not None:
                probe.close()
            stack.stop()
        latencies = np.array(step_latencies(steps, read_goal_log(goal_log), _QUIET_S)) * 1e3
        logs = {name: p.log.read_text(errors="replace") for name, p in stack.procs.items()}
    processes = {name: {"cpu_percent": 100.0 * (cpu1[name] - cpu0[name]) / window,
                        "rss_mb": memory[name][0], "rss_peak_mb": memory[name][1],
                        "nodes": stack.procs[name].nodes} for name in pids}
    robot_procs = [name for name in processes if name != _EMULATOR]
    nodes: dict[str, dict[str, Any]] = {}
    for node in _NODES:
        proc = next(p for p in stack.procs.values() if node in p.nodes)
        stamp = first_log_stamp(logs[proc.name], node)
        entry: dict[str, Any] = {"startup_s": startup[node],
                                 "ready_s": stamp - proc.started_wall if stamp is not None else None}
        if not one_process:
            entry.update({k: processes[node][k] for k in ("cpu_percent", "rss_mb", "rss_peak_mb")})
        nodes[node] = entry
    return {
        "duration_s": window,
        "one_process": one_process,
        "executor": executor if one_process else "single",
        "cpu_percent_total": sum(processes[n]["cpu_percent"] for n in robot_procs),
        "rss_mb_total": sum(processes[n]["rss_mb"] for n in robot_procs),
        "startup_s_max": max(startup.values()),
        "startup_floor_s": floor_s,
        "latency_ms_p50": float(np.percentile(latencies, 50)) if latencies.size else None,
        "latency_ms_p99": float(np.percentile(latencies, 99)) if latencies.size else None,
        "latency_steps": int(latencies.size),
        "cmd_vel_steps": len(steps),
        "nodes": nodes,
        "processes": processes,
        "emulator": {k: processes[_EMULATOR][k] for k in ("cpu_percent", "rss_mb", "rss_peak_mb")},
        "armed": armed,
        "dds_profile": profile or None,
        "load_average_1min": [load_start, load_end],
        "cpu_count": os.cpu_count(),
    }


def run(args: argparse.Namespace) -> int:
    """Measure the stack and print the figures."""
    if args.executor is not None and args.processes:
        raise StackArgumentError("--executor: not with --processes (each node alone spins its own executor)")
    result = measure(float(args.duration), not args.processes, args.executor or DEFAULT_EXECUTOR)
    if args.json:
        print_json(result)
        return 0
    rows: list[tuple[str, Any]] = [
        ("robot stack CPU, % of one core", f"{result['cpu_percent_total']:.1f}"),
        ("robot stack RSS, MiB", f"{result['rss_mb_total']:.0f}"),
        ("cmd_vel -> Goal Position p50 / p99, ms",
         f"{result['latency_ms_p50']} / {result['latency_ms_p99']} ({result['latency_steps']} steps)"),
    ]
    for name, proc in result["processes"].items():
        rows.append((f"{name} CPU % / RSS MiB (peak)",
                     f"{proc['cpu_percent']:.1f} / {proc['rss_mb']:.0f} ({proc['rss_peak_mb']:.0f})"))
    for name, node in result["nodes"].items():
        ready = "?" if node["ready_s"] is None else f"{node['ready_s']:.2f}"
        rows.append((f"{name} start-up (ready), s", f"{node['startup_s']:.2f} ({ready})"))
    rows.append(("start-up floor (imports, rclpy, one publish), s", f"{result['startup_floor_s']:.2f}"))
    rows.append(("load average (1 min) before / after", " / ".join(f"{x:.2f}" for x in result["load_average_1min"])))
    print_table(rows, title=f"snake bench stack ({result['duration_s']:.0f} s window)")
    return 0
