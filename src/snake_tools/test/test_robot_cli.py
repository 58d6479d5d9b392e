"""``snake robot``: the bridge's verbs against the real bridge on the servo emulator, and ``snake robot new``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from snake_core.robot import RobotConfigError, load_robot, resolve_robot_path
from snake_hardware.dynamixel import control_table as ct
from snake_hardware.emulator import ServoBusEmulator
from snake_tools.cli import main
from snake_tools.command import snake_command

_ROBOT = load_robot("tsnake")
_BOUND_S = "60"  # s: failure bound for a bridge's discovery on a loaded machine, never a speed requirement


def _snake(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(snake_command(*args), capture_output=True, text=True, timeout=300, check=False)


def _verb(verb: str, *ids: int) -> tuple[int, dict[str, Any]]:
    proc = _snake("robot", verb, *map(str, ids), "--json", "--timeout", _BOUND_S)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.graph
def test_verbs_give_the_bridges_answers_and_exit_codes(ros: Any, emu: ServoBusEmulator) -> None:
    proc = ros.start("bridge_node", {"backend": "dynamixel", "port": emu.port, "baud_rate": 4000000,
                                     "rate_hz": 50.0, "latency_ms": 30.0, "command_timeout_s": 30.0})
    code, status = _verb("status")       # real servos: disarmed until someone arms them
    assert code == 0 and status["state"] == "DISARMED" and status["torque"] is False, ros.log_of(proc)
    assert status["connected"] is True and status["faulted"] == []

    code, armed = _verb("arm")
    assert code == 0 and armed["success"] is True and armed["state"] in ("ARMING", "ARMED"), armed
    emu.settle()
    assert all(emu.torque_enabled(i) for i in emu.servos)       # the servos' own registers
    code, again = _verb("arm")
    assert code == 1 and again["success"] is False and "already armed" in again["message"]

    code, stopped = _verb("estop")
    assert code == 0 and stopped["state"] == "ESTOPPED"
    emu.settle()
    assert not any(emu.torque_enabled(i) for i in emu.servos)
    code, refused = _verb("arm")          # latched: arming is refused, the answer says what to do
    assert code == 1 and refused["state"] == "ESTOPPED" and "clear" in refused["message"]
    code, cleared = _verb("clear-estop")
    assert code == 0 and cleared["state"] == "DISARMED"
    code, reboot = _verb("reboot")        # nothing to reboot: refused with the bridge's reason
    assert code == 1 and "no servo" in reboot["message"]

    text = _snake("robot", "disarm", "--timeout", _BOUND_S)
    assert text.returncode == 0 and "/bridge_node/disarm: done:" in text.stdout and "DISARMED" in text.stdout


@pytest.mark.graph
def test_reboot_ids_must_be_the_servos_that_need_one(ros: Any, emu: ServoBusEmulator) -> None:
    """``reboot IDS`` reboots only when IDS are exactly the servos the bridge would reboot."""
    proc = ros.start("bridge_node", {"backend": "dynamixel", "port": emu.port, "baud_rate": 4000000,
                                     "rate_hz": 50.0, "latency_ms": 30.0, "command_timeout_s": 30.0})
    faulty = {_ROBOT.joints[2].servo_id: _ROBOT.joints[2].name, _ROBOT.joints[7].servo_id: _ROBOT.joints[7].name}
    code, status = _verb("status")   # answered once the bus is up (start-up reboots servos in error)
    assert status["connected"] is True and status["needs_reboot"] == {}, ros.log_of(proc)
    for servo in faulty:
        emu.raise_hardware_error(servo, 0x04)          # overheating: latched until a reboot
    for _ in range(30):                                # each status is a fresh process: a bounded count, no timing
        code, status = _verb("status")
        if {int(i) for i in status["needs_reboot"].values()} == set(faulty):
            break
    assert status["needs_reboot"] == {n: i for i, n in faulty.items()}, ros.log_of(proc)
    first, second = sorted(faulty)
    healthy = next(j.servo_id for j in _ROBOT.joints if j.servo_id not in faulty)
    code, refused = _verb("reboot", first, healthy)           # a servo that needs no reboot: nothing rebooted
    assert code == 1 and f"ID {healthy} needs no reboot" in refused["message"] and refused["state"] == status["state"]
    code, refused = _verb("reboot", first)                    # the other faulted servo would be rebooted unnamed
    assert code == 1 and "name them all" in refused["message"] and f"ID {second}" in refused["message"]
    assert emu.register(first, ct.HARDWARE_ERROR_STATUS, 1) and emu.register(second, ct.HARDWARE_ERROR_STATUS, 1)
    code, done = _verb("reboot", second, first)
    assert code == 0 and done["success"] is True and done["state"] == "DISARMED", done
    assert all(name in done["message"] for name in faulty.values())


@pytest.mark.graph
def test_no_bridge_is_one_line_and_exit_2(ros: Any) -> None:
    proc = _snake("robot", "arm", "--bridge", "/no_such_bridge", "--timeout", "1", "--json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "no bridge answered on /no_such_bridge/arm within 1 s" in proc.stderr


def test_new_for_six_modules_gives_the_shipped_tsnake_values(tmp_path: Path) -> None:
    """The shipped 6-module file is an independent oracle for the derived values."""
    out = tmp_path / "six.yaml"
    assert main(["robot", "new", "--from", "tsnake", "--modules", "6", "six", "--out", str(out)]) == 0
    shipped = yaml.safe_load(resolve_robot_path("tsnake").read_text())
    written = yaml.safe_load(out.read_text())
    assert written["joints"] == shipped["joints"]
    for key in ("head_end", "tail_start"):
        assert written["gaits"]["rolling"][key] == pytest.approx(shipped["gaits"]["rolling"][key], abs=1e-4)
    for key in ("reference_offset", "half_width"):
        assert written["following"][key] == pytest.approx(shipped["following"][key], abs=0.01)
    assert written["following"]["follower"] == shipped["following"]["follower"]


def test_new_eight_modules_is_consistent_and_gives_a_urdf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tsnake8.yaml"
    assert main(["robot", "new", "--from", "tsnake", "--modules", "8", "tsnake8", "--out", str(out)]) == 0
    robot = load_robot(out, calibrated=False)
    assert robot.name == "tsnake8" and robot.body.n_modules == 8
    assert [j.servo_id for j in robot.joints] == list(range(1, 25))
    twist = [s for j, s in zip(robot.joints, robot.joint_arc_positions(), strict=True) if j.type == "twist"]
    roll = robot.gait("rolling")
    # The buffer runs between the twist joints of modules 4 and 5, the body's middle.
    assert roll["head_end"] == pytest.approx(twist[3], abs=1e-4)
    assert roll["tail_start"] == pytest.approx(twist[4], abs=1e-4)
    assert roll["head_end"] == pytest.approx(robot.length - roll["tail_start"], abs=robot.body.module_length)
    capsys.readouterr()
    assert main(["urdf", "--robot", str(out)]) == 0
    assert capsys.readouterr().out.count("<joint ") >= 24
    assert main(["robot", "new", "--from", "tsnake", "--modules", "8", "tsnake8", "--out", str(out)]) == 2
    assert "exists" in capsys.readouterr().err


def test_loader_refuses_segments_of_another_module_count(tmp_path: Path) -> None:
    """An 8-module copy of tsnake.yaml with the 6-module head_end / tail_start: one line naming file and field."""
    data = yaml.safe_load(resolve_robot_path("tsnake").read_text())
    data["body"]["n_modules"] = 8
    data["joints"] += [{"name": f"m{m}_{t}", "type": t, "servo_id": 18 + 3 * (m - 7) + i + 1}
                       for m in (7, 8) for i, t in enumerate(("dorsal", "twist", "lateral"))]
    path = tmp_path / "copy8.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RobotConfigError) as err:
        load_robot(path, calibrated=False)
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{path}: gaits.rolling.head_end:") and "8 modules" in line


def test_bag_analyze_finds_a_new_robot_in_the_bag_else_says_robot_path(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A robot that exists only in the bag (not in config/robots) is analysed from its recorded YAML."""
    from snake_tools.bag.synthetic import SyntheticSession, write_session

    yaml_path = tmp_path / "elsewhere" / "tsnake8.yaml"
    yaml_path.parent.mkdir()
    assert main(["robot", "new", "--modules", "8", "tsnake8", "--out", str(yaml_path)]) == 0
    robot = load_robot(yaml_path, calibrated=False)
    session = SyntheticSession(script=((0.05, 0.0, 3.0),))
    with_yaml = write_session(tmp_path / "with", robot, session, robot_yaml=yaml_path.read_text())
    without = write_session(tmp_path / "without", robot, session)
    capsys.readouterr()

    assert main(["bag", "analyze", str(with_yaml), "--out", str(tmp_path / "r1"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["robot"] == "tsnake8"

    assert main(["bag", "analyze", str(without), "--out", str(tmp_path / "r2"), "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tsnake8" in err and "--robot PATH" in err
    assert main(["bag", "analyze", str(without), "--out", str(tmp_path / "r3"), "--robot", str(yaml_path),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["robot"] == "tsnake8"


@pytest.mark.graph
def test_gait_node_publishes_its_robot_yaml_latched(ros: Any) -> None:
    """A recorder that joins late still gets the robot's YAML (transient local)."""
    from std_msgs.msg import String

    from snake_ros.qos import LATCHED_QOS

    yaml_path = resolve_robot_path("tsnake")
    proc = ros.start("gait_node", {"robot": str(yaml_path)})
    got = ros.collect(String, "robot_description_yaml", LATCHED_QOS)
    assert ros.spin_until(lambda: len(got) > 0, 60.0), ros.log_of(proc)
    assert got[-1].data == yaml_path.read_text()


def test_calibrate_refuses_a_robot_that_is_not_a_tsnake(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "calibrate", "--robot", "wheeled_snake", "--duration", "6"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--robot wheeled_snake: kind 'planar_wheeled'" in err


@pytest.mark.parametrize("name", ["../evil", "a b", "", ".hidden", "x/y", "tsnake-8", "name\nkey: 1"])
def test_new_refuses_a_name_that_is_not_letters_digits_and_underscore_before_writing(
        tmp_path: Path, name: str) -> None:
    """The name becomes config/robots/NAME.yaml and config/calibration/NAME/: one line, exit 2, nothing written."""
    from snake_core.config_files import config_dir

    before = {p for p in config_dir().rglob("*")}
    run = _snake("robot", "new", "--from", "tsnake", "--modules", "8", name)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "letters, digits and '_'" in lines[0] and repr(name) in lines[0], lines
    assert {p for p in config_dir().rglob("*")} == before
    out = tmp_path / "r.yaml"            # with --out too: the name is the robot's name in the file
    assert _snake("robot", "new", "--modules", "8", name, "--out", str(out)).returncode == 2
    assert not out.exists()


@pytest.mark.parametrize("target", ["../escape", "lab.v2", "lab-2", ".x", "a b"])
def test_a_calibration_target_follows_the_same_name_rule(target: str) -> None:
    from snake_core.config_files import calibration_target

    with pytest.raises(RobotConfigError, match=r"letters, digits and '_'"):
        calibration_target(target)
    assert calibration_target("lab_2") == "lab_2"


@pytest.mark.graph
def test_status_names_every_bridge_answering_to_the_name(ros: Any) -> None:
    """Two nodes named bridge_node (started at once, so neither refused the other): status says there are two."""
    import rclpy
    from std_srvs.srv import Trigger

    def bridge(reason: str) -> Any:
        node = rclpy.create_node("bridge_node", context=ros.context)

        def status(request: Any, response: Any) -> Any:
            response.success = True
            response.message = json.dumps({"state": "DISARMED", "reason": reason, "torque": False,
                                           "connected": True, "faulted": [], "foreign": [], "needs_reboot": {}})
            return response

        node.create_service(Trigger, "~/status", status)
        ros.executor.add_node(node)
        return node

    nodes = [bridge("one"), bridge("two")]
    proc = subprocess.Popen(snake_command("robot", "status", "--json", "--timeout", _BOUND_S), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert ros.spin_until(lambda: proc.poll() is not None, 300.0)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for node in nodes:
            ros.executor.remove_node(node)
            node.destroy_node()
    assert proc.returncode == 0, err
    answer = json.loads(out)
    assert answer["bridges"] == 2 and answer["reason"] in ("one", "two"), answer
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "2 bridges answer to /bridge_node" in lines[0], err
