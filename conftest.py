"""Workspace-wide pytest fixtures.

DDS isolation: every pytest run claims its own ``ROS_DOMAIN_ID`` (an exclusive lock
per ID, so concurrent runs on one host never share one) and limits discovery to
localhost, set here before anything imports rclpy; node processes started by the
``ros`` fixture inherit both.

The ``ros`` fixture gives graph tests real rclpy nodes over Fast DDS: an in-test
node to publish/subscribe from, and ``ros.start(executable, params)`` to run a
stack node as its own process, exactly as ``ros2 run`` would.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from snake_tools.dds_domain import claim_domain_id

_DOMAIN_ID, _DOMAIN_LOCK = claim_domain_id()  # held for the life of this process
os.environ["ROS_DOMAIN_ID"] = str(_DOMAIN_ID)
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
os.environ.setdefault("MPLBACKEND", "Agg")

ROOT = Path(__file__).resolve().parent
_PROBE_DEPTH = 100_000  # messages a probe subscription can queue while the test is busy


def _param_arg(key: str, value: Any) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (list, tuple)):
        text = "[" + ",".join(repr(v) if isinstance(v, str) else str(v) for v in value) + "]"
    else:
        text = str(value)
    return f"{key}:={text}"


class RosHarness:
    """Real rclpy graph for one test: a probe node plus node processes."""

    def __init__(self, tmp_path: Path) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self._rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(f"test_probe_{os.getpid()}", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._procs: list[tuple[subprocess.Popen[bytes], Path]] = []
        self._subscriptions: dict[str, Any] = {}
        self._clients: dict[tuple[Any, str], Any] = {}
        self._tmp = tmp_path

    def start(self, executable: str, params: dict[str, Any] | None = None, name: str | None = None,
              extra_args: list[str] | None = None) -> subprocess.Popen[bytes]:
        """Start a node executable of the venv as a separate process with ROS parameters."""
        exe = shutil.which(executable) or str(Path(sys.executable).parent / executable)
        cmd = [exe, "--ros-args"]
        for key, value in (params or {}).items():
            cmd += ["-p", _param_arg(key, value)]
        if name:
            cmd += ["-r", f"__node:={name}"]
        cmd += extra_args or []
        log = self._tmp / f"{executable}-{len(self._procs)}.log"
        fh = log.open("wb")
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=os.environ.copy())
        self._procs.append((proc, log))
        return proc

    def log_of(self, proc: subprocess.Popen[bytes]) -> str:
        """Everything the node process has printed so far."""
        for p, log in self._procs:
            if p is proc:
                return log.read_text(errors="replace")
        raise KeyError("not a process of this harness")

    def spin_until(self, predicate: Callable[[], bool], timeout: float = 60.0) -> bool:
        """Spin the probe node until ``predicate()`` holds; False after ``timeout`` seconds.

        The timeout is only a failure bound (a node that never answers), never a
        speed requirement.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            self.executor.spin_once(timeout_sec=0.02)
        return predicate()

    def spin_for(self, seconds: float) -> None:
        """Spin the probe node for a while (to let messages flow)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.02)

    def call(self, srv_type: Any, name: str, request: Any, timeout: float = 60.0) -> Any:
        """Call the service ``name`` from the probe node: the :class:`snake_ros.service_call.Answer`, or None.

        The request is sent again while unanswered (:mod:`snake_ros.service_call`: an answer
        can be lost to discovery on a loaded machine), so it must be one whose repetition
        is harmless. ``timeout`` bounds waiting for the service and for the answer.
        """
        from snake_ros import service_call

        key = (srv_type, name)
        if key not in self._clients:  # one client per service: each new one races discovery again
            self._clients[key] = self.node.create_client(srv_type, name)
        client = self._clients[key]
        deadline = time.monotonic() + timeout
        if not self.spin_until(client.service_is_ready, timeout):
            return None
        return service_call.call(client, request, service_call.spinning(self.executor), deadline)

    def collect(self, msg_type: Any, topic: str, qos: Any = None) -> list[Any]:
        """Subscribe the probe node to ``topic``; returns the list messages are appended to.

        ``qos`` gives reliability and durability (those decide whether the subscription
        matches its publishers); the history is always deep enough to keep everything a
        test collects, so a probe starved of CPU for a while loses no message.
        """
        from rclpy.qos import HistoryPolicy, QoSProfile

        given = qos if isinstance(qos, QoSProfile) else QoSProfile(depth=10)
        deep = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=_PROBE_DEPTH,
                          reliability=given.reliability, durability=given.durability)
        box: list[Any] = []
        self._subscriptions[topic] = self.node.create_subscription(msg_type, topic, box.append, deep)
        return box

    def matched(self, topic: str) -> bool:
        """Whether the probe's subscription to ``topic`` (made by :meth:`collect`) has matched a publisher.

        A volatile publisher sends only to the subscriptions it has matched: wait on this
        before triggering a one-off message.
        """
        return self._subscriptions[topic].get_publisher_count() > 0

    def stop(self, proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int:
        """SIGINT a node process (as Ctrl-C would) and return its exit code."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return int(proc.returncode)

    def close(self) -> None:
        """Stop every process and shut the probe node down."""
        for proc, _ in self._procs:
            self.stop(proc)
        self.executor.shutdown()
        self.node.destroy_node()
        self._rclpy.shutdown(context=self.context)


@pytest.fixture
def ros(tmp_path: Path) -> Iterator[RosHarness]:
    """A real rclpy graph (probe node + node processes), torn down after the test."""
    harness = RosHarness(tmp_path)
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture
def emu(tmp_path: Path) -> Iterator[Any]:
    """The T-Snake's servos on the Protocol 2.0 emulator, its pty linked at ``tmp_path/ttyDXL``."""
    from snake_core.robot import load_robot
    from snake_hardware.emulator import ServoBusEmulator

    servos = ServoBusEmulator([j.servo_id for j in load_robot("tsnake").joints], link=tmp_path / "ttyDXL").start()
    try:
        yield servos
    finally:
        servos.stop()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The workspace root."""
    return ROOT


@pytest.fixture
def config_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo_root: Path) -> Path:
    """A private copy of config/ (robots and calibrations), so a test that writes touches no tracked file."""
    dst = tmp_path / "config"
    shutil.copytree(repo_root / "config", dst)
    monkeypatch.setenv("SNAKE_CONFIG_DIR", str(dst))
    monkeypatch.delenv("SNAKE_CALIBRATION_TARGET", raising=False)
    return dst
