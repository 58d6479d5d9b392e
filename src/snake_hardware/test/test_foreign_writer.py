"""Another program writing Goal Position of an armed servo: the supervisor leaves ARMED in time, the servo limp.

The bridge's loop (:class:`Supervisor` around the real :class:`DynamixelBackend`, dynamixel-sdk) runs
here against the Protocol 2.0 emulator over a real pty, with the safety settings of the shipped
``config/bridge.yaml`` and its scheduling: ``rt_priority`` gives the loop's thread ``SCHED_FIFO``, as
the bridge's, and the emulator's serving thread too (it stands in for servos, which do not share the
computer's cores); where the process may not, both run at normal priority. The foreign writer is
its own process at normal priority, opening the pty as root does (no lock, past ``TIOCEXCL``) and
writing Goal Position of one servo at a fixed rate. The oracle is the emulator's own shaft position,
never the supervisor's reading.
"""

from __future__ import annotations

import itertools
import math
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from snake_core.config_files import config_dir
from snake_core.robot import RobotModel, load_robot
from snake_hardware.backend import JointReading
from snake_hardware.dynamixel import control_table as ct
from snake_hardware.dynamixel.backend import DynamixelBackend, DynamixelSettings
from snake_hardware.emulator import ServoBusEmulator
from snake_hardware.realtime import apply_realtime
from snake_hardware.supervisor import BridgeState, Supervisor, SupervisorConfig

_JOINT = "m3_lateral"        # the dragged joint (servo ID from the YAML)
_DRAG_RAD = 1.3              # the foreign goal lies this far from the command, rad
_CONTRACT_RAD = 0.2          # rad, the joint stays this close to the command when the bridge's cycles keep time
_SETTLE_RAD = 0.01           # rad, the emulator's own step beyond a bound (it integrates up to the packet)
_WRITE_S = 3.0               # s, how long the foreign program writes
_VISIBLE_RAD = 0.1           # rad, a joint this far from the command by the bridge's own reading is off ...
_CYCLES_TO_FAULT = 3         # ... and the bridge leaves ARMED within this many cycles after the last one within it
_PROFILE_RAD_S = 4.8         # rad/s, the T-Snake YAML's joint velocity: the servos' Profile Velocity
_ARM_GUARD_S = 60.0          # s, only against a hang: arming on a loaded machine
_LATENCY_MS = 5.0            # read timeouts with room for the emulator thread, which shares this process
_WRITER = r"""
import os, sys, time
from snake_hardware.emulator.protocol import build
os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))   # an ordinary program: not the test's priority
port, sid, addr, ticks, hz, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), \
    float(sys.argv[5]), float(sys.argv[6])
fd = os.open(port, os.O_RDWR | os.O_NOCTTY)   # no flock, no termios change: a program that ignores the lock
packet = build(sid, 0x03, addr.to_bytes(2, "little") + (ticks & 0xFFFFFFFF).to_bytes(4, "little"))
print("ready", flush=True)
sys.stdin.readline()
if hz <= 0:
    os.write(fd, packet)
else:
    t0 = time.monotonic()
    k = 0
    while time.monotonic() - t0 < seconds:
        os.write(fd, packet)
        k += 1
        time.sleep(max(0.0, t0 + k / hz - time.monotonic()))
print("done", flush=True)
"""


def _shipped() -> dict[str, Any]:
    p: dict[str, Any] = next(iter(yaml.safe_load((config_dir() / "bridge.yaml").read_text()).values()))[
        "ros__parameters"]
    return p


def shipped_config() -> SupervisorConfig:
    """The supervisor's settings as ``config/bridge.yaml`` gives them to the bridge."""
    p = _shipped()
    return SupervisorConfig(
        period_s=1.0 / p["rate_hz"], arming_speed=p["arming_speed"], auto_arm=False,
        command_timeout_s=p["command_timeout_s"], timeout_reaction=p["timeout_reaction"],
        fault_reaction=p["fault_reaction"], max_consecutive_failures=p["max_consecutive_failures"],
        health_period_s=1.0 / p["health_rate_hz"], bus_loss_timeout_s=p["bus_loss_timeout_s"],
        tracking_tolerance_rad=p["tracking_tolerance_rad"], tracking_lag_s=p["tracking_lag_s"],
        tracking_time_s=p["tracking_time_s"])


@pytest.fixture
def robot() -> RobotModel:
    return load_robot("tsnake")


@pytest.fixture
def emu(robot: RobotModel) -> Iterator[ServoBusEmulator]:
    with ServoBusEmulator([j.servo_id for j in robot.joints]) as e:
        yield e


@pytest.fixture(autouse=True)
def shipped_scheduling(emu: ServoBusEmulator) -> Iterator[None]:
    """The shipped ``rt_priority`` for this thread (the loop's) and the emulator's, while the test runs.

    Where the process may not use ``SCHED_FIFO`` both keep the normal scheduler (the bridge warns
    then; the bounds below are stated in cycles that ran, so they hold either way).
    """
    priority = int(_shipped()["rt_priority"])
    before = os.sched_getscheduler(0), os.sched_getparam(0)
    serving = emu._thread.native_id if emu._thread is not None else None
    if priority > 0 and not apply_realtime(priority, []) and serving is not None:
        os.sched_setscheduler(serving, os.SCHED_FIFO, os.sched_param(priority))
    try:
        yield
    finally:
        os.sched_setscheduler(0, *before)   # pytest's thread as it was


class Loop:
    """The bridge's cycle at the shipped rate: step, then wait for the next period."""

    def __init__(self, robot: RobotModel, emu: ServoBusEmulator) -> None:
        self.config = shipped_config()
        self.backend = DynamixelBackend(robot, DynamixelSettings(port=emu.port, latency_ms=_LATENCY_MS,
                                                                 watchdog_s=1.0))
        self.sup = Supervisor(self.backend, robot.joints, self.config)
        self.next = time.monotonic()

    def step(self, command: dict[str, float]) -> JointReading | None:
        """One cycle; returns its reading, None where its read failed (the supervisor keeps the last)."""
        now = time.monotonic()
        self.sup.on_command(command, now)
        reading = self.sup.step(now)
        self.next += self.config.period_s
        delay = self.next - time.monotonic()
        if delay > 0:
            time.sleep(delay)   # the loop's pacing, as the bridge's timer
        else:
            self.next = time.monotonic()   # late: the next cycle a period from now, no burst
        return reading

    def arm(self, command: dict[str, float]) -> None:
        deadline = time.monotonic() + _ARM_GUARD_S
        while self.sup.state is not BridgeState.ARMED:
            assert time.monotonic() < deadline, self.sup.reason
            if self.sup.state is BridgeState.DISARMED and self.sup.connected:
                assert self.sup.arm().accepted
            self.step(command)


def _rad(robot: RobotModel, emu: ServoBusEmulator, joint: str) -> float:
    """The joint's angle from the emulator's shaft (independent of the backend's conversion)."""
    j = robot.joint(joint)
    ticks = emu.physical_position(j.servo_id)
    return (ticks - ct.TICKS_CENTER) * 2 * math.pi / 4096 * j.direction - j.zero_offset


def _writer(robot: RobotModel, emu: ServoBusEmulator, hz: float, seconds: float) -> tuple[subprocess.Popen[str], int]:
    """The foreign program (started, waiting for "go") and the Goal Position it writes, ticks."""
    j = robot.joint(_JOINT)
    foreign = ct.TICKS_CENTER + round(_DRAG_RAD / (2 * math.pi) * 4096) * j.direction
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, emu.port, str(j.servo_id), str(ct.GOAL_POSITION),
                             str(foreign), str(hz), str(seconds)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return proc, foreign


def _line_ready(proc: subprocess.Popen[str]) -> bool:
    assert proc.stdout is not None
    return bool(select.select([proc.stdout], [], [], 0)[0])


def _step_until_ready(loop: Loop, proc: subprocess.Popen[str], command: dict[str, float]) -> float:
    """Keep the bridge's loop running while the writer starts; then tell it to go (returns when, monotonic s)."""
    deadline = time.monotonic() + _ARM_GUARD_S
    while not _line_ready(proc):
        assert time.monotonic() < deadline and proc.poll() is None
        loop.step(command)
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline().strip() == "ready"
    go = time.monotonic()
    proc.stdin.write("go\n")
    proc.stdin.flush()
    return go


@pytest.mark.parametrize("hz", [50.0, 150.0, 200.0])
def test_a_root_program_writing_goal_position_faults_the_bridge_and_finds_its_servo_limp(
        robot: RobotModel, emu: ServoBusEmulator, hz: float) -> None:
    """The drag is bounded by cycles that ran, whatever the machine's load; after the FAULT the joint stays put.

    The bridge's property, in cycles: after the last cycle whose own reading had the joint within
    ``_VISIBLE_RAD`` of the command (cycle ``j``), it leaves ARMED within ``_CYCLES_TO_FAULT`` more
    cycles that read (cycle ``F``; a cycle whose read failed sees nothing), and the FAULT takes the
    dragged servo's torque off in that cycle, with the shipped ``fault_reaction`` (a foreign write
    always does). So the joint ends at most ``_VISIBLE_RAD`` plus what the servo runs at its profile
    velocity from the start of ``j`` to the end of ``F``, measured, however long the machine stalled
    those cycles (a starved emulator thread moves its servos over the stall at once, with the goal
    it finds waiting); and once limp it stays where it is while the writer goes on. On a machine
    that kept time that is within ``_CONTRACT_RAD``.
    """
    loop = Loop(robot, emu)
    command = {_JOINT: 0.0}
    loop.arm(command)
    writer, _ = _writer(robot, emu, hz, _WRITE_S)
    try:
        go = _step_until_ready(loop, writer, command)
        # (start, end, the gap in the bridge's own reading) per cycle, inf where the cycle's read failed
        # (a starved emulator thread: the supervisor keeps its last reading, which is no reading of
        # this cycle); first the last reading before the writer began
        cycles = [(go, go, abs(loop.sup._present[_JOINT] - command[_JOINT]))]
        while loop.sup.state is BridgeState.ARMED and writer.poll() is None:
            t0 = time.monotonic()
            reading = loop.step(command)
            gap = math.inf if reading is None else abs(reading.position[reading.names.index(_JOINT)] - command[_JOINT])
            cycles.append((t0, time.monotonic(), gap))
        left = abs(_rad(robot, emu, _JOINT) - command[_JOINT])   # just after the cycle that left ARMED
        assert loop.sup.state is BridgeState.FAULT, (loop.sup.state, cycles[-3:])
        assert _JOINT in loop.sup.reason and "not written by the bridge" in loop.sup.reason, loop.sup.reason
        assert not emu.torque_enabled(robot.joint(_JOINT).servo_id)
        f = len(cycles) - 1
        j = max(k for k, (_, _, gap) in enumerate(cycles[:-1]) if gap <= _VISIBLE_RAD)
        read = sum(gap < math.inf for _, _, gap in cycles[j + 1:])   # cycles that read, j excluded, F included
        span = cycles[f][1] - cycles[j][0]
        bound = _VISIBLE_RAD + _PROFILE_RAD_S * span
        late = max((b[0] - a[0] for a, b in itertools.pairwise(cycles[1:])), default=0.0)
        # The joint after the FAULT: the writer goes on for the rest of its time, the bridge's loop too.
        after = left
        while writer.poll() is None:
            loop.step(command)
            after = max(after, abs(_rad(robot, emu, _JOINT) - command[_JOINT]))
        print(f"\n{hz:g} Hz: FAULT {read} cycles that read ({f - j} in all) after the last reading within "
              f"{_VISIBLE_RAD} rad "
              f"({span * 1e3:.0f} ms, bound {bound:.3f} rad); joint {left:.3f} rad off at the FAULT, at most "
              f"{after:.3f} rad after it; longest cycle interval {late * 1e3:.0f} ms; {loop.sup.reason}")
        assert read <= _CYCLES_TO_FAULT, (cycles[j:], loop.sup.reason)
        assert left <= bound + _SETTLE_RAD, (left, bound, cycles[j:])
        assert after <= left + _SETTLE_RAD, (after, left)            # limp: the writer drags it no further
        assert loop.sup.state is BridgeState.FAULT and not emu.torque_enabled(robot.joint(_JOINT).servo_id)
        if bound < _CONTRACT_RAD:   # the cycles kept time: the contract holds
            assert after < _CONTRACT_RAD, (after, bound)
        assert after <= loop.config.tracking_tolerance_rad or bound > loop.config.tracking_tolerance_rad, \
            (after, bound)
    finally:
        writer.kill()
        writer.wait()
        loop.sup.shutdown("torque_off")


def test_a_single_foreign_write_is_a_fault_in_the_next_cycle(robot: RobotModel, emu: ServoBusEmulator) -> None:
    """One write between two cycles: the next cycle's read (Goal Position is in it) sees it before its own write.

    The register still holds the other program's goal when the next cycle reads it (the read comes
    before the cycle's write), so the FAULT does not wait for the joint to drift: the servo is limp
    from that cycle on and the foreign goal stays in its register (the bridge writes it no more).
    """
    loop = Loop(robot, emu)
    command = {_JOINT: 0.0}
    loop.arm(command)
    writer, foreign = _writer(robot, emu, 0.0, 0.0)
    try:
        _step_until_ready(loop, writer, command)
        # The write lands between two cycles (the loop waits for it, as a late cycle; the servos'
        # watchdog here is 1 s); one landing between a cycle's read and its write is overwritten
        # by that write and not caught (documented).
        assert writer.stdout is not None
        assert select.select([writer.stdout], [], [], _ARM_GUARD_S)[0], "the writer never wrote"
        assert writer.stdout.readline().strip() == "done"
        sid = robot.joint(_JOINT).servo_id
        deadline = time.monotonic() + _ARM_GUARD_S
        while emu.goal_position(sid) != foreign:   # the emulator's thread has the packet once it is in
            assert time.monotonic() < deadline, "the emulator never took the write"
            time.sleep(0.001)
        loop.step(command)
        print(f"\nsingle write: state {loop.sup.state.value}, {loop.sup.reason}; "
              f"joint {abs(_rad(robot, emu, _JOINT) - command[_JOINT]):.3f} rad off")
        assert loop.sup.state is BridgeState.FAULT, loop.sup.reason
        assert f"{_JOINT} (ID {sid}): Goal Position {foreign}" in loop.sup.reason, loop.sup.reason
        assert not emu.torque_enabled(sid)
        assert emu.goal_position(sid) == foreign   # limp and left alone: not overwritten by the bridge
    finally:
        writer.kill()
        writer.wait()
        loop.sup.shutdown("torque_off")


@pytest.mark.parametrize(("gait", "scale"), [("rolling", 1.0), ("conical", 1.0), ("rolling", -1.0)])
def test_gait_motion_at_the_largest_command_never_leaves_the_envelope(robot: RobotModel, emu: ServoBusEmulator,
                                                                      gait: str, scale: float) -> None:
    """The shipped envelope is tight, yet the gaits at their largest YAML rates stay inside it."""
    from snake_core.gait.registry import make_gait

    g = make_gait(gait, robot)
    top = float(robot.gait("reduction" if gait == "rolling" else gait)["omega_max"])
    command_vector = tuple(scale * top for _ in g.command_names)
    loop = Loop(robot, emu)
    period = loop.config.period_s
    names = g.joint_names
    command = dict(zip(names, g.step(period, command_vector).tolist(), strict=True))
    loop.arm(command)
    worst = 0.0
    for _ in range(round(3.0 / period)):   # 3 s of gait, the commands at the bridge's rate
        command = dict(zip(names, g.step(period, command_vector).tolist(), strict=True))
        loop.step(command)
        assert loop.sup.state is BridgeState.ARMED, loop.sup.reason
        gaps = loop.sup._envelope.gaps(loop.sup._present)
        worst = max([worst, *gaps.values()])
    print(f"\n{gait} x{scale}: largest gap {worst:.4f} rad (tolerance {loop.config.tracking_tolerance_rad})")
    loop.sup.shutdown("torque_off")
