"""``snake servo-model record``: BAM's trajectories through the real dynamixel-sdk to the emulated servo.

The logs it writes are read back by the strict BAM reader that ``identify`` uses, and the
trajectories are checked against BAM's published definitions (cubic keyframes solved here
with numpy, independently of the spline the module uses).
"""

from __future__ import annotations

import itertools
import json
import math
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from snake_hardware.dynamixel import control_table as ct
from snake_hardware.emulator import ServoBusEmulator
from snake_tools.cli import main
from snake_tools.command import snake_command
from snake_tools.commands.servo_model import TRAJECTORY_NAMES
from snake_tools.servo_model.bench_bag import read_log
from snake_tools.servo_model.bench_log import read_bam_log
from snake_tools.servo_model.trajectories import TRAJECTORIES

_MODEL = "XL330-M288"


def _bam_cubic(keyframes: list[list[float]], t: float) -> float:
    """BAM's cubic_interpolate: a 4x4 solve per segment (bam/trajectory.py), held at the ends."""
    if t <= keyframes[0][0]:
        return keyframes[0][1]
    if t >= keyframes[-1][0]:
        return keyframes[-1][1]
    for (t0, x0, d0), (t1, x1, d1) in itertools.pairwise(keyframes):
        if t0 <= t <= t1:
            a = np.array([[1, t0, t0**2, t0**3], [0, 1, 2 * t0, 3 * t0**2], [1, t1, t1**2, t1**3],
                          [0, 1, 2 * t1, 3 * t1**2]])
            w = np.linalg.solve(a, [x0, d0, x1, d1])
            return float(w @ [1, t, t**2, t**3])
    raise AssertionError(t)


def test_the_trajectories_are_bams() -> None:
    assert tuple(TRAJECTORIES) == TRAJECTORY_NAMES
    lift = [[0.0, 0.0, 0.0], [2.0, -math.pi / 2, 0.0]]
    updown = [[0.0, 0.0, 0.0], [3.0, math.pi / 2, 0.0], [6.0, 0.8 * math.pi / 2, 0.0]]
    for t in np.linspace(0.0, 6.0, 61):
        assert TRAJECTORIES["lift_and_drop"](t) == (pytest.approx(_bam_cubic(lift, t)), t < 2.0)
        assert TRAJECTORIES["up_and_down"](t) == (pytest.approx(_bam_cubic(updown, t)), True)
        assert TRAJECTORIES["sin_time_square"](t) == (pytest.approx(math.sin(t**2)), True)
        sinsin = math.sin(t) * math.pi / 2 + math.sin(5 * t) * 0.5 * math.sin(2 * t)
        assert TRAJECTORIES["sin_sin"](t) == (pytest.approx(sinsin), True)


def _record(*args: str) -> subprocess.CompletedProcess[str]:
    """``snake servo-model record`` as its own process, as on a bench.

    The dynamixel-sdk waits for a status packet by polling the port; in the emulator's process
    that loop would hold the interpreter lock the emulator's thread needs to answer (a real
    servo shares nothing with the computer), and a loaded host would then see lost answers.
    """
    return subprocess.run(snake_command("servo-model", "record", *args), capture_output=True, text=True, check=False)


@pytest.fixture
def servo(tmp_path: Path) -> Iterator[ServoBusEmulator]:
    emu = ServoBusEmulator([3], models={3: _MODEL}, link=tmp_path / "ttyDXL").start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def bench_port() -> Iterator[str]:
    """The servo on its own process (``snake servo-emulator``), as a servo shares nothing with the computer.

    The recordings run for seconds: an emulator in the test process would answer only when
    the threads earlier tests left there give up the interpreter lock.
    """
    proc = subprocess.Popen(snake_command("servo-emulator", "--ids", "3", "--model", _MODEL),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()
    try:
        assert port.startswith("/dev/"), port + proc.communicate(timeout=60)[1]
        yield port
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


def _registers(port: str) -> tuple[int, int]:
    """Position P Gain and Torque Enable of ID 3, read through the dynamixel-sdk."""
    from dynamixel_sdk import PacketHandler, PortHandler

    handler, packets = PortHandler(port), PacketHandler(2.0)
    assert handler.openPort() and handler.setBaudRate(1_000_000)
    try:
        gain, result, _ = packets.read2ByteTxRx(handler, 3, ct.POSITION_P_GAIN)
        torque, result_t, _ = packets.read1ByteTxRx(handler, 3, ct.TORQUE_ENABLE)
        assert result == result_t == 0
        return gain, torque
    finally:
        handler.closePort()


def test_recorded_logs_are_bam_logs_identify_reads(bench_port: str, tmp_path: Path) -> None:
    out = tmp_path / "logs"
    run = _record("--port", bench_port, "--id", "3", "--model", _MODEL, "--mass", "0.2", "--length", "0.1",
                  "--kp", "150", "--trajectory", "lift_and_drop", "sin_time_square", "--out", str(out))
    assert run.returncode == 0, run.stderr
    logs = sorted(out.glob("*.json"))
    assert [p.name for p in logs] == [f"{_MODEL}_kp150_lift_and_drop.json", f"{_MODEL}_kp150_sin_time_square.json"]
    for path in logs:
        log = read_bam_log(path, _MODEL)                # the strict reader of identify
        header = json.loads(path.read_text())
        assert header["kp"] == 150 and log.p_gain == 150.0 and header["mass"] == 0.2
        assert header["trajectory"] in path.name and header["motor"] == _MODEL
        assert header["vin"] == pytest.approx(float(np.median(log.voltage)))
        assert np.all(np.diff(log.time) > 0) and log.time[-1] < 6.0 + 0.1
        name = header["trajectory"]
        enables = np.array([TRAJECTORIES[name](t)[1] for t in log.time])
        # Each sample's goal was the trajectory's at the loop's time before its read, after the previous
        # sample's read: at a time between the two timestamps (each the middle of its read), however long
        # a loaded host made the loop. The trajectories are continuous: the goal lies within the range
        # the trajectory spans there, on a grid of 0.5 ms (at most 12 rad/s: 6 mrad between points).
        since = np.concatenate([[0.0], log.time[:-1]])
        for i, (t0, t1, goal) in enumerate(zip(since, log.time, log.goal, strict=True)):
            spanned = [TRAJECTORIES[name](t)[0] for t in np.linspace(t0, t1, max(2, math.ceil((t1 - t0) / 5e-4) + 1))]
            assert min(spanned) - 0.01 <= goal <= max(spanned) + 0.01, (name, i, goal, t1)
        if name == "lift_and_drop":
            assert np.all(log.torque_enable[log.time > 2.1] == 0.0) and np.all(log.torque_enable[log.time < 1.9])
            assert np.all(enables[log.time > 2.1] == 0)
    assert _registers(bench_port) == (150, 0)          # the gain went to the servo, limp at the end


def test_a_servo_that_is_not_there_is_one_line_and_exit_2(servo: ServoBusEmulator, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["servo-model", "record", "--port", servo.port, "--id", "9", "--model", _MODEL, "--mass", "0.2",
                 "--length", "0.1", "--out", str(tmp_path / "logs")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "ID 9 does not answer" in err[0]
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("flags, word", [(["--model", "XM999"], "--model"), (["--kp", "0"], "--kp"),
                                         (["--model", "XM430-W350"], "not XM430-W350")])
def test_bad_flags_are_one_line_and_exit_2(servo: ServoBusEmulator, tmp_path: Path, flags: list[str], word: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    args = {"--model": _MODEL, "--kp": "100"}
    args.update(dict(zip(flags[::2], flags[1::2], strict=True)))
    code = main(["servo-model", "record", "--port", servo.port, "--id", "3", "--mass", "0.2", "--length", "0.1",
                 "--out", str(tmp_path / "logs"), *[x for kv in args.items() for x in kv]])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and word in err[0], err


def test_recorded_bags_hold_standard_messages_identify_reads(bench_port: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    out = tmp_path / "bags"
    run = _record("--port", bench_port, "--id", "3", "--model", _MODEL, "--mass", "0.2", "--length", "0.1",
                  "--arm-mass", "0.01", "--kp", "150", "--trajectory", "lift_and_drop", "--format", "bag",
                  "--out", str(out))
    assert run.returncode == 0, run.stderr
    bag = out / f"{_MODEL}_kp150_lift_and_drop"
    assert sorted(p.name for p in out.iterdir()) == [bag.name] and (bag / "metadata.yaml").is_file()
    # Read with rosbags alone: the documented topics, standard types, one message of each per sample.
    store = get_typestore(Stores.ROS2_KILTED)
    with Reader(bag) as reader:
        assert {c.topic: c.msgtype for c in reader.connections} == {
            "joint_states": "sensor_msgs/msg/JointState", "joint_commands": "sensor_msgs/msg/JointState",
            "torque_enable": "std_msgs/msg/Bool", "battery_state": "sensor_msgs/msg/BatteryState"}
        counts = {c.topic: c.msgcount for c in reader.connections}
        states = [store.deserialize_cdr(raw, c.msgtype) for c, _, raw in reader.messages()
                  if c.topic == "joint_states"]
    assert len(set(counts.values())) == 1 and counts["joint_states"] > 100
    assert all(list(s.name) == ["servo"] and len(s.position) == len(s.velocity) == len(s.effort) == 1
               for s in states)
    import yaml

    custom = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]["custom_data"]
    assert custom["snake.bench.kp"] == "150" and float(custom["snake.bench.mass"]) == 0.2
    assert custom["snake.bench.motor"] == _MODEL and custom["snake.bench.trajectory"] == "lift_and_drop"
    assert float(custom["snake.bench.arm_mass"]) == 0.01
    # identify's reader: the run as the BAM log of it would be.
    log = read_log(bag, "auto", _MODEL)
    assert log.p_gain == 150.0 and log.mass == 0.2 and log.length == 0.1 and len(log.time) == counts["joint_states"]
    assert np.all(np.diff(log.time) > 0) and log.time[-1] < 6.0 + 0.1
    assert np.all(log.torque_enable[log.time > 2.1] == 0.0) and np.all(log.torque_enable[log.time < 1.9] == 1.0)
    goals = np.array([TRAJECTORIES["lift_and_drop"](t)[0] for t in log.time])
    assert np.max(np.abs(log.goal - goals)) < 0.35
    assert np.allclose(log.position, [s.position[0] for s in states])
    assert 4.0 < float(np.median(log.voltage)) < 15.0
    # A second recording into the same place does not overwrite the bag: one line, exit 2.
    capsys.readouterr()
    code = main(["servo-model", "record", "--port", bench_port, "--id", "3", "--model", _MODEL, "--mass", "0.2",
                 "--length", "0.1", "--kp", "150", "--trajectory", "lift_and_drop", "--format", "bag",
                 "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"--out: {bag} exists" in err[0]


def test_a_write_whose_status_packet_is_lost_is_sent_again(servo: ServoBusEmulator) -> None:
    """A lost status packet (a busy computer, a noisy bus) costs a repeat, not the recording; ten in a row end it."""
    from snake_tools.servo_model.record import WRITE_ATTEMPTS, RecordError, ServoLink

    link = ServoLink(servo.port, 1_000_000, 3, _MODEL)
    try:
        servo.drop_responses(WRITE_ATTEMPTS - 1)
        link.write2(ct.POSITION_P_GAIN, 321, "Position P Gain")
        assert link.retried == WRITE_ATTEMPTS - 1
        assert servo.servos[3].get(ct.POSITION_P_GAIN, 2) == 321   # the emulator's own table
        servo.drop_responses(WRITE_ATTEMPTS)
        with pytest.raises(RecordError, match=f"Goal Position: .*{WRITE_ATTEMPTS} attempts"):
            link.goal(0.1)
    finally:
        link.close()
