"""One pass over a bag into numpy time series, on one documented time base.

Time base: every message is placed at its *receive time* (the bag's timestamp). When
the bag holds ``/clock`` (the twin, or any run on simulated time), receive times are
mapped onto the recorded clock (:func:`snake_core.analysis.session.sim_time_map`), so
that rates come out per simulated second, as the nodes on ``use_sim_time`` saw them.
Header stamps are never compared across publishers (teleop stamps wall time while the
twin stamps simulated time). Times are seconds from the first message.

Header stamps (:meth:`BagSeries.header_times`): the JointState and PoseStamped topics
also keep each message's header stamp. On simulated time the receive times only place
a message between two ``/clock`` messages, and a twin in lock-step holds its clock while
it waits for a command, so a command's receive time says nothing of when in the period
it arrived; the stamp of a node on ``use_sim_time`` is the clock it answered. Where a
topic's stamps all lie on the recorded clock, :meth:`BagSeries.header_times` gives them
on the same axis as ``t``.

Pose source (:func:`pose_sources`): ``--pose-topic`` names a ``geometry_msgs/PoseStamped``
topic (``/vrpn_mocap/snake_head/pose``) or a ``/tf`` child frame (``tf:snake_head``: the
transforms of ``/tf`` and ``/tf_static`` whose ``child_frame_id`` is that frame, taken as
its pose in the world). Without it the first present of :data:`DEFAULT_POSE_TOPICS`, then
any ``/vrpn_mocap/<body>/pose`` (vrpn_mocap), then any other PoseStamped topic whose name
ends in ``/pose`` (the optitrack / NatNet and qualisys drivers' per-body topics), then the
``/tf`` child frames of :data:`DEFAULT_TF_FRAMES`.

``gait_state`` (``diagnostic_msgs/DiagnosticStatus``) carries numbers in its KeyValue
strings: they are parsed as floats (a value that is not a number is kept as text).
"""

from __future__ import annotations

import array
import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.analysis.bridge_states import StateSample, from_bus_status, from_log_line
from snake_core.analysis.session import sim_time_map
from snake_tools.bag.storage import BagError, BagSummary, iter_raw, summarize, typestore_for

_POSE = "geometry_msgs/msg/PoseStamped"
_JOINT_STATE = "sensor_msgs/msg/JointState"
_STAMP_SLACK_S = 1.0  # s, a header stamp this far outside the recorded clock's span is not on it
_TF = "tf2_msgs/msg/TFMessage"
_TF_TOPICS = ("/tf", "/tf_static")
_VRPN = re.compile(r"^/vrpn_mocap/[^/]+/pose$")
DEFAULT_POSE_TOPICS: tuple[str, ...] = ("/mocap/head_pose", "/ground_truth/base_pose", "/ground_truth/head_pose")
"""The stack's own pose topics, in the order a pose source is chosen among them."""
DEFAULT_TF_FRAMES: tuple[str, ...] = ("snake_head", "head")
"""``/tf`` child frames taken as the robot's head when no pose topic is present."""
READABLE: dict[str, tuple[str, ...]] = {
    "/clock": ("rosgraph_msgs/msg/Clock",),
    "/cmd_vel": ("geometry_msgs/msg/TwistStamped", "geometry_msgs/msg/Twist"),
    "/joint_states": (_JOINT_STATE,),
    "/joint_commands": (_JOINT_STATE,),
    "/ground_truth/base_pose": (_POSE,),
    "/ground_truth/head_pose": (_POSE,),
    "/mocap/head_pose": (_POSE,),
    "/gait_state": ("diagnostic_msgs/msg/DiagnosticStatus",),
    "/diagnostics": ("diagnostic_msgs/msg/DiagnosticArray",),
    "/singularity_margin": ("std_msgs/msg/Float64",),
    "/slipping_links": ("std_msgs/msg/Int32MultiArray",),
    "/slippage/ratio": ("std_msgs/msg/Float64",),
    "/plan": ("nav_msgs/msg/Path",),
    "/rosout": ("rcl_interfaces/msg/Log",),
    "/battery_state": ("sensor_msgs/msg/BatteryState",),
}
"""Topics the analysis reads, with the message types it accepts for each."""


def to_number(text: str) -> float | str:
    """A KeyValue value as a float when it is one (``True``/``False`` as 1/0), else the text."""
    if text in ("True", "False"):
        return float(text == "True")
    try:
        return float(text)
    except ValueError:
        return text


@dataclass
class Series:
    """Time series of one topic: times (s, on the bag's time base) and decoded rows.

    ``t`` is a float array once read. ``rows`` is a list, or for the topics read into
    columns (poses, ``cmd_vel``, ``/clock``, Float64 topics, JointState topics,
    ``gait_state``) a read-only sequence over numpy arrays (:class:`FloatRows`,
    :class:`JointRows`, :class:`GaitRows`) whose items are the same tuples a list holds.
    """

    t: Any = field(default_factory=list)
    rows: Any = field(default_factory=list)
    stamps_ns: np.ndarray | None = None
    """Header stamps, ns (JointState and PoseStamped topics), else None."""

    def times(self) -> np.ndarray:
        """Times as an array, s."""
        return np.asarray(self.t, dtype=float)


class FloatRows(Sequence[Any]):
    """Rows of fixed-width float messages over one array: (n,) gives floats, (n, k) tuples."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return FloatRows(self.values[k])
        row = self.values[k]
        return float(row) if self.values.ndim == 1 else tuple(float(x) for x in row)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return self.values if dtype is None else self.values.astype(dtype, copy=bool(copy))


class JointRows(Sequence[Any]):
    """JointState rows ``(names, position)`` over one flat array, with each message's actuator power.

    Attributes:
        names: Joint-name tuple per message (one shared tuple while the names do not change).
        position: Positions of every message, concatenated, rad (m for prismatic joints).
        offsets: Start of each message in ``position`` (n + 1 entries).
        power: Positive mechanical power of each message's joints,
            :func:`snake_core.analysis.energetics.positive_power` of its effort and velocity, W;
            NaN where the message lacks either for some joint.
    """

    def __init__(self, names: list[tuple[str, ...]], position: np.ndarray, counts: np.ndarray,
                 power: np.ndarray) -> None:
        self.names, self.position, self.power = names, position, power
        self.offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        k = range(len(self))[k]
        return (self.names[k], self.position[self.offsets[k]: self.offsets[k + 1]])

    def uniform(self) -> np.ndarray | None:
        """Positions as (n, joints), or None unless every message has the first one's names and positions."""
        if not self.names:
            return None
        first, width = self.names[0], len(self.names[0])
        if width == 0 or len(self.position) != width * len(self):
            return None
        if not all(n is first or n == first for n in self.names):
            return None
        if not np.array_equal(np.diff(self.offsets), np.full(len(self), width)):
            return None
        out = self.position.reshape(len(self), width)
        out.flags.writeable = False
        return out


class GaitRows(Sequence[Any]):
    """``gait_state`` rows ``(message, hardware_id, {key: value})`` over one float column per key.

    Attributes:
        modes: The message (the gait's mode) of each row.
        hardware: The hardware_id of each row.
        columns: Key -> float value per row (NaN where the row lacks the key or its value is text).
        present: Key -> whether each row has the key (as a float or as text).
        text: (row, key) -> value of the few values that are not numbers.
    """

    def __init__(self, modes: list[str], hardware: list[str], columns: dict[str, np.ndarray],
                 present: dict[str, np.ndarray], text: dict[tuple[int, str], str]) -> None:
        self.modes, self.hardware, self.columns, self.present, self.text = modes, hardware, columns, present, text

    def __len__(self) -> int:
        return len(self.modes)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        k = range(len(self))[k]
        values: dict[str, float | str] = {}
        for key, col in self.columns.items():
            if self.present[key][k]:
                values[key] = self.text.get((k, key), float(col[k]))
        return (self.modes[k], self.hardware[k], values)


@dataclass
class BagSeries:
    """Everything the analysis reads from a bag.

    Attributes:
        summary: The bag's summary.
        time_base: ``simulated (/clock)`` or ``receive time``.
        t0_ns: Receive time of the first message, ns.
        series: Topic -> series (topics the bag lacks are absent).
        unreadable: Topic -> why it could not be read (unexpected or unknown type).
    """

    summary: BagSummary
    time_base: str
    t0_ns: int
    series: dict[str, Series]
    unreadable: dict[str, str]

    pose_topics: tuple[str, ...] = ()
    """Pose sources present, in the order they are preferred (one when ``--pose-topic`` names it)."""

    clock_span_s: tuple[float, float] | None = None
    """First and last recorded ``/clock`` value, s (simulated time only)."""
    t_start_s: float = 0.0
    """Simulated time of ``t`` = 0, s (simulated time only)."""

    def has(self, *topics: str) -> bool:
        """The bag has at least one message on each topic."""
        return all(t in self.series and len(self.series[t].t) for t in topics)

    def header_times(self, topic: str) -> np.ndarray | None:
        """A topic's header stamps on the axis of its ``t``, s, or None.

        None unless the bag is on simulated time and every stamp of the topic lies within
        the recorded clock's span (the topic was stamped by the simulated clock, not the wall).
        """
        s = self.series.get(topic)
        if self.clock_span_s is None or s is None or s.stamps_ns is None or len(s.stamps_ns) != len(s.t):
            return None
        stamps = s.stamps_ns.astype(float) * 1e-9
        lo, hi = self.clock_span_s
        if not len(stamps) or stamps.min() < lo - _STAMP_SLACK_S or stamps.max() > hi + _STAMP_SLACK_S:
            return None
        return stamps - self.t_start_s

    def stamped_times(self, topic: str) -> np.ndarray:
        """A topic's times, s: its :meth:`header_times` where they exist, else its ``t``."""
        t = self.header_times(topic)
        return self.series[topic].times() if t is None else t


class _Cdr:
    """Little-endian CDR reader for the few flat types read on every message.

    rosbags' generic deserialiser builds a full message object per message; reading
    only the fields the analysis uses is several times faster on long bags (measured
    in docs/bags.md). Other types, and big-endian
    data, go through rosbags. Alignment is relative to the end of the 4-byte
    encapsulation header, as in CDR.
    """

    __slots__ = ("at", "buf")

    def __init__(self, buf: bytes) -> None:
        self.buf, self.at = buf, 4

    def _align(self, n: int) -> None:
        self.at += (-(self.at - 4)) % n

    def u8(self) -> int:
        self.at += 1
        return self.buf[self.at - 1]

    def u32(self) -> int:
        at = (self.at + 3) & ~3  # 4-alignment after the 4-byte header is plain 4-alignment
        self.at = at + 4
        return int(_U32.unpack_from(self.buf, at)[0])

    def string(self) -> str:
        at = (self.at + 3) & ~3
        end = at + 4 + _U32.unpack_from(self.buf, at)[0]
        self.at = end
        return self.buf[at + 4: end - 1].decode()

    def names(self, cache: dict[str, Any]) -> tuple[str, ...]:
        """A string sequence, reusing the previous decode when its bytes are the same."""
        start = self.at
        block = cache.get("block")
        if block is not None and self.buf.startswith(block, start):
            self.at = start + len(block)
            names: tuple[str, ...] = cache["names"]
            return names
        out = tuple(self.string() for _ in range(self.u32()))
        cache["block"], cache["names"] = self.buf[start: self.at], out
        return out

    def f64s(self, n: int) -> np.ndarray:
        self._align(8)
        out = np.frombuffer(self.buf, dtype="<f8", count=n, offset=self.at)
        self.at += 8 * n
        return out

    def f64_bytes(self) -> bytes:
        """A float64 sequence's raw little-endian bytes."""
        n = self.u32()
        if n == 0:  # an empty sequence has no padding to the element's alignment
            return b""
        self._align(8)
        self.at += 8 * n
        if self.at > len(self.buf):
            raise ValueError(f"float64 sequence of {n} runs past the message's {len(self.buf)} bytes")
        return self.buf[self.at - 8 * n: self.at]

    def header(self) -> None:
        self.at += 8  # stamp: int32 sec, uint32 nanosec
        self.string()  # frame_id

    def key_values(self) -> dict[str, float | str]:
        """A KeyValue sequence, values as numbers where they are (locals only: the hot loop)."""
        buf, unpack = self.buf, _U32.unpack_from
        at = (self.at + 3) & ~3
        (n,) = unpack(buf, at)
        at += 4
        values: dict[str, float | str] = {}
        for _ in range(n):
            at = (at + 3) & ~3
            end = at + 4 + unpack(buf, at)[0]
            key = buf[at + 4: end - 1].decode()
            at = (end + 3) & ~3
            end = at + 4 + unpack(buf, at)[0]
            values[key] = _number(buf[at + 4: end - 1])
            at = end
        self.at = at
        return values

    def status(self, cache: dict[str, Any]) -> tuple[str, int, str, dict[str, float | str]]:
        """A DiagnosticStatus, shared (read-only) with earlier ones of the same bytes.

        Statuses, their KeyValue dicts and their strings repeat from message to message
        (and the servos' values within one): one object each keeps a long bag small.
        """
        start = self.at
        level = self.u8()
        name, message = self.string(), self.string()
        self.string()  # hardware_id
        kv_start = self.at
        values = self.key_values()
        shared: dict[Any, Any] = cache.setdefault("shared", {})
        if len(shared) > _SHARED_MAX:
            shared.clear()
        values = shared.setdefault(self.buf[kv_start: self.at], values)
        name, message = shared.setdefault(name, name), shared.setdefault(message, message)
        return shared.setdefault(self.buf[start: self.at], (name, level, message, values))


_U32 = struct.Struct("<I")
_BAR_EVERY = 4096  # messages between progress-bar updates
_POWER_BLOCK = 4096  # JointState messages whose velocities and efforts are held before reduction to power
_SHARED_MAX = 20_000  # decoded diagnostic statuses kept for reuse by identical later ones
_POSE7 = struct.Struct("<7d")  # position x y z, orientation x y z w
_TWIST6 = struct.Struct("<6d")  # linear x y z, angular x y z


def _number(raw: bytes) -> float | str:
    """:func:`to_number` of a KeyValue value's raw bytes."""
    try:
        return float(raw)
    except ValueError:
        return to_number(raw.decode())


def _fast_decode(topic: str, msgtype: str, data: bytes, cache: dict[str, Any]) -> Any:
    """The decoded row of a message of a flat type, or None to use rosbags.

    ``cache`` is this topic's: it keeps the last joint-name block.
    """
    if len(data) < 4 or data[1] != 1:  # encapsulation: CDR little endian only
        return None
    r = _Cdr(data)
    if msgtype == "sensor_msgs/msg/JointState":
        r.header()
        names = r.names(cache)
        return (names, r.f64_bytes(), r.f64_bytes(), r.f64_bytes())
    if msgtype == _POSE:
        r.header()
        r._align(8)
        x, y, z, qx, qy, qz, qw = _POSE7.unpack_from(data, r.at)
        return (x, y, z, qw, qx, qy, qz)
    if msgtype == "rosgraph_msgs/msg/Clock":
        sec, nsec = struct.unpack_from("<iI", data, 4)
        return sec + nsec * 1e-9
    if msgtype in ("geometry_msgs/msg/TwistStamped", "geometry_msgs/msg/Twist"):
        if msgtype.endswith("Stamped"):
            r.header()
        r._align(8)
        tw = _TWIST6.unpack_from(data, r.at)
        return (tw[0], tw[5])
    if msgtype == "diagnostic_msgs/msg/DiagnosticArray":
        r.header()
        return [r.status(cache) for _ in range(r.u32())]
    if msgtype == "diagnostic_msgs/msg/DiagnosticStatus":
        r.u8()  # level
        r.string()  # name
        message, hardware_id = r.string(), r.string()
        return (message, hardware_id, r.key_values())
    if msgtype == "std_msgs/msg/Float64":
        return float(r.f64s(1)[0])
    return None


def _level(level: Any) -> int:
    """DiagnosticStatus level (a ``byte``) as an int."""
    return int(level) if isinstance(level, (int, np.integer)) else int.from_bytes(bytes(level)[:1], "little")


def _decode(topic: str, msg: Any) -> Any:
    if topic == "/clock":
        return msg.clock.sec + msg.clock.nanosec * 1e-9
    if topic == "/cmd_vel":
        tw = getattr(msg, "twist", msg)
        return (float(tw.linear.x), float(tw.angular.z))
    if topic in ("/joint_states", "/joint_commands"):
        return (tuple(msg.name), *(np.asarray(x, dtype="<f8").tobytes() for x in (msg.position, msg.velocity,
                                                                                 msg.effort)))
    if msg.__msgtype__ == _POSE:
        p, o = msg.pose.position, msg.pose.orientation
        return (p.x, p.y, p.z, o.w, o.x, o.y, o.z)
    if topic == "/gait_state":
        return (msg.message, msg.hardware_id, {kv.key: to_number(kv.value) for kv in msg.values})
    if topic == "/diagnostics":
        return [(s.name, _level(s.level), s.message, {kv.key: to_number(kv.value) for kv in s.values})
                for s in msg.status]
    if topic in ("/singularity_margin", "/slippage/ratio"):
        return float(msg.data)
    if topic == "/slipping_links":
        return [int(x) for x in msg.data]
    if topic == "/rosout":
        return (_level(msg.level), str(msg.name), str(msg.msg))
    if topic == "/battery_state":
        return float(msg.voltage)
    if topic == "/plan":
        return np.array([[p.pose.position.x, p.pose.position.y] for p in msg.poses]).reshape(-1, 2)
    raise KeyError(topic)


class _ListSink:
    """Rows kept as decoded (the rare and irregular types: diagnostics, plans, ...)."""

    def __init__(self) -> None:
        self.rows: list[Any] = []
        self.add = self.rows.append

    def done(self) -> Any:
        return self.rows


class _FloatSink:
    """Fixed-width float rows into one growing array (8 bytes a value, no object per message)."""

    def __init__(self, width: int) -> None:
        self.width, self.buf = width, array.array("d")
        self.add = self.buf.append if width == 1 else self.buf.extend

    def done(self) -> FloatRows:
        values = np.frombuffer(self.buf, dtype=float) if len(self.buf) else np.empty(0)
        return FloatRows(values if self.width == 1 else values.reshape(-1, self.width))


class _JointSink:
    """JointState rows ``(names, position bytes, velocity bytes, effort bytes)`` into flat arrays.

    Velocities and efforts are reduced to the power of each message ``_POWER_BLOCK`` messages
    at a time (:func:`snake_core.analysis.energetics.positive_power`), so they are never
    held for a whole bag.
    """

    def __init__(self) -> None:
        self.names: list[tuple[str, ...]] = []
        self.position = array.array("d")
        self.counts = array.array("q")
        self.power = array.array("d")
        self.block: list[tuple[int, bytes, bytes]] = []

    def add(self, row: tuple[tuple[str, ...], bytes, bytes, bytes]) -> None:
        names, position, velocity, effort = row
        if self.names and names == self.names[-1]:
            names = self.names[-1]  # one shared tuple while the names do not change
        self.names.append(names)
        self.position.frombytes(position)
        self.counts.append(len(position) // 8)
        self.block.append((len(names), velocity, effort))
        if len(self.block) == _POWER_BLOCK:
            self._flush()

    def _flush(self) -> None:
        from snake_core.analysis.energetics import positive_power

        block, self.block = self.block, []
        width = block[0][0] if block else 0
        if width and all(n == width and len(v) == len(e) == 8 * n for n, v, e in block):
            qd = np.frombuffer(b"".join(v for _n, v, _e in block), dtype="<f8").reshape(len(block), width)
            tau = np.frombuffer(b"".join(e for _n, _v, e in block), dtype="<f8").reshape(len(block), width)
            self.power.frombytes(positive_power(tau, qd).tobytes())
            return
        for n, v, e in block:  # mixed widths, or messages without velocity or effort
            ok = n > 0 and len(v) == len(e) == 8 * n
            self.power.append(float(positive_power(np.frombuffer(e, dtype="<f8")[None],
                                                   np.frombuffer(v, dtype="<f8")[None])[0]) if ok else np.nan)

    def done(self) -> JointRows:
        self._flush()
        position = np.frombuffer(self.position, dtype=float) if len(self.position) else np.empty(0)
        counts = np.frombuffer(self.counts, dtype=np.int64) if len(self.counts) else np.zeros(0, dtype=np.int64)
        power = np.frombuffer(self.power, dtype=float) if len(self.power) else np.empty(0)
        return JointRows(self.names, position, counts, power)


class _GaitSink:
    """``gait_state`` rows into one float column per key (NaN where absent or text)."""

    def __init__(self) -> None:
        self.modes: list[str] = []
        self.hardware: list[str] = []
        self.columns: dict[str, array.array[float]] = {}
        self.present: dict[str, array.array[int]] = {}
        self.text: dict[tuple[int, str], str] = {}
        self.strings: dict[str, str] = {}

    def add(self, row: tuple[str, str, dict[str, float | str]]) -> None:
        message, hardware_id, values = row
        k = len(self.modes)
        self.modes.append(self.strings.setdefault(message, message))
        self.hardware.append(self.strings.setdefault(hardware_id, hardware_id))
        for key in values:
            if key not in self.columns:
                self.columns[key] = array.array("d", [np.nan] * k)
                self.present[key] = array.array("b", bytes(k))
        for key, col in self.columns.items():
            value = values.get(key)
            if value is None:
                col.append(np.nan)
                self.present[key].append(0)
                continue
            self.present[key].append(1)
            if isinstance(value, float):
                col.append(value)
            else:
                col.append(np.nan)
                self.text[(k, key)] = value

    def done(self) -> GaitRows:
        return GaitRows(self.modes, self.hardware,
                        {k: np.frombuffer(c, dtype=float) if len(c) else np.empty(0) for k, c in self.columns.items()},
                        {k: np.frombuffer(p, dtype=np.int8).astype(bool) for k, p in self.present.items()},
                        self.text)


_FLOAT_WIDTHS = {_POSE: 7, "geometry_msgs/msg/TwistStamped": 2, "geometry_msgs/msg/Twist": 2,
                 "rosgraph_msgs/msg/Clock": 1, "std_msgs/msg/Float64": 1}
"""Types read into float columns, with their row width (the rows :func:`_decode` gives)."""


def _sink(topic: str, msgtype: str) -> Any:
    if msgtype in _FLOAT_WIDTHS:
        return _FloatSink(_FLOAT_WIDTHS[msgtype])
    if msgtype == _JOINT_STATE and topic in ("/joint_states", "/joint_commands"):
        return _JointSink()
    if msgtype == "diagnostic_msgs/msg/DiagnosticStatus" and topic == "/gait_state":
        return _GaitSink()
    return _ListSink()


class PoseTopicError(BagError):
    """``--pose-topic`` names a source the bag does not hold, or one of another type."""


def bridge_state_samples(bs: BagSeries) -> list[StateSample]:
    """The bridge's states a bag holds, or [] when it has none.

    Its ``bridge: bus`` status on ``/diagnostics`` and its logged changes on ``/rosout``, each
    read where present (:mod:`snake_core.analysis.bridge_states` parses them).
    """
    samples: list[StateSample] = []
    if bs.has("/diagnostics"):
        d = bs.series["/diagnostics"]
        for t, statuses in zip(d.t, d.rows, strict=True):
            for name, _level, message, values in statuses:
                if name == "bridge: bus" and (s := from_bus_status(float(t), message, values)) is not None:
                    samples.append(s)
    if bs.has("/rosout"):
        r = bs.series["/rosout"]
        for t, (_level, _name, text) in zip(r.t, r.rows, strict=True):
            if (s := from_log_line(float(t), text)) is not None:
                samples.append(s)
    return samples


def pose_sources(summary: BagSummary, pose_topic: str | None = None) -> list[str]:
    """Pose sources of a bag in the documented order (module docstring).

    A source is a topic name, or ``tf:<child frame>`` for a frame on ``/tf``; the frames
    of ``/tf`` are known only once read, so every default frame is listed when ``/tf`` is
    present and no pose topic is (``/tf`` is then the only source read).

    Raises:
        PoseTopicError: ``pose_topic`` is given and the bag lacks it (or has it with another type).
    """
    topics = summary.topics
    has_tf = any(t in topics and topics[t].type == _TF for t in _TF_TOPICS)
    if pose_topic is not None:
        if pose_topic.startswith("tf:"):
            if not pose_topic[3:] or "/" in pose_topic[3:]:
                raise PoseTopicError(f"--pose-topic {pose_topic}: expected tf:<child frame>, e.g. tf:snake_head")
            if not has_tf:
                raise PoseTopicError(f"--pose-topic {pose_topic}: {summary.path} has no /tf or /tf_static ({_TF})")
            return [pose_topic]
        if pose_topic not in topics:
            poses = sorted(n for n, t in topics.items() if t.type == _POSE)
            raise PoseTopicError(f"--pose-topic {pose_topic}: not in {summary.path} (its PoseStamped topics: "
                                 f"{', '.join(poses) or 'none'}{'; /tf: use tf:<child frame>' if has_tf else ''})")
        if topics[pose_topic].type != _POSE:
            raise PoseTopicError(f"--pose-topic {pose_topic}: type {topics[pose_topic].type}, expected {_POSE}")
        return [pose_topic]
    found = [t for t in DEFAULT_POSE_TOPICS if t in topics]
    found += sorted(n for n, t in topics.items() if _VRPN.match(n) and t.type == _POSE and n not in found)
    found += sorted(n for n, t in topics.items() if n.endswith("/pose") and t.type == _POSE and n not in found)
    if has_tf and not found:  # /tf is decoded message by message: only read when nothing else gives a pose
        found += [f"tf:{frame}" for frame in DEFAULT_TF_FRAMES]
    return found


def read_series(path: Path, topics: Iterable[str] | None = None, progress: bool = True,
                pose_topic: str | None = None) -> BagSeries:
    """Read the analysed topics of a bag in one pass.

    Args:
        path: Bag directory or storage file.
        topics: Subset of :data:`READABLE` to read (default: all).
        progress: Show a progress bar on a terminal.
        pose_topic: The pose source (module docstring); default: the documented order.

    A topic the analysis reads that has another type (or an unknown one) is left out
    and listed in ``unreadable``; the sections that needed it say so.

    Raises:
        BagError: The bag is unreadable, empty, or has nothing the analysis can read.
        PoseTopicError: ``pose_topic`` is not in the bag.
    """
    from tqdm import tqdm

    summary = summarize(path)
    if not summary.complete:
        raise BagError(summary.note)
    if summary.message_count == 0:
        raise BagError(f"{path}: empty bag (no messages)")
    sources = pose_sources(summary, pose_topic)
    readable = dict(READABLE)
    if pose_topic is not None:  # the named source replaces the stack's pose topics
        for name in DEFAULT_POSE_TOPICS:
            readable.pop(name, None)
    readable.update({n: (_POSE,) for n in sources if not n.startswith("tf:")})
    frames = {n[3:] for n in sources if n.startswith("tf:")}
    if frames:
        readable.update({n: (_TF,) for n in _TF_TOPICS})
    wanted = set(readable if topics is None else topics) | set(readable).difference(READABLE)
    unreadable: dict[str, str] = {}
    store = typestore_for(summary.topics.values())
    for name, info in summary.topics.items():
        if name in wanted and name in readable and info.type not in readable[name]:
            unreadable[name] = f"type {info.type}; the analysis reads it as {' or '.join(readable[name])}"
        elif info.type not in store.fielddefs:
            unreadable[name] = f"type {info.type} unknown (no definition in the bag or in rosbags' typestore)"
    present = {n for n in wanted if n in readable and n in summary.topics and n not in unreadable}
    if not present:
        listed = "; ".join(f"{n} ({unreadable.get(n, t.type)})" for n, t in sorted(summary.topics.items()))
        raise BagError(f"{path}: nothing to analyse: no topic the analysis can read; the bag has {listed}")
    total = sum(summary.topics[n].count for n in present)
    types = {n: summary.topics[n].type for n in present}
    sinks: dict[str, Any] = {n: _sink(n, types[n]) for n in present if types[n] != _TF}
    rx_buf: dict[str, array.array[int]] = {n: array.array("q") for n in sinks}
    hdr_buf: dict[str, array.array[int]] = {n: array.array("q") for n in sinks if types[n] in _STAMPED}
    caches: dict[str, dict[str, Any]] = {n: {} for n in present}
    tf_rx: dict[str, list[int]] = {}
    tf_rows: dict[str, list[Any]] = {}
    bar = tqdm(total=total, desc="reading bag", unit="msg", disable=None if progress else True, leave=False,
               miniters=1000)
    count = 0
    try:
        for topic, msgtype, stamp, data in iter_raw(path, present):
            try:
                if msgtype == _TF:
                    for frame, pose in _tf_poses(store.deserialize_cdr(data, msgtype), frames):
                        tf_rx.setdefault(frame, []).append(stamp)
                        tf_rows.setdefault(frame, []).append(pose)
                    bar.update()
                    continue
                row = _fast_decode(topic, msgtype, data, caches[topic])
                if row is None:
                    row = _decode(topic, store.deserialize_cdr(data, msgtype))
                sinks[topic].add(row)
            except Exception as err:  # rosbags' serde and struct raise several types on bad bytes
                raise BagError(f"{path}: message on {topic} at {stamp} ns cannot be decoded as {msgtype}: {err}") \
                    from err
            rx_buf[topic].append(stamp)
            if topic in hdr_buf:
                hdr_buf[topic].append(_header_stamp_ns(data))
            count += 1
            if count == _BAR_EVERY:
                bar.update(count)
                count = 0
    finally:
        bar.update(count)
        bar.close()
    series: dict[str, Series] = {n: Series(rows=sink.done()) for n, sink in sinks.items()}
    for name, buf in hdr_buf.items():
        series[name].stamps_ns = np.frombuffer(buf, dtype=np.int64) if len(buf) else np.empty(0, dtype=np.int64)
    rx: dict[str, Any] = {n: np.frombuffer(b, dtype=np.int64) if len(b) else np.empty(0, dtype=np.int64)
                          for n, b in rx_buf.items()}
    del sinks, rx_buf
    for frame in sorted(tf_rows):  # /tf and /tf_static interleaved: put in receive order
        order = np.argsort(np.asarray(tf_rx[frame], dtype=np.int64), kind="stable")
        rx[f"tf:{frame}"] = np.asarray(tf_rx[frame], dtype=np.int64)[order]
        series[f"tf:{frame}"] = Series(rows=[tf_rows[frame][i] for i in order])
    t0 = min((int(v[0]) for v in rx.values() if len(v)), default=summary.start_ns)
    clock = series.get("/clock")
    span: tuple[float, float] | None = None
    t_start = 0.0
    if clock is not None and len(clock.rows) >= 2:
        base = "simulated (/clock)"
        crx = np.asarray(rx["/clock"], dtype=np.int64)
        cval = np.maximum.accumulate(np.asarray(clock.rows, dtype=float))
        t_start = float(sim_time_map((crx - t0) * 1e-9, cval, np.zeros(1))[0])
        span = (float(cval[0]), float(cval[-1]))
        for name, s in series.items():
            s.t = sim_time_map((crx - t0) * 1e-9, cval, (np.asarray(rx[name], np.int64) - t0) * 1e-9) - t_start
    else:
        base = "receive time"
        for name, s in series.items():
            s.t = (np.asarray(rx[name], dtype=np.int64) - t0) * 1e-9
    present_sources = tuple(n for n in sources if n in series and len(series[n].rows))
    if pose_topic is not None and not present_sources:
        raise PoseTopicError(f"--pose-topic {pose_topic}: no message in {path}"
                             + (" (no transform with that child_frame_id on /tf or /tf_static)"
                                if pose_topic.startswith("tf:") else ""))
    return BagSeries(summary=summary, time_base=base, t0_ns=int(t0), series=series, unreadable=unreadable,
                     pose_topics=present_sources, clock_span_s=span, t_start_s=t_start)


_STAMPED = (_JOINT_STATE, "geometry_msgs/msg/PoseStamped")  # types whose header stamps are kept


def _header_stamp_ns(data: bytes) -> int:
    """The header stamp of a serialized message that starts with a std_msgs/Header, ns.

    After the 4-byte encapsulation header: int32 sec, uint32 nanosec, in the message's byte order.
    """
    sec, nsec = struct.unpack_from("<iI" if data[1] == 1 else ">iI", data, 4)
    return sec * 1_000_000_000 + nsec


def _tf_poses(msg: Any, frames: set[str]) -> list[tuple[str, tuple[float, ...]]]:
    """(child frame, (x, y, z, qw, qx, qy, qz)) of a TFMessage's transforms to the wanted frames."""
    out: list[tuple[str, tuple[float, ...]]] = []
    for tr in msg.transforms:
        if tr.child_frame_id in frames:
            p, o = tr.transform.translation, tr.transform.rotation
            out.append((tr.child_frame_id, (p.x, p.y, p.z, o.w, o.x, o.y, o.z)))
    return out
