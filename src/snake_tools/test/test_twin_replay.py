"""``snake twin replay`` and the "twin vs robot" section of ``snake bag analyze``.

The "robot" is the twin itself with hidden physics, recorded to a real rosbag2 bag
(:func:`snake_tools.twin.recording.record_twin_run`): replaying it with the same physics
must reproduce it exactly, with other physics it must not.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from snake_core.robot import load_robot
from snake_core.twin_params import ContactParams, ServoParams, TwinParams
from snake_tools.bag.synthetic import write_session
from snake_tools.cli import main
from snake_tools.twin.recording import record_twin_run
from snake_tools.twin.replay import Trajectory, compare, heading_of, replay

ROOT = Path(__file__).resolve().parents[3]
_DURATION_S = 3.0
# The hidden physics of the "robot": a slow, late twist servo on a slippery floor.
_HIDDEN = TwinParams(servo={"twist": ServoParams(kp=3.0, latency_s=0.04)},
                     contact=ContactParams(ground_friction=0.4))


@pytest.fixture(scope="module")
def robot():
    return load_robot("tsnake")


@pytest.fixture(scope="module")
def recording(tmp_path_factory, robot) -> Path:
    return record_twin_run(tmp_path_factory.mktemp("twin") / "robot", robot, _DURATION_S, twin_params=_HIDDEN)


def test_replay_with_the_hidden_physics_reproduces_the_recording(recording, robot):
    r = replay(recording, robot, _HIDDEN)
    assert r["drive"] == "joint_commands"
    assert r["time_base"] == "simulated (/clock)"
    assert r["distance_travelled_m"] > 0.05  # the recording moves, so a zero divergence means something
    assert r["divergence_end_m"] == pytest.approx(0.0, abs=1e-9)
    assert r["divergence_max_m"] == pytest.approx(0.0, abs=1e-9)
    assert r["heading_drift_rad"] == pytest.approx(0.0, abs=1e-9)
    assert r["joint_residual_rms_rad"] == pytest.approx(0.0, abs=1e-9)
    assert r["latency_steps"]["twist"] == round(0.04 / r["timestep_s"]) > 0
    for seg in r["segments"]:
        assert seg["speed_ratio"] == pytest.approx(1.0)


def test_replay_with_other_physics_diverges_and_says_where(recording, robot):
    default = replay(recording, robot, None)
    assert default["latency_steps"]["twist"] == 0
    assert default["divergence_max_m"] > 1e-3
    # The hidden change is in the twist servos: their tracking residual is the largest.
    by_type = default["joint_residual_rms_rad_by_type"]
    assert by_type["twist"] > by_type["dorsal"] and by_type["twist"] > by_type["lateral"]
    # Putting back the latency alone brings the twist joints closer than the defaults.
    part = replay(recording, robot, TwinParams(servo={"twist": ServoParams(latency_s=0.04)}))
    assert part["joint_residual_rms_rad_by_type"]["twist"] < by_type["twist"]


def _script(t: float) -> tuple[float, float]:
    """cmd_vel of the gait recording: forward, then a left turn."""
    return (0.08, 0.0) if t < 2.0 else (0.05, 0.15)


@pytest.fixture(scope="module")
def gait_recording(tmp_path_factory, robot) -> Path:
    return record_twin_run(tmp_path_factory.mktemp("twin") / "gait", robot, 4.0, twin_params=_HIDDEN,
                           cmd_vel=_script)


def test_cmd_vel_drive_through_the_gait_reproduces_a_gait_recording(gait_recording, robot):
    r = replay(gait_recording, robot, _HIDDEN, drive="cmd_vel")
    assert r["drive"] == "cmd_vel through the rolling gait"
    assert r["distance_travelled_m"] > 0.05
    assert r["divergence_max_m"] == pytest.approx(0.0, abs=1e-9)
    assert r["joint_residual_rms_rad"] == pytest.approx(0.0, abs=1e-9)
    # Segments follow the recorded cmd_vel: the forward span, then the turn.
    assert [(s["cmd_v_mps"], s["cmd_omega_radps"]) for s in r["segments"]] == [(0.08, 0.0), (0.05, 0.15)]
    assert r["segments"][0]["t_start_s"] == 0.0 and r["segments"][1]["t_start_s"] == pytest.approx(2.0)
    # The joint_commands drive of the same bag agrees with the cmd_vel drive.
    direct = replay(gait_recording, robot, _HIDDEN)
    assert direct["drive"] == "joint_commands"
    assert direct["divergence_max_m"] == pytest.approx(0.0, abs=1e-9)
    other = replay(gait_recording, robot, None, drive="cmd_vel")
    assert other["divergence_max_m"] > 1e-3


def _line(t: np.ndarray, v: float, heading: float, omega: float = 0.0) -> Trajectory:
    """Closed-form trajectory: speed v along a heading turning at omega."""
    h = heading + omega * t
    if omega == 0.0:
        xy = np.column_stack([v * t * math.cos(heading), v * t * math.sin(heading)])
    else:
        xy = np.column_stack([v / omega * (np.sin(h) - math.sin(heading)),
                              -v / omega * (np.cos(h) - math.cos(heading))])
    return Trajectory(t=t, xy=xy, heading=h)


def test_compare_against_closed_form_motion():
    t = np.linspace(0.0, 10.0, 501)
    robot = _line(t, 0.10, 0.3)
    twin = _line(t, 0.05, -1.0)  # half as fast, started with another heading: the comparison aligns it
    out = compare(robot, twin, [(0.0, 10.0, (0.1, 0.0))])
    seg = out["segments"][0]
    assert seg["speed_ratio"] == pytest.approx(0.5)
    assert seg["turn_rate_ratio"] is None  # the robot did not turn
    assert out["distance_travelled_m"] == pytest.approx(1.0)
    assert out["divergence_end_m"] == pytest.approx(0.5)
    assert out["divergence_per_m"] == pytest.approx(0.5)
    assert out["heading_drift_rad"] == pytest.approx(0.0, abs=1e-12)
    turning = compare(_line(t, 0.1, 0.0, 0.2), _line(t, 0.1, 0.0, 0.1), [(0.0, 10.0, None)])
    assert turning["segments"][0]["turn_rate_ratio"] == pytest.approx(0.5)
    assert turning["heading_drift_rad"] == pytest.approx(-1.0)


def test_heading_ignores_roll_about_the_body_axis():
    yaw, roll = 0.7, 1.1
    # q = yaw about z, then roll about the body x axis: q_yaw * q_roll.
    qz = np.array([math.cos(yaw / 2), 0, 0, math.sin(yaw / 2)])
    qx = np.array([math.cos(roll / 2), math.sin(roll / 2), 0, 0])
    w1, x1, y1, z1 = qz
    w2, x2, y2, z2 = qx
    q = np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                  w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])
    assert heading_of(q)[0] == pytest.approx(yaw)


def test_cli_replay_json_names_the_file_it_loaded(recording, capsys):
    assert main(["twin", "replay", str(recording), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["target"] == "twin"
    assert out["twin_params_file"].endswith("config/calibration/tsnake/twin.yaml")
    assert out["divergence_end_m"] >= 0.0


def test_bag_analyze_has_the_twin_vs_robot_section(recording, tmp_path, capsys):
    out_dir = tmp_path / "report"
    assert main(["bag", "analyze", str(recording), "--out", str(out_dir), "--twin-target", "twin", "--json"]) == 0
    summary = json.loads((out_dir / "summary.json").read_text())
    block = summary["twin_vs_robot"]
    direct = replay(recording, load_robot("tsnake"), None)
    assert block["divergence_end_m"] == pytest.approx(direct["divergence_end_m"])
    assert "Twin vs robot" in (out_dir / "report.html").read_text()


def _config_with(tmp_path: Path, target: str, block: dict) -> Path:
    cfg = tmp_path / "config"
    shutil.copytree(ROOT / "config", cfg)
    (cfg / "calibration" / "tsnake" / f"{target}.yaml").write_text(yaml.safe_dump({"twin": block}))
    return cfg


def test_bad_input_is_one_line_and_exit_2(recording, tmp_path, capsys, monkeypatch, robot):
    no_commands = write_session(tmp_path / "nocmd", robot, rates={"joint_commands": 0.0, "cmd_vel": 0.0})
    assert main(["twin", "replay", str(no_commands)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nocmd" in err and "no /cmd_vel" in err
    assert main(["twin", "replay", str(no_commands), "--drive", "joint_commands"]) == 2
    assert "no /joint_commands" in capsys.readouterr().err
    no_pose = write_session(tmp_path / "nopose", robot, rates={"mocap": 0.0, "ground_truth": 0.0})
    # Without a pose, joint_commands replay as a lifted run (joints only); cmd_vel needs the path.
    assert main(["twin", "replay", str(no_pose), "--drive", "cmd_vel"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no pose" in err

    assert main(["twin", "replay", str(recording), "--target", "no_such_lab"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no_such_lab" in err and "targets: twin" in err

    monkeypatch.setenv("SNAKE_CONFIG_DIR", str(_config_with(tmp_path, "lab", {"servo": {"twist": {"kpp": 2.0}}})))
    assert main(["twin", "replay", str(recording), "--target", "lab"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "lab.yaml" in err and "twin.servo.twist" in err and "kpp" in err


def test_a_target_with_the_hidden_physics_replays_exactly(recording, tmp_path, capsys, monkeypatch):
    block = _HIDDEN.to_yaml_dict()
    monkeypatch.setenv("SNAKE_CONFIG_DIR", str(_config_with(tmp_path, "lab", block)))
    assert main(["twin", "replay", str(recording), "--target", "lab", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["twin_params_file"].endswith("lab.yaml")
    assert out["divergence_end_m"] == pytest.approx(0.0, abs=1e-9)


def test_bag_analyze_with_an_unknown_twin_target_exits_2(recording, tmp_path, capsys):
    assert main(["bag", "analyze", str(recording), "--out", str(tmp_path / "r"), "--twin-target", "nowhere"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nowhere" in err


def _with_battery_state(bag: Path, out: Path, volts: float, period_s: float = 0.5) -> Path:
    """A copy of ``bag`` with ``/battery_state`` at ``volts`` every ``period_s`` (as the bridge publishes it)."""
    from rosbags.rosbag2 import Reader, StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_KILTED)
    battery = "sensor_msgs/msg/BatteryState"
    with Reader(bag) as reader, Writer(out, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {c.id: writer.add_connection(c.topic, c.msgtype, typestore=ts) for c in reader.connections}
        for c, t, raw in reader.messages():
            writer.write(conns[c.id], t, raw)
        conn = writer.add_connection("/battery_state", battery, typestore=ts)
        cls = ts.types
        nan = math.nan
        for k in range(int((reader.end_time - reader.start_time) * 1e-9 / period_s) + 1):
            t_ns = reader.start_time + round(k * period_s * 1e9)
            stamp = cls["builtin_interfaces/msg/Time"](sec=t_ns // 10**9, nanosec=t_ns % 10**9)
            msg = cls[battery](header=cls["std_msgs/msg/Header"](stamp=stamp, frame_id=""), voltage=volts,
                               temperature=nan, current=nan, charge=nan, capacity=nan, design_capacity=nan,
                               percentage=nan, power_supply_status=0, power_supply_health=0,
                               power_supply_technology=0, present=True, cell_voltage=np.zeros(0, np.float32),
                               cell_temperature=np.zeros(0, np.float32),
                               location="", serial_number="")
            writer.write(conn, t_ns, ts.serialize_cdr(msg, battery))
    return out


def test_replay_runs_the_servos_at_the_recorded_supply_voltage(tmp_path, robot):
    """A robot recorded on a 10.8 V supply replays exactly only at the voltage its bag holds."""
    low = _HIDDEN.at_voltage(10.8)
    bag = record_twin_run(tmp_path / "low", robot, _DURATION_S, twin_params=low)
    nominal = replay(bag, robot, _HIDDEN)
    assert nominal["supply_voltage_v"] == 12.0
    assert nominal["supply_voltage_source"] == "nominal (no /battery_state in the bag)"
    assert nominal["joint_residual_rms_rad"] > 1e-4  # 10 % less gain and torque than the twin at 12 V
    measured = replay(_with_battery_state(bag, tmp_path / "low_battery", 10.8), robot, _HIDDEN)
    assert measured["supply_voltage_v"] == pytest.approx(10.8)
    assert measured["supply_voltage_source"].startswith("recorded /battery_state (")
    # exact but for BatteryState's float32 voltage (10.8 is 10.8000002 there)
    assert measured["joint_residual_rms_rad"] < 1e-6 < 1e-2 * nominal["joint_residual_rms_rad"]
    assert measured["divergence_max_m"] < 1e-6
