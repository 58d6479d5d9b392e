"""One pass over a bag into numpy time series, on one documented time base.

Time base: every message is placed at its *receive time* (the bag's timestamp). When
the bag holds ``/clock`` (the twin, or any run on simulated time), receive times are
mapped onto the recorded clock (:func:`snake_core.analysis.session.sim_time_map`), so
that rates come out per simulated second, as the nodes on ``use_sim_time`` saw them.
Header stamps are never compared across publishers (teleop stamps wall time while the
twin stamps simulated time). Times are seconds from the first message.

``gait_state`` (``diagnostic_msgs/DiagnosticStatus``) carries numbers in its KeyValue
strings: they are parsed as floats (a value that is not a number is kept as text).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.analysis.session import sim_time_map
from snake_tools.bag.storage import BagError, BagSummary, iter_raw, summarize, typestore_for

_POSE = "geometry_msgs/msg/PoseStamped"
_JOINT_STATE = "sensor_msgs/msg/JointState"
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
    "/slippage/ratio": ("std_msgs/msg/Float64",),
    "/plan": ("nav_msgs/msg/Path",),
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
    """Time series of one topic: times (s, on the bag's time base) and decoded rows."""

    t: list[float] = field(default_factory=list)
    rows: list[Any] = field(default_factory=list)

    def times(self) -> np.ndarray:
        """Times as an array, s."""
        return np.asarray(self.t, dtype=float)


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

    def has(self, *topics: str) -> bool:
        """The bag has at least one message on each topic."""
        return all(t in self.series and self.series[t].t for t in topics)


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
        return (tuple(msg.name), np.asarray(msg.position, dtype=float))
    if topic in ("/ground_truth/base_pose", "/ground_truth/head_pose", "/mocap/head_pose"):
        p, o = msg.pose.position, msg.pose.orientation
        return (p.x, p.y, p.z, o.w, o.x, o.y, o.z)
    if topic == "/gait_state":
        return (msg.message, msg.hardware_id, {kv.key: to_number(kv.value) for kv in msg.values})
    if topic == "/diagnostics":
        return [(s.name, _level(s.level), s.message, {kv.key: to_number(kv.value) for kv in s.values})
                for s in msg.status]
    if topic in ("/singularity_margin", "/slippage/ratio"):
        return float(msg.data)
    if topic == "/plan":
        return np.array([[p.pose.position.x, p.pose.position.y] for p in msg.poses]).reshape(-1, 2)
    raise KeyError(topic)


def read_series(path: Path, topics: Iterable[str] | None = None, progress: bool = True) -> BagSeries:
    """Read the analysed topics of a bag in one pass.

    Args:
        path: Bag directory or storage file.
        topics: Subset of :data:`READABLE` to read (default: all).
        progress: Show a progress bar on a terminal.

    Raises:
        BagError: The bag is unreadable, empty, or a topic the analysis reads has a type
            it cannot decode.
    """
    from tqdm import tqdm

    summary = summarize(path)
    if not summary.complete:
        raise BagError(summary.note)
    if summary.message_count == 0:
        raise BagError(f"{path}: empty bag (no messages)")
    wanted = set(READABLE if topics is None else topics)
    unreadable: dict[str, str] = {}
    store = typestore_for(summary.topics.values())
    for name, info in summary.topics.items():
        if name in wanted and info.type not in READABLE[name]:
            raise BagError(f"{path}: topic {name} has type {info.type}; the analysis reads it as "
                           f"{' or '.join(READABLE[name])}")
        if info.type not in store.fielddefs:
            unreadable[name] = f"type {info.type} unknown (no definition in the bag or in rosbags' typestore)"
    present = {n for n in wanted if n in summary.topics and n not in unreadable}
    if not present:
        listed = "; ".join(f"{n} ({t.type})" for n, t in sorted(summary.topics.items()))
        raise BagError(f"{path}: nothing to analyse: no topic the analysis reads ({', '.join(sorted(wanted))}); "
                       f"the bag has {listed}")
    total = sum(summary.topics[n].count for n in present)
    series: dict[str, Series] = {n: Series() for n in present}
    rx: dict[str, list[int]] = {n: [] for n in present}
    bar = tqdm(total=total, desc="reading bag", unit="msg", disable=None if progress else True, leave=False)
    try:
        for topic, msgtype, stamp, data in iter_raw(path, present):
            try:
                msg = store.deserialize_cdr(data, msgtype)
            except Exception as err:
                raise BagError(f"{path}: message on {topic} at {stamp} ns cannot be decoded as {msgtype}: {err}") \
                    from err
            rx[topic].append(stamp)
            series[topic].rows.append(_decode(topic, msg))
            bar.update()
    finally:
        bar.close()
    t0 = min((v[0] for v in rx.values() if v), default=summary.start_ns)
    clock = series.get("/clock")
    if clock is not None and len(clock.rows) >= 2:
        base = "simulated (/clock)"
        crx = np.asarray(rx["/clock"], dtype=np.int64)
        cval = np.maximum.accumulate(np.asarray(clock.rows, dtype=float))
        t_start = float(sim_time_map((crx - t0) * 1e-9, cval, np.zeros(1))[0])
        for name, s in series.items():
            s.t = list(sim_time_map((crx - t0) * 1e-9, cval, (np.asarray(rx[name], np.int64) - t0) * 1e-9)
                       - t_start)
    else:
        base = "receive time"
        for name, s in series.items():
            s.t = list((np.asarray(rx[name], dtype=np.int64) - t0) * 1e-9)
    return BagSeries(summary=summary, time_base=base, t0_ns=int(t0), series=series, unreadable=unreadable)
