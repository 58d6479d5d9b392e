"""The supervisor with the shipped bridge settings, the Dynamixel backend, and our emulator over a real pty.

What the bridge did not command (a register written by another program on the bus) and
arming after a restart with a twist joint wound many turns, cycle by cycle. The emulator
runs on simulated time (the test advances it one period per cycle), so nothing here
depends on the machine's speed; polls are counted, never timed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from snake_core.robot import RobotModel, load_robot
from snake_hardware.dynamixel import control_table as ct
from snake_hardware.dynamixel.backend import DynamixelBackend, DynamixelSettings
from snake_hardware.dynamixel.bus_plan import health_plan, sync_read_bytes, sync_write_bytes
from snake_hardware.emulator import ServoBusEmulator
from snake_hardware.supervisor import BridgeState, Supervisor, SupervisorConfig

_ROOT = Path(__file__).resolve().parents[3]
_LATENCY_MS = 30.0   # generous read timeouts: the emulator thread shares this process (bus setting, not safety)
_RETRIES = 5
S = BridgeState


def _shipped() -> dict[str, Any]:
    """The bridge's parameters as config/bridge.yaml ships them."""
    doc = yaml.safe_load((_ROOT / "config" / "bridge.yaml").read_text())
    return dict(doc["/**/bridge_node"]["ros__parameters"])


def _config() -> SupervisorConfig:
    p = _shipped()
    return SupervisorConfig(
        period_s=1.0 / p["rate_hz"], arming_speed=p["arming_speed"], auto_arm=False,
        command_timeout_s=p["command_timeout_s"], timeout_reaction=p["timeout_reaction"],
        fault_reaction=p["fault_reaction"], max_consecutive_failures=p["max_consecutive_failures"],
        health_period_s=1.0 / p["health_rate_hz"])


class Bench:
    """Supervisor + backend on the emulator; one :meth:`cycle` = one bridge cycle and one period of physics."""

    def __init__(self, robot: RobotModel, emu: ServoBusEmulator) -> None:
        p = _shipped()
        self.emu = emu
        self.config = _config()
        self.backend = DynamixelBackend(robot, DynamixelSettings(
            port=emu.port, latency_ms=_LATENCY_MS, retries=_RETRIES, watchdog_s=p["watchdog_s"],
            return_delay_us=p["return_delay_us"]))
        self.sup = Supervisor(self.backend, robot.joints, self.config)
        self.now = 0.0
        self.command = {j.name: 0.0 for j in robot.joints}
        self.reading: Any = None

    def cycle(self) -> None:
        self.now += self.config.period_s
        self.sup.on_command(self.command, self.now)
        self.reading = self.sup.step(self.now) or self.reading
        self.emu.advance(self.config.period_s)

    def armed(self, bound: int = 3000) -> None:
        self.cycle()
        assert self.sup.state is S.DISARMED, self.sup.reason
        out = self.sup.arm()
        assert out.accepted, out.message
        for _ in range(bound):
            if self.sup.state is not S.ARMING:
                break
            self.cycle()
        assert self.sup.state is S.ARMED, self.sup.reason


@pytest.fixture
def robot() -> RobotModel:
    return load_robot("tsnake")


@pytest.fixture
def emu(robot: RobotModel) -> Iterator[ServoBusEmulator]:
    with ServoBusEmulator([j.servo_id for j in robot.joints], sim_time=True) as e:
        yield e


@pytest.mark.parametrize(("addr", "size", "value", "named"), [
    (ct.TORQUE_ENABLE, 1, 0, "Torque Enable 0"),
    (ct.BUS_WATCHDOG, 1, 0, "Bus Watchdog 0"),
], ids=["torque-off", "watchdog-off"])
def test_a_register_written_behind_the_bridges_back_is_a_fault_within_two_polls(
        robot: RobotModel, emu: ServoBusEmulator, addr: int, size: int, value: int, named: str) -> None:
    bench = Bench(robot, emu)
    bench.armed()
    polls = bench.sup.health_polls
    assert emu.write_register(9, addr, size, value) == 0      # another program on the bus: m3_lateral, ID 9
    while bench.sup.state is S.ARMED and bench.sup.health_polls <= polls + 2:
        bench.cycle()
    assert bench.sup.state is S.FAULT, bench.sup.reason
    assert bench.sup.health_polls - polls <= 2
    assert "m3_lateral (ID 9)" in bench.sup.reason and named in bench.sup.reason, bench.sup.reason
    # The shipped fault reaction (hold): the other servos keep their torque and their goals.
    assert _shipped()["fault_reaction"] == "hold"
    assert all(emu.torque_enabled(j.servo_id) for j in robot.joints if j.servo_id != 9)
    out = bench.sup.arm()
    assert not out.accepted
    # ~/reboot of that servo restores the bridge's settings; then it arms again.
    assert bench.sup.reboot().accepted and bench.sup.state is S.DISARMED
    for _ in range(400):
        bench.cycle()
        if not bench.backend.rebooting:
            break
    polls = bench.sup.health_polls
    for _ in range(400):                       # a poll begun after it answered sees it back (arming waits)
        if bench.sup.health_polls > polls + 1:
            break
        bench.cycle()
    assert emu.register(9, ct.BUS_WATCHDOG, 1) == math.ceil(_shipped()["watchdog_s"] / ct.WATCHDOG_UNIT_S - 1e-9)
    bench.armed()


def test_a_goal_or_mode_the_bridge_did_not_write_is_reported_by_the_backend(robot: RobotModel,
                                                                         emu: ServoBusEmulator) -> None:
    b = DynamixelBackend(robot, DynamixelSettings(port=emu.port, latency_ms=_LATENCY_MS, retries=_RETRIES))
    b.open()
    try:
        b.read()
        assert all(h.foreign == () for h in b.health())
        # Limp: Operating Mode of a twist joint (ID 5) changed to position mode.
        assert emu.write_register(5, ct.OPERATING_MODE, 1, ct.MODE_POSITION) == 0
        h = {x.name: x for x in b.health()}
        assert h["m2_twist"].foreign == ("Operating Mode 3 (written 4)",)
        assert all(x.foreign == () for n, x in h.items() if n != "m2_twist")
        # Torque on, goals written; a goal outside every goal written since the last poll is foreign,
        # one the servo kept from before (a refused or lost write) is not.
        b.set_torque(True, ["m1_dorsal", "m2_dorsal"])
        b.write_goals({"m1_dorsal": 0.1, "m2_dorsal": 0.1})
        b.write_goals({"m1_dorsal": 0.2, "m2_dorsal": 0.2})
        emu.advance(0.0)                       # the servos have taken the sync writes (no answer to wait for)
        assert emu.write_register(1, ct.GOAL_POSITION, 4, 2048 + 700) == 0
        assert emu.write_register(4, ct.GOAL_POSITION, 4, 2048 + round(0.1 * 4096 / (2 * math.pi))) == 0
        h = {x.name: x for x in b.health()}
        assert h["m1_dorsal"].foreign == (f"Goal Position 2748 (written {2048 + round(0.2 * 4096 / (2 * math.pi))})",)
        assert h["m2_dorsal"].foreign == () and h["m2_dorsal"].goal_refused
    finally:
        b.close()


def test_arming_after_a_restart_with_a_twist_joint_40_turns_away_moves_it_less_than_half_a_turn(
        robot: RobotModel) -> None:
    ids = [j.servo_id for j in robot.joints]
    wound = 2048 + 40 * 4096 + 300     # ticks: m2_twist (ID 5) left 40 turns (and 0.46 rad) from 0
    with ServoBusEmulator(ids, positions={5: wound}, sim_time=True) as e:
        bench = Bench(robot, e)
        phys0 = e.physical_position(5)
        bench.cycle()                          # opens the bus
        bench.cycle()
        reported = bench.reading.position[4]
        assert reported == pytest.approx((wound - 2048) * 2 * math.pi / 4096, abs=1e-9)
        bench.armed()                          # the gait commands 0 rad on every joint
        worst = 0.0
        for _ in range(100):                   # armed: the servo stays at the command's nearest equivalent
            bench.cycle()
            worst = max(worst, abs(e.physical_position(5) - phys0))
        assert worst < 2048                    # less than half a turn (it moved 300 ticks, 0.46 rad)
        assert abs(e.physical_position(5) - (phys0 - 300)) < 5
        # joint_states stays continuous: 40 turns, as the servo is.
        assert bench.reading.position[4] == pytest.approx(40 * 2 * math.pi, abs=0.01)
        bench.sup.shutdown("torque_off")


@pytest.mark.parametrize("baud", [1_000_000, 4_000_000])
def test_no_health_step_overruns_a_cycle_with_the_shipped_rate(robot: RobotModel, baud: int) -> None:
    """Shipped rate (100 Hz) and latency timer (1 ms): every cycle's bytes fit its period at ``baud``."""
    p = _shipped()
    period, n = 1.0 / p["rate_hz"], len(robot.joints)
    plan = health_plan(n, period, baud, p["latency_ms"])
    assert sum(plan.mode_chunks) == n and sum(plan.status_chunks) == n   # a round covers every servo
    cycle = sync_write_bytes(n, 4) + sync_read_bytes(n, 10)
    for step in plan.step_bytes():
        wire_s = (cycle + step) * 10 / baud                # 10 bits per byte on the wire
        assert wire_s + 2 * p["latency_ms"] / 1000 <= 0.9 * period
    # A round still fits its health period, so a change is seen within two polls of 0.5 s.
    assert plan.steps * period <= 1.0 / p["health_rate_hz"]
    # The single 83-byte read of every servo would not fit at 1 Mbps.
    whole = (cycle + sync_read_bytes(n, ct.HEALTH_BLOCK_LEN)) * 10 / baud
    assert (whole > period) is (baud == 1_000_000)


def test_the_planned_bytes_are_the_bytes_on_the_wire(robot: RobotModel, emu: ServoBusEmulator) -> None:
    b = DynamixelBackend(robot, DynamixelSettings(port=emu.port, latency_ms=_LATENCY_MS, retries=_RETRIES,
                                                  baud_rate=1_000_000))
    b.open()
    try:
        b.read()
        plan = health_plan(len(robot.joints), 0.01, 1_000_000, _LATENCY_MS)
        c = b.counters
        measured = []
        before = c.bytes_tx + c.bytes_rx
        for _ in b.health_round(0.01):
            measured.append(c.bytes_tx + c.bytes_rx - before)
            before = c.bytes_tx + c.bytes_rx
        assert c.retries == 0
        assert measured == plan.step_bytes()
    finally:
        b.close()
