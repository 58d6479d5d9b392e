"""Twin node graph tests: a real twin_node process (MuJoCo physics) over DDS.

Most tests run the twin in lock-step (one 20 ms control period per ``joint_commands``
message), so what they check does not depend on how fast this machine is.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from geometry_msgs.msg import PoseArray, PoseStamped, TwistStamped
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import BatteryState, JointState

from snake_core.following.synthetic_mocap import MocapConfig, MocapModel
from snake_core.servo.actuator import position_actuator
from snake_core.servo.model import load_servo_model
from snake_ros.qos import COMMAND_QOS, SENSOR_PUB_QOS, SENSOR_QOS

pytestmark = pytest.mark.graph

_PERIOD_NS = 20_000_000  # the default control period, 20 ms
_LOCKSTEP = {"mode": "lockstep", "robot": "tsnake", "world": "flat", "command_timeout_s": 0.0}


def _ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


class _Twin:
    """Probe-side handles on one twin_node process."""

    def __init__(self, ros: Any, params: dict[str, Any], commander: bool = True) -> None:
        """Start the twin; ``commander``: the probe publishes ``joint_commands`` too (False: another node does)."""
        self.ros = ros
        # Reliable probes (the twin publishes reliable): a loaded machine loses no sample.
        self.clock = ros.collect(Clock, "/clock", SENSOR_PUB_QOS)
        self.states = ros.collect(JointState, "joint_states", SENSOR_PUB_QOS)
        self.gt_head = ros.collect(PoseStamped, "ground_truth/head_pose", SENSOR_PUB_QOS)
        self.gt_base = ros.collect(PoseStamped, "ground_truth/base_pose", SENSOR_PUB_QOS)
        self.mocap = ros.collect(PoseStamped, "mocap/head_pose", SENSOR_PUB_QOS)
        self.markers = ros.collect(PoseArray, "mocap/markers", SENSOR_PUB_QOS)
        self.pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS) if commander else None
        self.proc = ros.start("twin_node", params)
        ok = ros.spin_until(lambda: bool(self.clock) and (self.pub is None or self.pub.get_subscription_count() > 0),
                            30.0)
        assert ok, ros.log_of(self.proc)

    def now_ns(self) -> int:
        return _ns(self.clock[-1].clock)

    def send(self, targets: dict[str, float]) -> None:
        msg = JointState()
        msg.name = list(targets)
        msg.position = [float(v) for v in targets.values()]
        assert self.pub is not None, "a twin started with commander=False"
        self.pub.publish(msg)

    def lockstep(self, targets: dict[str, float], n: int) -> None:
        """Send ``n`` commands, one at a time, each after the previous one's period was run."""
        for _ in range(n):
            before = self.now_ns()
            self.send(targets)
            assert self.ros.spin_until(lambda b=before: self.now_ns() > b, 20.0), self.ros.log_of(self.proc)


def test_paused_twin_runs_no_period_until_resumed(ros):
    from std_srvs.srv import SetBool

    twin = _Twin(ros, {**_LOCKSTEP, "lockstep_prime": True, "start_paused": True, "mocap_rate_hz": 0.0})
    assert ros.spin_until(lambda: "paused (~/pause false resumes)" in ros.log_of(twin.proc)), ros.log_of(twin.proc)

    def call(data: bool) -> str:
        answer = ros.call(SetBool, "/twin_node/pause", SetBool.Request(data=data))
        assert answer is not None and answer.response.success, ros.log_of(twin.proc)
        return str(answer.response.message)

    # Paused and primed: no priming period; a command sets the targets but runs no period.
    twin.send({"m1_lateral": 0.3})
    assert ros.spin_until(lambda: "their period runs on resume" in ros.log_of(twin.proc)), ros.log_of(twin.proc)
    assert call(False) == "running at simulated t = 0.000 s"
    # The command's period runs on resume (not a priming period on top of it), then one per command.
    assert ros.spin_until(lambda: twin.now_ns() == _PERIOD_NS), ros.log_of(twin.proc)
    twin.lockstep({"m1_lateral": 0.3}, 2)
    assert twin.now_ns() == 3 * _PERIOD_NS
    assert call(True) == "paused at simulated t = 0.060 s"
    assert call(False) == "running at simulated t = 0.060 s"


def test_lockstep_advances_exactly_one_period_per_command(ros):
    twin = _Twin(ros, _LOCKSTEP)
    assert twin.now_ns() == 0
    for k in range(1, 21):
        twin.lockstep({"m1_lateral": 0.1}, 1)
        assert twin.now_ns() == k * _PERIOD_NS
    ros.spin_for(0.5)  # no command: the time stands still (the clock is only re-published)
    assert twin.now_ns() == 20 * _PERIOD_NS
    assert ros.spin_until(lambda: len(twin.states) and _ns(twin.states[-1].header.stamp) == 20 * _PERIOD_NS)
    stamps = [_ns(m.header.stamp) for m in twin.states]
    assert stamps == sorted(set(stamps)) and all(s % _PERIOD_NS == 0 for s in stamps)
    assert ros.spin_until(lambda: len(twin.gt_head) and _ns(twin.gt_head[-1].header.stamp) == 20 * _PERIOD_NS)
    assert twin.gt_head[-1].header.frame_id == "world"


def test_joints_follow_commands_clamped_with_bad_entries_dropped(ros):
    twin = _Twin(ros, _LOCKSTEP)
    targets = {"m1_lateral": 0.4, "m2_dorsal": -0.3, "m4_twist": 1.0, "m3_lateral": 2.5,
               "m5_dorsal": math.nan, "no_such_joint": 0.7, "m2_twist": 1e12}
    twin.lockstep(targets, 60)  # 1.2 s simulated
    assert ros.spin_until(lambda: bool(twin.states) and _ns(twin.states[-1].header.stamp) == 60 * _PERIOD_NS)
    q = dict(zip(twin.states[-1].name, twin.states[-1].position, strict=True))
    effort = dict(zip(twin.states[-1].name, twin.states[-1].effort, strict=True))
    assert len(q) == 18 and "no_such_joint" not in q
    # Each joint sags from its goal by its load over the servo's kp (18.9 N m/rad, the XM430-W350's
    # factory P gain): the bent m2_dorsal lifts part of the body, 0.05 rad under about 1 N m.
    kp = position_actuator(load_servo_model("XM430-W350")).kp
    for name, goal in (("m1_lateral", 0.4), ("m2_dorsal", -0.3), ("m4_twist", 1.0)):
        assert q[name] == pytest.approx(goal, abs=0.1)
        assert effort[name] == pytest.approx(kp * (goal - q[name]), abs=0.1)
    # clamped to the YAML limit 1.5708: the servo pushes towards it, not towards 2.5 rad (which would
    # saturate it at its 4.1 N m)
    assert q["m3_lateral"] == pytest.approx(math.pi / 2, abs=0.1)
    assert effort["m3_lateral"] == pytest.approx(kp * (1.5708 - q["m3_lateral"]), abs=0.1)
    assert q["m3_lateral"] <= 1.5708 + 0.02
    assert abs(q["m5_dorsal"]) < 0.05  # the NaN was dropped: the target stays 0
    assert abs(q["m2_twist"]) < 0.05   # the absurd target was dropped before MuJoCo; the others run
    assert abs(q["m6_lateral"]) < 0.05  # never commanded
    log = ros.log_of(twin.proc)
    assert "no_such_joint" in log and "m3_lateral" in log and "absurd" in log


def test_realtime_clock_advances_and_a_command_timeout_holds_the_last_targets(ros):
    twin = _Twin(ros, {"mode": "realtime", "command_timeout_s": 0.3})
    sent_ns = twin.now_ns()
    twin.send({"m1_lateral": 0.5, "m2_lateral": -0.5})
    end_ns = sent_ns + 2_000_000_000  # well past the 0.3 s timeout
    assert ros.spin_until(lambda: twin.now_ns() > end_ns, 30.0), ros.log_of(twin.proc)
    ticks = [_ns(m.clock) for m in twin.clock]
    assert all(b >= a for a, b in itertools.pairwise(ticks)) and ticks[-1] > ticks[0]
    assert all(t % _PERIOD_NS == 0 for t in ticks)
    # More than the timeout has passed since the single command: the targets are held.
    assert ros.spin_until(lambda: bool(twin.states) and _ns(twin.states[-1].header.stamp) > end_ns)
    q = dict(zip(twin.states[-1].name, twin.states[-1].position, strict=True))
    assert q["m1_lateral"] == pytest.approx(0.5, abs=0.05)
    assert q["m2_lateral"] == pytest.approx(-0.5, abs=0.05)
    assert "holding the last targets" in ros.log_of(twin.proc)


def test_mocap_latency_and_dropouts_match_the_model(ros):
    latency_periods, p, seed, n = 3, 0.3, 5, 100
    params = {**_LOCKSTEP, "seed": seed, "mocap_rate_hz": 50.0, "mocap_position_noise_m": 0.0,
              "mocap_orientation_noise_rad": 0.0, "mocap_latency_s": latency_periods * 0.02,
              "mocap_dropout_probability": p}
    twin = _Twin(ros, params)
    wave = [{"m1_lateral": 0.6 * math.sin(0.2 * k), "m2_dorsal": 0.3 * math.cos(0.15 * k), "m1_twist": 0.05 * k}
            for k in range(n)]
    for targets in wave:
        twin.lockstep(targets, 1)
    end = n * _PERIOD_NS
    # Which samples survive: the documented dropout process of MocapModel, seeded like the node.
    model = MocapModel(MocapConfig(dropout_probability=p, rate_hz=50.0), np.random.default_rng(seed))
    valid = [model.capture(k * 0.02, np.zeros(3), np.array([1.0, 0, 0, 0]), np.zeros((3, 3))).valid
             for k in range(n + 1)]
    expected = {(k + latency_periods) * _PERIOD_NS for k in range(n + 1)
                if valid[k] and k + latency_periods <= n}
    assert 0 < len(expected) < n - latency_periods  # some lost, some kept
    assert ros.spin_until(lambda: bool(twin.gt_head) and _ns(twin.gt_head[-1].header.stamp) == end
                          and max((_ns(m.header.stamp) for m in twin.mocap), default=-1) >= max(expected)
                          and max((_ns(m.header.stamp) for m in twin.markers), default=-1) >= max(expected))
    truth = {_ns(m.header.stamp): m.pose for m in twin.gt_head}
    got = {_ns(m.header.stamp): m.pose for m in twin.mocap}
    assert set(got) == expected
    # Each released sample is the true head pose one latency earlier (no noise configured).
    compared = 0
    for stamp, pose in got.items():
        src = truth.get(stamp - latency_periods * _PERIOD_NS)
        if src is None:
            continue  # the very first ground-truth message may predate discovery
        assert (pose.position.x, pose.position.y, pose.position.z) == (src.position.x, src.position.y,
                                                                       src.position.z)
        q1 = np.array([pose.orientation.w, pose.orientation.x, pose.orientation.y, pose.orientation.z])
        q0 = np.array([src.orientation.w, src.orientation.x, src.orientation.y, src.orientation.z])
        assert abs(float(q1 @ q0)) == pytest.approx(1.0, abs=1e-9)
        compared += 1
    assert compared >= len(got) - 1
    # The pose moved during the wave, so equality with the delayed truth is not trivial.
    xs = [m.pose.position.y for m in twin.gt_head]
    assert max(xs) - min(xs) > 1e-3
    # Markers: one PoseArray per released sample, three positions near the head, identity orientation.
    marker_stamps = {_ns(m.header.stamp) for m in twin.markers}
    assert marker_stamps == expected
    for arr in twin.markers:
        stamp = _ns(arr.header.stamp)
        assert len(arr.poses) == 3 and arr.header.frame_id == "world"
        head = got[stamp].position
        for mk in arr.poses:
            assert mk.orientation.w == 1.0 and mk.orientation.x == mk.orientation.y == mk.orientation.z == 0.0
            assert math.dist((mk.position.x, mk.position.y, mk.position.z), (head.x, head.y, head.z)) < 0.25


def test_the_gait_node_drives_the_twin_forward(ros):
    # The gait is the one commander (the twin ignores two).
    twin = _Twin(ros, {"mode": "fast", "speed_factor": 2.0, "world": "flat", "command_timeout_s": 1.0,
                       "mocap_rate_hz": 0.0}, commander=False)
    gait = ros.start("gait_node", {"use_sim_time": True, "robot": "tsnake", "gait": "rolling", "rate_hz": 50,
                                   "cmd_timeout": 1.0})
    cmds = ros.collect(JointState, "joint_commands", SENSOR_QOS)
    # The ground truth too: its publisher may match the probe after the clock's.
    assert ros.spin_until(lambda: len(cmds) > 5 and bool(twin.gt_head), 30.0), ros.log_of(gait)
    start_ns = twin.now_ns()
    p0 = twin.gt_head[-1].pose.position
    cmd_pub = ros.node.create_publisher(TwistStamped, "cmd_vel", COMMAND_QOS)

    def driving() -> bool:
        msg = TwistStamped()
        msg.twist.linear.x = 0.1
        cmd_pub.publish(msg)
        ros.spin_for(0.05)
        return twin.now_ns() - start_ns > 8_000_000_000  # 8 s simulated

    assert ros.spin_until(driving, 120.0), ros.log_of(twin.proc)
    p1 = twin.gt_head[-1].pose.position
    moved = math.hypot(p1.x - p0.x, p1.y - p0.y)
    assert moved > 0.1, f"head moved {moved:.3f} m in 8 s at 0.1 m/s"
    # The body kept changing shape while it went (the gait in the loop, not a drift).
    k0 = next(i for i, m in enumerate(twin.states) if _ns(m.header.stamp) >= start_ns)
    q = np.array([m.position for m in twin.states[k0:]])
    assert np.ptp(q, axis=0).max() > 0.3, f"joint ranges {np.ptp(q, axis=0)}"


def test_a_bad_world_file_stops_the_node_with_the_field_named(ros, tmp_path: Path, repo_root: Path):
    world = yaml.safe_load((repo_root / "config" / "worlds" / "flat.yaml").read_text())
    world["ground"]["friction"] = -0.5
    bad = tmp_path / "bad_world.yaml"
    bad.write_text(yaml.safe_dump(world))
    proc = ros.start("twin_node", {"world": str(bad)})
    assert proc.wait(timeout=60) != 0
    log = ros.log_of(proc)
    assert "bad_world.yaml" in log and "ground.friction" in log
    assert "Traceback" not in log


def test_primed_lockstep_alternates_one_period_per_gait_tick(ros):
    # The gait node first: on sim time with no /clock yet it does not tick. Let the probe
    # discover its publisher, so that no command of the loop goes unseen.
    cmds = ros.collect(JointState, "joint_commands", COMMAND_QOS)
    gait = ros.start("gait_node", {"use_sim_time": True, "robot": "tsnake", "gait": "rolling", "rate_hz": 50})
    assert ros.spin_until(lambda: ros.node.count_publishers("joint_commands") > 0, 30.0), ros.log_of(gait)
    ros.spin_for(1.0)
    assert not cmds
    # The gait is the one commander: with the probe's publisher too, the twin would ignore both.
    twin = _Twin(ros, {**_LOCKSTEP, "lockstep_prime": True, "mocap_rate_hz": 0.0}, commander=False)
    # The gait ticks on /clock, the twin runs one period per tick: the loop keeps itself going.
    assert ros.spin_until(lambda: twin.now_ns() >= 50 * _PERIOD_NS, 60.0), (
        ros.log_of(gait) + ros.log_of(twin.proc))
    # Stop the twin, not the gait: without /clock the gait stops ticking, and nothing else
    # publishes commands (the gait's own exit re-publishes its last shape, a separate message).
    # The twin says where it stopped; the gait answers that last clock with one command.
    assert ros.stop(twin.proc) == 0, ros.log_of(twin.proc)
    found = re.search(r"twin stopped at simulated t = (\d+\.\d{3}) s", ros.log_of(twin.proc))
    assert found, ros.log_of(twin.proc)
    end_ns = round(float(found.group(1)) * 1000) * 1_000_000
    # Reliable and in order: the probe receives the command answering the last clock.
    assert ros.spin_until(lambda: bool(cmds) and _ns(cmds[-1].header.stamp) == end_ns, 30.0), (
        ros.log_of(gait))
    # One gait command per period, each stamped at the start of the period it drives, in order,
    # up to the twin's last period: no two for one period, none off the period grid. (If the
    # gait's first command was lost before the twin's subscription matched, the twin re-primed:
    # the run then starts a period later.) The twin advances a period only on a command, so the
    # loop itself skips none; the probe may miss some: a reliable writer keeps only its history
    # (COMMAND_QOS: the last 10) to repair a reader whose receive thread was starved of CPU for
    # longer than that many periods of the loop, which runs as fast as the two nodes go (one
    # suite run on a loaded 2-core host lost 36 in a row).
    stamps = [_ns(m.header.stamp) for m in cmds]
    assert stamps[0] <= 5 * _PERIOD_NS
    gaps = np.diff(stamps)
    assert np.all(gaps > 0) and np.all(gaps % _PERIOD_NS == 0), stamps
    assert len(stamps) >= (end_ns - stamps[0]) // _PERIOD_NS // 2, (len(stamps), end_ns)


def test_live_parameters_are_validated_and_start_up_ones_refused(ros):
    from rcl_interfaces.msg import Parameter as ParameterMsg
    from rcl_interfaces.msg import ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    twin = _Twin(ros, {**_LOCKSTEP, "mocap_position_noise_m": 0.0, "mocap_orientation_noise_rad": 0.0})

    def set_param(name: str, value: Any) -> Any:
        if isinstance(value, str):
            pv = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=value)
        else:
            pv = ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=float(value))
        request = SetParameters.Request(parameters=[ParameterMsg(name=name, value=pv)])
        answer = ros.call(SetParameters, "/twin_node/set_parameters", request)
        assert answer is not None
        return answer.response.results[0]

    assert not set_param("world", "uneven").successful  # fixed at start-up
    assert not set_param("mocap_dropout_probability", 1.5).successful  # outside its range
    assert not set_param("mocap_position_noise_m", -0.1).successful
    # A live change takes effect: noise switched on makes the mocap differ from the truth.
    assert set_param("mocap_position_noise_m", 0.01).successful
    twin.lockstep({"m1_lateral": 0.0}, 10)
    last = twin.now_ns()
    assert ros.spin_until(lambda: any(_ns(m.header.stamp) == last for m in twin.mocap)
                          and any(_ns(m.header.stamp) == last for m in twin.gt_head)), ros.log_of(twin.proc)
    truth = {_ns(m.header.stamp): m.pose.position for m in twin.gt_head}
    errors = [math.dist((m.pose.position.x, m.pose.position.y, m.pose.position.z),
                        (truth[s].x, truth[s].y, truth[s].z))
              for m in twin.mocap if (s := _ns(m.header.stamp)) in truth and s > 0]
    assert len(errors) >= 5 and min(errors) > 0.0 and max(errors) < 0.1


def test_two_commanders_are_ignored_until_one_is_left(ros):
    twin = _Twin(ros, _LOCKSTEP)
    twin.lockstep({"m1_lateral": 0.4}, 30)
    second = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    # The twin's reader matched both writers: it says so, naming the publishers.
    assert ros.spin_until(lambda: "2 publishers on /joint_commands" in ros.log_of(twin.proc), 30.0), \
        ros.log_of(twin.proc)
    before = twin.now_ns()

    def interleave() -> None:
        twin.send({"m1_lateral": -0.4})
        msg = JointState()
        msg.name, msg.position = ["m1_lateral"], [0.0]
        second.publish(msg)

    both = ros.node.create_timer(0.02, interleave)
    # Ignored (throttled warning, 2 s apart) for as long as both publish; in lockstep no period runs.
    assert ros.spin_until(lambda: ros.log_of(twin.proc).count("joint_commands ignored") >= 2, 30.0), \
        ros.log_of(twin.proc)
    n_clock = len(twin.clock)          # the twin re-publishes its clock every 0.1 s, after what it has run
    assert ros.spin_until(lambda: len(twin.clock) >= n_clock + 3, 30.0)
    assert twin.now_ns() == before
    ros.node.destroy_timer(both)
    ros.node.destroy_publisher(second)
    assert ros.spin_until(lambda: "one commander on joint_commands again" in ros.log_of(twin.proc), 30.0), \
        ros.log_of(twin.proc)
    twin.lockstep({"m1_lateral": -0.4}, 60)
    assert ros.spin_until(lambda: bool(twin.states) and _ns(twin.states[-1].header.stamp) == twin.now_ns())
    q = dict(zip(twin.states[-1].name, twin.states[-1].position, strict=True))
    assert q["m1_lateral"] == pytest.approx(-0.4, abs=0.05)


def test_the_calibration_target_sets_the_twin_physics_and_is_named(ros, tmp_path: Path, repo_root: Path,
                                                                   monkeypatch: pytest.MonkeyPatch):
    import shutil

    cfg = tmp_path / "config"
    shutil.copytree(repo_root / "config", cfg)
    # Twist servos that act on a goal two control periods late.
    (cfg / "calibration" / "tsnake" / "lab.yaml").write_text(
        yaml.safe_dump({"twin": {"servo": {"twist": {"latency_s": 2 * _PERIOD_NS * 1e-9}}}}))
    monkeypatch.setenv("SNAKE_CONFIG_DIR", str(cfg))
    targets = {"m1_twist": 0.3, "m1_lateral": 0.3}
    moved = {}
    for target in ("twin", "lab"):
        twin = _Twin(ros, {**_LOCKSTEP, "calibration_target": target})
        assert f"calibration/tsnake/{target}.yaml" in ros.log_of(twin.proc)
        twin.lockstep(targets, 1)
        assert ros.spin_until(lambda t=twin: len(t.states) and _ns(t.states[-1].header.stamp) == _PERIOD_NS)
        state = dict(zip(twin.states[-1].name, twin.states[-1].position, strict=True))
        moved[target] = {j: state[j] for j in targets}
        ros.node.destroy_publisher(twin.pub)  # the next twin must see a single commander
        twin.proc.terminate()
        twin.proc.wait(timeout=60)
    # Without latency both joints start towards their goal in the first period; with it the
    # twist joint has not been told yet, the lateral one (no latency) moves as before.
    assert moved["twin"]["m1_twist"] > 0.02
    assert abs(moved["lab"]["m1_twist"]) < 0.1 * moved["twin"]["m1_twist"]
    assert moved["lab"]["m1_lateral"] > 0.02


def test_a_calibration_target_without_a_file_stops_the_node_naming_the_targets(ros):
    proc = ros.start("twin_node", {"calibration_target": "no_such_lab"})
    assert proc.wait(timeout=60) != 0
    log = ros.log_of(proc)
    assert "no_such_lab" in log and "targets: twin" in log
    assert "Traceback" not in log


def test_battery_state_carries_the_supply_voltage_and_torque_off_leaves_a_lifted_joint_limp(ros):
    from std_srvs.srv import SetBool

    battery = ros.collect(BatteryState, "battery_state", SENSOR_PUB_QOS)
    twin = _Twin(ros, {**_LOCKSTEP, "lifted": True, "supply_voltage": 11.1, "mocap_rate_hz": 0.0})
    assert "servos at 11.1 V" in ros.log_of(twin.proc)
    bent = {"m5_dorsal": 0.6}
    twin.lockstep(bent, 100)  # 2 s: bent and held against gravity
    assert ros.spin_until(lambda: len(battery) >= 4), ros.log_of(twin.proc)  # 25, 50, ... (0: before matching)
    assert [m.voltage for m in battery] == pytest.approx([11.1] * len(battery)) and all(m.present for m in battery)
    assert math.isnan(battery[-1].percentage)
    stamps = [_ns(m.header.stamp) for m in battery]
    assert all(s % (25 * _PERIOD_NS) == 0 for s in stamps) and set(np.diff(stamps)) == {25 * _PERIOD_NS}  # 2 Hz

    def joint() -> tuple[float, float]:
        t = twin.now_ns()
        assert ros.spin_until(lambda: len(twin.states) and _ns(twin.states[-1].header.stamp) == t)
        k = list(twin.states[-1].name).index("m5_dorsal")
        return twin.states[-1].position[k], twin.states[-1].effort[k]

    held, effort = joint()
    assert 0.5 < held < 0.6 and effort > 0.1  # sags under the body below it, the servo pushing back

    def torque(on: bool) -> str:
        answer = ros.call(SetBool, "/twin_node/torque", SetBool.Request(data=on))
        assert answer is not None and answer.response.success, ros.log_of(twin.proc)
        return str(answer.response.message)

    assert torque(False).startswith("torque off: every joint limp")
    lowest = held
    for _ in range(25):  # 0.5 s with the same goal: it swings down through the vertical
        twin.lockstep(bent, 1)
        q, effort = joint()
        lowest = min(lowest, q)
        assert effort == 0.0
    assert lowest < 0.1 * held
    assert torque(True).startswith("torque on: each joint held where it is")
    now, _ = joint()
    twin.lockstep({"m1_lateral": 0.0}, 50)  # 1 s of commands to another joint: it stays, it does not go back
    q, _ = joint()
    k = list(twin.states[-1].name).index("m5_dorsal")
    assert abs(twin.states[-1].velocity[k]) < 0.05 and abs(q - now) < 0.2
    twin.lockstep(bent, 100)  # a goal sent again is followed
    q, effort = joint()
    assert q == pytest.approx(held, abs=0.02) and effort > 0.1
