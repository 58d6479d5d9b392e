"""The bridge's supply voltage (``battery_state``) and its servo registers, over DDS.

A real bridge process (``backend: dynamixel``, dynamixel-sdk) on our emulator's pty, as in
``test_bridge_node.py``; the emulator runs in this test process, so the test sets each
servo's input voltage and reads the registers the bridge wrote. Waits are on conditions.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import BatteryState
from std_srvs.srv import Trigger

from snake_core.robot import load_robot
from snake_hardware.dynamixel import control_table as ct
from snake_hardware.emulator import ServoBusEmulator
from snake_ros.qos import SENSOR_QOS, STATUS_QOS

pytestmark = pytest.mark.graph

_ROBOT = load_robot("tsnake")
_BOUND_S = 60.0


def _start_bridge(ros: Any, port: str, **extra: Any) -> Any:
    params = {"backend": "dynamixel", "port": port, "baud_rate": 4000000, "rate_hz": 50.0,
              "latency_ms": 30.0, "watchdog_s": 1.0, "health_rate_hz": 5.0, "command_timeout_s": 30.0}
    params.update(extra)
    return ros.start("bridge_node", params)


def _joint_values(diags: list[DiagnosticArray], name: str) -> dict[str, str]:
    for arr in reversed(diags):
        for st in arr.status:
            if st.name == f"bridge: {name}" and st.values:
                return {kv.key: kv.value for kv in st.values}
    return {}


def test_battery_state_is_the_median_of_the_servos_and_each_is_in_its_diagnostics(
        ros: Any, emu: ServoBusEmulator) -> None:
    volts = {j.servo_id: 11.0 + 0.1 * (k % 7) for k, j in enumerate(_ROBOT.joints)}
    volts[1] = 6.0          # one servo far off: the median does not follow it
    for sid, v in volts.items():
        emu.set_voltage(v, servo_id=sid)
    want = statistics.median(round(v, 1) for v in volts.values())   # 0.1 V register units
    battery = ros.collect(BatteryState, "battery_state", SENSOR_QOS)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    _start_bridge(ros, emu.port)
    assert ros.spin_until(lambda: any(abs(m.voltage - want) < 1e-4 for m in battery), _BOUND_S), \
        [m.voltage for m in battery[-5:]]
    msg = next(m for m in battery if abs(m.voltage - want) < 1e-4)
    assert msg.present
    assert msg.power_supply_technology == BatteryState.POWER_SUPPLY_TECHNOLOGY_UNKNOWN
    assert math.isnan(msg.current) and math.isnan(msg.percentage)
    assert ros.spin_until(lambda: _joint_values(diags, "m1_dorsal").get("voltage_v") == "6.0", _BOUND_S)
    assert _joint_values(diags, "m3_dorsal")["voltage_v"] == f"{volts[7]:.1f}"


def test_battery_state_is_nan_when_no_servo_answers(ros: Any, tmp_path: Path) -> None:
    battery = ros.collect(BatteryState, "battery_state", SENSOR_QOS)
    _start_bridge(ros, str(tmp_path / "no_such_port"))
    assert ros.spin_until(lambda: len(battery) >= 2, _BOUND_S)
    assert all(math.isnan(m.voltage) and m.present for m in battery)


def test_the_bridge_writes_the_yamls_registers_and_refuses_to_arm_on_one_that_did_not_take(
        ros: Any, emu: ServoBusEmulator, tmp_path: Path) -> None:
    raw = yaml.safe_load(Path(_ROBOT.source or "").read_text())
    raw["joint_types"]["dorsal"]["registers"]["position_p_gain"] = 1500
    robot_file = tmp_path / "tsnake.yaml"
    robot_file.write_text(yaml.safe_dump(raw, sort_keys=False))
    emu.stick_register(10, ct.POSITION_P_GAIN)     # m4_dorsal keeps the factory 800
    _start_bridge(ros, emu.port, robot=str(robot_file))

    def status() -> dict[str, Any]:
        answer = ros.call(Trigger, "/bridge_node/status", Trigger.Request())
        assert answer is not None
        return json.loads(answer.response.message)

    assert ros.spin_until(lambda: status()["state"] == "DISARMED", _BOUND_S)
    dorsal = [j.servo_id for j in _ROBOT.joints if j.type == "dorsal"]
    assert [emu.register(sid, ct.POSITION_P_GAIN, 2) for sid in dorsal] == [1500, 1500, 1500, 800, 1500, 1500]
    assert status()["registers_not_taken"] == {"m4_dorsal": "ID 10: Position P Gain 800 (written 1500)"}
    answer = ros.call(Trigger, "/bridge_node/arm", Trigger.Request())
    assert answer is not None and not answer.response.success
    assert "m4_dorsal (ID 10: Position P Gain 800 (written 1500))" in answer.response.message
    assert not any(emu.torque_enabled(j.servo_id) for j in _ROBOT.joints)
    emu.stick_register(10, ct.POSITION_P_GAIN, stuck=False)
    answer = ros.call(Trigger, "/bridge_node/reboot", Trigger.Request())
    assert answer is not None and answer.response.success, answer.response.message

    def armed() -> bool:
        reply = ros.call(Trigger, "/bridge_node/arm", Trigger.Request())
        return reply is not None and (reply.response.success or reply.response.message.startswith("already armed"))

    assert ros.spin_until(armed, _BOUND_S)
    assert emu.register(10, ct.POSITION_P_GAIN, 2) == 1500
