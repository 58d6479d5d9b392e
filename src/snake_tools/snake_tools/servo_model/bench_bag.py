"""Bench runs of one servo on a pendulum as rosbag2 bags (standard messages), written and read strictly.

What ``snake servo-model record --format bag`` writes and ``snake servo-model identify``
reads, one bag directory per run (rosbag2 metadata version 9, MCAP storage, written with
rosbags). Every sample is four messages with the same header stamp (the run's start plus the
sample's time, ns) and that stamp as receive time:

=================  ==========================  ===============================================
topic              type                        content
=================  ==========================  ===============================================
``joint_states``   sensor_msgs/msg/JointState  the servo's present ``position`` (rad),
                                               ``velocity`` (rad/s), ``effort`` (N m: Present
                                               Current x the model's torque constant, as the
                                               bridge publishes it; 0 where the model reports
                                               no current)
``joint_commands`` sensor_msgs/msg/JointState  the goal ``position`` (rad) written before the read
``torque_enable``  std_msgs/msg/Bool           the Torque Enable the run had at that sample
``battery_state``  sensor_msgs/msg/BatteryState the servo's Present Input ``voltage`` (V)
=================  ==========================  ===============================================

The rig and the run are the bag's ``custom_data`` (metadata.yaml, strings, keys
:data:`CUSTOM_KEYS`): ``snake.bench.mass`` (kg), ``snake.bench.length`` (m),
``snake.bench.arm_mass`` (kg), ``snake.bench.kp`` (Position P Gain register),
``snake.bench.motor`` (the servo model), ``snake.bench.trajectory`` and ``snake.bench.joint``
(the joint name of the messages). :func:`read_bench_bag` takes each ``joint_states`` sample
with the latest goal, torque enable and voltage stamped at or before it; every problem is
one line naming the bag and the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.servo.pendulum import BenchLog
from snake_tools.servo_model.bench_log import BAM_MOTORS, BenchLogError

PREFIX = "snake.bench."
CUSTOM_KEYS = ("mass", "length", "arm_mass", "kp", "motor", "trajectory", "joint")
"""The ``custom_data`` keys of a bench bag, each after :data:`PREFIX`."""
TOPICS = {"joint_states": "sensor_msgs/msg/JointState", "joint_commands": "sensor_msgs/msg/JointState",
          "torque_enable": "std_msgs/msg/Bool", "battery_state": "sensor_msgs/msg/BatteryState"}
"""Topic -> message type of a bench bag."""
JOINT = "servo"
"""Joint name of the messages."""
_MIN_SAMPLES = 20
_MAX_P_GAIN = 16383
_NS = 1_000_000_000


def write_bench_bag(path: Path, entries: Sequence[Mapping[str, Any]], header: Mapping[str, Any],
                    torque_constant: float, start_ns: int = 0) -> Path:
    """Write one run as a bag directory ``path`` (which must not exist).

    Args:
        path: The bag directory.
        entries: The run's samples (:func:`snake_tools.servo_model.record.record_run`): ``timestamp``
            (s from the run's start), ``position``, ``goal_position``, ``speed``, ``current`` (A),
            ``input_volts``, ``torque_enable`` (without ``current``: no effort).
        header: ``mass``, ``length``, ``arm_mass``, ``kp``, ``motor``, ``trajectory``.
        torque_constant: N m per A of the model (the effort of a current).
        start_ns: Stamp of the run's start, ns since the epoch.
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    types = store.types
    time_msg, header_msg = types["builtin_interfaces/msg/Time"], types["std_msgs/msg/Header"]
    joint_state, boolean, battery = (types["sensor_msgs/msg/JointState"], types["std_msgs/msg/Bool"],
                                     types["sensor_msgs/msg/BatteryState"])
    empty = np.zeros(0)
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {topic: writer.add_connection(topic, kind, typestore=store) for topic, kind in TOPICS.items()}
        for key in CUSTOM_KEYS:
            value = JOINT if key == "joint" else header[key]
            writer.set_custom_data(PREFIX + key, repr(value) if isinstance(value, float) else str(value))
        for e in entries:
            ns = start_ns + round(float(e["timestamp"]) * _NS)
            stamp = header_msg(stamp=time_msg(sec=ns // _NS, nanosec=ns % _NS), frame_id="")
            msgs = {
                "joint_states": joint_state(header=stamp, name=[JOINT], position=np.array([float(e["position"])]),
                                           velocity=np.array([float(e["speed"])]),
                                           effort=(np.array([float(e["current"]) * torque_constant])
                                                   if "current" in e else empty)),
                "joint_commands": joint_state(header=stamp, name=[JOINT],
                                             position=np.array([float(e["goal_position"])]), velocity=empty,
                                             effort=empty),
                "torque_enable": boolean(data=bool(e["torque_enable"])),
                "battery_state": battery(
                    header=stamp, voltage=float(e["input_volts"]), temperature=math.nan, current=math.nan,
                    charge=math.nan, capacity=math.nan, design_capacity=math.nan, percentage=math.nan,
                    power_supply_status=0, power_supply_health=0, power_supply_technology=0, present=True,
                    cell_voltage=empty, cell_temperature=empty, location="", serial_number=""),
            }
            for topic, msg in msgs.items():
                writer.write(conns[topic], ns, store.serialize_cdr(msg, TOPICS[topic]))
    return path


def is_bench_bag(path: Path) -> bool:
    """``path`` is a bag directory (it holds ``metadata.yaml``)."""
    return path.is_dir() and (path / "metadata.yaml").is_file()


def read_bench_bag(path: Path, model: str | None = None) -> BenchLog:
    """Read one bench bag as a bench log.

    Args:
        path: The bag directory.
        model: The servo model the fit is for; a bag of another motor is refused.

    Raises:
        BenchLogError: Not a bag, a custom_data key or a topic missing or of the wrong type, a
            value out of range, stamps not increasing, a sample without a goal, torque state or
            voltage before it, or a bag of another servo model (one line naming the bag and field).
    """
    from snake_tools.bag.storage import BagError, TopicSummary, _metadata, open_reader, typestore_for

    def fail(field: str, msg: str) -> BenchLogError:
        return BenchLogError(f"{path}: {field}: {msg}")

    try:
        meta = _metadata(path)
        reader = open_reader(path)
    except BagError as err:
        raise BenchLogError(str(err)) from err
    custom = meta.get("custom_data") or {}
    if not isinstance(custom, dict):
        raise fail("custom_data", "expected a mapping of the bench's values")
    for key in CUSTOM_KEYS:
        if PREFIX + key not in custom:
            raise fail(f"custom_data.{PREFIX}{key}", "missing (a bench bag names its rig and run)")
    motor = BAM_MOTORS.get(str(custom[PREFIX + "motor"]), str(custom[PREFIX + "motor"]))
    if model is not None and motor != model:
        raise fail(f"custom_data.{PREFIX}motor", f"a bag of {custom[PREFIX + 'motor']!r} ({motor}), not of {model}")
    mass = _number(custom[PREFIX + "mass"], "mass", fail, 100.0)
    length = _number(custom[PREFIX + "length"], "length", fail, 10.0)
    kp = _number(custom[PREFIX + "kp"], "kp", fail, float(_MAX_P_GAIN))
    if kp != int(kp):
        raise fail(f"custom_data.{PREFIX}kp", f"must be a Position P Gain register value, got {kp!r}")
    joint = str(custom[PREFIX + "joint"])
    series: dict[str, list[tuple[int, float]]] = {topic: [] for topic in TOPICS}
    try:
        kinds = {c.topic: c.msgtype for c in reader.connections}
        for topic, kind in TOPICS.items():
            if topic not in kinds:
                raise fail(topic, f"missing (a bench bag has {', '.join(TOPICS)})")
            if kinds[topic] != kind:
                raise fail(topic, f"of type {kinds[topic]}, expected {kind}")
        store = typestore_for([TopicSummary(type=c.msgtype, msgdef=c.msgdef.data or "") for c in reader.connections])
        wanted = [c for c in reader.connections if c.topic in TOPICS]
        for conn, receive_ns, raw in reader.messages(connections=wanted):
            msg = store.deserialize_cdr(raw, conn.msgtype)
            series[conn.topic].append(_sample(conn.topic, msg, receive_ns, joint, fail))
    finally:
        reader.close()
    states = series["joint_states"]
    if len(states) < _MIN_SAMPLES:
        raise fail("joint_states", f"need at least {_MIN_SAMPLES} samples, got {len(states)}")
    stamps = np.array([s for s, _ in states], dtype=np.int64)
    if np.any(np.diff(stamps) <= 0):
        raise fail("joint_states.header.stamp", f"not increasing (sample {int(np.argmin(np.diff(stamps))) + 1})")
    held = {topic: _hold(series[topic], stamps, topic, fail) for topic in ("joint_commands", "torque_enable",
                                                                         "battery_state")}
    if np.any(held["battery_state"] <= 0.0):
        raise fail("battery_state.voltage", "a supply voltage <= 0")
    return BenchLog(name=path.name, mass=mass, length=length, p_gain=kp, time=(stamps - stamps[0]) / _NS,
                    position=np.array([v for _, v in states]), goal=held["joint_commands"],
                    torque_enable=held["torque_enable"], voltage=held["battery_state"],
                    trajectory=str(custom[PREFIX + "trajectory"]), motor=motor)


def _sample(topic: str, msg: Any, receive_ns: int, joint: str, fail: Any) -> tuple[int, float]:
    """(stamp ns, value) of one message: the header stamp where the type has one, else the receive time."""
    if topic == "torque_enable":
        return receive_ns, float(bool(msg.data))
    stamp = int(msg.header.stamp.sec) * _NS + int(msg.header.stamp.nanosec)
    if topic == "battery_state":
        # float32 on the wire: its shortest decimal is the reading (0.1 V steps), not a float32's tail
        value = float(str(np.float32(msg.voltage)))
        if not math.isfinite(value):
            raise fail("battery_state.voltage", f"expected a finite number, got {value!r}")
        return stamp, value
    names = list(msg.name)
    if joint not in names or len(msg.position) != len(names):
        raise fail(f"{topic}.name", f"no position of joint {joint!r} (names {names})")
    value = float(msg.position[names.index(joint)])
    if not math.isfinite(value):
        raise fail(f"{topic}.position", f"expected a finite number, got {value!r}")
    return stamp, value


def _hold(samples: list[tuple[int, float]], stamps: np.ndarray, topic: str, fail: Any) -> np.ndarray:
    """Each stamp's latest value of ``samples`` stamped at or before it (zero-order hold)."""
    if not samples:
        raise fail(topic, "no messages")
    samples = sorted(samples)
    at = np.array([s for s, _ in samples], dtype=np.int64)
    idx = np.searchsorted(at, stamps, side="right") - 1
    if idx[0] < 0:
        raise fail(topic, "no message at or before the first joint_states sample")
    return np.array([v for _, v in samples])[idx]


def _number(text: Any, key: str, fail: Any, high: float) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise fail(f"custom_data.{PREFIX}{key}", f"must be a number, got {text!r}") from None
    if not 0.0 < value <= high:
        raise fail(f"custom_data.{PREFIX}{key}", f"must be in (0, {high:g}], got {text!r}")
    return value


def read_log(path: Path, fmt: str = "auto", model: str | None = None) -> BenchLog:
    """One bench log in ``fmt``: ``bam`` (BAM's JSON), ``bag`` (a bench bag) or ``auto`` (from the path).

    ``auto``: a directory holding ``metadata.yaml`` is a bag, a ``.json`` file a BAM log.

    Raises:
        BenchLogError: A path of neither kind, or a bad log (one line naming the file and the field).
    """
    from snake_tools.servo_model.bench_log import read_bam_log

    if fmt == "auto":
        if is_bench_bag(path):
            fmt = "bag"
        elif path.suffix.lower() == ".json":
            fmt = "bam"
        else:
            raise BenchLogError(f"{path}: format: neither a BAM log (a .json file) nor a bag (a directory "
                                f"with metadata.yaml); --format bam or bag says which")
    return read_bench_bag(path, model) if fmt == "bag" else read_bam_log(path, model)
