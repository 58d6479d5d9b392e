"""``snake bag record``: the graph's messages, serialised as received, into a rosbag2 bag.

One rclpy node subscribes to each selected topic with a *raw* subscription (the CDR
bytes as they came off the wire) and hands them to rosbags' writer unchanged: no
deserialisation or re-serialisation. Message types come from the graph
(``get_topic_names_and_types``), their definitions from rosbags' Kilted typestore (a
type it does not know is skipped with one warning naming it).

QoS per topic follows its publishers (``get_publishers_info_by_topic``): best effort
if any publisher is best effort (else reliable), transient local if every publisher is
(else volatile), keep-last with a deep queue (``_QUEUE_DEPTH``) so that a burst is not dropped.

Nothing received waits for the disk, and no message waits for a spin of its own: each
wake-up of the loop (a message arrived) takes every message waiting in every subscription's
reader (:meth:`BagRecorder.take_all`) and puts them on an unbounded queue as one batch; a
writer thread takes the batches off, writes, splits and flushes. The reader therefore
acknowledges a reliable publisher's samples before the publisher's own history (often 10
deep) would have to drop them, and a recorder that fell behind catches up a whole backlog
per wake-up.

The end: stopping (``--duration``, Ctrl-C, SIGTERM) fixes the stop time, and
:meth:`BagRecorder.close` drains every subscription until each publisher's messages up to
that time have arrived: a publisher is done once a message it sent after the stop arrives
(that message and later ones are not written), or once it has been silent for
``_DRAIN_QUIET_S``; the drain is bounded by ``_DRAIN_LIMIT_S``. The bag therefore holds the
publishers' time span up to the stop, however far behind the recorder was. The summary says
how many messages were behind at the stop (published before it, taken after it), the
largest backlog taken at one wake-up, and the publishers not drained within the bound (their
messages before the stop that did not arrive are lost; the sequence numbers of those that
did arrive after it count them as gaps).

Gaps: every message carries its publisher's sequence number (``MessageInfo``); a jump of
more than one between two messages of the same publisher is a gap, counted per topic
with the messages it lost (``gaps``, ``missing`` in the summary), and so is a
``message_lost`` event of the middleware. A publisher's messages sent before the
recorder subscribed are not gaps (a volatile subscription never gets them).

Receive time stamps each message, as ``ros2 bag record`` does without ``--use-sim-time``:
the middleware's reception time of the sample (the host's system clock, ns), so a recorder
that takes it late still stamps when it arrived; the system clock at the take where the
middleware does not give it.

Durability on a crash: every ``_FLUSH_PERIOD_S`` the open MCAP chunk is closed and
written through to the file (sqlite3: the transaction is committed, WAL journal), and
``--max-duration`` / ``--max-size`` close the file and start the next split. After a
``kill -9`` everything up to the last flush is in the files; ``snake bag info`` says so
and ``snake bag recover`` writes it to a complete bag. Ctrl-C / SIGTERM close the bag
normally (all splits, then ``metadata.yaml``).
"""

from __future__ import annotations

import importlib
import math
import queue
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from snake_tools.bag.storage import BagError

STACK_TOPICS: tuple[str, ...] = (
    "/clock", "/cmd_vel", "/joint_commands", "/joint_states", "/gait_state", "/diagnostics",
    "/ground_truth/head_pose", "/ground_truth/base_pose", "/mocap/head_pose", "/mocap/markers",
    "/singularity_margin", "/slipping_links", "/gait_speed_scale", "/slippage/ratio",
    "/slippage/object_accel_norm", "/slippage/robot_accel_norm", "/slippage/constraint_force_norm",
    "/slippage/status", "/goal_pose", "/pegs", "/map", "/plan", "/planner_status", "/follower_status",
    "/head_offset", "/blocked_branch", "/rosout", "/robot_description_yaml", "/battery_state",
)
"""Topics ``snake bag record`` takes by default: everything the stack's nodes publish or read."""

_FLUSH_PERIOD_S = 1.0  # s of wall time between flushes to disk (what survives a kill -9)
_DISCOVERY_PERIOD_S = 0.1  # s between graph scans for new topics
_STATUS_PERIOD_S = 1.0  # s between live status lines
_QUEUE_DEPTH = 10000  # messages the DDS reader of one topic may hold before the recorder takes them
_DRAIN_QUIET_S = 1.0  # s of silence after which a publisher with nothing after the stop counts as drained
_DRAIN_LIMIT_S = 10.0  # s, longest drain at the stop
_DRAIN_WAIT_S = 0.02  # s, longest wait for new data between two takes of the drain


@dataclass
class _Split:
    index: int
    writer: Any
    staging: Path
    opened_ns: int
    connections: dict[str, Any] = field(default_factory=dict)
    bytes: int = 0


def pose_topic_to_record(spec: str) -> list[str]:
    """Topics that carry the pose source ``spec`` (a topic, or ``tf:<frame>`` for ``/tf``, ``/tf_static``).

    Raises:
        ValueError: ``tf:`` without a frame, or ``tf2_msgs`` not installed (the recorder
            needs the message package to subscribe, even raw).
    """
    if not spec.startswith("tf:"):
        return [spec if spec.startswith("/") else "/" + spec]
    if not spec[3:]:
        raise ValueError(f"--pose-topic {spec}: expected tf:<child frame>, e.g. tf:snake_head")
    try:
        message_class("tf2_msgs/msg/TFMessage")
    except ImportError as err:
        raise ValueError(f"--pose-topic {spec}: /tf cannot be recorded here: the tf2_msgs package is not "
                         f"installed ({err}); record /tf /tf_static with `ros2 bag record` next to it") from err
    return ["/tf", "/tf_static"]


def message_class(type_name: str) -> Any:
    """The rclpy message class of ``pkg/msg/Name``."""
    pkg, kind, name = type_name.split("/")
    return getattr(importlib.import_module(f"{pkg}.{kind}"), name)


def offered_qos(infos: Sequence[Any]) -> list[Any]:
    """Publishers' QoS profiles as rosbags ``Qos`` tuples (for metadata.yaml)."""
    from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

    def t(d: Any) -> Any:
        ns = int(getattr(d, "nanoseconds", 0))
        return QosTime(ns // 1_000_000_000, ns % 1_000_000_000)

    out = []
    for info in infos:
        q = info.qos_profile
        out.append(Qos(QosHistory(int(q.history)), int(q.depth), QosReliability(int(q.reliability)),
                       QosDurability(int(q.durability)), t(q.deadline), t(q.lifespan),
                       QosLiveliness(int(q.liveliness)), t(q.liveliness_lease_duration),
                       bool(q.avoid_ros_namespace_conventions)))
    return out


def subscription_qos(infos: Sequence[Any]) -> Any:
    """Subscription QoS matched to the publishers: best effort if any is, transient local if all are."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    best_effort = any(i.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT for i in infos)
    latched = bool(infos) and all(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for i in infos)
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=_QUEUE_DEPTH,
                      reliability=ReliabilityPolicy.BEST_EFFORT if best_effort else ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)


class BagRecorder:
    """Raw subscriptions of one rclpy node written into a (split) rosbag2 bag.

    Args:
        node: The rclpy node to subscribe with (spun by the caller).
        out: Bag directory to create.
        storage: ``mcap`` or ``sqlite3``.
        topics: Topic names to record (absolute); None records every topic.
        max_duration_s: Start a new split after this long, s (0: never).
        max_size_bytes: Start a new split after this many bytes (0: never).
        warn: Where warnings go (one line each).
        info: Where the line that says what is being recorded goes, each time new topics
            are subscribed (default: stderr).
    """

    def __init__(self, node: Any, out: Path, storage: str = "mcap", topics: Sequence[str] | None = None,
                 max_duration_s: float = 0.0, max_size_bytes: int = 0,
                 warn: Callable[[str], None] | None = None, info: Callable[[str], None] | None = None) -> None:
        from rosbags.typesys import Stores, get_typestore

        if storage not in ("mcap", "sqlite3"):
            raise BagError(f"--storage: expected mcap or sqlite3, got {storage!r}")
        out = Path(out)
        if out.exists():
            raise BagError(f"{out}: exists already; choose another --out")
        if not out.parent.is_dir():
            raise BagError(f"--out {out}: the directory {out.parent} does not exist (the bag directory is "
                           "created, its parent must exist)")
        out.mkdir()
        self.node, self.out, self.storage = node, out, storage
        self.wanted = None if topics is None else {t if t.startswith("/") else "/" + t for t in topics}
        self.max_duration_ns = int(max_duration_s * 1e9)
        self.max_size_bytes = int(max_size_bytes)
        self.warn = warn or (lambda text: print(f"snake bag record: warning: {text}", file=sys.stderr))
        self.info = info or (lambda text: print(f"snake bag record: {text}", file=sys.stderr, flush=True))
        self.typestore = get_typestore(Stores.ROS2_KILTED)
        self.counts: dict[str, int] = {}
        self.types: dict[str, str] = {}
        self.qos: dict[str, list[Any]] = {}
        self._subs: dict[str, Any] = {}
        self._skipped: set[str] = set()
        self._split: _Split | None = None
        self._closed_meta: list[dict[str, Any]] = []
        self._last_flush = time.monotonic()
        self._last_discovery = 0.0
        self._closed = False
        self.gaps: dict[str, int] = {}       # per topic: sequence jumps, and middleware message_lost events
        self.missing: dict[str, int] = {}    # per topic: messages those gaps lost
        self._last_seq: dict[tuple[str, bytes], int] = {}
        self._last_seen: dict[tuple[str, bytes], float] = {}   # per publisher: monotonic time of its last message
        self._passed: set[tuple[str, bytes]] = set()           # publishers whose message after the stop arrived
        self._stop_ns: int | None = None     # the stop (system clock, ns): later messages are not written
        self.end_ns: float = math.inf        # a stop known in advance (--duration), system clock ns
        self.behind_at_stop = 0              # messages published before the stop, taken after it
        self.after_stop = 0                  # messages published after the stop (not written)
        self.largest_backlog = 0             # most messages taken at one wake-up
        self.undrained: list[str] = []       # topics with a publisher not drained within the bound
        self._queue: queue.SimpleQueue[list[tuple[str, int, bytes]] | None] = queue.SimpleQueue()
        self._error: BaseException | None = None
        self._writer = threading.Thread(target=self._write_loop, name="snake-bag-writer", daemon=True)
        self._writer.start()

    # --- discovery ---------------------------------------------------------------------------------------
    def discover(self) -> None:
        """Subscribe to selected topics that appeared in the graph since the last scan."""
        self._last_discovery = time.monotonic()
        new: list[str] = []
        self._discover(new)
        if new:
            self.info(f"recording {len(self._subs)} topic(s) into {self.out}: new {' '.join(sorted(new))}"
                      f"; all: {' '.join(sorted(self._subs))}")

    def _discover(self, new: list[str]) -> None:
        for topic, types in self.node.get_topic_names_and_types():
            if topic in self._subs or topic in self._skipped:
                continue
            if self.wanted is not None and topic not in self.wanted:
                continue
            infos = self.node.get_publishers_info_by_topic(topic)
            if not infos:
                continue
            type_name = types[0]
            if len(types) > 1:
                self.warn(f"{topic}: several types in the graph {types}; recording {type_name}")
            if type_name not in self.typestore.fielddefs:
                self.warn(f"{topic}: type {type_name} has no definition in rosbags' typestore; not recorded")
                self._skipped.add(topic)
                continue
            try:
                cls = message_class(type_name)
            except (ImportError, AttributeError, ValueError):
                self.warn(f"{topic}: cannot import the message class of {type_name}; not recorded")
                self._skipped.add(topic)
                continue
            self.types[topic] = type_name
            self.qos[topic] = offered_qos(infos)
            self.counts[topic] = 0
            self.gaps[topic] = self.missing[topic] = 0
            from rclpy.event_handler import SubscriptionEventCallbacks

            self._subs[topic] = self.node.create_subscription(
                cls, topic, lambda data, info, topic=topic: self.on_message(topic, data, info),
                subscription_qos(infos), raw=True,
                event_callbacks=SubscriptionEventCallbacks(message_lost=partial(self._on_lost, topic)))
            new.append(topic)

    def _on_lost(self, topic: str, lost: Any) -> None:
        """The middleware says it lost messages of ``topic`` (``message_lost`` event)."""
        self.gaps[topic] += 1
        self.missing[topic] += int(getattr(lost, "total_count_change", 0) or 0)

    # --- writing -----------------------------------------------------------------------------------------
    def _open_split(self, now_ns: int) -> _Split:
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.rosbag2.storage_sqlite3 import Sqlite3Writer

        index = len(self._closed_meta)
        staging = self.out / f".split_{index}"
        writer = Writer(staging, version=9,
                        storage_plugin=StoragePlugin.MCAP if self.storage == "mcap" else StoragePlugin.SQLITE3)
        writer.open()
        if isinstance(writer.storage, Sqlite3Writer):  # the storage plugin of --storage sqlite3
            writer.storage.conn.execute("PRAGMA journal_mode=WAL")
        return _Split(index=index, writer=writer, staging=staging, opened_ns=now_ns)

    def on_message(self, topic: str, data: bytes, info: Any = None) -> None:
        """Queue one received message (raw CDR) with its receive time for the writer thread.

        ``info`` is rclpy's ``MessageInfo`` (the publisher's sequence number: gaps are counted;
        the reception and source times).
        """
        if self._closed:
            return
        batch: list[tuple[str, int, bytes]] = []
        self._accept(topic, data, info, batch)
        if batch:
            self._queue.put(batch)

    def take_all(self) -> int:
        """Take every message waiting in every subscription's reader; queue them as one batch.

        Returns:
            How many messages were taken (written or not: those after the stop are not).
        """
        from rclpy.exceptions import InvalidHandle

        batch: list[tuple[str, int, bytes]] = []
        taken = 0
        for topic, sub in list(self._subs.items()):
            while True:
                try:
                    with sub.handle:
                        got = sub.handle.take_message(sub.msg_type, True)
                except InvalidHandle:
                    break
                if got is None:
                    break
                taken += 1
                self._accept(topic, got[0], got[1], batch)
        self.largest_backlog = max(self.largest_backlog, taken)
        if batch:
            batch.sort(key=lambda item: item[1])
            self._queue.put(batch)
        return taken

    def _accept(self, topic: str, data: bytes, info: Any, batch: list[tuple[str, int, bytes]]) -> None:
        """One message taken: counted, gap-checked, and added to ``batch`` unless sent after the stop."""
        info = info or {}
        key = self._key(topic, info)
        self._last_seen[key] = time.monotonic()
        self._count_gap(topic, info)
        source = int(info.get("source_timestamp") or 0)
        if source > (self._stop_ns if self._stop_ns is not None else self.end_ns):
            self._passed.add(key)
            self.after_stop += 1
            return
        if self._stop_ns is not None:
            self.behind_at_stop += 1
        stamp = int(info.get("received_timestamp") or 0) or time.time_ns()
        batch.append((topic, stamp, data))
        self.counts[topic] += 1

    @staticmethod
    def _key(topic: str, info: Any) -> tuple[str, bytes]:
        gid = info.get("publisher_gid") or {}
        return topic, bytes(gid.get("data", b"")) if isinstance(gid, dict) else b""

    def _count_gap(self, topic: str, info: Any) -> None:
        seq = info.get("publication_sequence_number")
        if not seq:   # the middleware does not give it
            return
        key = self._key(topic, info)
        last = self._last_seq.get(key)
        if last is not None and seq > last + 1:
            self.gaps[topic] += 1
            self.missing[topic] += seq - last - 1
        if last is None or seq > last:
            self._last_seq[key] = seq

    def _write_loop(self) -> None:
        """The writer thread: messages off the queue into the bag, a flush every ``_FLUSH_PERIOD_S``."""
        try:
            while True:
                try:
                    item = self._queue.get(timeout=_FLUSH_PERIOD_S / 4)
                except queue.Empty:
                    item = ()   # type: ignore[assignment]
                if item is None:
                    self._close_split()   # in this thread: sqlite3 objects stay in the thread that made them
                    return
                for message in item or ():
                    self._write(*message)
                if time.monotonic() - self._last_flush >= _FLUSH_PERIOD_S:
                    self.flush()
        except BaseException as err:   # reported by close(); the thread must not die silently
            self._error = err

    def _write(self, topic: str, now_ns: int, data: bytes) -> None:
        """Write one message into the current split (opened or rotated as needed)."""
        split = self._split
        if split is not None and ((self.max_duration_ns and now_ns - split.opened_ns >= self.max_duration_ns)
                                  or (self.max_size_bytes and split.bytes >= self.max_size_bytes)):
            self._close_split()
            split = None
        if split is None:
            split = self._split = self._open_split(now_ns)
        conn = split.connections.get(topic)
        if conn is None:
            conn = split.connections[topic] = split.writer.add_connection(
                topic, self.types[topic], typestore=self.typestore, offered_qos_profiles=self.qos[topic])
        split.writer.write(conn, now_ns, data)
        split.bytes += len(data) + 30

    def flush(self) -> None:
        """Put everything written so far into the file (survives a kill -9 of this process; writer thread)."""
        self._last_flush = time.monotonic()
        split = self._split
        if split is None:
            return
        storage = split.writer.storage
        if self.storage == "mcap":
            if storage.chunk.bio.tell():
                storage.close_chunk()
            storage.bio.flush()
        else:
            storage.conn.commit()

    def _close_split(self) -> None:
        split, self._split = self._split, None
        if split is None:
            return
        split.writer.close()
        meta = yaml.safe_load((split.staging / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        src = next(p for p in split.staging.iterdir() if p.name != "metadata.yaml")
        name = f"{self.out.name}_{split.index}{src.suffix}"
        src.replace(self.out / name)
        shutil.rmtree(split.staging)
        meta["relative_file_paths"] = [name]
        for f in meta["files"]:
            f["path"] = name
        self._closed_meta.append(meta)

    def tick(self) -> None:
        """Periodic work between spins: graph discovery (the writer thread flushes)."""
        now = time.monotonic()
        if now - self._last_discovery >= _DISCOVERY_PERIOD_S:
            self.discover()

    def drain(self, stop_ns: int | None = None, wait: Callable[[float], object] | None = None,
              limit_s: float = _DRAIN_LIMIT_S) -> None:
        """Take messages until every publisher's messages up to the stop have arrived (bounded).

        A publisher is drained once a message it sent after ``stop_ns`` arrived, or once it
        has been silent for ``_DRAIN_QUIET_S``; the drain ends when every publisher is, or
        after ``limit_s``. Messages sent after the stop are counted, not written.

        Args:
            stop_ns: The stop, system clock ns (default: now).
            wait: Waits up to the given seconds for new data (e.g. a spin of the node's
                executor, which also delivers its events); default: sleeps that long.
            limit_s: Longest drain, s.
        """
        self._stop_ns = time.time_ns() if stop_ns is None else int(stop_ns)
        begun = time.monotonic()
        pause = wait or time.sleep
        while True:
            self.take_all()
            now = time.monotonic()
            waiting = {k for k, seen in self._last_seen.items()
                       if k not in self._passed and now - max(seen, begun) < _DRAIN_QUIET_S}
            if not waiting:
                return
            if now - begun >= limit_s:
                self.undrained = sorted({topic for topic, _ in waiting})
                self.warn(f"the drain at the stop ended after {limit_s:g} s with publishers of "
                          f"{' '.join(self.undrained)} still sending messages from before the stop: those not "
                          "taken are not in the bag")
                return
            pause(_DRAIN_WAIT_S)

    def close(self, stop_ns: int | None = None, wait: Callable[[float], object] | None = None,
              drain_s: float = _DRAIN_LIMIT_S) -> Path:
        """Drain up to the stop (:meth:`drain`), close the last split and write the bag's metadata.yaml (version 9).

        Args:
            stop_ns: The stop, system clock ns (default: now).
            wait: See :meth:`drain`.
            drain_s: Longest drain, s (0: only what is waiting now).
        """
        if self._closed:
            return self.out
        if self._stop_ns is None:
            self.drain(stop_ns, wait, drain_s)
        self._closed = True
        for sub in self._subs.values():
            self.node.destroy_subscription(sub)
        self._queue.put(None)
        self._writer.join()   # it writes what is queued, then closes the last split
        if self._error is not None:
            raise BagError(f"{self.out}: writing failed: {self._error}") from self._error
        (self.out / "metadata.yaml").write_text(yaml.safe_dump(
            {"rosbag2_bagfile_information": merge_metadata(self._closed_meta, self.storage)}, sort_keys=True))
        return self.out

    def status_line(self, elapsed_s: float) -> str:
        """One line: messages and mean rates per topic."""
        total = sum(self.counts.values())
        parts = [f"{t.rsplit('/', 1)[-1]} {n} ({n / elapsed_s:.0f}/s)" for t, n in sorted(self.counts.items())
                 if n and elapsed_s > 0]
        return f"{elapsed_s:7.1f} s  {total} msgs  split {len(self._closed_meta)}  " + "  ".join(parts)

    def gap_line(self) -> str:
        """One line: gaps per topic (sequence jumps, lost-message events) and their messages; the end's drain."""
        bad = {t: (g, self.missing.get(t, 0)) for t, g in sorted(self.gaps.items()) if g}
        total = sum(self.counts.values())
        end = (f"; {self.behind_at_stop} message(s) behind at the stop, drained; largest backlog "
               f"{self.largest_backlog} at one wake-up")
        if self.undrained:
            end += f"; NOT DRAINED within {_DRAIN_LIMIT_S:g} s: {' '.join(self.undrained)}"
        if not bad:
            return f"{total} messages on {len(self.counts)} topic(s), no gaps{end}"
        return (f"{total} messages on {len(self.counts)} topic(s); GAPS: "
                + ", ".join(f"{t} {g} gap(s), {m} message(s) lost" for t, (g, m) in bad.items()) + end)


def merge_metadata(splits: list[dict[str, Any]], storage: str) -> dict[str, Any]:
    """One bag's metadata from the metadata of its closed splits (rosbag2 version 9 layout)."""
    topics: dict[str, dict[str, Any]] = {}
    files: list[dict[str, Any]] = []
    start, end = None, None
    for meta in splits:
        files += meta["files"]
        s0 = int(meta["starting_time"]["nanoseconds_since_epoch"])
        s1 = s0 + int(meta["duration"]["nanoseconds"])
        if meta["message_count"]:
            start = s0 if start is None else min(start, s0)
            end = s1 if end is None else max(end, s1)
        for t in meta["topics_with_message_count"]:
            name = t["topic_metadata"]["name"]
            if name in topics:
                topics[name]["message_count"] += t["message_count"]
            else:
                topics[name] = {"topic_metadata": t["topic_metadata"], "message_count": t["message_count"]}
    start = start or 0
    return {
        "version": 9, "storage_identifier": storage,
        "relative_file_paths": [f["path"] for f in files],
        "duration": {"nanoseconds": max(0, (end or start) - start)},
        "starting_time": {"nanoseconds_since_epoch": start},
        "message_count": sum(t["message_count"] for t in topics.values()),
        "topics_with_message_count": list(topics.values()),
        "compression_format": "", "compression_mode": "", "files": files,
        "custom_data": None, "ros_distro": "kilted",
    }


def record(out: Path, storage: str, topics: Sequence[str] | None, duration_s: float, max_duration_s: float,
           max_size_bytes: int, quiet: bool = False) -> dict[str, Any]:
    """Record until ``duration_s`` (0: until Ctrl-C / SIGTERM); returns counts per topic.

    SIGTERM is turned into a clean stop, so the bag is complete either way.
    """
    import rclpy

    stop: dict[str, int | None] = {"ns": None}   # when SIGTERM came, system clock ns

    def on_term(_sig: int, _frame: Any) -> None:
        stop["ns"] = time.time_ns()

    previous = signal.signal(signal.SIGTERM, on_term)
    started = time.monotonic()
    end_ns = time.time_ns() + round(duration_s * 1e9) if duration_s > 0 else math.inf
    try:
        with rclpy.init(signal_handler_options=rclpy.signals.SignalHandlerOptions.NO):
            node = rclpy.create_node("snake_bag_recorder")
            recorder = BagRecorder(node, out, storage, topics, max_duration_s, max_size_bytes)
            recorder.end_ns = end_ns
            what = "every topic" if topics is None else f"{len(topics)} topic(s)"
            print(f"snake bag record: ready: waiting for publishers of {what} (graph scanned every "
                  f"{_DISCOVERY_PERIOD_S} s); Ctrl-C or SIGTERM stops and closes {out}", file=sys.stderr, flush=True)
            last_status = started
            try:
                while stop["ns"] is None and time.time_ns() < end_ns:
                    recorder.tick()
                    rclpy.spin_once(node, timeout_sec=0.05)
                    recorder.take_all()
                    now = time.monotonic()
                    if not quiet and now - last_status >= _STATUS_PERIOD_S:
                        last_status = now
                        print("\r" + recorder.status_line(now - started)[:200], end="", file=sys.stderr,
                              flush=True)
            except KeyboardInterrupt:
                stop["ns"] = time.time_ns()
            finally:
                # --duration: the publishers' span up to its end, whenever the recorder got there.
                stop_ns = stop["ns"] if stop["ns"] is not None else int(min(end_ns, time.time_ns()))
                try:
                    recorder.close(stop_ns, wait=lambda s: rclpy.spin_once(node, timeout_sec=s))
                except KeyboardInterrupt:   # a second Ctrl-C: stop draining, close what is there
                    recorder.close(stop_ns, drain_s=0.0)
                node.destroy_node()
                if not quiet:
                    print(file=sys.stderr)
                print(f"snake bag record: {recorder.gap_line()}", file=sys.stderr, flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return {"out": str(out), "storage": storage, "seconds": time.monotonic() - started,
            "counts": dict(recorder.counts), "gaps": dict(recorder.gaps), "missing": dict(recorder.missing),
            "behind_at_stop": recorder.behind_at_stop, "largest_backlog": recorder.largest_backlog,
            "after_stop": recorder.after_stop, "undrained": list(recorder.undrained), "stop_ns": stop_ns}
