"""Bridge node graph tests: a real bridge process, dynamixel-sdk, and our emulator on a pty.

The emulator runs in this test process (so the test reads its registers); the bridge
runs as its own process with ``backend: dynamixel`` pointed at the emulator's stable
symlink, exactly as it would be pointed at a U2D2.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger

from snake_core.robot import load_robot
from snake_hardware.backend import HW_OVERLOAD
from snake_hardware.dynamixel import control_table as ct
from snake_hardware.emulator import ServoBusEmulator
from snake_ros.qos import COMMAND_QOS, SENSOR_QOS, STATUS_QOS

pytestmark = pytest.mark.graph

_ROBOT = load_robot("tsnake")


def _ticks(name: str, angle: float) -> int:
    """Independent rad -> ticks for the tsnake YAML (zero offsets 0, direction +1)."""
    j = _ROBOT.joint(name)
    return 2048 + round((j.direction * angle + j.zero_offset) * 4096 / (2 * math.pi))


def _envelope_ok(emu: ServoBusEmulator) -> bool:
    """Every goal any servo ever accepted lies within its joint's YAML limits."""
    for j in _ROBOT.joints:
        if j.continuous:
            continue
        lo, hi = sorted((_ticks(j.name, j.lower), _ticks(j.name, j.upper)))
        if any(not lo <= g <= hi for g in emu.goal_log(j.servo_id)):
            return False
    return True


@pytest.fixture
def emu(tmp_path: Path) -> Iterator[ServoBusEmulator]:
    e = ServoBusEmulator([j.servo_id for j in _ROBOT.joints], link=tmp_path / "ttyDXL").start()
    try:
        yield e
    finally:
        e.stop()


def _start_bridge(ros: Any, emu: ServoBusEmulator, **extra: Any) -> Any:
    params = {"backend": "dynamixel", "port": emu.port, "baud_rate": 4000000, "rate_hz": 50.0,
              "latency_ms": 30.0, "watchdog_s": 1.0, "health_rate_hz": 5.0, "command_timeout_s": 30.0}
    params.update(extra)
    return ros.start("bridge_node", params)


def _command(ros: Any, pub: Any, targets: dict[str, float]) -> None:
    msg = JointState()
    msg.name = list(targets)
    msg.position = [float(v) for v in targets.values()]
    pub.publish(msg)


def _call(ros: Any, srv_type: Any, name: str, request: Any) -> Any:
    client = ros.node.create_client(srv_type, name)
    assert ros.spin_until(client.service_is_ready, 20.0), f"{name} not available"
    future = client.call_async(request)
    assert ros.spin_until(future.done, 20.0)
    return future.result()


def _status(diags: list[DiagnosticArray], name: str) -> Any:
    for arr in reversed(diags):
        for st in arr.status:
            if st.name == name:
                return st
    return None


def test_commands_reach_goal_registers_and_states_follow(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu)
    states = ros.collect(JointState, "joint_states", SENSOR_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    assert ros.spin_until(lambda: len(states) > 3, 30.0), ros.log_of(proc)
    assert not any(emu.torque_enabled(i) for i in emu.servos)  # no torque before a command
    # Names in any order, one out of the envelope, one NaN, one unknown.
    cmd = {"m1_twist": 2.0, "m2_dorsal": 5.0, "m1_dorsal": -0.3, "m2_lateral": math.nan, "tail_fin": 1.0}
    held = emu.present_position(6)
    assert ros.spin_until(lambda: (_command(ros, pub, cmd), emu.goal_position(2) == _ticks("m1_twist", 2.0))[1],
                          20.0), ros.log_of(proc)
    assert emu.goal_position(1) == _ticks("m1_dorsal", -0.3)
    assert emu.goal_position(4) == _ticks("m2_dorsal", 1.5708)       # clamped to the YAML limit
    assert emu.goal_position(6) == held                                # NaN dropped: holds where it was
    assert all(emu.torque_enabled(i) for i in emu.servos)

    def follows() -> bool:
        if not states:
            return False
        pos = dict(zip(states[-1].name, states[-1].position, strict=True))
        return abs(pos["m1_twist"] - 2.0) < 3e-3 and abs(pos["m1_dorsal"] + 0.3) < 3e-3
    assert ros.spin_until(follows, 20.0)
    assert states[-1].header.stamp.sec > 0
    assert _envelope_ok(emu)
    assert proc.poll() is None


def test_emergency_stop_turns_torque_off_everywhere(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    assert ros.spin_until(lambda: (_command(ros, pub, {"m3_dorsal": 0.2}),
                                   all(emu.torque_enabled(i) for i in emu.servos))[1], 30.0), ros.log_of(proc)
    result = _call(ros, Trigger, "/bridge_node/emergency_stop", Trigger.Request())
    assert result.success, result.message
    emu.settle()
    assert not any(emu.torque_enabled(i) for i in emu.servos)  # done before the service answered
    # Commands do not re-enable torque after an e-stop; the torque service does.
    _command(ros, pub, {"m3_dorsal": 0.4})
    ros.spin_for(0.5)
    assert not any(emu.torque_enabled(i) for i in emu.servos)
    result = _call(ros, SetBool, "/bridge_node/torque", SetBool.Request(data=True))
    assert result.success, result.message
    emu.settle()
    assert all(emu.torque_enabled(i) for i in emu.servos)


def test_faults_give_documented_diagnostics_without_crash(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu, max_consecutive_failures=1000)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    states = ros.collect(JointState, "joint_states", SENSOR_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    assert ros.spin_until(lambda: (_command(ros, pub, {"m1_dorsal": 0.1}), emu.torque_enabled(1))[1], 30.0), \
        ros.log_of(proc)
    # Corrupted and dropped answers: retried and counted, the loop goes on.
    def counter(key: str) -> int:
        bus = _status(diags, "bridge: bus")
        values = {kv.key: kv.value for kv in bus.values} if bus else {}
        return int(values.get(key, 0))

    emu.corrupt_responses(1)
    assert ros.spin_until(lambda: counter("crc_errors") >= 1, 20.0)
    emu.drop_responses(1)
    assert ros.spin_until(lambda: counter("timeouts") >= 1, 20.0)
    # A servo raising overload: ERROR for that joint, naming the bit.
    emu.raise_hardware_error(9, HW_OVERLOAD)

    def overload() -> bool:
        st = _status(diags, "bridge: m3_lateral")
        return st is not None and st.level == DiagnosticStatus.ERROR and "overload" in st.message
    assert ros.spin_until(overload, 20.0), ros.log_of(proc)[-3000:]
    # While a hardware error stands, commands are ignored (fault_reaction hold: present positions).
    for _ in range(5):
        _command(ros, pub, {"m1_dorsal": 0.4})
        ros.spin_for(0.1)
    assert abs(emu.goal_position(1) - _ticks("m1_dorsal", 0.1)) <= 2
    # A vanished servo: ERROR "no answer" for its joint, node alive.
    emu.vanish(5)

    def no_answer() -> bool:
        st = _status(diags, "bridge: m2_twist")
        return st is not None and st.level == DiagnosticStatus.ERROR and st.message == "no answer"
    assert ros.spin_until(no_answer, 30.0)
    emu.restore(5)
    n = len(states)
    assert ros.spin_until(lambda: len(states) > n + 5, 20.0)
    # Reboot service clears the hardware error.
    result = _call(ros, Trigger, "/bridge_node/reboot", Trigger.Request())
    assert result.success and "m3_lateral" in result.message, result.message
    assert emu.register(9, ct.HARDWARE_ERROR_STATUS, 1) == 0
    assert _envelope_ok(emu)
    assert proc.poll() is None


def test_unplug_replug_resumes_from_present_positions(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    states = ros.collect(JointState, "joint_states", SENSOR_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    assert ros.spin_until(lambda: (_command(ros, pub, {"m1_dorsal": 0.5}),
                                   emu.goal_position(1) == _ticks("m1_dorsal", 0.5))[1], 30.0), ros.log_of(proc)
    emu.unplug()

    def disconnected() -> bool:
        bus = _status(diags, "bridge: bus")
        return bus is not None and bus.level == DiagnosticStatus.ERROR and bus.message.startswith("disconnected")
    assert ros.spin_until(disconnected, 20.0), ros.log_of(proc)
    # While unplugged the servo is moved by hand (its present position changes).
    with emu._lock:
        emu.servos[1].position = float(_ticks("m1_dorsal", -0.2))
        for s in emu.servos.values():
            s.table[ct.TORQUE_ENABLE] = 0
    logs_before = {i: len(emu.goal_log(i)) for i in emu.servos}
    emu.replug()
    n = len(states)
    assert ros.spin_until(lambda: len(states) > n + 3, 30.0), ros.log_of(proc)
    pos = dict(zip(states[-1].name, states[-1].position, strict=True))
    assert pos["m1_dorsal"] == pytest.approx(-0.2, abs=2e-3)
    assert ros.spin_until(lambda: (bus := _status(diags, "bridge: bus")) is not None
                          and bus.level == DiagnosticStatus.OK
                          and {kv.key: kv.value for kv in bus.values}.get("reconnects") == "1", 20.0)
    ros.spin_for(0.5)
    # No stale target: nothing was sent after the reconnect until a new command...
    assert all(len(emu.goal_log(i)) == logs_before[i] for i in emu.servos)
    assert not any(emu.torque_enabled(i) for i in emu.servos)
    # ...and then the first goals of the untouched joints are their present positions.
    assert ros.spin_until(lambda: (_command(ros, pub, {"m2_dorsal": 0.1}),
                                   emu.goal_position(4) == _ticks("m2_dorsal", 0.1))[1], 30.0)
    first = emu.goal_log(1)[logs_before[1]]
    assert first == _ticks("m1_dorsal", -0.2)
    assert _envelope_ok(emu)
    assert proc.poll() is None


def test_emulated_backend_runs_the_whole_path_in_process(ros: Any) -> None:
    proc = ros.start("bridge_node", {"backend": "emulated", "rate_hz": 50.0, "command_timeout_s": 30.0})
    states = ros.collect(JointState, "joint_states", SENSOR_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)

    def at_target() -> bool:
        _command(ros, pub, {"m2_twist": -4.0, "m4_lateral": 0.6})
        if not states:
            return False
        pos = dict(zip(states[-1].name, states[-1].position, strict=True))
        return abs(pos["m2_twist"] + 4.0) < 3e-3 and abs(pos["m4_lateral"] - 0.6) < 3e-3
    assert ros.spin_until(at_target, 40.0), ros.log_of(proc)
    assert ros.stop(proc) == 0


def test_command_timeout_torque_off(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu, command_timeout_s=0.5, timeout_reaction="torque_off")
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    assert ros.spin_until(lambda: (_command(ros, pub, {"m5_dorsal": 0.3}),
                                   all(emu.torque_enabled(i) for i in emu.servos))[1], 30.0), ros.log_of(proc)
    # Silence on joint_commands: after the timeout every servo is torque-off.
    assert ros.spin_until(lambda: not any(emu.torque_enabled(i) for i in emu.servos), 20.0), ros.log_of(proc)
    assert proc.poll() is None


def test_lost_servo_goes_safe_names_the_id_and_recovers(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu, max_consecutive_failures=3)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    assert ros.spin_until(lambda: (_command(ros, pub, {"m1_dorsal": 0.2}),
                                   all(emu.torque_enabled(i) for i in emu.servos))[1], 30.0), ros.log_of(proc)
    emu.vanish(5)

    def names_the_id() -> bool:
        bus = _status(diags, "bridge: bus")
        return bus is not None and bus.level == DiagnosticStatus.ERROR and "IDs 5 (m2_twist)" in bus.message
    assert ros.spin_until(names_the_id, 30.0), ros.log_of(proc)
    # Safe state: torque off on every servo that still answers.
    assert not any(emu.torque_enabled(i) for i in emu.servos if i != 5)
    emu.restore(5)

    def recovered() -> bool:
        bus = _status(diags, "bridge: bus")
        values = {kv.key: kv.value for kv in bus.values} if bus else {}
        return bus is not None and bus.level == DiagnosticStatus.OK and int(values.get("reconnects", 0)) >= 1
    assert ros.spin_until(recovered, 30.0), ros.log_of(proc)
    assert _envelope_ok(emu)
    assert proc.poll() is None
