"""Bridge node graph tests: a real bridge process, dynamixel-sdk, and our emulator on a pty.

The emulator runs in this test process (so the test reads its registers); the bridge
runs as its own process with ``backend: dynamixel`` pointed at the emulator's stable
symlink, exactly as it would be pointed at a U2D2.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger

from snake_core.robot import load_robot
from snake_hardware.dynamixel import control_table as ct
from snake_hardware.dynamixel.hardware_errors import HW_OVERLOAD
from snake_hardware.emulator import ServoBusEmulator
from snake_ros.qos import COMMAND_QOS, SENSOR_QOS, STATUS_QOS
from snake_tools.command import snake_command

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
    answer = ros.call(srv_type, name, request)
    assert answer is not None, f"{name}: no answer"
    return answer.response


def _status(diags: list[DiagnosticArray], name: str) -> Any:
    for arr in reversed(diags):
        for st in arr.status:
            if st.name == name:
                return st
    return None


def _bus(diags: list[DiagnosticArray]) -> dict[str, str]:
    """Values of the newest ``bridge: bus`` status ({} before the first)."""
    bus = _status(diags, "bridge: bus")
    return {kv.key: kv.value for kv in bus.values} if bus else {}


def _state_is(diags: list[DiagnosticArray], state: str) -> Any:
    return lambda: _bus(diags).get("state") == state


def _more(diags: list[DiagnosticArray], n: int) -> Any:
    """A predicate true once ``n`` more diagnostics arrays arrived (0.5 s apart)."""
    target = len(diags) + n
    return lambda: len(diags) >= target


def _stream(ros: Any, pub: Any, targets: dict[str, float]) -> dict[str, float]:
    """Publish ``targets`` at 50 Hz whenever the probe spins; returns the dict (mutable)."""
    ros.node.create_timer(0.02, lambda: _command(ros, pub, targets))
    return targets


def _arm(ros: Any) -> None:
    answer = ros.call(Trigger, "/bridge_node/arm", Trigger.Request())
    assert answer is not None, "/bridge_node/arm: no answer"
    # A copy sent again after a lost answer finds the bridge armed by the first.
    again = answer.resent and answer.response.message.startswith("already armed")
    assert answer.response.success or again, answer.response.message


def _torque(emu: ServoBusEmulator) -> list[bool]:
    return [emu.torque_enabled(i) for i in emu.servos]


def test_disarmed_at_start_commands_never_enable_torque_then_arm_moves(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu, arming_speed=5.0)     # backend dynamixel: auto_arm false
    states = ros.collect(JointState, "joint_states", SENSOR_QOS)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    assert ros.spin_until(lambda: len(states) > 3 and _bus(diags).get("state") == "DISARMED", 30.0), \
        ros.log_of(proc)
    # The start-up line says how to arm, as commands that can be pasted (with and without ros2).
    how = ("to arm: snake robot arm --bridge /bridge_node "
           "(or: ros2 service call /bridge_node/arm std_srvs/srv/Trigger)")
    assert ros.spin_until(lambda: how in ros.log_of(proc), 20.0), ros.log_of(proc)
    logs = {i: len(emu.goal_log(i)) for i in emu.servos}
    # Names in any order, one out of the envelope, one NaN, one unknown.
    cmd = _stream(ros, pub, {"m1_twist": 2.0, "m2_dorsal": 5.0, "m1_dorsal": -0.3, "m2_lateral": math.nan,
                             "tail_fin": 1.0})
    assert ros.spin_until(lambda: _bus(diags).get("command_state") == "active", 20.0)
    assert ros.spin_until(_more(diags, 4), 20.0)          # two more seconds of commands
    assert not any(_torque(emu)) and _bus(diags)["state"] == "DISARMED"
    assert all(len(emu.goal_log(i)) == logs[i] for i in emu.servos)   # not one goal written
    held = emu.present_position(6)
    _arm(ros)
    emu.settle()
    assert all(_torque(emu))
    assert ros.spin_until(lambda: emu.goal_position(2) == _ticks("m1_twist", 2.0), 20.0), ros.log_of(proc)
    assert ros.spin_until(_state_is(diags, "ARMED"), 20.0)
    assert emu.goal_position(1) == _ticks("m1_dorsal", -0.3)
    assert emu.goal_position(4) == _ticks("m2_dorsal", 1.5708)       # clamped to the YAML limit
    assert emu.goal_position(6) == held                                # NaN dropped: holds where it was

    def follows() -> bool:
        if not states:
            return False
        pos = dict(zip(states[-1].name, states[-1].position, strict=True))
        return abs(pos["m1_twist"] - 2.0) < 3e-3 and abs(pos["m1_dorsal"] + 0.3) < 3e-3
    assert ros.spin_until(follows, 20.0)
    assert states[-1].header.stamp.sec > 0
    assert _envelope_ok(emu)
    assert cmd and proc.poll() is None


def test_arming_moves_from_the_present_pose_within_the_limits(ros: Any, emu: ServoBusEmulator) -> None:
    with emu._lock:  # a servo resting 70 degrees off the commanded pose, as on a real robot
        emu.servos[4].position = float(_ticks("m2_dorsal", 1.2))
    proc = _start_bridge(ros, emu, arming_speed=1.0)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    _stream(ros, pub, {"m2_dorsal": 0.0, "m1_dorsal": 0.0})
    assert ros.spin_until(lambda: _bus(diags).get("command_state") == "active", 30.0), ros.log_of(proc)
    first = len(emu.goal_log(4))
    _arm(ros)
    # Wait on the goals written since arming (the goal register may already read the target
    # before the first arming goal is written: it still holds the 0 rad the servo started at).
    target = _ticks("m2_dorsal", 0.0)
    assert ros.spin_until(lambda: target in emu.goal_log(4)[first:], 30.0), ros.log_of(proc)
    goals = emu.goal_log(4)[first:]
    assert goals[0] == _ticks("m2_dorsal", 1.2)                       # torque on at the present pose
    # 1.0 rad/s at 50 Hz: 0.02 rad = 13 ticks per cycle at most (+1 for rounding).
    steps = [abs(b - a) for a, b in itertools.pairwise(goals)]
    assert max(steps) <= 14 and len(goals) > 50
    assert ros.spin_until(_state_is(diags, "ARMED"), 20.0)
    assert proc.poll() is None


def test_torque_false_and_disarm_stay_limp_while_commands_flow(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    _stream(ros, pub, {"m3_dorsal": 0.2})
    for service, request in (("/bridge_node/torque", SetBool.Request(data=False)),
                             ("/bridge_node/disarm", Trigger.Request())):
        result = _call(ros, SetBool, "/bridge_node/torque", SetBool.Request(data=True))
        assert result.success, result.message
        assert ros.spin_until(lambda: all(_torque(emu)) and _bus(diags).get("state") == "ARMED", 30.0), \
            ros.log_of(proc)
        result = _call(ros, SetBool if "torque" in service else Trigger, service, request)
        assert result.success, result.message
        emu.settle()
        assert not any(_torque(emu))
        assert ros.spin_until(_more(diags, 4), 20.0)      # two seconds of commands: still limp
        assert not any(_torque(emu)) and _bus(diags)["state"] == "DISARMED"
    assert proc.poll() is None


def test_emergency_stop_latches_until_cleared_then_arm(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    _stream(ros, pub, {"m3_dorsal": 0.2})
    _arm(ros)
    emu.settle()
    assert all(_torque(emu))
    result = _call(ros, Trigger, "/bridge_node/emergency_stop", Trigger.Request())
    assert result.success, result.message
    emu.settle()
    assert not any(_torque(emu))  # done before the service answered
    # Commands, disarm and arm do not leave the latch; ~/clear_estop does, to DISARMED (still limp).
    result = _call(ros, Trigger, "/bridge_node/disarm", Trigger.Request())
    assert not result.success and "latched" in result.message
    result = _call(ros, Trigger, "/bridge_node/arm", Trigger.Request())
    assert not result.success and "~/clear_estop" in result.message
    assert ros.spin_until(_more(diags, 4), 20.0)
    assert not any(_torque(emu)) and _bus(diags)["state"] == "ESTOPPED"
    result = _call(ros, Trigger, "/bridge_node/clear_estop", Trigger.Request())
    assert result.success, result.message
    assert ros.spin_until(_state_is(diags, "DISARMED"), 20.0), ros.log_of(proc)
    emu.settle()
    assert not any(_torque(emu))
    _arm(ros)
    emu.settle()
    assert all(_torque(emu))
    assert ros.spin_until(_state_is(diags, "ARMED"), 20.0), ros.log_of(proc)


def test_command_timeout_holds_then_commands_resume(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu, command_timeout_s=0.5, arming_speed=5.0)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    assert ros.spin_until(_state_is(diags, "DISARMED"), 30.0), ros.log_of(proc)
    _arm(ros)
    assert ros.spin_until(lambda: (_command(ros, pub, {"m5_dorsal": 0.3}),
                                   emu.goal_position(13) == _ticks("m5_dorsal", 0.3))[1], 30.0)
    # Silence on joint_commands: HOLDING (in a report newer than the goal reached), torque on, the goal stays.
    reached = len(diags)
    assert ros.spin_until(lambda: any(_bus_state(arr) == "HOLDING" for arr in diags[reached:]), 20.0), \
        ros.log_of(proc)
    assert all(_torque(emu)) and emu.goal_position(13) == _ticks("m5_dorsal", 0.3)
    assert _status(diags, "bridge: bus").level == DiagnosticStatus.WARN
    assert ros.spin_until(lambda: (_command(ros, pub, {"m5_dorsal": -0.3}),
                                   emu.goal_position(13) == _ticks("m5_dorsal", -0.3))[1], 30.0)
    assert proc.poll() is None


def test_faults_give_documented_diagnostics_without_crash(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu, max_consecutive_failures=1000)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    states = ros.collect(JointState, "joint_states", SENSOR_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    _arm(ros)
    assert ros.spin_until(lambda: (_command(ros, pub, {"m1_dorsal": 0.1}),
                                   emu.goal_position(1) == _ticks("m1_dorsal", 0.1))[1], 30.0), ros.log_of(proc)

    def counter(key: str) -> int:
        return int(_bus(diags).get(key, 0))

    # Corrupted and dropped answers: retried and counted, the loop goes on. (Counted from what the
    # counters said before: a read can time out on a loaded machine by itself.)
    crc_errors = counter("crc_errors")
    emu.corrupt_responses(1)
    assert ros.spin_until(lambda: counter("crc_errors") >= crc_errors + 1, 20.0)
    timeouts = counter("timeouts")
    emu.drop_responses(1)
    assert ros.spin_until(lambda: counter("timeouts") >= timeouts + 1, 20.0)
    # A servo raising overload: ERROR for that joint naming the bit, FAULT on the bus.
    emu.raise_hardware_error(9, HW_OVERLOAD)

    def overload() -> bool:
        st = _status(diags, "bridge: m3_lateral")
        return st is not None and st.level == DiagnosticStatus.ERROR and "overload" in st.message
    assert ros.spin_until(overload, 20.0), ros.log_of(proc)[-3000:]
    assert ros.spin_until(_state_is(diags, "FAULT"), 20.0)
    assert _status(diags, "bridge: bus").level == DiagnosticStatus.ERROR
    # While the fault stands, commands are ignored (fault_reaction hold: the last goals) and arm is refused.
    for _ in range(5):
        _command(ros, pub, {"m1_dorsal": 0.4})
        ros.spin_for(0.1)
    assert emu.goal_position(1) == _ticks("m1_dorsal", 0.1)
    result = _call(ros, Trigger, "/bridge_node/arm", Trigger.Request())
    assert not result.success and "reboot" in result.message
    # A vanished servo: ERROR "no answer" for its joint, node alive.
    emu.vanish(5)

    def no_answer() -> bool:
        st = _status(diags, "bridge: m2_twist")
        return st is not None and st.level == DiagnosticStatus.ERROR and st.message == "no answer"
    assert ros.spin_until(no_answer, 30.0)
    emu.restore(5)
    n = len(states)
    assert ros.spin_until(lambda: len(states) > n + 5, 20.0)
    # Reboot clears the hardware error: DISARMED, limp.
    result = _call(ros, Trigger, "/bridge_node/reboot", Trigger.Request())
    assert result.success and "m3_lateral" in result.message, result.message
    assert emu.register(9, ct.HARDWARE_ERROR_STATUS, 1) == 0
    assert ros.spin_until(_state_is(diags, "DISARMED"), 20.0)
    emu.settle()
    assert not any(_torque(emu))
    assert _envelope_ok(emu)
    assert proc.poll() is None


def test_unplug_replug_resumes_from_present_positions(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu, arming_speed=5.0)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    states = ros.collect(JointState, "joint_states", SENSOR_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    _arm(ros)
    assert ros.spin_until(lambda: (_command(ros, pub, {"m1_dorsal": 0.5}),
                                   emu.goal_position(1) == _ticks("m1_dorsal", 0.5))[1], 30.0), ros.log_of(proc)
    emu.unplug()

    def disconnected() -> bool:
        bus = _status(diags, "bridge: bus")
        return bus is not None and bus.level == DiagnosticStatus.ERROR and bus.message.startswith("disconnected")
    assert ros.spin_until(disconnected, 20.0), ros.log_of(proc)
    assert _bus(diags)["state"] == "FAULT"
    # While unplugged the servo is moved by hand (its present position changes).
    with emu._lock:
        emu.servos[1].position = float(_ticks("m1_dorsal", -0.2))
        for s in emu.servos.values():
            s.table[ct.TORQUE_ENABLE] = 0
    logs_before = {i: len(emu.goal_log(i)) for i in emu.servos}
    # Joint states stamped after the replug (the bridge stamps with the host's clock): states from
    # before the unplug may still wait in the probe's queue.
    replugged_ns = time.time_ns()
    emu.replug()

    def fresh() -> list[JointState]:
        return [m for m in states if m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec > replugged_ns]

    assert ros.spin_until(lambda: len(fresh()) > 3, 30.0), ros.log_of(proc)
    pos = dict(zip(fresh()[-1].name, fresh()[-1].position, strict=True))
    assert pos["m1_dorsal"] == pytest.approx(-0.2, abs=2e-3)
    assert ros.spin_until(lambda: (bus := _status(diags, "bridge: bus")) is not None
                          and bus.level == DiagnosticStatus.OK and _bus(diags).get("reconnects") == "1"
                          and _bus(diags).get("state") == "DISARMED", 20.0)
    # No stale target and no torque after the reconnect, whatever the commands say, until armed...
    assert ros.spin_until(_more(diags, 2), 20.0)
    for _ in range(10):
        _command(ros, pub, {"m2_dorsal": 0.1})
        ros.spin_for(0.05)
    assert all(len(emu.goal_log(i)) == logs_before[i] for i in emu.servos)
    assert not any(_torque(emu))
    # ...and then the first goals are the present positions.
    _arm(ros)
    assert ros.spin_until(lambda: (_command(ros, pub, {"m2_dorsal": 0.1}),
                                   emu.goal_position(4) == _ticks("m2_dorsal", 0.1))[1], 30.0)
    first = emu.goal_log(1)[logs_before[1]]
    assert first == _ticks("m1_dorsal", -0.2)
    assert _envelope_ok(emu)
    assert proc.poll() is None


def test_emulated_backend_arms_by_itself_and_runs_the_whole_path(ros: Any) -> None:
    proc = ros.start("bridge_node", {"backend": "emulated", "rate_hz": 50.0, "command_timeout_s": 30.0,
                                     "arming_speed": 5.0})
    states = ros.collect(JointState, "joint_states", SENSOR_QOS)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)

    def at_target() -> bool:
        _command(ros, pub, {"m2_twist": -4.0, "m4_lateral": 0.6})
        if not states:
            return False
        pos = dict(zip(states[-1].name, states[-1].position, strict=True))
        # m2_twist is continuous: it arms to the equivalent of -4 rad nearest where it starts (0).
        return abs(pos["m2_twist"] - (-4.0 + 2 * math.pi)) < 3e-3 and abs(pos["m4_lateral"] - 0.6) < 3e-3
    assert ros.spin_until(at_target, 40.0), ros.log_of(proc)
    assert ros.spin_until(_state_is(diags, "ARMED"), 20.0)
    assert ros.stop(proc) == 0


def test_command_timeout_torque_off(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu, command_timeout_s=2.0, timeout_reaction="torque_off")
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    # Commands stream at 50 Hz from before the arming on (the probe spins while it waits for
    # the answer), so that only the silence below can time out.
    stream = ros.node.create_timer(0.02, lambda: _command(ros, pub, {"m5_dorsal": 0.3}))
    _arm(ros)
    assert ros.spin_until(_state_is(diags, "ARMED"), 30.0), ros.log_of(proc)
    ros.node.destroy_timer(stream)
    # Silence on joint_commands: after the timeout every servo is torque-off...
    assert ros.spin_until(lambda: not any(_torque(emu)), 20.0), ros.log_of(proc)
    assert ros.spin_until(_state_is(diags, "DISARMED"), 20.0)
    # ...and new commands do not bring torque back.
    for _ in range(20):
        _command(ros, pub, {"m5_dorsal": 0.3})
        ros.spin_for(0.05)
    assert ros.spin_until(_more(diags, 2), 20.0)
    assert not any(_torque(emu))
    assert proc.poll() is None


def test_lost_servo_goes_safe_names_the_id_and_recovers(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu, max_consecutive_failures=3)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    _arm(ros)
    assert ros.spin_until(lambda: (_command(ros, pub, {"m1_dorsal": 0.2}), all(_torque(emu)))[1], 30.0), \
        ros.log_of(proc)
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
        return (bus is not None and bus.level == DiagnosticStatus.OK and int(_bus(diags).get("reconnects", 0)) >= 1
                and _bus(diags).get("state") == "DISARMED")
    assert ros.spin_until(recovered, 30.0), ros.log_of(proc)
    assert not any(_torque(emu))
    assert _envelope_ok(emu)
    assert proc.poll() is None


def test_an_absurd_target_leaves_the_other_17_servos_running(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu, arming_speed=5.0)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    targets = {j.name: 0.1 for j in _ROBOT.joints}
    twist_before = emu.goal_position(5)
    _stream(ros, pub, {**targets, "m2_twist": 5e6})
    _arm(ros)
    others = [j for j in _ROBOT.joints if j.name != "m2_twist"]
    assert ros.spin_until(lambda: all(emu.goal_position(j.servo_id) == _ticks(j.name, 0.1) for j in others)
                          and _bus(diags).get("state") == "ARMED", 30.0), ros.log_of(proc)
    assert ros.spin_until(_more(diags, 3), 20.0)
    bus = _bus(diags)
    assert bus["state"] == "ARMED" and bus["reconnects"] == "0"        # never counted as a bus failure
    assert all(_torque(emu))
    assert emu.goal_position(5) == twist_before == emu.present_position(5)   # dropped: holds where it is
    assert ros.spin_until(lambda: "absurd" in ros.log_of(proc), 20.0)
    assert proc.poll() is None


def test_kill_9_of_the_bridge_stops_the_servos_by_the_bus_watchdog(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu, watchdog_s=0.5, arming_speed=0.3)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    _stream(ros, pub, {"m1_dorsal": 1.2})
    _arm(ros)
    start = emu.present_position(1)
    assert ros.spin_until(lambda: abs(emu.present_position(1) - start) > 50, 30.0), ros.log_of(proc)
    proc.kill()                                              # SIGKILL: no exit hook runs
    proc.wait()
    assert ros.spin_until(lambda: all(emu.register(i, ct.BUS_WATCHDOG, 1) == ct.WATCHDOG_TRIPPED
                                      for i in emu.servos), 20.0)
    stopped = emu.present_position(1)
    assert emu.goal_position(1) == stopped                   # the watchdog's goal := present
    assert stopped != _ticks("m1_dorsal", 1.2)               # stopped on the way, not at the target
    emu.settle()
    assert emu.present_position(1) == stopped and emu.servos[1].velocity == 0.0


def test_auto_arm_given_overrides_the_backend_default(ros: Any) -> None:
    proc = ros.start("bridge_node", {"backend": "emulated", "auto_arm": False, "rate_hz": 50.0})
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    _stream(ros, pub, {"m1_dorsal": 0.3})
    assert ros.spin_until(lambda: _bus(diags).get("command_state") == "active", 30.0), ros.log_of(proc)
    assert ros.spin_until(_more(diags, 2), 20.0)
    assert _bus(diags)["state"] == "DISARMED" and _bus(diags)["torque"] == "False"
    _arm(ros)
    assert ros.spin_until(_state_is(diags, "ARMED"), 30.0), ros.log_of(proc)
    assert ros.stop(proc) == 0


def test_a_latency_spike_warns_on_the_bus_and_reports_no_hardware_error(ros: Any, emu: ServoBusEmulator) -> None:
    # Short read timeouts (latency_ms 5) against 50 ms late answers: what a USB latency spike does.
    proc = _start_bridge(ros, emu, latency_ms=5.0, fault_reaction="torque_off", max_consecutive_failures=1000)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    # The bus up first: with 5 ms read timeouts a loaded machine can miss the first pings (the bridge retries).
    assert ros.spin_until(_state_is(diags, "DISARMED"), 60.0), ros.log_of(proc)
    _arm(ros)
    _stream(ros, pub, {"m1_dorsal": 0.1})
    assert ros.spin_until(_state_is(diags, "ARMED"), 60.0), ros.log_of(proc)
    timeouts = int(_bus(diags).get("timeouts", 0))  # a loaded machine can time a read out by itself
    emu.set_delay(0.05)
    assert ros.spin_until(lambda: int(_bus(diags).get("timeouts", 0)) >= timeouts + 5, 60.0), \
        ros.log_of(proc)[-3000:]
    first = len(diags)
    assert ros.spin_until(_more(diags, 6), 60.0)
    emu.set_delay(0.0)
    during = diags[first:]
    buses = [st for arr in during for st in arr.status if st.name == "bridge: bus"]
    assert any(st.level == DiagnosticStatus.WARN for st in buses), [st.message for st in buses]
    joints = [st for arr in during for st in arr.status if st.name != "bridge: bus"]
    assert not any("hardware error" in st.message for st in joints), {st.message for st in joints}
    assert all(_bus_state(arr) in ("ARMED", "ARMING") for arr in during)  # never FAULT, never limp
    # The spike over: the bus reports OK again.
    assert ros.spin_until(lambda: _status(diags, "bridge: bus").level == DiagnosticStatus.OK, 60.0)


def _bus_state(arr: DiagnosticArray) -> str | None:
    for st in arr.status:
        if st.name == "bridge: bus":
            return next((kv.value for kv in st.values if kv.key == "state"), None)
    return None


def test_missing_port_faults_and_its_error_is_throttled(ros: Any, tmp_path: Path) -> None:
    port = str(tmp_path / "no-such-port")
    proc = ros.start("bridge_node", {"backend": "dynamixel", "port": port, "baud_rate": 4000000,
                                     "rate_hz": 50.0, "command_timeout_s": 30.0})
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    assert ros.spin_until(lambda: "]: bus not ready" in ros.log_of(proc), 30.0), ros.log_of(proc)
    assert ros.spin_until(lambda: _status(diags, "bridge: bus") is not None, 30.0), ros.log_of(proc)
    assert _status(diags, "bridge: bus").level == DiagnosticStatus.ERROR
    # 14 more reports are 7 s of the node's own clock: more than three 2 s retries of the port.
    assert ros.spin_until(_more(diags, 14), 60.0), ros.log_of(proc)
    assert proc.poll() is None
    errors = [line for line in ros.log_of(proc).splitlines() if line.startswith("[ERROR]") and "bus not ready" in line]
    assert len(errors) == 1, ros.log_of(proc)


def test_safety_parameters_are_refused_while_armed_and_the_deadman_stays_on(ros: Any, emu: ServoBusEmulator) -> None:
    from rcl_interfaces.msg import Parameter as ParameterMsg
    from rcl_interfaces.msg import ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    proc = _start_bridge(ros, emu, arming_speed=5.0)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)

    def set_param(name: str, value: Any) -> Any:
        if isinstance(value, str):
            pv = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=value)
        else:
            pv = ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=float(value))
        return _call(ros, SetParameters, "/bridge_node/set_parameters",
                     SetParameters.Request(parameters=[ParameterMsg(name=name, value=pv)])).results[0]

    assert ros.spin_until(_state_is(diags, "DISARMED"), 30.0), ros.log_of(proc)
    refused = set_param("command_timeout_s", 0.0)     # the deadman is never switched off at run time
    assert not refused.successful and "command_timeout_s" in refused.reason
    assert set_param("command_timeout_s", 20.0).successful   # disarmed: a bounded change is taken
    _stream(ros, pub, {"m1_dorsal": 0.0})
    _arm(ros)
    assert ros.spin_until(_state_is(diags, "ARMED"), 30.0), ros.log_of(proc)
    for name, value in (("command_timeout_s", 0.0), ("command_timeout_s", 10.0), ("arming_speed", 10.0),
                        ("exit_reaction", "hold"), ("timeout_reaction", "torque_off"), ("bus_loss_timeout_s", 5.0)):
        result = set_param(name, value)
        assert not result.successful and name in result.reason and "ARMED" in result.reason, (name, result)
    assert _bus(diags)["state"] == "ARMED" and proc.poll() is None
    # FAULT with the shipped fault_reaction hold: the servos stay stiff, so the settings stay read-only.
    emu.raise_hardware_error(9, HW_OVERLOAD)
    assert ros.spin_until(_state_is(diags, "FAULT"), 30.0), ros.log_of(proc)
    assert sum(_torque(emu)) == len(_torque(emu)) - 1   # the overloaded servo shut itself down, 17 stiff
    for name, value in (("exit_reaction", "hold"), ("fault_reaction", "torque_off"), ("bus_loss_timeout_s", 5.0),
                        ("health_rate_hz", 0.1)):
        result = set_param(name, value)
        assert not result.successful and name in result.reason and "FAULT" in result.reason, (name, result)
    # Torque off (still FAULT): the settings may change again.
    assert _call(ros, Trigger, "/bridge_node/disarm", Trigger.Request()).success
    assert not any(_torque(emu))
    assert set_param("exit_reaction", "hold").successful


def test_two_joint_commands_publishers_refuse_arming_one_arms(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu, arming_speed=5.0)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    # The second publisher is announced before the first on the same reliable discovery channel, so
    # once the bridge takes the first one's commands it knows both.
    second = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    assert ros.spin_until(_state_is(diags, "DISARMED"), 30.0), ros.log_of(proc)
    # Both writers matched by the bridge's reader: its participant has discovered both.
    assert ros.spin_until(lambda: second.get_subscription_count() >= 1 and pub.get_subscription_count() >= 1,
                          30.0), ros.log_of(proc)
    _stream(ros, pub, {"m1_dorsal": 0.0})
    result = _call(ros, Trigger, "/bridge_node/arm", Trigger.Request())
    assert not result.success
    assert "/joint_commands" in result.message and ros.node.get_name() in result.message, result.message
    assert not any(_torque(emu)) and _bus(diags)["state"] == "DISARMED"
    ros.node.destroy_publisher(second)
    assert ros.spin_until(lambda: ros.node.count_publishers("/joint_commands") == 1), ros.log_of(proc)
    _stream(ros, pub, {"m1_dorsal": 0.0})
    # The bridge's graph view catches up by discovery: arm once it sees one publisher.
    assert ros.spin_until(lambda: _call(ros, Trigger, "/bridge_node/arm", Trigger.Request()).success, 30.0), \
        ros.log_of(proc)
    assert ros.spin_until(_state_is(diags, "ARMED"), 30.0), ros.log_of(proc)


_TWIN_WARNING = "drives real servos with the twin's calibration"


def _start_up_log(ros: Any, proc: Any) -> str:
    """The bridge's log once the bus is ready (the calibration lines come before it)."""
    assert ros.spin_until(lambda: "bus ready" in ros.log_of(proc), 60.0), ros.log_of(proc)
    return str(ros.log_of(proc))


def test_real_backend_on_the_twins_calibration_warns_how_to_choose_the_robots(
        ros: Any, emu: ServoBusEmulator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SNAKE_CALIBRATION_TARGET", raising=False)
    log = _start_up_log(ros, _start_bridge(ros, emu))
    info = [line for line in log.splitlines() if "calibration 'twin' of tsnake:" in line]
    assert len(info) == 1 and "[INFO]" in info[0], log
    warn = [line for line in log.splitlines() if _TWIN_WARNING in line]
    assert len(warn) == 1 and "[WARN]" in warn[0], log
    assert "SNAKE_CALIBRATION_TARGET" in warn[0] and "calibration_target" in warn[0], warn[0]


def test_real_backend_on_a_robot_target_names_it_without_warning(
        ros: Any, emu: ServoBusEmulator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SNAKE_CALIBRATION_TARGET", "lab_tsnake")
    log = _start_up_log(ros, _start_bridge(ros, emu))
    assert "calibration 'lab_tsnake' of tsnake:" in log, log
    assert _TWIN_WARNING not in log, log


def test_emulated_backend_on_the_twins_calibration_names_it_without_warning(
        ros: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SNAKE_CALIBRATION_TARGET", raising=False)
    log = _start_up_log(ros, ros.start("bridge_node", {"backend": "emulated", "rate_hz": 50.0}))
    assert "calibration 'twin' of tsnake:" in log, log
    assert _TWIN_WARNING not in log, log


def test_a_second_commander_while_armed_holds_the_last_goals_until_one_is_left(ros: Any,
                                                                                emu: ServoBusEmulator) -> None:
    proc = _start_bridge(ros, emu, arming_speed=5.0)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    assert ros.spin_until(_state_is(diags, "DISARMED"), 30.0), ros.log_of(proc)
    assert ros.spin_until(lambda: pub.get_subscription_count() >= 1, 30.0), ros.log_of(proc)
    targets = _stream(ros, pub, {"m5_dorsal": 0.3})
    _arm(ros)
    assert ros.spin_until(lambda: _bus(diags).get("state") == "ARMED"
                          and emu.goal_position(13) == _ticks("m5_dorsal", 0.3), 30.0), ros.log_of(proc)
    # A second commander appears and swings the joint the other way, interleaved with the first.
    second = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    swinging = ros.node.create_timer(0.02, lambda: _command(ros, second, {"m5_dorsal": -0.3}))
    # The bridge's reader matched both writers: it holds (HOLDING, torque on) and names the publishers.
    assert ros.spin_until(_state_is(diags, "HOLDING"), 30.0), ros.log_of(proc)
    held = emu.goal_position(13)
    assert ros.spin_until(_more(diags, 3), 30.0)          # 1 s of both commanders publishing
    assert _bus(diags)["state"] == "HOLDING" and all(_torque(emu))
    assert emu.goal_position(13) == held
    bus = _status(diags, "bridge: bus")
    assert "2 publishers on /joint_commands" in bus.message and ros.node.get_name() in bus.message, bus.message
    assert "joint_commands ignored" in ros.log_of(proc)
    # One commander left: the next command resumes (a new ramp from the held goal).
    ros.node.destroy_timer(swinging)
    ros.node.destroy_publisher(second)
    targets["m5_dorsal"] = -0.2
    assert ros.spin_until(lambda: _bus(diags).get("state") == "ARMED"
                          and emu.goal_position(13) == _ticks("m5_dorsal", -0.2), 30.0), ros.log_of(proc)
    assert proc.poll() is None


def test_snake_servo_on_the_armed_bridges_port_is_refused_and_torque_stays_on(ros: Any,
                                                                              emu: ServoBusEmulator) -> None:
    import os
    import subprocess

    proc = _start_bridge(ros, emu, arming_speed=5.0)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    assert ros.spin_until(_state_is(diags, "DISARMED"), 30.0), ros.log_of(proc)
    _stream(ros, pub, {"m1_dorsal": 0.1})
    _arm(ros)
    assert ros.spin_until(_state_is(diags, "ARMED"), 30.0), ros.log_of(proc)
    servo = subprocess.Popen(snake_command("servo", "--robot", "tsnake", "--port", emu.port),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert ros.spin_until(lambda: servo.poll() is not None, 120.0)   # the bridge keeps cycling meanwhile
        lines = (servo.stderr.read() if servo.stderr else "").strip().splitlines()
    finally:
        if servo.poll() is None:
            servo.kill()
        servo.wait()
    assert servo.returncode != 0
    assert len(lines) == 1 and emu.port in lines[0] and "in use by another program" in lines[0], lines
    assert ros.spin_until(_more(diags, 2), 20.0)   # reports made after the refusal
    assert _bus(diags)["state"] == "ARMED" and all(_torque(emu)) and proc.poll() is None
    assert emu.goal_position(1) == _ticks("m1_dorsal", 0.1)


def test_a_second_bridge_of_the_same_name_exits_and_the_first_keeps_serving(ros: Any, emu: ServoBusEmulator) -> None:
    first = _start_bridge(ros, emu)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    assert ros.spin_until(_state_is(diags, "DISARMED"), 60.0), ros.log_of(first)
    second = ros.start("bridge_node", {"backend": "emulated"})
    deadline = time.monotonic() + 120.0
    while second.poll() is None and "bus ready" not in ros.log_of(second):   # refused, or it started
        assert time.monotonic() < deadline, ros.log_of(second)
        ros.spin_for(0.1)
    if second.poll() is None:
        # Its start-up look ended before discovery showed the first (it looks for at most
        # runtime.DUPLICATE_WAIT_S, and a loaded host can take longer): the documented miss,
        # whose backstop, arming refused while two nodes share the name, is the next test's.
        ros.stop(second, timeout=60.0)
    else:
        assert second.returncode == 2, ros.log_of(second)
        lines = [line for line in ros.log_of(second).splitlines() if line.strip()]
        assert len(lines) == 1 and "/bridge_node already runs" in lines[0], lines
    _arm(ros)   # the first still answers, with the bus
    assert ros.spin_until(lambda: all(_torque(emu)), 30.0)
    assert first.poll() is None


def test_arming_is_refused_while_a_node_of_the_bridges_name_appears(ros: Any, emu: ServoBusEmulator) -> None:
    import rclpy

    proc = _start_bridge(ros, emu)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    assert ros.spin_until(_state_is(diags, "DISARMED"), 60.0), ros.log_of(proc)
    twin = rclpy.create_node("bridge_node", context=ros.context)   # a duplicate that appeared later
    try:
        def refused() -> bool:
            """Arm; until the bridge has discovered the duplicate it may still arm: disarm and ask again."""
            result = _call(ros, Trigger, "/bridge_node/arm", Trigger.Request())
            if result.success:
                assert _call(ros, Trigger, "/bridge_node/disarm", Trigger.Request()).success
                return False
            return "2 nodes named /bridge_node" in result.message
        assert ros.spin_until(refused, 60.0)
        emu.settle()
        assert not any(_torque(emu))
    finally:
        twin.destroy_node()
    assert ros.spin_until(lambda: _call(ros, Trigger, "/bridge_node/arm", Trigger.Request()).success, 60.0)


def test_a_foreign_write_leaves_its_servo_limp_and_stays_fault_through_unplug_replug_until_reboot(
        ros: Any, emu: ServoBusEmulator) -> None:
    """The shipped fault_reaction (hold) for the rest; auto_arm on, to show the reconnect does not re-arm."""
    proc = _start_bridge(ros, emu, auto_arm=True)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
    _stream(ros, pub, {"m1_dorsal": 0.1})

    def status() -> dict[str, Any]:
        return dict(json.loads(_call(ros, Trigger, "/bridge_node/status", Trigger.Request()).message))

    assert ros.spin_until(lambda: status()["state"] == "ARMED", 60.0), ros.log_of(proc)
    # Another program changes m3_lateral's (ID 9) Bus Watchdog while it holds torque.
    assert emu.write_register(9, ct.BUS_WATCHDOG, 1, 7) == 0
    assert ros.spin_until(lambda: status()["state"] == "FAULT", 30.0), ros.log_of(proc)
    st = status()
    assert "not written by the bridge" in st["reason"] and st["foreign"] == ["m3_lateral"], st
    emu.settle()
    assert not emu.torque_enabled(9)                                      # limp, whatever fault_reaction says
    assert all(emu.torque_enabled(i) for i in emu.servos if i != 9)       # hold: the rest keep their pose
    # The bus goes away and comes back: still FAULT, nothing re-armed, the servo named.
    emu.unplug()
    assert ros.spin_until(lambda: not status()["connected"], 30.0), ros.log_of(proc)
    emu.replug()
    assert ros.spin_until(lambda: status()["connected"], 30.0), ros.log_of(proc)
    st = status()
    assert st["state"] == "FAULT" and "reboot" in st["reason"] and st["needs_reboot"] == {"m3_lateral": 9}, st
    polls = int(_bus(diags).get("health_polls", 0))
    assert ros.spin_until(lambda: int(_bus(diags).get("health_polls", 0)) >= polls + 2, 30.0)   # two more polls
    st = status()
    assert st["state"] == "FAULT" and not any(_torque(emu)), st
    result = _call(ros, Trigger, "/bridge_node/arm", Trigger.Request())
    assert not result.success and "reboot" in result.message
    # ~/reboot of that servo: DISARMED, and the bridge's Bus Watchdog is back on it.
    result = _call(ros, Trigger, "/bridge_node/reboot", Trigger.Request())
    assert result.success and "m3_lateral" in result.message, result.message
    assert ros.spin_until(lambda: status()["state"] == "DISARMED", 30.0), ros.log_of(proc)
    assert ros.spin_until(lambda: emu.register(9, ct.BUS_WATCHDOG, 1) == 50, 30.0)
    assert proc.poll() is None
