"""``snake view``: a real Foxglove WebSocket protocol client subscribes while the twin runs.

The client is the ``websockets`` library speaking the protocol as the Foxglove and Lichtblick
apps do (subprotocol ``foxglove.websocket.v1``, the name those apps offer; JSON ``advertise``,
``subscribe``; binary message data ``0x01 | subscription u32 | time u64 | payload`` and service
calls ``0x02`` / answers ``0x03 | service u32 | call u32 | encoding length u32 | encoding | payload``).
Messages are decoded with the channel's own advertised schema: ``cdr`` by rosbags from the
``ros2msg`` definition (a parser apart from rclpy, which wrote them), ``json`` as JSON.
"""

from __future__ import annotations

import json
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from snake_core.analysis.session import chain_points_batch
from snake_core.robot import load_robot
from snake_tools.command import snake_command

pytestmark = pytest.mark.graph

_ROBOT = load_robot("tsnake")
_BOUND_S = 60.0  # failure bound on every wait, never a speed requirement
_SUBPROTOCOLS = ["foxglove.websocket.v1"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ViewProcess:
    """``snake view`` as its own process, and a protocol client connected to it."""

    def __init__(self, tmp: Path, *args: str) -> None:
        self.port = _free_port()
        self.log = tmp / "view.log"
        self.proc = subprocess.Popen([*snake_command(), "view", "--port", str(self.port), *args],
                                     stdout=self.log.open("wb"), stderr=subprocess.STDOUT)
        self.ws: Any = None
        self.ops: dict[str, dict[str, Any]] = {}

    def connect(self) -> None:
        from websockets.sync.client import connect

        deadline = time.monotonic() + _BOUND_S
        while True:  # the server is up once "serving" is printed; connect retries until then
            assert self.proc.poll() is None, self.log.read_text()
            try:
                self.ws = connect(f"ws://127.0.0.1:{self.port}", subprotocols=_SUBPROTOCOLS, open_timeout=_BOUND_S)
                break
            except OSError:
                assert time.monotonic() < deadline, self.log.read_text()
                time.sleep(0.1)
        assert self.ws.subprotocol in _SUBPROTOCOLS
        while "advertise" not in self.ops:
            self._take(self.ws.recv(timeout=_BOUND_S))

    def _take(self, frame: Any) -> tuple[int, bytes] | None:
        if isinstance(frame, str):
            msg = json.loads(frame)
            self.ops.setdefault(msg["op"], msg)
            return None
        return frame[0], bytes(frame[1:])

    def channels(self) -> dict[str, dict[str, Any]]:
        return {c["topic"]: c for c in self.ops["advertise"]["channels"]}

    def decode(self, topic: str, payload: bytes) -> Any:
        """A message of ``topic`` decoded with its channel's advertised schema (rosbags for ``cdr``)."""
        channel = self.channels()[topic]
        if channel["encoding"] == "json":
            return json.loads(payload)
        from rosbags.typesys import Stores, get_types_from_msg, get_typestore

        assert channel["encoding"] == "cdr" and channel["schemaEncoding"] == "ros2msg"
        store = get_typestore(Stores.EMPTY)
        store.register(get_types_from_msg(channel["schema"], channel["schemaName"]))
        return store.deserialize_cdr(payload, channel["schemaName"])

    def first_messages(self, topics: list[str]) -> dict[str, Any]:
        """Subscribe to ``topics``; the first message of each, decoded (:meth:`decode`)."""
        chans = self.channels()
        subs = {k: chans[t] for k, t in enumerate(topics)}
        self.ws.send(json.dumps({"op": "subscribe", "subscriptions": [{"id": k, "channelId": c["id"]}
                                                                      for k, c in subs.items()]}))
        got: dict[str, Any] = {}
        deadline = time.monotonic() + _BOUND_S
        while len(got) < len(topics):
            assert time.monotonic() < deadline, f"only {sorted(got)} of {topics}"
            taken = self._take(self.ws.recv(timeout=_BOUND_S))
            if taken is not None and taken[0] == 0x01:
                sub, _t = struct.unpack_from("<IQ", taken[1])
                topic = subs[sub]["topic"]
                if topic not in got:
                    got[topic] = self.decode(topic, taken[1][12:])
        return got

    def call(self, service: str, request: dict[str, Any]) -> dict[str, Any]:
        while "advertiseServices" not in self.ops:
            self._take(self.ws.recv(timeout=_BOUND_S))
        sid = next(s["id"] for s in self.ops["advertiseServices"]["services"] if s["name"] == service)
        payload = json.dumps(request).encode()
        self.ws.send(bytes([0x02]) + struct.pack("<III", sid, 7, 4) + b"json" + payload)
        while True:
            taken = self._take(self.ws.recv(timeout=_BOUND_S))
            if taken is not None and taken[0] == 0x03:
                _sid, call_id, n = struct.unpack_from("<III", taken[1])
                assert call_id == 7
                return dict(json.loads(taken[1][12 + n:]))
            if "serviceCallFailure" in self.ops:
                raise AssertionError(self.ops["serviceCallFailure"])

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()
        if self.proc.poll() is None:
            self.proc.send_signal(2)
            try:
                self.proc.wait(timeout=_BOUND_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def view(tmp_path: Path) -> Iterator[Any]:
    made: list[ViewProcess] = []

    def start(*args: str) -> ViewProcess:
        made.append(ViewProcess(tmp_path, *args))
        made[-1].connect()
        return made[-1]

    yield start
    for v in made:
        v.close()


def test_view_serves_the_running_twin(ros: Any, view: Any) -> None:
    ros.start("twin_node", {"robot": "tsnake"})
    v = view()
    chans = v.channels()
    for topic, schema, encoding in (
            ("/joint_states", "sensor_msgs/msg/JointState", "cdr"), ("/robot/scene", "foxglove.SceneUpdate", "json"),
            ("/mocap/head_pose", "geometry_msgs/msg/PoseStamped", "cdr"),
            ("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray", "cdr"), ("/plan", "nav_msgs/msg/Path", "cdr"),
            ("/goal_pose", "geometry_msgs/msg/PoseStamped", "cdr"), ("/monitors", "snake.Monitors", "json"),
            ("/bridge/state", "snake.BridgeState", "json"), ("/tf", "foxglove.FrameTransform", "json")):
        assert (chans[topic]["schemaName"], chans[topic]["encoding"]) == (schema, encoding)
    assert len(chans) == 9
    assert "services" not in v.ops["serverInfo"].get("capabilities", [])   # commands are off by default
    got = v.first_messages(["/joint_states", "/robot/scene", "/mocap/head_pose"])
    assert list(got["/joint_states"].name) == list(_ROBOT.joint_names)
    assert len(got["/joint_states"].position) == len(_ROBOT.joints)
    body = next(e for e in got["/robot/scene"]["entities"] if e["id"] == "body")
    centres = np.array([[s["pose"]["position"][k] for k in "xyz"] for s in body["spheres"]])
    assert centres.shape == (len(_ROBOT.joints) + 2, 3)                    # head end, every joint, tail end
    # Independent of the view: the same kinematics at rest (the twin starts straight) is a straight chain
    # of the body's length, so the drawn points are one body length apart end to end.
    straight = chain_points_batch(_ROBOT, np.zeros((1, 3)), np.array([[1.0, 0, 0, 0]]),
                                  np.zeros((1, len(_ROBOT.joints))))[0]
    assert np.linalg.norm(centres[-1] - centres[0]) == pytest.approx(
        np.linalg.norm(straight[-1] - straight[0]), rel=0.05)
    mocap = got["/mocap/head_pose"]
    assert abs(mocap.pose.position.z) < 0.2 and mocap.header.frame_id
    v.proc.send_signal(signal.SIGINT)  # Ctrl-C ends the server (a failure bound, not a speed check)
    assert v.proc.wait(timeout=_BOUND_S) == 0


def test_commands_only_with_allow_commands_and_they_arm_the_real_bridge(ros: Any, view: Any,
                                                                        tmp_path: Path) -> None:
    from snake_hardware.emulator import ServoBusEmulator

    emu = ServoBusEmulator([j.servo_id for j in _ROBOT.joints], link=tmp_path / "ttyDXL").start()
    try:
        ros.start("bridge_node", {"backend": "dynamixel", "port": emu.port, "baud_rate": 4000000, "rate_hz": 50.0,
                                  "latency_ms": 30.0, "command_timeout_s": 30.0})
        v = view("--allow-commands")
        assert "services" in v.ops["serverInfo"]["capabilities"]
        state = v.first_messages(["/bridge/state"])["/bridge/state"]
        assert state["state"] == "DISARMED"
        answer = v.call("/bridge/arm", {})
        assert answer["success"] is True, answer
        emu.settle()
        assert all(emu.torque_enabled(i) for i in emu.servos)
        stopped = v.call("/bridge/emergency_stop", {})
        assert stopped["success"] is True
        emu.settle()
        assert not any(emu.torque_enabled(i) for i in emu.servos)
        names = {s["name"] for s in v.ops["advertiseServices"]["services"]}
        assert names == {"/bridge/arm", "/bridge/disarm", "/bridge/emergency_stop", "/bridge/clear_estop"}
        cleared = v.call("/bridge/clear_estop", {})
        assert cleared["success"] is True, cleared
    finally:
        emu.stop()


def test_mocap_topic_names_the_head_pose_the_view_shows(ros: Any, view: Any) -> None:
    """``--mocap-topic``: a motion-capture system's own topic (vrpn_mocap) reaches the pose channel."""
    import threading

    from geometry_msgs.msg import PoseStamped

    from snake_ros.qos import SENSOR_QOS

    pub = ros.node.create_publisher(PoseStamped, "/vrpn_mocap/snake_head/pose", SENSOR_QOS)
    msg = PoseStamped()
    msg.header.frame_id = "world"
    msg.pose.position.x, msg.pose.position.y = 1.25, -0.5
    msg.pose.orientation.w = 1.0
    done = threading.Event()

    def publish() -> None:  # until the view has shown one (no spinning needed to publish)
        while not done.wait(0.05):
            pub.publish(msg)

    v = view("--mocap-topic", "/vrpn_mocap/snake_head/pose")
    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    try:
        got = v.first_messages(["/mocap/head_pose"])["/mocap/head_pose"]
    finally:
        done.set()
        publisher.join()
    assert got.pose.position.x == pytest.approx(1.25) and got.pose.position.y == pytest.approx(-0.5)
    assert got.header.frame_id == "world"


def test_bad_clients_are_one_line_each_and_the_view_and_the_twin_keep_going(ros: Any, view: Any) -> None:
    """Garbage, a refused subprotocol and a client gone mid-frame beside a client that keeps receiving."""
    twin = ros.start("twin_node", {"robot": "tsnake"})
    v = view()
    before = v.first_messages(["/joint_states"])["/joint_states"]
    with socket.create_connection(("127.0.0.1", v.port), timeout=_BOUND_S) as bad:
        bad.sendall(b"\x16\x03\x01garbage\r\n\r\n")
        while bad.recv(4096):  # until the view has answered 400 and closed
            pass
    with socket.create_connection(("127.0.0.1", v.port), timeout=_BOUND_S) as other:
        other.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                      b"Sec-WebSocket-Protocol: foxglove.websocket.v1\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += other.recv(4096)
        assert answer.startswith(b"HTTP/1.1 101")
        other.sendall(bytes([0x81, 0x80 | 126]) + struct.pack(">H", 500) + b"\x01\x02\x03\x04" + b"{\"op\":")
        other.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # gone: a reset
    deadline = time.monotonic() + _BOUND_S
    while "went away" not in v.log.read_text():  # the view's line for the vanished client
        assert time.monotonic() < deadline, v.log.read_text()
        time.sleep(0.1)
    stamps = []
    while len(stamps) < 100:                                           # the good client is still served
        taken = v._take(v.ws.recv(timeout=_BOUND_S))
        if taken is not None and taken[0] == 0x01:
            stamps.append(v.decode("/joint_states", taken[1][12:]).header.stamp)
    assert (stamps[-1].sec, stamps[-1].nanosec) > (before.header.stamp.sec, before.header.stamp.nanosec)
    lines = [x for x in v.log.read_text().splitlines() if x.startswith("snake view: ") and "serving" not in x]
    assert len(lines) == 2 and "refused client" in lines[0] and "not an HTTP GET request" in lines[0], lines
    assert "went away mid-connection" in lines[1]
    assert twin.poll() is None and v.proc.poll() is None
