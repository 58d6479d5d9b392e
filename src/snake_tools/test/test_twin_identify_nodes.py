"""Identify the twin from runs recorded through the real nodes, as on a robot.

The "robot" is ``twin_node`` with the physics of ``snake bench twin``
(:func:`snake_tools.bench.twin.hidden_params`: every servo parameter of every joint type
changed by 40-80 %, a command latency of two control periods, another ground friction),
written as a calibration target the fit never reads, with 1 mm of mocap noise. Two runs,
each recorded by ``snake bag record`` over DDS:

* lifted (``twin_node lifted:=true``) under ``snake twin excite --variant lifted``;
* on the ground under ``gait_node`` (rolling gait) driven by ``cmd_vel`` (straight, then a
  turn), the twin started paused and resumed (``~/pause``) once the recorder and the gait
  are in place.

The twin runs in lock-step (one control period per command) and the commanders on its
``/clock``, so the runs are the same however loaded the machine is. The fit starts from the
defaults; what it recovers is compared with the hidden values, and the replay with the fitted
target with the replay with the defaults.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from snake_core.robot import load_robot
from snake_tools.bag.series import read_series
from snake_tools.bag.storage import scan_incomplete
from snake_tools.bench.twin import hidden_params
from snake_tools.cli import main
from snake_tools.command import snake_command

pytestmark = pytest.mark.graph

_LIFTED_S = 15.0
_GROUND_S = 12.0
_MOCAP_NOISE_M = 0.001
_STRAIGHT, _TURN = (0.08, 0.0), (0.05, 0.15)  # cmd_vel of the ground run's two halves: m/s, rad/s
_TOPICS = ("/clock", "/joint_commands", "/joint_states", "/ground_truth/head_pose", "/mocap/head_pose", "/cmd_vel",
           "/diagnostics")
_TWIN_TOPICS = ("/clock", "/joint_states", "/ground_truth/head_pose", "/mocap/head_pose")
_BOUND_S = 600.0  # s, failure bound only (a process that never answers), not a speed requirement



class _Recorder:
    """``snake bag record`` of the identification topics, in its own process."""

    def __init__(self, bag: Path) -> None:
        self.bag = bag
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.proc = subprocess.Popen(snake_command("bag", "record", "--out", str(bag), "--topics", *_TOPICS, "--quiet"),
                                     env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        assert self.ready.wait(_BOUND_S), self.lines

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            if "ready: waiting for publishers" in line:
                self.ready.set()

    def recording(self, *topics: str) -> bool:
        """Whether the recorder has said it records each of ``topics``."""
        said = " ".join(line for line in self.lines if line.startswith("snake bag record: recording"))
        return all(t in said for t in topics)

    def holds(self, *topics: str) -> bool:
        """Whether the bag's files already hold a message of each of ``topics``.

        A publisher sends only to the subscriptions it has discovered, and a node that starts
        after the recorder may discover it seconds after the recorder discovered the node: a
        message on disk shows that the publisher's messages reach the bag.
        """
        if not self.bag.exists():
            return False
        found = {m[0] for m in scan_incomplete(self.bag).messages}
        return all(t in found for t in topics)

    def close(self) -> Path:
        """SIGTERM: the bag is closed complete."""
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=_BOUND_S) == 0, self.lines
        self._reader.join(timeout=10)
        return self.bag


def _twin(ros: Any, lifted: bool, start_paused: bool = False) -> Any:
    return ros.start("twin_node", {"mode": "lockstep", "lockstep_prime": True, "calibration_target": "hidden",
                                   "lifted": lifted, "world": "flat", "command_timeout_s": 0.0,
                                   "mocap_position_noise_m": _MOCAP_NOISE_M, "seed": 3,
                                   "start_paused": start_paused})


def _record_lifted(ros: Any, bag: Path) -> Path:
    rec = _Recorder(bag)
    try:
        twin = _twin(ros, lifted=True)
        # The primed twin repeats its first period every second until a command: its messages reach the bag.
        assert ros.spin_until(lambda: rec.holds(*_TWIN_TOPICS), _BOUND_S), (rec.lines, ros.log_of(twin))
        # Two subscribers on joint_commands (the twin and the recorder) before the first command.
        done = subprocess.run(snake_command("twin", "excite", "--variant", "lifted", "--duration", str(_LIFTED_S),
                                     "--use-sim-time", "--subscribers", "2", "--pose-timeout", str(_BOUND_S),
                                     "--json"),
                              env=os.environ.copy(), capture_output=True, text=True, timeout=_BOUND_S, check=False)
        assert done.returncode == 0, done.stderr + ros.log_of(twin)
        assert ros.stop(twin) == 0, ros.log_of(twin)
        assert "(lifted)" in ros.log_of(twin)
    finally:
        rec.close()
    # Every command is in the bag, one per simulated control period, stamped with the clock it answered.
    bs = read_series(bag, progress=False)
    stamps = bs.header_times("/joint_commands")
    assert stamps is not None and len(stamps) == json.loads(done.stdout)["published"]
    assert np.diff(stamps) == pytest.approx(np.full(len(stamps) - 1, 0.02), abs=1e-9)
    return bag


def _record_ground(ros: Any, bag: Path) -> Path:
    from geometry_msgs.msg import TwistStamped
    from rosgraph_msgs.msg import Clock
    from std_srvs.srv import SetBool

    from snake_ros.qos import COMMAND_QOS

    latest: list[Clock] = []  # the newest clock only: a probe that falls behind still sees the twin's time
    ros.node.create_subscription(Clock, "/clock", lambda m: latest.__setitem__(slice(None), [m]), 1)
    cmd_vel = ros.node.create_publisher(TwistStamped, "cmd_vel", COMMAND_QOS)
    rec = _Recorder(bag)
    try:
        # The twin starts paused: the recorder and the gait are in place before the first period.
        twin = _twin(ros, lifted=False, start_paused=True)
        gait = ros.start("gait_node", {"use_sim_time": True, "robot": "tsnake", "gait": "rolling",
                                       "cmd_timeout": 60.0})
        # The paused twin re-publishes its clock, the gait its diagnostics (wall clock): both reach the bag.
        assert ros.spin_until(lambda: rec.holds("/clock", "/diagnostics"), _BOUND_S), (
            rec.lines, ros.log_of(twin), ros.log_of(gait))
        twist = TwistStamped()  # zero stamp: not checked against the clock
        twist.twist.linear.x, twist.twist.angular.z = _STRAIGHT

        def sent() -> bool:
            cmd_vel.publish(twist)  # again until the bag has it: the recorder may discover the probe late
            return rec.holds("/cmd_vel")

        assert ros.spin_until(sent, _BOUND_S), rec.lines
        assert ros.spin_until(lambda: bool(latest), _BOUND_S), ros.log_of(twin)  # the probe sees the clock
        resumed = ros.call(SetBool, "/twin_node/pause", SetBool.Request(data=False), _BOUND_S)
        assert resumed is not None and resumed.response.success, ros.log_of(twin)

        def ended() -> bool:
            """Straight for the first half of the run, then a turn; True at its end."""
            t = latest[0].clock.sec + latest[0].clock.nanosec * 1e-9 if latest else 0.0
            twist.twist.linear.x, twist.twist.angular.z = _STRAIGHT if t < _GROUND_S / 2 else _TURN
            cmd_vel.publish(twist)  # again and again: the gait may have matched the probe after the first one
            return t >= _GROUND_S

        assert ros.spin_until(ended, _BOUND_S), ros.log_of(gait) + ros.log_of(twin)
        assert ros.stop(gait) == 0, ros.log_of(gait)
        assert ros.stop(twin) == 0, ros.log_of(twin)
    finally:
        rec.close()
    return bag


@pytest.fixture(autouse=True)
def _stack_dds_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe and the recorder announce themselves as the stack's nodes do (every 0.5 s).

    A participant learns of the ones started before it from their periodic announcements;
    with Fast DDS's default of 3 s a node started after the probe could miss its first
    cmd_vel for longer than this lock-step run takes. Autouse: set before ``ros`` makes the probe.
    """
    from snake_ros.dds_profile import PROFILE_ENV, snake_profile

    profile = snake_profile()
    assert profile is not None
    monkeypatch.setenv(PROFILE_ENV, str(profile))


def _run(capsys: Any, *argv: str) -> dict[str, Any]:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.timeout(1800)
def test_identify_from_runs_recorded_through_the_nodes(ros, config_copy, tmp_path, capsys):
    robot = load_robot("tsnake")
    hidden = hidden_params(robot)
    truth = hidden.flat(robot)
    (config_copy / "calibration" / "tsnake" / "hidden.yaml").write_text(
        yaml.safe_dump({"twin": hidden.to_yaml_dict()}, sort_keys=False))
    lifted_bag = _record_lifted(ros, tmp_path / "lifted")
    ground_bag = _record_ground(ros, tmp_path / "ground")

    lifted = _run(capsys, "twin", "identify", str(lifted_bag), "--robot", "tsnake", "--target", "lab", "--lifted",
                  "--write", "--json", "--structure", "none")
    assert lifted["residual_rms_after"] < 0.05 * lifted["residual_rms_before"]
    for name, p in lifted["parameters"].items():
        if name.endswith("frictionloss"):  # hidden value 0: found at 0 (within 0.01 N m)
            assert p["fitted"] == pytest.approx(0.0, abs=0.01), name
        elif name.endswith("latency_s"):   # within one physics step
            assert abs(p["fitted"] - truth[name]) <= lifted["timestep_s"], (name, p, truth[name])
            assert p["identified"], name
        else:
            assert p["fitted"] == pytest.approx(truth[name], rel=0.15), (name, p, truth[name])
            assert p["identified"], name
    assert "contact.ground_friction" in lifted["not_identified"]  # a lifted robot touches nothing

    ground = _run(capsys, "twin", "identify", str(ground_bag), "--robot", "tsnake", "--target", "lab", "--write",
                  "--json")
    friction = ground["parameters"]["contact.ground_friction"]
    assert friction["identified"]
    assert friction["fitted"] == pytest.approx(truth["contact.ground_friction"], rel=0.15), friction

    fitted = _run(capsys, "twin", "replay", str(ground_bag), "--target", "lab", "--json")
    default = _run(capsys, "twin", "replay", str(ground_bag), "--target", "twin", "--json")
    assert default["divergence_max_m"] > 0.02  # the defaults are measurably off on this run
    assert fitted["divergence_max_m"] * 5 <= default["divergence_max_m"], (fitted, default)
    assert fitted["joint_residual_rms_rad"] * 5 <= default["joint_residual_rms_rad"]
