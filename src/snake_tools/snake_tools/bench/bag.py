"""``snake bench bag``: the recorder under load, and the analysis time of a long session.

(a) ``snake bag record`` (its own process) against a publisher process at twice the
stack's rates: 18-joint ``joint_states`` and ``joint_commands`` at 200 Hz, ``diagnostics``
(bus + 18 servo statuses) at 100 Hz, ``mocap/head_pose`` at 120 Hz, for ``--seconds``;
messages dropped = published after every topic matched minus recorded (goal 0). The recorder
is stopped (SIGINT) right after the last message is published, so it has to drain the end:
every message carries its index in its header stamp, and ``last_in_bag`` says per topic
whether the last one published before the stop is in the bag. The same again beside
``_BUSY_LOOPS`` busy loops (one process each, spinning on the CPU) for each count:
``loaded``, one entry per count, ``{published, recorded, lost, last_in_bag}`` with the
recorder's own ``behind_at_stop`` and ``largest_backlog`` (goal: lost 0, every last message in
the bag).
(b) ``snake bag analyze`` (analysis and report, its own process) on a synthetic bag of the
full stack per ``--minutes`` (:mod:`snake_tools.bag.synthetic`): wall time and peak RSS
(``ru_maxrss``) of that process, median of ``--runs`` with min and max, and the load average
(goal for 60 minutes: <= 30 s and <= 300 MB).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from snake_core.robot import load_robot
from snake_tools.cli import count
from snake_tools.command import snake_command
from snake_tools.output import print_json, print_table

_RATES_HZ = {"/joint_states": 200.0, "/joint_commands": 200.0, "/diagnostics": 100.0, "/mocap/head_pose": 120.0}
_MATCH_TIMEOUT_S = 60.0  # wall s to wait for the recorder to subscribe
_RECORDER_EXIT_S = 120.0  # wall s the recorder may take to drain and close after SIGINT
_GOAL_S_60MIN = 30.0  # s, wall time of `snake bag analyze` on a 60-minute full-stack bag
_GOAL_RSS_MB = 300.0  # MB, its peak resident memory
_BUSY_LOOPS = (2, 4)  # CPU-bound processes beside the loaded recordings, one recording per count


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake bench bag``."""
    p = subparsers.add_parser("bag", help="recorder drops at 2x the stack's rates; analysis time of a long bag")
    p.add_argument("--seconds", type=float, default=60.0, help="recording time of part (a), s")
    p.add_argument("--minutes", type=float, nargs="+", default=[10.0, 60.0],
                   help="lengths of the synthetic bags of part (b), min")
    p.add_argument("--runs", type=count, default=1, help="analyses of each bag in part (b) (median, min, max)")
    p.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap")
    p.add_argument("--no-record", action="store_true", help="skip part (a)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def _messages() -> dict[str, object]:
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import JointState

    names = load_robot("tsnake").joint_names
    js = JointState(name=names, position=[0.1] * 18, velocity=[0.0] * 18, effort=[0.0] * 18)
    diag = DiagnosticArray(status=[DiagnosticStatus(name="bridge: bus", values=[KeyValue(key="failed_cycles",
                                                                                      value="0")])])
    diag.status += [DiagnosticStatus(name=f"bridge: {n}", message="ok",
                                     values=[KeyValue(key="temperature_c", value="35"),
                                             KeyValue(key="voltage_v", value="12.0")]) for n in names]
    return {"/joint_states": js, "/joint_commands": js, "/diagnostics": diag, "/mocap/head_pose": PoseStamped()}


def _busy_loops(n: int) -> list[subprocess.Popen[bytes]]:
    """``n`` processes that keep one CPU each busy until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def record_loaded(seconds: float, storage: str, loops: int) -> dict[str, object]:
    """:func:`record_drops` beside ``loops`` busy loops: ``{published, recorded, lost, last_in_bag}`` and the load."""
    busy = _busy_loops(loops)
    try:
        result = record_drops(seconds, storage)
        load = list(os.getloadavg())
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    sent = result["record_sent"]
    kept = result["record_kept"]
    assert isinstance(sent, dict) and isinstance(kept, dict)
    published, recorded = sum(sent.values()), sum(kept.get(t, 0) for t in sent)
    return {"published": published, "recorded": recorded, "lost": published - recorded,
            "lost_per_topic": result["record_dropped_per_topic"], "last_in_bag": result["record_last_in_bag"],
            "behind_at_stop": result["record_behind_at_stop"], "largest_backlog": result["record_largest_backlog"],
            "busy_loops": loops, "load_average_1_5_15": load}


def record_drops(seconds: float, storage: str) -> dict[str, object]:
    """Publish at the benchmark rates into a recorder process; count what it kept."""
    import rclpy

    from snake_ros.qos import COMMAND_QOS, SENSOR_PUB_QOS, STATUS_QOS

    qos = {"/joint_states": SENSOR_PUB_QOS, "/joint_commands": COMMAND_QOS, "/diagnostics": STATUS_QOS,
           "/mocap/head_pose": SENSOR_PUB_QOS}
    env = os.environ.copy()
    env.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    tmp = Path(tempfile.mkdtemp(prefix="snake-bench-bag-"))
    bag = tmp / "bag"
    proc = subprocess.Popen([*snake_command(), "bag", "record", "--out", str(bag), "--storage", storage, "--quiet",
                             "--topics", *_RATES_HZ], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    sent = dict.fromkeys(_RATES_HZ, 0)
    late: dict[str, int] = dict.fromkeys(_RATES_HZ, 0)
    summary: dict[str, object] = {}
    try:
        with rclpy.init():
            node = rclpy.create_node("bench_bag_publisher")
            msgs = _messages()
            pubs = {t: node.create_publisher(type(msgs[t]), t, qos[t]) for t in _RATES_HZ}
            deadline = time.monotonic() + _MATCH_TIMEOUT_S
            while not all(p.get_subscription_count() for p in pubs.values()) and time.monotonic() < deadline:
                rclpy.spin_once(node, timeout_sec=0.05)
            if not all(p.get_subscription_count() for p in pubs.values()):
                raise OSError("snake bag record did not subscribe to every topic")
            start = time.monotonic()
            due = dict.fromkeys(_RATES_HZ, start)
            while (now := time.monotonic()) < start + seconds:
                for topic, rate in _RATES_HZ.items():
                    if now >= due[topic]:
                        msg = msgs[topic]
                        msg.header.stamp.sec = sent[topic]   # type: ignore[attr-defined]  # its index
                        pubs[topic].publish(msg)
                        sent[topic] += 1
                        due[topic] += 1.0 / rate
                        if now - due[topic] > 1.0 / rate:
                            late[topic] += 1  # this process fell behind the nominal rate
                time.sleep(0.0005)
            # Stopped right after the last message: the recorder drains what it has not taken yet,
            # while this process stays up (a reliable reader may still need its retransmissions).
            proc.send_signal(signal.SIGINT)
            deadline = time.monotonic() + _RECORDER_EXIT_S
            while proc.poll() is None and time.monotonic() < deadline:
                rclpy.spin_once(node, timeout_sec=0.05)
            node.destroy_node()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=_RECORDER_EXIT_S)
            summary = json.loads(out or "{}")
        except (subprocess.TimeoutExpired, ValueError):
            proc.kill()
            proc.wait()
    indices = _indices(bag)
    shutil.rmtree(tmp, ignore_errors=True)
    counts = {t: len(x) for t, x in indices.items()}
    dropped = {t: sent[t] - len(set(indices.get(t, ())) & set(range(sent[t]))) for t in _RATES_HZ}
    last = {t: sent[t] > 0 and sent[t] - 1 in indices.get(t, ()) for t in _RATES_HZ}
    return {"record_seconds": seconds, "record_storage": storage, "record_sent": sent,
            "record_sent_rate_hz": {t: sent[t] / seconds for t in sent}, "record_kept": counts,
            "record_dropped_per_topic": dropped, "record_dropped": sum(dropped.values()),
            "record_last_in_bag": last, "record_behind_at_stop": summary.get("behind_at_stop"),
            "record_largest_backlog": summary.get("largest_backlog"), "record_goal_dropped": 0}


def _indices(bag: Path) -> dict[str, list[int]]:
    """Per topic, the indices (header stamp seconds) of the messages in the bag."""
    from snake_tools.bag.storage import iter_raw, summarize, typestore_for

    store = typestore_for(summarize(bag).topics.values())
    out: dict[str, list[int]] = {}
    for topic, typ, _stamp, data in iter_raw(bag):
        out.setdefault(topic, []).append(int(store.deserialize_cdr(data, typ).header.stamp.sec))
    return out


def _child_analyze(bag: Path, out: Path) -> tuple[float, float]:
    """Run ``snake bag analyze BAG --out OUT`` in a fresh process: (wall s, peak RSS MB).

    The peak RSS is the child's ``ru_maxrss`` (from ``wait4``): the whole command, its
    interpreter and imports included.

    Raises:
        OSError: The command failed.
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(snake_command("bag", "analyze", str(bag), "--out", str(out)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise OSError(f"snake bag analyze {bag} exited {proc.returncode}: {err.strip().splitlines()[-1:]}")
    return wall, usage.ru_maxrss / 1024.0  # ru_maxrss is in KiB on Linux


def analyze_cost(minutes: list[float], runs: int) -> dict[str, object]:
    """Write a synthetic full-stack bag per length and time ``snake bag analyze`` on it.

    Each length: ``runs`` analyses, each in its own process; the wall time and peak RSS
    are their median, with min and max beside.
    """
    from snake_tools.bag.storage import summarize
    from snake_tools.bag.synthetic import SyntheticSession, write_session

    result: dict[str, object] = {"analyze_runs": runs, "load_average_1_5_15": list(os.getloadavg()),
                                 "analyze_goal_s_60min": _GOAL_S_60MIN, "analyze_goal_rss_mb_60min": _GOAL_RSS_MB}
    for m in minutes:
        seconds = m * 60.0
        script = tuple((v, w, seconds / 4) for v, w in ((0.08, 0.0), (0.05, 0.08), (0.0, 0.15), (0.0, 0.0)))
        tmp = Path(tempfile.mkdtemp(prefix="snake-bench-bag-"))
        try:
            t0 = time.perf_counter()
            bag = write_session(tmp / "bag", load_robot("tsnake"), SyntheticSession(script=script))
            write_s = time.perf_counter() - t0
            walls, rss = [], []
            for k in range(runs):
                wall, peak = _child_analyze(bag, tmp / f"report{k}")
                walls.append(wall)
                rss.append(peak)
            messages = summarize(bag).message_count
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        key = f"{m:g}min"
        result.update({f"analyze_messages_{key}": messages, f"write_s_{key}": write_s,
                       f"analyze_s_{key}": statistics.median(walls), f"analyze_s_{key}_min": min(walls),
                       f"analyze_s_{key}_max": max(walls), f"analyze_peak_rss_mb_{key}": statistics.median(rss),
                       f"analyze_peak_rss_mb_{key}_min": min(rss), f"analyze_peak_rss_mb_{key}_max": max(rss)})
    result["load_average_after_1_5_15"] = list(os.getloadavg())
    return result


def run(args: argparse.Namespace) -> int:
    """Run both parts and print their numbers."""
    if not args.seconds > 0 or not all(m > 0 for m in args.minutes):
        raise ValueError("--seconds and --minutes must be > 0")
    result: dict[str, object] = {}
    if not args.no_record:
        result.update(record_drops(args.seconds, args.storage))
        result["loaded"] = [record_loaded(args.seconds, args.storage, n) for n in _BUSY_LOOPS]
    else:
        result["record_dropped"] = None
    result.update(analyze_cost(args.minutes, args.runs))
    if args.json:
        print_json(result)
    else:
        print_table(list(result.items()), title="snake bench bag")
    return 0
