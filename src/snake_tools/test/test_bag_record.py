"""``snake bag record / recover / play`` over real DDS (the ``ros`` fixture), against what was sent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from snake_tools.bag.storage import iter_raw, scan_incomplete, summarize, typestore_for
from snake_tools.cli import main
from snake_tools.command import snake_command


def _decoded(bag: Path) -> dict[str, list[object]]:
    s = summarize(bag)
    store = typestore_for(s.topics.values())
    out: dict[str, list[object]] = {}
    for topic, typ, _stamp, data in iter_raw(bag):
        out.setdefault(topic, []).append(store.deserialize_cdr(data, typ))
    return out


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_round_trip_with_qos_matched_to_publishers(ros, tmp_path, storage):
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64, String

    from snake_ros.qos import LATCHED_QOS, STATUS_QOS
    from snake_tools.bag.record import BagRecorder

    node = ros.node
    best_effort = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
    latched = node.create_publisher(String, "/plan_text", LATCHED_QOS)
    latched.publish(String(data="published before the recorder existed"))
    states = node.create_publisher(JointState, "/joint_states", best_effort)
    margin = node.create_publisher(Float64, "/singularity_margin", STATUS_QOS)
    topics = ["/plan_text", "/joint_states", "/singularity_margin"]
    rec = BagRecorder(node, tmp_path / "bag", storage, topics)

    def subscribed() -> bool:
        rec.discover()
        return all(t in rec.counts for t in topics)

    assert ros.spin_until(subscribed)
    qos = {t: rec._subs[t].qos_profile for t in topics}
    assert qos["/joint_states"].reliability == ReliabilityPolicy.BEST_EFFORT
    assert qos["/singularity_margin"].reliability == ReliabilityPolicy.RELIABLE
    assert qos["/plan_text"].durability == DurabilityPolicy.TRANSIENT_LOCAL
    assert qos["/singularity_margin"].durability == DurabilityPolicy.VOLATILE
    assert ros.spin_until(lambda: states.get_subscription_count() > 0 and margin.get_subscription_count() > 0)
    sent_states, sent_margin = [], []
    for k in range(40):
        js = JointState(name=["a", "b"], position=[0.01 * k, -0.02 * k])
        js.header.stamp.sec = k
        sent_states.append(js)
        states.publish(js)  # best effort: one in flight at a time, so none is dropped on localhost
        assert ros.spin_until(lambda k=k: rec.counts["/joint_states"] == k + 1)
        sent_margin.append(0.5 + k)
        margin.publish(Float64(data=0.5 + k))
    assert ros.spin_until(lambda: rec.counts["/singularity_margin"] == 40 and rec.counts["/plan_text"] == 1)
    rec.close()

    got = _decoded(tmp_path / "bag")
    assert [m.data for m in got["/plan_text"]] == ["published before the recorder existed"]
    assert [m.data for m in got["/singularity_margin"]] == sent_margin
    assert [(m.header.stamp.sec, list(m.name), m.position.tolist()) for m in got["/joint_states"]] == \
        [(m.header.stamp.sec, list(m.name), list(m.position)) for m in sent_states]
    s = summarize(tmp_path / "bag")
    assert s.complete and s.storage == storage and s.version == 9
    assert {t: x.count for t, x in s.topics.items()} == {"/plan_text": 1, "/joint_states": 40,
                                                         "/singularity_margin": 40}
    offered = {t: x.qos[0] for t, x in s.topics.items()}
    assert offered["/joint_states"].reliability.name == "BEST_EFFORT"
    assert offered["/plan_text"].durability.name == "TRANSIENT_LOCAL"


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_kill_9_leaves_recoverable_data(ros, tmp_path, capsys, storage):
    from std_msgs.msg import Float64

    from snake_ros.qos import COMMAND_QOS

    bag = tmp_path / "bag"
    pub = ros.node.create_publisher(Float64, "/chatter", COMMAND_QOS)
    proc = subprocess.Popen(snake_command("bag", "record", "--out", str(bag), "--storage", storage, "--topics",
                                          "/chatter", "--max-duration", "1", "--quiet"), env=os.environ.copy(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    suffix = ".mcap" if storage == "mcap" else ".db3"
    try:
        assert ros.spin_until(lambda: pub.get_subscription_count() > 0, timeout=60)
        sent = 0

        def flushed_enough() -> bool:
            # Publish one message per check; done once a split was closed and 30 messages are on disk.
            nonlocal sent
            pub.publish(Float64(data=float(sent)))
            sent += 1
            if sent % 20 or not (bag / f"bag_0{suffix}").exists():
                return False
            return len(scan_incomplete(bag).messages) >= 30

        assert ros.spin_until(flushed_enough, timeout=120)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not (bag / "metadata.yaml").exists()

    code = main(["bag", "info", str(bag), "--json"])
    info = json.loads(capsys.readouterr().out)
    assert code == 0 and info["complete"] is False
    assert "recoverable" in info["note"] and "snake bag recover" in info["note"]
    n = info["topics"]["/chatter"]["count"]
    assert 30 <= n <= sent
    code = main(["bag", "analyze", str(bag), "--out", str(tmp_path / "r")])
    assert code == 2 and "incomplete bag" in capsys.readouterr().err

    assert main(["bag", "recover", str(bag), "--out", str(tmp_path / "fixed"), "--json"]) == 0
    capsys.readouterr()
    values = [m.data for m in _decoded(tmp_path / "fixed")["/chatter"]]
    # What survives is exactly the first messages sent, in order, none missing.
    assert values == [float(k) for k in range(len(values))]
    assert len(values) == n


def test_sigterm_closes_a_complete_bag(ros, tmp_path):
    from std_msgs.msg import Float64

    from snake_ros.qos import COMMAND_QOS

    bag = tmp_path / "bag"
    pub = ros.node.create_publisher(Float64, "/chatter", COMMAND_QOS)
    proc = subprocess.Popen(snake_command("bag", "record", "--out", str(bag), "--topics", "/chatter", "--quiet"),
                            env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sent = 0
    try:
        assert ros.spin_until(lambda: pub.get_subscription_count() > 0, timeout=60)

        def some_on_disk() -> bool:
            nonlocal sent
            pub.publish(Float64(data=float(sent)))
            sent += 1
            return sent % 10 == 0 and len(scan_incomplete(bag).messages) >= 10

        assert ros.spin_until(some_on_disk, timeout=120)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    s = summarize(bag)
    assert s.complete and s.version == 9
    values = [m.data for m in _decoded(bag)["/chatter"]]
    assert len(values) >= 10 and values == [float(k) for k in range(len(values))]
    assert s.topics["/chatter"].count == len(values) <= sent


def _timed_bag(path: Path, stamps_ns: list[int]) -> Path:
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_KILTED)
    typ = "std_msgs/msg/Float64"
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conn = w.add_connection("/chatter", typ, typestore=ts)
        for k, stamp in enumerate(stamps_ns):
            w.write(conn, stamp, ts.serialize_cdr(ts.types[typ](data=float(k)), typ))
    return path


def test_play_republishes_in_order_with_the_recorded_clock(ros, tmp_path):
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import Float64

    from snake_ros.qos import COMMAND_QOS

    rng = np.random.default_rng(2)
    gaps = rng.uniform(0.005, 0.08, 39)
    stamps = [1_800_000_000_000_000_000 + int(x) for x in np.concatenate([[0.0], np.cumsum(gaps)]) * 1e9]
    bag = _timed_bag(tmp_path / "bag", stamps)
    data = ros.collect(Float64, "/replayed", COMMAND_QOS)
    clock = ros.collect(Clock, "/clock", COMMAND_QOS)
    proc = subprocess.Popen(
        snake_command("bag", "play", str(bag), "--clock", "--rate", "4", "--remap", "/chatter:=/replayed",
               "--wait-for-subscribers"), env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert ros.spin_until(lambda: len(data) == len(stamps) and len(clock) == len(stamps), timeout=120), \
            (len(data), len(clock), len(stamps), proc.poll())
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert [m.data for m in data] == [float(k) for k in range(len(stamps))]
    clock_ns = [m.clock.sec * 1_000_000_000 + m.clock.nanosec for m in clock]
    assert clock_ns == stamps
    assert np.diff(clock_ns) * 1e-9 == pytest.approx(gaps, abs=1e-9)


def test_recorder_started_before_the_publisher_keeps_its_first_messages_and_says_what_it_records(ros, tmp_path):
    import threading

    from geometry_msgs.msg import PoseStamped

    from snake_ros.qos import COMMAND_QOS

    topic = "/vrpn_mocap/snake_head/pose"
    bag = tmp_path / "bag"
    proc = subprocess.Popen(snake_command("bag", "record", "--out", str(bag), "--topics", "/cmd_vel", "--pose-topic",
                                          topic, "--quiet"), env=os.environ.copy(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    ready, recording = threading.Event(), threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "ready: waiting for publishers" in line:
                ready.set()
            if line.startswith("snake bag record: recording") and topic in line:
                recording.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    n = 20
    try:
        assert ready.wait(timeout=120), lines  # the recorder is up before the publisher exists
        pub = ros.node.create_publisher(PoseStamped, topic, COMMAND_QOS)
        assert ros.spin_until(lambda: recording.is_set() and pub.get_subscription_count() > 0, timeout=60), lines
        for k in range(n):
            msg = PoseStamped()
            msg.header.stamp.sec = k
            msg.pose.position.x = 0.01 * k
            pub.publish(msg)
        assert ros.spin_until(lambda: len(scan_incomplete(bag).messages) >= n, timeout=120)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
    got = _decoded(bag)[topic]
    assert [(m.header.stamp.sec, m.pose.position.x) for m in got] == [(k, 0.01 * k) for k in range(n)]
    said = [line for line in lines if line.startswith("snake bag record: recording")]
    assert len(said) == 1 and f"new {topic}" in said[0] and str(bag) in said[0]


def test_record_pose_topic_on_tf_needs_tf2_msgs(tmp_path, capsys):
    from snake_tools.bag.record import pose_topic_to_record

    assert pose_topic_to_record("/vrpn_mocap/snake_head/pose") == ["/vrpn_mocap/snake_head/pose"]
    try:
        import tf2_msgs.msg  # noqa: F401
    except ImportError:
        code = main(["bag", "record", "--out", str(tmp_path / "bag"), "--pose-topic", "tf:snake_head"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and "tf2_msgs" in err[0] and "--pose-topic tf:snake_head" in err[0]
        assert not (tmp_path / "bag").exists()
    else:
        assert pose_topic_to_record("tf:snake_head") == ["/tf", "/tf_static"]


def test_an_out_whose_parent_is_missing_is_refused_with_one_line(tmp_path):
    out = tmp_path / "nonexistent" / "dir" / "rec"
    run = subprocess.run(snake_command("bag", "record", "--out", str(out), "--duration", "1"), capture_output=True,
                         text=True, timeout=300, check=False)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and str(out.parent) in lines[0] and "does not exist" in lines[0], lines
    assert not (tmp_path / "nonexistent").exists()


def test_gaps_are_counted_per_publisher_from_sequence_numbers(ros, tmp_path):
    from snake_tools.bag.record import BagRecorder

    rec = BagRecorder(ros.node, tmp_path / "bag", "mcap", ["/a"])
    try:
        rec.gaps["/a"] = rec.missing["/a"] = 0
        rec.counts["/a"] = 0
        one, two = {"data": b"\x01" * 16}, {"data": b"\x02" * 16}
        for seq, gid in ((1, one), (2, one), (1, two), (5, one), (2, two), (6, one), (9, two)):
            rec._count_gap("/a", {"publication_sequence_number": seq, "publisher_gid": gid})
        assert rec.gaps["/a"] == 2 and rec.missing["/a"] == 2 + 6   # 3..4 of one, 3..8 of two
        assert "/a 2 gap(s), 8 message(s) lost" in rec.gap_line()
    finally:
        rec.close()


def test_a_reliable_publisher_at_the_stacks_rate_loses_nothing_beside_two_busy_loops(ros, tmp_path):
    """``snake bag record`` keeps every message of a reliable publisher while two busy loops load the CPU."""
    import time

    from rclpy.duration import Duration
    from sensor_msgs.msg import JointState

    from snake_ros.qos import COMMAND_QOS

    bag = tmp_path / "bag"
    pub = ros.node.create_publisher(JointState, "/joint_commands", COMMAND_QOS)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    proc = subprocess.Popen(snake_command("bag", "record", "--out", str(bag), "--topics", "/joint_commands", "--quiet"),
                            env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert ros.spin_until(lambda: pub.get_subscription_count() > 0, timeout=120)
        names = [f"j{k}" for k in range(18)]
        sent = 0
        next_due = time.monotonic()
        while sent < 300:   # 3 s at 100 Hz, the stack's highest shipped rate (the bridge's loop)
            pub.publish(JointState(name=names, position=[0.001 * sent] * 18))
            sent += 1
            next_due += 0.01
            ros.executor.spin_once(timeout_sec=max(0.0, next_due - time.monotonic()))   # the publisher's pacing
        assert ros.spin_until(lambda: pub.wait_for_all_acked(Duration(seconds=0.1)), timeout=120)
    finally:
        for b in busy:
            b.kill()
            b.wait()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    values = [m.position[0] for m in _decoded(bag)["/joint_commands"]]
    assert values == pytest.approx([0.001 * k for k in range(sent)]), (len(values), sent, err)
    assert "no gaps" in err and json.loads(out)["gaps"] == {"/joint_commands": 0}


def test_a_recorder_behind_at_the_stop_drains_what_was_published_before_it_and_nothing_after(ros, tmp_path):
    """Messages waiting in the reader at the stop are written up to the stop (by their source time), the rest not."""
    import time

    from rclpy.duration import Duration
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import Float64

    from snake_tools.bag.record import BagRecorder

    pub = ros.node.create_publisher(Float64, "/chatter", QoSProfile(
        history=HistoryPolicy.KEEP_ALL, depth=1, reliability=ReliabilityPolicy.RELIABLE))
    rec = BagRecorder(ros.node, tmp_path / "bag", "mcap", ["/chatter"])

    def subscribed() -> bool:
        rec.discover()
        return "/chatter" in rec.counts

    assert ros.spin_until(subscribed)
    assert ros.spin_until(lambda: pub.get_subscription_count() > 0)
    before_ns = time.time_ns()
    # Nothing spins while these are published: the recorder is 300 messages behind at the stop.
    for k in range(300):
        pub.publish(Float64(data=float(k)))
    stop_ns = time.time_ns()
    for k in range(300, 400):
        pub.publish(Float64(data=float(k)))
    assert pub.wait_for_all_acked(Duration(seconds=60))   # all in the recorder's reader, none taken
    assert rec.counts["/chatter"] == 0
    rec.close(stop_ns)
    assert [m.data for m in _decoded(tmp_path / "bag")["/chatter"]] == [float(k) for k in range(300)]
    assert rec.behind_at_stop == 300 and rec.after_stop == 100 and rec.largest_backlog == 400
    assert rec.gaps["/chatter"] == 0 and rec.undrained == []
    stamps = [stamp for _, _, stamp, _ in iter_raw(tmp_path / "bag")]
    # Stamped when the middleware received them (system clock), not when the drain took them.
    assert before_ns <= min(stamps) and max(stamps) <= stop_ns + 5_000_000_000
    assert "300 message(s) behind at the stop, drained; largest backlog 400" in rec.gap_line()


def test_duration_is_the_publishers_span_up_to_its_end(ros, tmp_path):
    """``--duration``: every message published before the end is in the bag, the last one included."""
    import time

    from std_msgs.msg import Float64

    from snake_ros.qos import COMMAND_QOS

    bag = tmp_path / "bag"
    pub = ros.node.create_publisher(Float64, "/chatter", COMMAND_QOS)
    # --duration counts from the recorder's start: long enough that its discovery of the publisher on a
    # loaded machine (seconds) leaves a span to record; the test is about the end.
    proc = subprocess.Popen(snake_command("bag", "record", "--out", str(bag), "--topics", "/chatter", "--quiet",
                                   "--duration", "15"),
                            env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sent: list[tuple[int, int]] = []   # the system clock just before and just after each publish, ns
    try:
        assert ros.spin_until(lambda: pub.get_subscription_count() > 0 or proc.poll() is not None, timeout=120)
        assert pub.get_subscription_count() > 0, f"the recorder ended before it subscribed: {proc.communicate()}"

        def publish_until_it_is_done() -> bool:
            t0 = time.time_ns()
            pub.publish(Float64(data=float(len(sent))))
            sent.append((t0, time.time_ns()))
            return proc.poll() is not None or not pub.get_subscription_count()

        assert ros.spin_until(publish_until_it_is_done, timeout=300)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    values = [m.data for m in _decoded(bag)["/chatter"]]
    result = json.loads(out)
    stop_ns = result["stop_ns"]
    # The bag ends at the stop: every message published before it is there (the last one too), none after it.
    before = sum(t1 <= stop_ns for _, t1 in sent)
    assert before > 0
    assert values[:before] == [float(k) for k in range(before)], (len(values), before, err)
    assert all(t1 > stop_ns or t0 <= stop_ns for t0, t1 in sent[before:])   # published in order
    assert not [v for v in values[before:] if sent[int(v)][0] > stop_ns]
    assert result["gaps"] == {"/chatter": 0} and result["undrained"] == []
    assert "no gaps" in err and "behind at the stop" in err
