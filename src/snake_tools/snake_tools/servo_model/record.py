"""Record one servo on a pendulum bench: BAM's trajectories at several P gains, as BAM logs.

The servo (its ID alone on the bus, horn at the pendulum's pivot, 0 rad hanging down) is
driven through Protocol 2.0 with the ROBOTIS dynamixel-sdk and the bridge's control table
(:mod:`snake_hardware.dynamixel.control_table`). For each Position P Gain and each trajectory
(:mod:`snake_tools.servo_model.trajectories`): torque off, the gain written, the first goal
held for :data:`SETTLE_S`, then every ``1 / rate_hz`` s the goal (and the torque enable the
trajectory asks) is written and the present state read back in one transaction: current,
velocity, position, input voltage and temperature; then back to 0 at :data:`RETURN_SPEED`
and torque off. Each run is one file in BAM's published JSON format (what ``snake
servo-model identify`` and BAM's own tools read): the header ``mass``, ``arm_mass``,
``length``, ``kp``, ``vin`` (the median supply voltage measured), ``motor``, ``trajectory``,
and per sample ``timestamp`` (s, the middle of its read), ``position`` and ``goal_position``
(rad), ``speed`` (rad/s), ``current`` (A), ``input_volts`` (V), ``temp`` (deg C),
``torque_enable``. With ``fmt="bag"`` each run is a rosbag2 bag directory of standard
messages instead (:mod:`snake_tools.servo_model.bench_bag`), which ``identify`` reads too.
"""

from __future__ import annotations

import json
import math
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snake_hardware.dynamixel import control_table as ct
from snake_tools.servo_model.trajectories import DURATION_S, TRAJECTORIES, Trajectory

SETTLE_S = 1.0
"""s the first goal is held before a run starts (BAM: 1 s)."""
RETURN_SPEED = 1.0
"""rad/s of the move back to 0 after a run."""
MAX_MISSED_IN_ROW = 10
"""Failed reads in a row that end a run (the servo stopped answering)."""
WRITE_ATTEMPTS = MAX_MISSED_IN_ROW
"""Times a write is sent while its status packet does not come, before the recording ends: as many
as the reads a run loses in a row before it ends (each waits about 35 ms at the dynamixel-sdk's
16 ms latency timer, so a computer busy for a third of a second does not end a recording)."""
_STATE_ADDR = ct.PRESENT_CURRENT
_STATE_LEN = ct.PRESENT_TEMPERATURE + 1 - ct.PRESENT_CURRENT
_RAD_PER_TICK = 2.0 * math.pi / ct.TICKS_PER_REV


class RecordError(OSError):
    """The bus or the servo failed in a way that ends the recording (one line)."""


@dataclass(frozen=True)
class Pendulum:
    """The bench: what BAM's header says of it (kg, kg, m)."""

    mass: float
    length: float
    arm_mass: float = 0.0


class ServoLink:
    """One servo through the dynamixel-sdk: ping, registers, goal, present state."""

    def __init__(self, port: str, baud_rate: int, servo_id: int, model: str) -> None:
        """Open ``port`` and check the servo at ``servo_id`` is a ``model``."""
        from dynamixel_sdk import PacketHandler, PortHandler

        self.id = servo_id
        self.model = ct.model(model)
        self.retried = 0
        """Writes sent again because their status packet did not come (:meth:`_written`)."""
        self._port = PortHandler(port)
        self._packet = PacketHandler(2.0)
        if not self._port.openPort():
            raise RecordError(f"cannot open {port}")
        if not self._port.setBaudRate(baud_rate):
            self._port.closePort()
            raise RecordError(f"{port}: cannot set {baud_rate} bps")
        number, result, _error = self._packet.ping(self._port, servo_id)
        if result != 0:
            self._port.closePort()
            raise RecordError(f"ID {servo_id} does not answer on {port} at {baud_rate} bps "
                              f"({self._packet.getTxRxResult(result)})")
        if number != self.model.number:
            self._port.closePort()
            raise RecordError(f"ID {servo_id} is model number {number}, not {model} ({self.model.number})")

    def close(self) -> None:
        """Release the port."""
        self._port.closePort()

    def _written(self, what: str, write: Callable[[], tuple[int, int]]) -> None:
        """A write, sent again while its status packet does not come or comes damaged (:data:`WRITE_ATTEMPTS`).

        The same value written again is harmless; a status lost on a busy computer or a noisy bus
        would otherwise end the recording. The port is cleared between attempts (a late status of
        the first must not pass for a later read's). Each repeat counts in :attr:`retried`.
        """
        from dynamixel_sdk import COMM_RX_CORRUPT, COMM_RX_TIMEOUT

        for attempt in range(WRITE_ATTEMPTS):
            result, error = write()
            if result not in (COMM_RX_TIMEOUT, COMM_RX_CORRUPT) or attempt == WRITE_ATTEMPTS - 1:
                break
            self.retried += 1
            self._port.clearPort()
        if result != 0:
            raise RecordError(f"{what}: {self._packet.getTxRxResult(result)} ({WRITE_ATTEMPTS} attempts)")
        if error != 0:
            raise RecordError(f"{what}: {self._packet.getRxPacketError(error)}")

    def write1(self, addr: int, value: int, what: str) -> None:
        """Write one byte."""
        self._written(what, lambda: self._packet.write1ByteTxRx(self._port, self.id, addr, value))

    def write2(self, addr: int, value: int, what: str) -> None:
        """Write two bytes."""
        self._written(what, lambda: self._packet.write2ByteTxRx(self._port, self.id, addr, value))

    def torque(self, on: bool) -> None:
        """Torque Enable."""
        self.write1(ct.TORQUE_ENABLE, int(on), "Torque Enable")

    def goal(self, angle: float) -> None:
        """Goal Position for a servo angle, rad (0 = the horn centred), within position mode's range."""
        ticks = round(ct.TICKS_CENTER + angle / _RAD_PER_TICK)
        ticks = min(max(ticks, 0), ct.POSITION_MAX_TICKS)
        self._written("Goal Position",
                      lambda: self._packet.write4ByteTxRx(self._port, self.id, ct.GOAL_POSITION, ticks))

    def state(self) -> dict[str, float] | None:
        """Present current (A), velocity (rad/s), position (rad), input voltage (V), temperature; None if not read."""
        data, result, error = self._packet.readTxRx(self._port, self.id, _STATE_ADDR, _STATE_LEN)
        if result != 0 or error != 0 or len(data) != _STATE_LEN:
            return None
        raw = bytes(data)
        current, = struct.unpack_from("<h", raw, 0)
        velocity, position = struct.unpack_from("<ii", raw, ct.PRESENT_VELOCITY - _STATE_ADDR)
        volts, = struct.unpack_from("<H", raw, ct.PRESENT_INPUT_VOLTAGE - _STATE_ADDR)
        temp = raw[ct.PRESENT_TEMPERATURE - _STATE_ADDR]
        unit_a = self.model.current_unit_a if self.model.current_unit_a > 0 else 0.0
        return {"position": (position - ct.TICKS_CENTER) * _RAD_PER_TICK,
                "speed": velocity * ct.VELOCITY_UNIT_RAD_S, "current": current * unit_a,
                "input_volts": volts * ct.VOLTAGE_UNIT_V, "temp": float(temp)}


def record_run(link: ServoLink, trajectory: Trajectory, p_gain: int, rate_hz: float,
               clock: Callable[[], float] = time.monotonic) -> tuple[list[dict[str, Any]], int]:
    """One run: the gain, the settle, the trajectory sampled at ``rate_hz``, the return; (entries, missed reads)."""
    period = 1.0 / rate_hz
    link.torque(False)
    link.write1(ct.OPERATING_MODE, ct.MODE_POSITION, "Operating Mode")
    link.write2(ct.POSITION_P_GAIN, p_gain, "Position P Gain")
    first, _ = trajectory(0.0)
    link.goal(first)
    link.torque(True)
    settle_end = clock() + SETTLE_S
    while clock() < settle_end:
        link.goal(first)
        time.sleep(period)
    entries: list[dict[str, Any]] = []
    missed = in_row = 0
    enabled = True
    start = clock()
    tick = start
    try:
        while (t := clock() - start) < DURATION_S:
            goal, enable = trajectory(t)
            if enable != enabled:
                link.torque(enable)
                enabled = enable
            if enabled:
                link.goal(goal)
            before = clock() - start
            state = link.state()
            after = clock() - start
            if state is None:
                missed += 1
                in_row += 1
                if in_row >= MAX_MISSED_IN_ROW:
                    raise RecordError(f"{in_row} reads in a row failed at t = {t:.2f} s: the servo stopped answering")
            else:
                in_row = 0
                entries.append({"timestamp": 0.5 * (before + after), **state, "goal_position": goal,
                                "torque_enable": enabled})
            tick += period
            time.sleep(max(0.0, tick - clock()))
        _return_to_zero(link, entries[-1]["position"] if entries else 0.0, period, clock)
    finally:
        link.torque(False)
    return entries, missed


def _return_to_zero(link: ServoLink, angle: float, period: float, clock: Callable[[], float]) -> None:
    link.torque(True)
    step = RETURN_SPEED * period
    while abs(angle) > 0.0:
        angle = max(0.0, angle - step) if angle > 0 else min(0.0, angle + step)
        link.goal(angle)
        time.sleep(period)


def bam_log(entries: list[dict[str, Any]], pendulum: Pendulum, p_gain: int, model: str,
            trajectory: str) -> dict[str, Any]:
    """A run as BAM's JSON: the header and the entries."""
    volts = [e["input_volts"] for e in entries if e["input_volts"] > 0]
    return {"mass": pendulum.mass, "arm_mass": pendulum.arm_mass, "length": pendulum.length, "kp": p_gain,
            "vin": float(np.median(volts)) if volts else None, "motor": model, "trajectory": trajectory,
            "entries": entries}


def run_paths(out: Path, model: str, p_gains: Sequence[int], trajectories: Sequence[str],
              fmt: str = "bam") -> list[Path]:
    """Where each run goes: ``MODEL_kpP_TRAJECTORY.json`` (``bam``) or the bag directory without suffix."""
    suffix = ".json" if fmt == "bam" else ""
    return [out / f"{model}_kp{p}_{name}{suffix}" for p in p_gains for name in trajectories]


def record(link: ServoLink, pendulum: Pendulum, p_gains: Sequence[int], trajectories: Sequence[str],
           out: Path, rate_hz: float, say: Callable[[str], None] = print, fmt: str = "bam") -> list[Path]:
    """Every trajectory at every gain, one BAM log (``fmt="bam"``) or bench bag (``"bag"``) each in ``out``.

    Returns:
        The files (bag directories) written.
    """
    from snake_tools.servo_model.bench_bag import write_bench_bag

    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    paths = iter(run_paths(out, link.model.name, p_gains, trajectories, fmt))
    for p_gain in p_gains:
        for name in trajectories:
            start_ns = time.time_ns()
            entries, missed = record_run(link, TRAJECTORIES[name], p_gain, rate_hz)
            path = next(paths)
            log = bam_log(entries, pendulum, p_gain, link.model.name, name)
            if fmt == "bag":
                write_bench_bag(path, entries, log, link.model.torque_constant, start_ns)
            else:
                path.write_text(json.dumps(log))
            written.append(path)
            rate = len(entries) / DURATION_S
            say(f"{path.name}: {len(entries)} samples ({rate:.0f} Hz), {missed} reads missed")
    return written
