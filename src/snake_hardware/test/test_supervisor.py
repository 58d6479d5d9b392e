"""The bridge's safety state machine against a fake backend: every transition, table-style.

The fake backend records every torque and goal write, so each test checks what the
actuators would have received, not only the state name.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace

import numpy as np
import pytest

from snake_core.gait import make_gait
from snake_core.robot import load_robot
from snake_hardware.backend import (
    Backend,
    BusCounters,
    CommError,
    DeviceLostError,
    JointHealth,
    JointReading,
    NotReadyError,
    StartupError,
)
from snake_hardware.command import CLOSING_SPEED, JointTargetFilter
from snake_hardware.dynamixel.hardware_errors import HW_OVERLOAD
from snake_hardware.supervisor import BridgeState, Supervisor, SupervisorConfig

_ROBOT = load_robot("tsnake")
_NAMES = _ROBOT.joint_names
_T = 0.01  # s, cycle period of these tests
S = BridgeState


class FakeBackend(Backend):
    """Joints that reach each goal at once, as an ideal servo (or go where a test puts them); writes recorded."""

    def __init__(self, positions: Mapping[str, float] | None = None) -> None:
        self.position = {n: 0.0 for n in _NAMES}
        self.position.update(positions or {})
        self.torque = dict.fromkeys(_NAMES, False)
        self.writes: list[dict[str, float]] = []
        self.torque_log: list[bool] = []
        self.errors: dict[str, int] = {}
        self.opened = 0
        self.fresh = False
        self.fail_open = False
        self.fail_read = False
        self.lose_on_read = False
        self.unconvertible: set[str] = set()
        self.rebooted: list[str] = []
        self.foreign: dict[str, tuple[str, ...]] = {}   # settings "another program" changed, per joint
        self.follow = True                              # joints with torque on go to their goals
        self.foreign_goal: dict[str, str] = {}          # Goal Position "another program" wrote, per joint
        self.goal_reads: list[list[str]] = []           # joints whose Goal Position was read back
        self.velocity: dict[str, float] = {}            # Present Velocity, rad/s (0 when not given)
        self._counters = BusCounters()

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(_NAMES)

    def open(self) -> None:
        if self.fail_open:
            raise StartupError("1 of 18 servos do not answer: IDs 5 (m2_twist)")
        self.opened += 1
        self.fresh = False
        self.torque = dict.fromkeys(_NAMES, False)

    def close(self) -> None:
        self.fresh = False

    def reconnect(self) -> None:
        self.open()
        self._counters.reconnects += 1

    def read(self) -> JointReading:
        if self.lose_on_read:
            raise DeviceLostError("/dev/ttyUSB0 vanished")
        if self.fail_read:
            raise CommError("sync read of present state failed after 3 attempts")
        self.fresh = True
        pos = np.array([self.position[n] for n in _NAMES])
        zeros = np.zeros(len(_NAMES))
        vel = np.array([self.velocity.get(n, 0.0) for n in _NAMES])
        return JointReading(tuple(_NAMES), pos, vel, zeros, 0.0)

    def write_goals(self, goals: Mapping[str, float]) -> None:
        if not self.fresh:
            raise NotReadyError("read first")
        bad = self.unconvertible & goals.keys()
        if bad:  # as a tick conversion that overflows: the whole call fails
            raise OverflowError(f"int too big to convert ({sorted(bad)[0]})")
        self.writes.append(dict(goals))
        if self.follow:
            self.position.update({n: g for n, g in goals.items() if self.torque.get(n)})

    def set_torque(self, enabled: bool, names: Sequence[str] | None = None) -> None:
        if enabled and not self.fresh:
            raise NotReadyError("read first")
        for n in names or _NAMES:
            self.torque[n] = enabled
        self.torque_log.append(enabled)

    def health(self) -> list[JointHealth]:
        return [JointHealth(n, self.errors.get(n, 0), 40.0, 12.0, self.torque[n], foreign=self.foreign.get(n, ()))
                for n in _NAMES]

    def reboot(self, names: Sequence[str]) -> None:
        for n in names:
            self.errors.pop(n, None)
            self.foreign.pop(n, None)
            self.torque[n] = False
        self.rebooted += list(names)

    @property
    def counters(self) -> BusCounters:
        return self._counters

    def describe_hardware_error(self, bits: int) -> str:
        return f"fake error {bits:#x}"

    def foreign_goals(self, names: Sequence[str]) -> dict[str, str]:
        self.goal_reads.append(list(names))
        return {n: self.foreign_goal[n] for n in names if n in self.foreign_goal}


def _config(**kw: object) -> SupervisorConfig:
    base = SupervisorConfig(period_s=_T, arming_speed=0.3, command_timeout_s=0.5, health_period_s=0.05)
    return replace(base, **kw)  # type: ignore[arg-type]


class Rig:
    """A supervisor on a fake backend with a test clock."""

    def __init__(self, positions: Mapping[str, float] | None = None, **config: object) -> None:
        self.backend = FakeBackend(positions)
        self.sup = Supervisor(self.backend, _ROBOT.joints, _config(**config), clock=lambda: self.now)
        self.now = 0.0

    def step(self, n: int = 1) -> None:
        for _ in range(n):
            self.now += _T
            self.sup.step(self.now)

    def command(self, targets: Mapping[str, float]) -> None:
        self.sup.on_command(targets, self.now)

    @property
    def any_torque(self) -> bool:
        return any(self.backend.torque.values())

    @property
    def all_torque(self) -> bool:
        return all(self.backend.torque.values())


def _disarmed(rig: Rig) -> None:
    rig.step()
    assert rig.sup.state is S.DISARMED and rig.sup.connected


def _arming(rig: Rig) -> None:
    _disarmed(rig)
    assert rig.sup.arm().accepted
    assert rig.sup.state is S.ARMING


def _armed(rig: Rig) -> None:
    _arming(rig)
    rig.command({"m1_dorsal": 0.0})
    rig.step()
    assert rig.sup.state is S.ARMED


def _holding(rig: Rig) -> None:
    _armed(rig)
    rig.step(60)  # 0.6 s > command_timeout_s without a command
    assert rig.sup.state is S.HOLDING


def _estopped(rig: Rig) -> None:
    _armed(rig)
    assert rig.sup.emergency_stop().accepted
    assert rig.sup.state is S.ESTOPPED


def _fault(rig: Rig) -> None:
    _armed(rig)
    rig.backend.errors["m3_lateral"] = HW_OVERLOAD
    rig.step(10)
    assert rig.sup.state is S.FAULT


_SETUPS: dict[S, Callable[[Rig], None]] = {
    S.DISARMED: _disarmed, S.ARMING: _arming, S.ARMED: _armed, S.HOLDING: _holding,
    S.ESTOPPED: _estopped, S.FAULT: _fault,
}


def _do(rig: Rig, event: str) -> bool | None:
    sup = rig.sup
    if event == "arm":
        return sup.arm().accepted
    if event == "disarm":
        return sup.disarm().accepted
    if event == "estop":
        return sup.emergency_stop().accepted
    if event == "reboot":
        return sup.reboot().accepted
    if event == "clear_estop":
        return sup.clear_estop().accepted
    if event == "command":
        rig.command({n: 0.0 for n in _NAMES})
        rig.step()
        return None
    if event == "timeout":
        rig.step(60)
        return None
    if event == "bus_lost":
        rig.backend.lose_on_read = True
        rig.step()
        return None
    raise AssertionError(event)


# (start, event) -> (accepted or None for events without an answer, end state, torque on)
_TABLE = [
    (S.DISARMED, "arm", True, S.ARMING, True),
    (S.DISARMED, "disarm", True, S.DISARMED, False),
    (S.DISARMED, "estop", True, S.ESTOPPED, False),
    (S.DISARMED, "reboot", False, S.DISARMED, False),
    (S.DISARMED, "command", None, S.DISARMED, False),
    (S.DISARMED, "timeout", None, S.DISARMED, False),
    (S.DISARMED, "bus_lost", None, S.FAULT, False),
    (S.DISARMED, "clear_estop", False, S.DISARMED, False),
    (S.ARMING, "arm", False, S.ARMING, True),
    (S.ARMING, "disarm", True, S.DISARMED, False),
    (S.ARMING, "estop", True, S.ESTOPPED, False),
    (S.ARMING, "reboot", False, S.ARMING, True),
    (S.ARMING, "command", None, S.ARMED, True),
    (S.ARMING, "bus_lost", None, S.FAULT, False),
    (S.ARMING, "clear_estop", False, S.ARMING, True),
    (S.ARMED, "arm", False, S.ARMED, True),
    (S.ARMED, "disarm", True, S.DISARMED, False),
    (S.ARMED, "estop", True, S.ESTOPPED, False),
    (S.ARMED, "reboot", False, S.ARMED, True),
    (S.ARMED, "command", None, S.ARMED, True),
    (S.ARMED, "timeout", None, S.HOLDING, True),
    (S.ARMED, "bus_lost", None, S.FAULT, False),
    (S.ARMED, "clear_estop", False, S.ARMED, True),
    (S.HOLDING, "arm", False, S.HOLDING, True),
    (S.HOLDING, "disarm", True, S.DISARMED, False),
    (S.HOLDING, "estop", True, S.ESTOPPED, False),
    (S.HOLDING, "reboot", False, S.HOLDING, True),
    (S.HOLDING, "command", None, S.ARMED, True),   # resumes through ARMING (gap 0 here)
    (S.HOLDING, "bus_lost", None, S.FAULT, False),
    (S.HOLDING, "clear_estop", False, S.HOLDING, True),
    (S.ESTOPPED, "arm", False, S.ESTOPPED, False),   # clear_estop first
    (S.ESTOPPED, "disarm", False, S.ESTOPPED, False),
    (S.ESTOPPED, "estop", True, S.ESTOPPED, False),
    (S.ESTOPPED, "reboot", False, S.ESTOPPED, False),
    (S.ESTOPPED, "command", None, S.ESTOPPED, False),
    (S.ESTOPPED, "timeout", None, S.ESTOPPED, False),
    (S.ESTOPPED, "bus_lost", None, S.ESTOPPED, False),
    (S.ESTOPPED, "clear_estop", True, S.DISARMED, False),
    (S.FAULT, "arm", False, S.FAULT, True),         # fault_reaction hold: torque stays on
    (S.FAULT, "disarm", True, S.FAULT, False),
    (S.FAULT, "estop", True, S.ESTOPPED, False),
    (S.FAULT, "reboot", True, S.DISARMED, False),
    (S.FAULT, "command", None, S.FAULT, True),
    (S.FAULT, "bus_lost", None, S.FAULT, False),
    (S.FAULT, "clear_estop", False, S.FAULT, True),
]


@pytest.mark.parametrize(("start", "event", "accepted", "end", "torque"), _TABLE,
                         ids=[f"{a.value}-{e}" for a, e, *_ in _TABLE])
def test_transition_table(start: S, event: str, accepted: bool | None, end: S, torque: bool) -> None:
    rig = Rig()
    _SETUPS[start](rig)
    got = _do(rig, event)
    if accepted is not None:
        assert got is accepted
    assert rig.sup.state is end, rig.sup.reason
    if rig.sup.connected:
        assert rig.all_torque is torque and rig.any_torque is torque
    assert rig.sup.transitions[-1].target is end or rig.sup.transitions[-1].source is end
    if not torque:  # a limp bridge writes no goal
        n = len(rig.backend.writes)
        rig.step(5)
        assert len(rig.backend.writes) == n or (end is S.FAULT and not rig.sup.connected)


def test_refusals_name_their_reason() -> None:
    rig = Rig()
    _estopped(rig)
    assert "latched" in rig.sup.disarm().message
    out = rig.sup.arm()
    assert not out.accepted and "~/clear_estop" in out.message
    rig = Rig()
    _armed(rig)
    out = rig.sup.clear_estop()
    assert not out.accepted and "no emergency stop latched" in out.message
    rig = Rig()
    _fault(rig)
    out = rig.sup.arm()
    assert not out.accepted and "reboot" in out.message and "m3_lateral" in out.message
    rig = Rig()
    _armed(rig)
    out = rig.sup.arm()
    assert not out.accepted and "already armed" in out.message
    assert "no servo" in rig.sup.reboot().message


def test_a_command_never_enables_torque() -> None:
    rig = Rig()
    _disarmed(rig)
    for k in range(200):
        rig.command({n: 0.5 * math.sin(0.1 * k) for n in _NAMES})
        rig.step()
    assert rig.backend.torque_log == [] and not rig.any_torque and rig.backend.writes == []
    # disarm (torque false) while commands keep coming: limp stays limp.
    _armed(rig2 := Rig())
    assert rig2.sup.disarm().accepted
    for _ in range(100):
        rig2.command({n: 0.3 for n in _NAMES})
        rig2.step()
    assert not rig2.any_torque and rig2.sup.state is S.DISARMED


def test_timeout_torque_off_goes_limp_and_stays_limp() -> None:
    rig = Rig(timeout_reaction="torque_off")
    _armed(rig)
    rig.step(60)
    assert rig.sup.state is S.DISARMED and not rig.any_torque
    rig.command({"m1_dorsal": 0.2})
    rig.step(10)
    assert rig.sup.state is S.DISARMED and not rig.any_torque


def test_fault_reason_names_the_bits_as_the_backend_describes_them() -> None:
    rig = Rig()
    _fault(rig)
    assert rig.sup.reason == f"hardware error (m3_lateral: fake error {HW_OVERLOAD:#x})"
    assert Backend.describe_hardware_error(rig.backend, HW_OVERLOAD) == "error bits 0x20"  # the interface's default
    assert Backend.describe_hardware_error(rig.backend, 0) == ""


def test_fault_reaction_torque_off() -> None:
    rig = Rig(fault_reaction="torque_off")
    _armed(rig)
    rig.backend.errors["m3_lateral"] = HW_OVERLOAD
    rig.step(10)
    assert rig.sup.state is S.FAULT and not rig.any_torque
    assert rig.sup.faulted == ["m3_lateral"]


def test_fault_hold_keeps_the_last_goals_and_ignores_commands() -> None:
    rig = Rig()
    _armed(rig)
    rig.command({"m1_dorsal": 0.3})
    rig.step(100)
    held = rig.backend.writes[-1]["m1_dorsal"]
    assert held == pytest.approx(0.3)
    rig.backend.errors["m3_lateral"] = HW_OVERLOAD
    rig.step(10)
    rig.command({"m1_dorsal": -0.5})
    rig.step(10)
    assert rig.sup.state is S.FAULT and rig.backend.writes[-1]["m1_dorsal"] == held


def test_bus_loss_reconnect_and_auto_arm() -> None:
    rig = Rig(auto_arm=True)
    rig.step()
    assert rig.sup.state is S.ARMING and rig.all_torque      # armed by itself at start-up
    rig.backend.lose_on_read = True
    rig.step()
    assert rig.sup.state is S.FAULT and not rig.sup.connected and "bus lost" in rig.sup.reason
    assert rig.sup.arm().accepted is False
    rig.backend.lose_on_read = False
    rig.step()
    assert rig.sup.state is S.ARMING and rig.backend.opened == 2  # reconnected and re-armed
    # An e-stop survives a reconnect, even with auto_arm.
    rig.sup.emergency_stop()
    rig.backend.lose_on_read = True
    rig.step()
    rig.backend.lose_on_read = False
    rig.step(50)
    assert rig.sup.state is S.ESTOPPED and not rig.any_torque


def test_clearing_the_estop_is_its_own_step_and_never_arms() -> None:
    rig = Rig(auto_arm=True)
    rig.step()
    assert rig.sup.state is S.ARMING
    assert rig.sup.emergency_stop().accepted
    torque_writes = len(rig.backend.torque_log)
    out = rig.sup.clear_estop()
    assert out.accepted and rig.sup.state is S.DISARMED, out.message
    assert rig.backend.torque_log[torque_writes:] == [False]   # torque off written again, never on
    goal_writes = len(rig.backend.writes)
    rig.command({n: 0.2 for n in _NAMES})
    rig.step(50)
    assert rig.sup.state is S.DISARMED and not rig.any_torque  # auto_arm does not arm on a clear
    assert len(rig.backend.writes) == goal_writes
    assert rig.sup.arm().accepted and rig.sup.state is S.ARMING and rig.all_torque
    assert [(t.source, t.target) for t in rig.sup.transitions][-3:] == [
        (S.ARMING, S.ESTOPPED), (S.ESTOPPED, S.DISARMED), (S.DISARMED, S.ARMING)]


def test_clearing_the_estop_while_disconnected_waits_for_the_bus_limp() -> None:
    rig = Rig()
    _estopped(rig)
    rig.backend.lose_on_read = True
    rig.step()
    assert rig.sup.state is S.ESTOPPED and not rig.sup.connected
    out = rig.sup.clear_estop()
    assert out.accepted and rig.sup.state is S.FAULT and "bus not connected" in rig.sup.reason
    assert rig.sup.arm().accepted is False
    rig.backend.lose_on_read = False
    rig.step(50)
    assert rig.sup.connected and rig.sup.state is S.DISARMED and not rig.any_torque


def test_clearing_the_estop_with_a_servo_in_hardware_error_is_a_fault() -> None:
    rig = Rig()
    _estopped(rig)
    rig.backend.errors["m3_lateral"] = HW_OVERLOAD
    rig.step(60)
    assert rig.sup.state is S.ESTOPPED and rig.sup.faulted == ["m3_lateral"]
    out = rig.sup.clear_estop()
    assert out.accepted and rig.sup.state is S.FAULT and "m3_lateral" in out.message
    assert not rig.any_torque
    rig.backend.errors.clear()
    assert rig.sup.reboot().accepted and rig.sup.state is S.DISARMED


def test_start_up_failure_is_a_fault_then_disarmed() -> None:
    rig = Rig()
    rig.backend.fail_open = True
    rig.step()
    assert rig.sup.state is S.FAULT and "IDs 5 (m2_twist)" in rig.sup.bus_error
    rig.backend.fail_open = False
    rig.step(300)  # backoff
    assert rig.sup.state is S.DISARMED and rig.sup.connected and not rig.any_torque


def test_consecutive_comm_failures_lose_the_bus() -> None:
    rig = Rig(max_consecutive_failures=3, bus_loss_timeout_s=0.0)
    _armed(rig)
    rig.backend.fail_read = True
    rig.step(2)
    assert rig.sup.state is S.ARMED and rig.sup.failed_cycles == 2
    rig.step()
    assert rig.sup.state is S.FAULT and not rig.sup.connected


def test_arming_ramp_from_present_pose_to_a_still_command() -> None:
    start = {"m1_dorsal": -0.6, "m2_lateral": 0.4}
    rig = Rig(start, arming_speed=0.3)
    _disarmed(rig)
    rig.command({"m1_dorsal": 0.3, "m2_lateral": 0.4, "m3_dorsal": -0.15})
    assert rig.sup.arm().accepted                      # fresh command: ramp toward it
    cycles = 0
    while rig.sup.state is S.ARMING:
        rig.command({"m1_dorsal": 0.3, "m2_lateral": 0.4, "m3_dorsal": -0.15})
        rig.step()
        cycles += 1
        assert cycles < 1000
    # The largest gap (0.9 rad) closes at 0.3 rad/s: 3 s, i.e. 0.9 / (0.3 T) cycles (+1 for rounding).
    assert abs(cycles - 0.9 / (0.3 * _T)) <= 1
    prev = {n: start.get(n, 0.0) for n in _NAMES}   # the pose torque came on at
    for w in rig.backend.writes:
        for n, g in w.items():
            assert abs(g - prev[n]) <= 0.3 * _T + 1e-12
        prev = w
    assert prev["m1_dorsal"] == pytest.approx(0.3) and prev["m3_dorsal"] == pytest.approx(-0.15)


def test_arm_without_fresh_commands_holds_the_present_pose() -> None:
    rig = Rig({"m4_dorsal": 0.7})
    _disarmed(rig)
    rig.command({"m4_dorsal": -0.7})
    rig.step(60)                                       # that command is stale now
    assert rig.sup.arm().accepted
    rig.step(20)
    assert rig.sup.state is S.ARMING                   # waits for a fresh command
    assert all(w["m4_dorsal"] == 0.7 for w in rig.backend.writes)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_no_goal_step_exceeds_the_limit_through_arming_and_rolling_gait(seed: int) -> None:
    rng = np.random.default_rng(seed)
    present = {}
    for j in _ROBOT.joints:
        lo, hi = (j.lower, j.upper) if not j.continuous else (-math.pi, math.pi)
        present[j.name] = float(rng.uniform(lo, hi))
    rig = Rig(present, arming_speed=0.3, command_timeout_s=0.5, auto_arm=True)
    gait = make_gait("rolling", _ROBOT)
    command = gait.mapping.to_command(0.05, 0.1)
    rig.step()
    assert rig.sup.state is S.ARMING
    states = []
    for k in range(2500):                             # 25 s: arming (< 15 s), then the gait
        if k % 2 == 0:                                 # the gait at 50 Hz, the bridge at 100 Hz
            q = gait.step(2 * _T, command)
            rig.command(dict(zip(gait.joint_names, (float(x) for x in q), strict=True)))
        rig.step()
        states.append(rig.sup.state)
    assert states[-1] is S.ARMED and S.ARMING in states
    limit = {j.name: j.velocity * _T for j in _ROBOT.joints}
    prev = dict(present)                               # arming writes goal := present first
    worst = 0.0
    for w in rig.backend.writes:
        for n, g in w.items():
            step = abs(g - prev[n])
            worst = max(worst, step / limit[n])
            assert step <= limit[n] + 1e-12, (n, step)
        prev.update(w)
    assert worst <= 1.0
    # After arming the goals track the gait exactly (its steps are within the limits).
    q_final = dict(zip(gait.joint_names, (float(x) for x in q), strict=True))
    assert max(abs(prev[n] - q_final[n]) for n in _NAMES) < 5 * max(limit.values())


def test_cycles_run_back_to_back_move_the_goals_no_faster_than_the_joint_velocity() -> None:
    """An executor that queued timer events behind a stall runs them back to back: no faster goals.

    Oracle: the YAML velocity over the wall time between writes (the shipped robot file).
    """
    rig = Rig(arming_speed=0.3, auto_arm=True)
    rig.step()
    for _ in range(20):                                # armed at the start pose (the fake's zeros)
        rig.command(dict.fromkeys(_NAMES, 0.0))
        rig.step()
    assert rig.sup.state is S.ARMED
    far = {n: (j.upper if not j.continuous else 3.0) for n, j in zip(_NAMES, _ROBOT.joints, strict=True)}
    times, writes = [], []
    for k in range(40):
        rig.command(far)
        if k % 10 == 9:                                # a 50 ms stall, then five cycles within 1 ms
            rig.now += 4 * _T
            for _ in range(5):
                rig.now += 2e-4
                rig.sup.step(rig.now)
                times.append(rig.now)
                writes.append(dict(rig.backend.writes[-1]))
        else:
            rig.step()
            times.append(rig.now)
            writes.append(dict(rig.backend.writes[-1]))
    assert rig.sup.state is S.ARMED
    for j in _ROBOT.joints:
        for (t0, w0), (t1, w1) in itertools.pairwise(zip(times, writes, strict=True)):
            assert abs(w1[j.name] - w0[j.name]) <= j.velocity * min(t1 - t0, _T) * (1 + 1e-9) + 1e-12
        assert writes[-1][j.name] != writes[0][j.name]  # they do move toward the far command


def test_one_unconvertible_goal_never_counts_as_a_bus_failure() -> None:
    rig = Rig()
    _armed(rig)
    rig.backend.unconvertible = {"m2_twist"}
    rig.command({n: 0.1 for n in _NAMES})
    rig.step(40)
    assert rig.sup.state is S.ARMED and rig.sup.connected and rig.sup.failed_cycles == 0
    assert rig.sup.rejected_goals >= 1 and rig.all_torque
    last = rig.backend.writes[-1]
    assert "m2_twist" not in last and len(last) == 17
    assert all(last[n] == pytest.approx(0.1) for n in last)
    # A new command for that joint retries it; once convertible it runs again.
    rig.backend.unconvertible = set()
    rig.command({"m2_twist": 0.1})
    rig.step(40)
    assert rig.backend.writes[-1]["m2_twist"] == pytest.approx(0.1)


def test_filter_drops_absurd_targets_per_joint_and_keeps_the_rest() -> None:
    f = JointTargetFilter(_ROBOT.joints)
    cmd = f.filter(["m2_twist", "m1_dorsal", "m3_twist", "m4_dorsal"], [5e6, 0.2, -1e12, 1e300])
    assert cmd.targets == {"m1_dorsal": 0.2}
    assert cmd.absurd == ["m2_twist", "m3_twist", "m4_dorsal"] and cmd.dropped
    ok = f.filter(["m2_twist"], [-9.9e5])                # a long roll one way is not absurd
    assert ok.targets == {"m2_twist": -9.9e5}


# --- what the bridge did not command ---------------------------------------------------------
def _tamper(rig: Rig, how: str) -> str:
    """Change m3_lateral (ID 9) behind the supervisor's back; returns the register named in the fault."""
    if how == "torque_off":
        rig.backend.torque["m3_lateral"] = False
        return "Torque Enable 0"
    rig.backend.foreign["m3_lateral"] = ("Bus Watchdog 0 (written 5)",)
    return "Bus Watchdog 0"


@pytest.mark.parametrize("start", [S.ARMING, S.ARMED, S.HOLDING])
@pytest.mark.parametrize("how", ["torque_off", "watchdog"])
@pytest.mark.parametrize("reaction", ["hold", "torque_off"])
def test_a_setting_changed_behind_the_bridges_back_while_torque_is_on_is_a_fault(
        start: S, how: str, reaction: str) -> None:
    rig = Rig(fault_reaction=reaction)
    _SETUPS[start](rig)
    register = _tamper(rig, how)
    polls = rig.sup.health_polls
    while rig.sup.state is start and rig.sup.health_polls < polls + 2:
        rig.step()
    assert rig.sup.state is S.FAULT, rig.sup.reason
    assert "m3_lateral (ID 9)" in rig.sup.reason and register in rig.sup.reason
    assert rig.sup.foreign.keys() == {"m3_lateral"}
    others = [rig.backend.torque[n] for n in _NAMES if n != "m3_lateral"]
    assert all(others) if reaction == "hold" else not any(others)
    # Latched: further polls keep FAULT (no servo reports a hardware error, yet nothing recovers by itself),
    # commands are ignored and arming is refused, naming the servo.
    n_writes = len(rig.backend.writes)
    rig.command({n: 0.3 for n in _NAMES})
    rig.step(30)
    assert rig.sup.state is S.FAULT
    assert all(w == rig.backend.writes[n_writes - 1] for w in rig.backend.writes[n_writes:]) or reaction != "hold"
    out = rig.sup.arm()
    assert not out.accepted
    # Reboot restores the servo's settings: DISARMED, limp, and arming works again.
    assert rig.sup.reboot().accepted and rig.backend.rebooted == ["m3_lateral"]
    assert rig.sup.state is S.DISARMED and not rig.any_torque
    rig.step(10)
    assert rig.sup.state is S.DISARMED and rig.sup.foreign == {}
    assert rig.sup.arm().accepted


def test_settings_changed_while_limp_refuse_arming_until_reboot() -> None:
    rig = Rig()
    _disarmed(rig)
    rig.backend.foreign["m4_twist"] = ("Operating Mode 3 (written 4)",)
    rig.step(10)
    assert rig.sup.state is S.DISARMED and not rig.any_torque
    out = rig.sup.arm()
    assert not out.accepted and "m4_twist (ID 11)" in out.message and "Operating Mode 3" in out.message
    assert rig.sup.reboot().accepted and rig.sup.state is S.DISARMED
    assert not rig.sup.arm().accepted              # rebooting until the next health poll reads it again
    rig.step(10)
    assert rig.sup.arm().accepted and rig.sup.state is S.ARMING


def test_torque_off_while_limp_or_estopped_is_no_fault() -> None:
    rig = Rig()
    _estopped(rig)
    rig.backend.foreign["m1_dorsal"] = ("Bus Watchdog 0 (written 5)",)
    rig.step(20)
    assert rig.sup.state is S.ESTOPPED
    rig = Rig()
    _disarmed(rig)
    rig.step(20)        # every servo limp, as the bridge wrote: nothing to report
    assert rig.sup.state is S.DISARMED and rig.sup.foreign == {}


class SpreadBackend(FakeBackend):
    """A health poll in steps of 5 joints, as a slow bus spreads it over cycles."""

    steps = 0

    def health_round(self, period_s: float) -> Iterator[list[JointHealth]]:
        full = self.health()
        for k in range(0, len(full), 5):
            self.steps += 1
            yield full[k:k + 5]


def test_a_poll_is_a_round_over_every_joint_and_catches_a_change_within_two() -> None:
    rig = Rig()
    rig.backend = SpreadBackend()
    rig.sup = Supervisor(rig.backend, _ROBOT.joints, _config(command_timeout_s=60.0), clock=lambda: rig.now)
    _armed(rig)
    rig.step(200)
    assert rig.sup.health_polls > 0 and rig.backend.steps == 4 * rig.sup.health_polls + (rig.backend.steps % 4)
    assert rig.sup.state is S.ARMED
    # A change to the last joint of the round just after its step was read: seen in the next round.
    while rig.backend.steps % 4 != 0:
        rig.step()
    rig.backend.torque["m6_lateral"] = False
    polls = rig.sup.health_polls
    while rig.sup.state is S.ARMED:
        rig.step()
    assert rig.sup.state is S.FAULT and "m6_lateral (ID 18)" in rig.sup.reason
    assert rig.sup.health_polls - polls <= 2


# --- one commander ------------------------------------------------------------------------------
def test_several_commanders_hold_the_last_goals_until_one_is_left() -> None:
    rig = Rig(command_timeout_s=60.0)
    _armed(rig)
    rig.command({"m1_dorsal": 0.2})
    rig.step(50)
    held = rig.backend.writes[-1]
    rig.sup.refuse_commands("2 publishers on /joint_commands (/a, /b)")
    assert rig.sup.state is S.HOLDING and "/a, /b" in rig.sup.reason
    for k in range(50):              # the two commanders interleave: nothing of it reaches the servos
        rig.command({"m1_dorsal": 0.5 if k % 2 else -0.5})
        rig.step()
    assert rig.sup.state is S.HOLDING and rig.all_torque
    assert all(w == held for w in rig.backend.writes[-50:])
    assert not rig.sup.arm().accepted          # already armed (holding)
    rig.sup.accept_commands()
    rig.command({"m1_dorsal": -0.1})
    rig.step(200)
    assert rig.sup.state is S.ARMED and rig.backend.writes[-1]["m1_dorsal"] == pytest.approx(-0.1)


# --- continuous joints arm to the nearest equivalent angle ------------------------------------------
@pytest.mark.parametrize("turns", [40, -127, 3])
def test_a_wound_twist_joint_arms_to_the_nearest_equivalent_angle_and_keeps_the_gaits_winding(turns: int) -> None:
    start = 2 * math.pi * turns + 0.4
    rig = Rig({"m2_twist": start})
    _disarmed(rig)
    rig.command({n: 0.0 for n in _NAMES})
    assert rig.sup.arm().accepted
    assert rig.sup.arming_gap == pytest.approx(0.4)          # not 40 turns
    q = 0.0
    while rig.sup.state is S.ARMING:
        rig.command({n: (q if n == "m2_twist" else 0.0) for n in _NAMES})
        rig.step()
        assert abs(rig.backend.writes[-1]["m2_twist"] - start) < math.pi
        assert len(rig.backend.writes) < 1000
    # The gait winds the joint on (3 turns): the goals follow, offset by the same whole turns.
    for _ in range(3000):
        q += 2 * math.pi / 1000
        rig.command({"m2_twist": q})
        rig.step()
    assert rig.sup.state is S.ARMED
    assert rig.backend.writes[-1]["m2_twist"] - q == pytest.approx(2 * math.pi * turns, abs=0.05)


def test_arming_waits_for_rebooting_servos() -> None:
    rig = Rig()
    _disarmed(rig)
    rig.backend.health = lambda: [JointHealth(n, -1 if n == "m2_twist" else 0, 40.0, 12.0, False,  # type: ignore
                                              rebooting=n == "m2_twist") for n in _NAMES]
    rig.step(10)
    out = rig.sup.arm()
    assert not out.accepted and "m2_twist" in out.message and rig.sup.state is S.DISARMED and not rig.any_torque
    del rig.backend.health
    rig.step(10)
    assert rig.sup.arm().accepted


def test_a_reboot_is_not_undone_by_the_health_read_before_it() -> None:
    """FAULT -> reboot -> DISARMED holds while a health round spread over cycles reaches the rebooted servos."""
    rig = Rig()
    rig.backend.health_round = lambda period_s: ([h] for h in rig.backend.health())  # type: ignore[method-assign]
    _armed(rig)
    rig.backend.errors.update({"m1_dorsal": HW_OVERLOAD, "m3_lateral": HW_OVERLOAD})
    while rig.sup.faulted != ["m1_dorsal", "m3_lateral"]:
        rig.step()
    assert rig.sup.state is S.FAULT
    assert rig.sup.reboot().accepted and rig.sup.state is S.DISARMED
    assert rig.sup.arm().accepted is False           # rebooting: limp until they answer again
    for _ in range(3 * len(_NAMES)):                 # three whole rounds, one joint per cycle
        rig.step()
        assert rig.sup.state is S.DISARMED and rig.sup.faulted == []
    assert rig.sup.arm().accepted


# --- tracking envelope ---------------------------------------------------------------------------
_TOL, _LAG, _HOLD = 0.1, 0.25, 0.05   # tracking_tolerance_rad, tracking_lag_s, tracking_time_s of these tests


def _tracking_rig() -> Rig:
    rig = Rig(tracking_tolerance_rad=_TOL, tracking_lag_s=_LAG, tracking_time_s=_HOLD, command_timeout_s=30.0)
    _armed(rig)
    return rig


def test_a_stalled_joint_faults_after_the_tracking_time_naming_it_and_holds_until_disarmed() -> None:
    rig = _tracking_rig()
    rig.backend.follow = False                       # the servo no longer reaches its goals (a stall)
    rig.command({"m2_lateral": 1.0})
    steps = 0
    while rig.sup.state is S.ARMED:
        rig.step()
        steps += 1
        assert steps < 500
    # The goal moves away at the YAML velocity; the gap passes the tolerance, then stays beyond it.
    assert rig.sup.state is S.FAULT and "m2_lateral" in rig.sup.reason and "tracking" in rig.sup.reason
    gap_at_fault = abs(rig.sup.goals["m2_lateral"] - rig.backend.position["m2_lateral"])
    assert gap_at_fault > _TOL
    assert rig.all_torque                            # fault_reaction hold: the servos stay stiff
    rig.step(20)                                     # health polls: still FAULT (latched)
    assert rig.sup.state is S.FAULT
    refused = rig.sup.arm()
    assert not refused.accepted and "call disarm first" in refused.message   # disarm clears it, not reboot
    assert not rig.sup.reboot().accepted                                     # no servo needs a reboot
    assert rig.sup.disarm().accepted and not rig.any_torque
    rig.step(10)
    assert rig.sup.state is S.DISARMED
    assert rig.sup.reason == "tracking fault cleared by disarm"              # the fault's own cause


def test_holding_keeps_a_joint_that_its_load_stops_short_of_its_last_goal_where_it_is() -> None:
    """Commands stop while a loaded joint catches up; the load then stops it: HOLDING, not a tracking FAULT.

    The lagging joint is held where it is (its goal becomes its position); a joint at its goal
    keeps that goal exactly.
    """
    rig = Rig(tracking_tolerance_rad=_TOL, tracking_lag_s=_LAG, tracking_time_s=_HOLD, command_timeout_s=0.5)
    _armed(rig)
    rig.backend.follow = False
    rig.command({"m2_lateral": 0.5, "m3_lateral": 0.2})
    while rig.sup.goals["m2_lateral"] < 0.5 or rig.sup.goals["m3_lateral"] < 0.2:   # the rate-limited goals
        rig.backend.position["m3_lateral"] = rig.sup.goals["m3_lateral"]             # an unloaded servo: there
        rig.step()
    rig.backend.position["m2_lateral"] = 0.2          # 0.3 rad behind, catching up: no fault while it moves
    rig.backend.velocity["m2_lateral"] = 1.0
    while rig.sup.state is S.ARMED:                   # no more commands: the timeout comes
        rig.backend.position["m3_lateral"] = rig.sup.goals["m3_lateral"]
        rig.step()
        assert rig.now < 5.0
    assert rig.sup.state is S.HOLDING, rig.sup.reason
    rig.backend.velocity["m2_lateral"] = 0.0          # ... and the load stops it there
    rig.step(round(10 * _HOLD / _T))                  # ten tracking times
    assert rig.sup.state is S.HOLDING, rig.sup.reason
    assert rig.backend.writes[-1]["m2_lateral"] == 0.2    # held where it is
    assert rig.backend.writes[-1]["m3_lateral"] == 0.2    # its last goal, exactly
    assert rig.all_torque


def _catching_up_to_its_last_goal() -> Rig:
    """Armed, the last command puts m2_lateral at 0.5, the joint 0.3 rad behind and catching up (timeout 0.5 s)."""
    rig = Rig(tracking_tolerance_rad=_TOL, tracking_lag_s=_LAG, tracking_time_s=_HOLD, command_timeout_s=0.5)
    _armed(rig)
    rig.backend.follow = False
    rig.command({"m2_lateral": 0.5})
    while rig.sup.goals["m2_lateral"] < 0.5:
        rig.step()
    rig.backend.position["m2_lateral"] = 0.2
    rig.backend.velocity["m2_lateral"] = 1.0
    return rig


def test_a_loop_stalled_past_the_command_timeout_and_the_tracking_time_holds_rather_than_faults() -> None:
    """The last command, then a stall of the bridge's loop longer than both: the commands ended first."""
    rig = _catching_up_to_its_last_goal()
    rig.step(round(1.2 * _LAG / _T))                  # the band narrows to the last goal: out, but closing
    assert rig.sup.state is S.ARMED, rig.sup.reason
    rig.backend.velocity["m2_lateral"] = 0.0          # stopped by its load: its tracking time starts ...
    rig.step()
    assert rig.sup.state is S.ARMED, rig.sup.reason
    rig.now += 2.0                                    # ... and the computer keeps the loop waiting 2 s
    rig.step()
    assert rig.sup.state is S.HOLDING, rig.sup.reason
    rig.step(round(10 * _HOLD / _T))
    assert rig.sup.state is S.HOLDING, rig.sup.reason
    assert rig.backend.writes[-1]["m2_lateral"] == 0.2


def test_time_out_of_the_envelope_counts_from_cycles_that_ran_not_from_before_a_stall() -> None:
    """A stall with the commands queued behind it: the last one (the gait's stop, where the body is) is taken.

    The joint left behind is not faulted for the time the loop did not run; it is commanded where
    it is, and the command timeout then holds it there.
    """
    rig = _catching_up_to_its_last_goal()
    rig.step(round(1.2 * _LAG / _T))
    rig.backend.velocity["m2_lateral"] = 0.0          # stopped by its load: its tracking time starts ...
    rig.step()
    assert rig.sup.state is S.ARMED, rig.sup.reason
    rig.now += 0.3                                    # ... and the loop does not run for 0.3 s (< the timeout)
    rig.command({"m2_lateral": 0.2})                  # the stop, where the body is, taken when it runs again
    rig.step(round(1.0 / _T))
    assert rig.sup.state is S.HOLDING, rig.sup.reason
    assert rig.backend.writes[-1]["m2_lateral"] == pytest.approx(0.2)


def test_a_gap_beyond_the_tolerance_shorter_than_the_tracking_time_is_no_fault() -> None:
    rig = _tracking_rig()
    rig.backend.follow = False
    start = rig.backend.position["m3_lateral"]
    rig.backend.position["m3_lateral"] = start + 2 * _TOL   # pushed for less than tracking_time_s
    rig.step(round(_HOLD / _T) - 1)
    rig.backend.position["m3_lateral"] = start
    rig.step(50)
    assert rig.sup.state is S.ARMED
    rig.backend.position["m3_lateral"] = start + 0.9 * _TOL  # within the tolerance for ever
    rig.step(100)
    assert rig.sup.state is S.ARMED
    rig.backend.position["m3_lateral"] = start + 1.5 * _TOL  # beyond it, long enough
    rig.step(round(_HOLD / _T) + 2)
    assert rig.sup.state is S.FAULT and "m3_lateral" in rig.sup.reason


def test_goals_within_the_lag_window_are_no_gap() -> None:
    """A servo that lags its rate-limited goals by less than tracking_lag_s never leaves the envelope."""
    rig = _tracking_rig()
    rig.backend.follow = False
    trail: list[float] = []
    for k in range(300):                              # the command sweeps back and forth at the YAML velocity
        rig.command({"m2_lateral": 1.0 if (k // 100) % 2 == 0 else -1.0})
        rig.step()
        trail.append(rig.sup.goals["m2_lateral"])
        lagged = trail[max(0, len(trail) - 1 - round(0.8 * _LAG / _T))]
        rig.backend.position["m2_lateral"] = lagged   # the servo is 0.8 * tracking_lag_s behind
        assert rig.sup.state is S.ARMED, (k, rig.sup.reason)


def test_a_joint_catching_up_is_no_fault_one_that_stands_still_is() -> None:
    """A loaded servo behind goals that run faster than it can: out of the band, but closing in."""
    rig = _tracking_rig()
    rig.backend.follow = False
    start = rig.backend.position["m3_twist"]
    rig.backend.position["m3_twist"] = start - 3 * _TOL       # far behind the goals (below the band)
    rig.backend.velocity["m3_twist"] = 2 * CLOSING_SPEED       # ... and moving up toward them
    rig.step(round(10 * _HOLD / _T))
    assert rig.sup.state is S.ARMED, rig.sup.reason
    rig.backend.velocity["m3_twist"] = -2 * CLOSING_SPEED      # moving away: counts
    rig.step(round(_HOLD / _T) + 2)
    assert rig.sup.state is S.FAULT and "m3_twist" in rig.sup.reason
    rig = _tracking_rig()
    rig.backend.follow = False
    rig.backend.position["m3_twist"] = start - 3 * _TOL
    rig.backend.velocity["m3_twist"] = 0.5 * CLOSING_SPEED     # all but still (a stall): counts
    rig.step(round(_HOLD / _T) + 2)
    assert rig.sup.state is S.FAULT and "m3_twist" in rig.sup.reason


def test_a_drifting_joint_has_its_goal_read_back_and_a_foreign_goal_faults_at_once() -> None:
    rig = _tracking_rig()
    rig.backend.follow = False
    start = rig.backend.position["m3_lateral"]
    rig.backend.position["m3_lateral"] = start + 0.01   # small: not read back
    rig.step(5)
    assert rig.backend.goal_reads == []
    rig.backend.foreign_goal["m3_lateral"] = "Goal Position 2895 (written 2048)"
    rig.backend.position["m3_lateral"] = start + 0.08   # drifting (past 0.05 rad), within the tolerance
    rig.step()
    assert rig.backend.goal_reads == [["m3_lateral"]]
    assert rig.sup.state is S.FAULT and "not written by the bridge" in rig.sup.reason
    assert rig.sup.foreign == {"m3_lateral": "Goal Position 2895 (written 2048)"}
    assert not rig.sup.arm().accepted                # latched until ~/reboot, as every foreign setting


def _shipped(**overrides: object) -> dict[str, object]:
    """The supervisor's settings from ``config/bridge.yaml``, as the bridge builds them (``overrides`` on top)."""
    import yaml

    from snake_core.config_files import config_dir

    p = next(iter(yaml.safe_load((config_dir() / "bridge.yaml").read_text()).values()))["ros__parameters"]
    shipped: dict[str, object] = {
        "period_s": 1.0 / p["rate_hz"], "arming_speed": p["arming_speed"],
        "command_timeout_s": p["command_timeout_s"], "timeout_reaction": p["timeout_reaction"],
        "fault_reaction": p["fault_reaction"], "max_consecutive_failures": p["max_consecutive_failures"],
        "health_period_s": 1.0 / p["health_rate_hz"], "bus_loss_timeout_s": p["bus_loss_timeout_s"],
        "tracking_tolerance_rad": p["tracking_tolerance_rad"], "tracking_lag_s": p["tracking_lag_s"],
        "tracking_time_s": p["tracking_time_s"]}
    shipped.update(overrides)
    return shipped


@pytest.mark.parametrize("reaction", ["shipped", "hold", "torque_off"])
def test_a_foreign_write_leaves_its_servo_limp_and_stays_latched_through_a_reconnect_until_reboot(
        reaction: str) -> None:
    """Shipped settings (auto_arm on, to show a reconnect does not re-arm): every transition checked."""
    over = {} if reaction == "shipped" else {"fault_reaction": reaction}
    rig = Rig(**_shipped(auto_arm=True, **over))
    assert rig.sup.config.period_s == pytest.approx(_T)   # the rig's clock steps one shipped cycle
    hold = rig.sup.config.fault_reaction == "hold"
    rig.step()
    rig.command({n: 0.0 for n in _NAMES})
    while rig.sup.state is not S.ARMED:
        rig.command({n: 0.0 for n in _NAMES})
        rig.step()
        assert rig.now < 5.0, rig.sup.reason
    seen = len(rig.sup.transitions)

    def moves() -> list[tuple[S, S]]:
        return [(t.source, t.target) for t in itertools.islice(rig.sup.transitions, seen, None)]

    # Another program writes m3_lateral's Goal Position and drags it: FAULT in the cycle that reads it back.
    rig.backend.foreign_goal["m3_lateral"] = "Goal Position 2895 (written 2048)"
    rig.backend.position["m3_lateral"] = 0.08
    rig.command({n: 0.0 for n in _NAMES})
    rig.step()
    assert moves() == [(S.ARMED, S.FAULT)] and "m3_lateral (ID 9)" in rig.sup.reason
    assert rig.backend.torque["m3_lateral"] is False                 # limp at once, whatever fault_reaction says
    others = [rig.backend.torque[n] for n in _NAMES if n != "m3_lateral"]
    assert all(others) if hold else not any(others)                 # fault_reaction decides for the rest
    n_writes = len(rig.backend.writes)
    rig.step(20)
    assert all("m3_lateral" not in w for w in rig.backend.writes[n_writes:])   # no goal written to it any more
    assert (len(rig.backend.writes) > n_writes) == hold
    # Torque found on again on the limp servo (the other program wrote Torque Enable): off again.
    rig.backend.torque["m3_lateral"] = True
    polls = rig.sup.health_polls
    while rig.sup.health_polls < polls + 2:
        rig.step()
    assert rig.backend.torque["m3_lateral"] is False and rig.sup.state is S.FAULT
    # The bus is lost and comes back: still FAULT, nothing armed (auto_arm), arming refused.
    rig.backend.lose_on_read = True
    rig.step()
    assert moves()[-1] == (S.FAULT, S.FAULT) and "bus lost" in rig.sup.reason
    rig.backend.lose_on_read = False
    opened = rig.backend.opened
    while rig.backend.opened == opened:
        rig.step()
        assert rig.now < 60.0
    assert moves()[-1] == (S.FAULT, S.FAULT), rig.sup.reason
    assert "still not written by the bridge" in rig.sup.reason and "reboot" in rig.sup.reason
    rig.command({n: 0.3 for n in _NAMES})
    rig.step(round(2 * rig.sup.config.health_period_s / _T))        # two health polls after the reconnect
    assert rig.sup.state is S.FAULT and not rig.any_torque and rig.sup.connected
    out = rig.sup.arm()
    assert not out.accepted and "reboot" in out.message
    # An emergency stop and its clear do not release it either.
    assert rig.sup.emergency_stop().accepted and rig.sup.clear_estop().accepted
    assert rig.sup.state is S.FAULT and "reboot" in rig.sup.reason
    # Only ~/reboot of that servo does: DISARMED, limp; arming works once it answers again.
    assert rig.sup.reboot().accepted and rig.backend.rebooted == ["m3_lateral"]
    assert moves()[-3:] == [(S.FAULT, S.ESTOPPED), (S.ESTOPPED, S.FAULT), (S.FAULT, S.DISARMED)]
    assert not rig.any_torque and rig.sup.foreign == {}
    rig.backend.foreign_goal.clear()
    rig.step(round(2 * rig.sup.config.health_period_s / _T))
    assert rig.sup.state is S.DISARMED and rig.sup.arm().accepted and rig.sup.state is S.ARMING
    assert [m for m in moves() if m[0] is not m[1]] == [
        (S.ARMED, S.FAULT), (S.FAULT, S.ESTOPPED), (S.ESTOPPED, S.FAULT), (S.FAULT, S.DISARMED),
        (S.DISARMED, S.ARMING)]


def test_a_hardware_error_fault_still_clears_on_reconnect() -> None:
    """Only a foreign write latches through a reconnect: a servo in hardware error is re-read afterwards."""
    rig = Rig(**_shipped())
    _armed(rig)
    rig.backend.errors["m3_lateral"] = HW_OVERLOAD
    while rig.sup.state is not S.FAULT:
        rig.command({"m1_dorsal": 0.0})
        rig.step()
        assert rig.now < 5.0
    assert rig.sup.faulted == ["m3_lateral"]
    rig.backend.errors.clear()
    rig.backend.lose_on_read = True
    rig.step()
    rig.backend.lose_on_read = False
    opened = rig.backend.opened
    while rig.backend.opened == opened:
        rig.step()
        assert rig.now < 60.0
    assert rig.sup.state is S.DISARMED and rig.sup.reason == "bus ready"
