"""Dynamixel X-series servos over Protocol 2.0 with dynamixel-sdk 4.1.

Start-up (:meth:`DynamixelBackend.open`): ping every configured ID (a
:class:`~snake_hardware.backend.StartupError` lists the missing IDs and their
joints), check model numbers, reboot servos that report a hardware error, then with
torque off: operating mode (position, or extended position for continuous joints),
Homing Offset 0 (the YAML's ``zero_offset`` is the one calibration), Min/Max Position
Limit from the YAML limits, Return Delay Time, the joint's ``registers`` (PWM Limit and
Current Limit, EEPROM, written only where the servo holds another value, to spare its
flash; Position P/I/D Gain; Profile Velocity and Acceleration, from the joint's YAML
``velocity`` where ``registers`` leaves them 0, never 0 = unlimited), and the Bus Watchdog
armed so a silent bus stops every servo even if this process dies. The registers are then
read back (one sync read of PWM Limit..Current Limit, one of Position D Gain..Profile
Velocity): a value the servo does not hold is listed in
:attr:`DynamixelBackend.register_mismatches`, and the supervisor refuses to arm until a
reboot wrote it. Rebooted servos get the same, once they answer again. Goals are refused
until a sync read of present positions succeeded after open, reconnect or a watchdog trip.

Each cycle is one sync write of Goal Position (116) and one sync read of Present
Current/Velocity/Position (126..135): FAST SYNC READ (one status packet for every servo)
when every servo's model and firmware support it, else SYNC READ; a failed fast read is
retried as a plain one. The framing is dynamixel-sdk's; which answer
belongs to which request is checked here: every answer must carry the awaited ID and
exactly the awaited length (each block read has its own length, see
``control_table.HEALTH_BLOCK_LEN``), others are counted as stale and skipped; after a
failed transaction the port is drained until the line goes quiet. Timeouts and CRC
errors are retried and counted; serial exceptions (device gone) close the port and
raise :class:`~snake_hardware.backend.DeviceLostError`.

Endless rotation (continuous joints, extended position mode): the Goal Position range
is +-1,048,575 ticks (+-256 rev) around the servo's turn count. The backend keeps a
per-joint turn offset (a multiple of 4096 ticks) so that joint angle = f(Present
Position + offset) is continuous, and when a servo's count passes +-128 rev it *unwinds*
it: torque off, Operating Mode 3 then 4 (the e-Manual: changing to position control
mode resets Present Position to within one revolution, the shaft does not move), read
the new count, shift the offset by the whole turns removed, torque on, goal rewritten in
the new frame. At most one servo unwinds per :meth:`DynamixelBackend.read`; each is
counted (``BusCounters.unwinds``). See docs/hardware.md for why this and not Homing
Offset, REBOOT, CLEAR or velocity mode.

Reboot does not block: :meth:`DynamixelBackend.reboot` sends REBOOT and returns; the
rebooted servos leave the sync read and write (their reading is marked ``stale``) and
every :meth:`DynamixelBackend.read` pings them (one attempt, at most every 50 ms) until
they answer, then re-initialises them (torque stays off).

The serial port and packet handler are :mod:`.port`; the transactions on the bus (framing
checks, retries, drain) :mod:`.transactions`; the health poll's timing plan :mod:`.bus_plan`.
"""

from __future__ import annotations

import errno
import math
import struct
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
from dynamixel_sdk.robotis_def import INST_REBOOT

from snake_core.robot import JointSpec, RobotModel
from snake_hardware.backend import (
    Backend,
    BackendError,
    BusCounters,
    CommError,
    ConfigError,
    DeviceLostError,
    JointHealth,
    JointReading,
    NotReadyError,
    StartupError,
)
from snake_hardware.dynamixel import control_table as ct
from snake_hardware.dynamixel import conversion as cv
from snake_hardware.dynamixel import port_lock
from snake_hardware.dynamixel.bus_plan import _split, health_plan
from snake_hardware.dynamixel.hardware_errors import describe_hw_error
from snake_hardware.dynamixel.port import _CountingPort, _latency_timer_ms
from snake_hardware.dynamixel.transactions import _FAST_SEGMENT_OVERHEAD, Transactions

_READ_BACK_ROUNDS = 3  # rounds of reading back written registers from servos that did not answer
_STARTUP_BOOT_WAIT_S = 1.5    # s, longest wait at start-up for servos rebooted to clear an error
_REBOOT_PING_PERIOD_S = 0.05  # s, least time between two pings of a rebooting servo
_UNWIND_TICKS = 128 * ct.TICKS_PER_REV  # |Present Position| beyond which a servo's turns are unwound
_PROFILE_RAMP_S = 0.05        # s, Profile Acceleration reaches the profile velocity in this time
_WATCHDOG_TO_GOAL_LEN = ct.GOAL_POSITION + 4 - ct.BUS_WATCHDOG   # bytes, Bus Watchdog .. Goal Position
_FAST_MAX_LENGTH = 1024       # longest LEN field the SDK accepts in a status packet, bytes
_TICKS_PER_RAD = ct.TICKS_PER_REV / (2.0 * math.pi)
# The registers of a robot description that the health block holds (RAM), checked every poll.
_HEALTH_REGISTERS = ("position_d_gain", "position_i_gain", "position_p_gain", "profile_acceleration",
                     "profile_velocity")
# The state block (Goal Position, Present Current, Velocity, Position) as a numpy record, little-endian.
_STATE_DTYPE = np.dtype({"names": ["goal", "cur", "vel", "pos"], "formats": ["<i4", "<i2", "<i4", "<i4"],
                         "offsets": [ct.GOAL_POSITION - ct.STATE_BLOCK_ADDR,
                                     ct.PRESENT_CURRENT - ct.STATE_BLOCK_ADDR,
                                     ct.PRESENT_VELOCITY - ct.STATE_BLOCK_ADDR,
                                     ct.PRESENT_POSITION - ct.STATE_BLOCK_ADDR],
                         "itemsize": ct.STATE_BLOCK_LEN})


@dataclass(frozen=True)
class DynamixelSettings:
    """Bus settings of the Dynamixel backend.

    Attributes:
        port: Serial device (U2D2), or the emulator's pty path.
        baud_rate: bps; must match the servos' Baud Rate register.
        retries: Extra attempts of a failed transaction.
        latency_ms: USB adapter latency timer, ms (1 after the udev rule; sets read timeouts).
        return_delay_us: Return Delay Time written to every servo, us (2 us units, 0..508).
        profile_velocity: Cap on every servo's Profile Velocity, rad/s (0: the joint's
            YAML ``velocity``, or its ``registers.profile_velocity``, alone). Profile
            Velocity is never 0 (unlimited).
        profile_acceleration: Profile Acceleration in register units where the joint's
            ``registers.profile_acceleration`` is 0 (0: derived, the profile velocity
            reached in 50 ms).
        watchdog_s: Bus Watchdog timeout, s (0 disables; 0.02..2.54 s).
        check_models: Refuse servos whose model number differs from the YAML.
        fast_sync_read: Read the present state with FAST SYNC READ (one status packet for
            every servo) when every servo's model and firmware support it
            (``control_table.FAST_SYNC_READ_FIRMWARE``); else SYNC READ.
    """

    port: str = "/dev/ttyUSB0"
    baud_rate: int = 4_000_000
    retries: int = 2
    latency_ms: float = 1.0
    return_delay_us: int = 0
    profile_velocity: float = 0.0
    profile_acceleration: int = 0
    watchdog_s: float = 0.1
    check_models: bool = True
    fast_sync_read: bool = True

    def validate(self) -> None:
        """Raise ConfigError naming the first bad field."""
        if self.baud_rate not in ct.BAUD_INDEX.values() and self.baud_rate not in (57600, 115200):
            raise ConfigError(f"baud_rate: {self.baud_rate} is not an X-series baud rate")
        if self.retries < 0:
            raise ConfigError(f"retries: must be >= 0, got {self.retries}")
        if not 0 <= self.return_delay_us <= 508:
            raise ConfigError(f"return_delay_us: must be in [0, 508], got {self.return_delay_us}")
        if self.watchdog_s != 0 and not ct.WATCHDOG_UNIT_S <= self.watchdog_s <= 127 * ct.WATCHDOG_UNIT_S:
            raise ConfigError(f"watchdog_s: must be 0 or in [0.02, 2.54] s, got {self.watchdog_s}")
        if self.profile_velocity < 0 or self.profile_acceleration < 0:
            raise ConfigError("profile_velocity / profile_acceleration: must be >= 0")


class DynamixelBackend(Backend):
    """The robot's joints as Dynamixel X-series servos on one bus.

    Args:
        robot: Robot description (joints with servo IDs, models, offsets, limits).
        settings: Bus settings.
    """

    def __init__(self, robot: RobotModel, settings: DynamixelSettings | None = None) -> None:
        """Check the description; :meth:`open` talks to the servos."""
        self._robot = robot
        self._settings = settings or DynamixelSettings()
        self._settings.validate()
        self._joints: tuple[JointSpec, ...] = robot.joints
        self._index = {j.name: i for i, j in enumerate(self._joints)}
        for j in self._joints:
            try:
                ct.model(j.model)
            except KeyError as err:
                raise ConfigError(f"{j.name}.model: {err.args[0]}") from None
            if j.operating_mode == "position":
                try:
                    cv.limit_ticks(j)
                except ValueError as err:
                    raise ConfigError(str(err)) from None
            if j.operating_mode == "velocity":
                raise ConfigError(f"{j.name}.operating_mode: velocity mode is not supported by this bridge")
        n = len(self._joints)
        self._names = tuple(j.name for j in self._joints)
        self._extended = [j.operating_mode == "extended_position" for j in self._joints]
        self._extended_index = [i for i, ext in enumerate(self._extended) if ext]
        # Per-cycle conversion constants (conversion.py's formulas, one array per factor).
        self._limits = [cv.limit_ticks(j) if j.operating_mode == "position" else None for j in self._joints]
        self._ids = [j.servo_id for j in self._joints]
        self._direction = np.array([float(j.direction) for j in self._joints])
        self._zero = np.array([j.zero_offset for j in self._joints])
        models = [ct.model(j.model) for j in self._joints]
        self._cur_unit = np.array([m.current_unit_a if m.current_unit_a > 0 else 1e-3 for m in models])
        self._cur_torque = np.array([m.torque_constant if m.current_unit_a > 0 else m.stall_torque
                                     for m in models])
        self._goal_table = cv.GoalTable(self._joints, self._limits)
        # A Goal Position sync write's parameters: per servo its ID, then the 4-byte register value.
        self._goal_frame = struct.Struct("<" + "BI" * n)
        self._counters = BusCounters()
        self._bus = Transactions(self._settings, self._counters, self._joints, self._ids, self.close)
        self._fresh = False
        self._present = np.zeros(n)
        self._known = [False] * n                 # a position was ever read
        self._torque = [False] * n
        self._turns = [0] * n                     # ticks added to Present Position (multiple of 4096)
        self._raw: list[int | None] = [None] * n  # last Present Position register value
        self._anchor: set[int] = set()            # joints whose turn offset is set at the next read
        self._goal_unwrapped: list[int | None] = [None] * n   # last goal sent, unwrapped ticks
        self._goal_register: list[int | None] = [None] * n    # last goal sent, register ticks
        # Per joint, (least, greatest) register ticks written since the servo's last health read.
        self._goal_band: list[tuple[int, int] | None] = [None] * n
        self._rearming: set[int] = set()          # joints whose watchdog clear + re-arm has not gone through
        self._unwind_due: set[int] = set()
        self._rebooting: dict[int, float] = {}    # joint index -> monotonic time of the last ping
        self._rejected: dict[str, str] = {}
        self._goals_moved: tuple[str, ...] = ()   # joints whose goal the last read found moved (not ours)
        self._registers = [self.register_values(j) for j in self._joints]  # what each servo must hold
        self._write_refusals: dict[int, str] = {}  # joint index -> register writes the servo refused
        self._mismatch: dict[int, str] = {}        # joint index -> registers read back other than written

    # --- Backend interface ----------------------------------------------------------------
    @property
    def joint_names(self) -> tuple[str, ...]:
        """Joint names, head to tail."""
        return self._names

    @property
    def counters(self) -> BusCounters:
        """Live communication counters."""
        return self._counters

    @property
    def rejected_goals(self) -> Mapping[str, str]:
        """Joints whose goal the last :meth:`write_goals` did not send, with the reason."""
        return dict(self._rejected)

    def describe_hardware_error(self, bits: int) -> str:
        """Names of the X-series Hardware Error Status bits set in ``bits`` (:mod:`.hardware_errors`)."""
        return describe_hw_error(bits)

    @property
    def settings(self) -> DynamixelSettings:
        """The bus settings."""
        return self._settings

    @property
    def bus_wait_s(self) -> float:
        """Seconds spent polling the port for answers since it was opened (0 if closed)."""
        return self._bus.port.wait_s if self._bus.port is not None else 0.0

    @property
    def ready(self) -> bool:
        """True once fresh present positions were read (goals accepted)."""
        return self._fresh

    @property
    def rebooting(self) -> tuple[str, ...]:
        """Joints whose servo was rebooted and has not been re-initialised yet."""
        return tuple(self._joints[i].name for i in sorted(self._rebooting))

    @property
    def register_mismatches(self) -> dict[str, str]:
        """Joints whose servo does not hold the registers written to it (read back), described.

        Each as ``"ID 3: Position P Gain 0 (written 800)"``; also a servo that refused a
        write or did not answer the read-back. Empty when every register took.
        """
        return {self._joints[i].name: why for i, why in sorted(self._mismatch.items())}

    def written_registers(self) -> dict[str, dict[str, int]]:
        """Per joint, the registers written to its servo, register units (:meth:`register_values`)."""
        return {j.name: dict(self._registers[i]) for i, j in enumerate(self._joints)}

    def turn_offsets(self) -> dict[str, int]:
        """Per joint, the ticks added to Present Position to get the unwrapped position."""
        return {j.name: self._turns[i] for i, j in enumerate(self._joints)}

    def open(self) -> None:
        """Open the port and initialise every servo (torque stays off)."""
        self._open_port()
        try:
            self._initialise()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the port; never raises."""
        port, self._bus.port = self._bus.port, None
        self._fresh = False
        if port is not None:
            try:
                port_lock.unlock_port(port.ser.fd)
                port.closePort()
            except Exception:
                pass

    def reconnect(self) -> None:
        """Close, reopen and re-initialise; goals wait for the next :meth:`read`."""
        self.close()
        self.open()
        self._counters.reconnects += 1

    def read(self) -> JointReading:
        """Sync read of present current, velocity and position of every servo.

        Rebooting servos are pinged (and re-initialised once they answer) instead of read;
        their values are the last ones read and their names are listed in ``stale``.
        Afterwards, at most one continuous joint past the unwind threshold is unwound.
        """
        self._bus.require(self._bus.port)
        self._service_reboots()
        active = [j for i, j in enumerate(self._joints) if i not in self._rebooting] if self._rebooting \
            else self._joints
        blocks: dict[int, bytes] = {}
        if active:
            blocks = self._bus.transact("sync read of present state", partial(
                self._bus.state_read, active, [self._bus.fast]))
        if self._rebooting:
            pos, vel, eff, stale = self._decode_each(blocks)
        else:
            pos, vel, eff = self._decode_all(blocks)
            stale = []
        self._goals_moved = self._unexplained_goals(blocks)
        self._present = pos
        self._fresh = True
        reading = JointReading(self.joint_names, pos.copy(), vel, eff, time.monotonic(), tuple(stale))
        self._maybe_unwind()
        return reading

    def _unexplained_goals(self, blocks: Mapping[int, bytes]) -> tuple[str, ...]:
        """Joints with torque on whose Goal Position in the state read no recent goal of ours explains.

        Recent: the last goal written, or one inside the band written since the servo's last
        health read (a goal the servo refused keeps an older one of ours).

        Read before the cycle's goal write, so a goal another program wrote since the last
        write is still in the register. A servo whose Bus Watchdog tripped set its goal itself;
        :meth:`foreign_goals` (which reads the watchdog too) tells the two apart.
        """
        out: list[str] = []
        base = ct.STATE_BLOCK_ADDR
        register, bands, torque = self._goal_register, self._goal_band, self._torque
        for i, j in enumerate(self._joints):
            expected = register[i]
            b = blocks.get(j.servo_id)
            if expected is None or b is None or not torque[i]:
                continue
            goal = _field(b, base, ct.GOAL_POSITION, 4)
            band = bands[i]
            if goal != expected and (band is None or not band[0] <= goal <= band[1]):
                out.append(j.name)
        return tuple(out)

    @property
    def goals_moved(self) -> tuple[str, ...]:
        """Joints whose Goal Position, read by the last :meth:`read`, is none of the goals recently written."""
        return self._goals_moved

    def _decode_all(self, blocks: Mapping[int, bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Joint position, velocity and effort of every servo from its state block (none rebooting).

        :mod:`.conversion`'s formulas on arrays: the same operations in the same order
        as :meth:`_decode_each`, so the same values.
        """
        st = np.frombuffer(b"".join([blocks[sid] for sid in self._ids]), dtype=_STATE_DTYPE)
        raw_pos = st["pos"].astype(np.int64)
        raw = raw_pos.tolist()
        if self._anchor:
            for i in sorted(self._anchor):
                self._anchor_turns(i, raw[i])
        self._raw = list(raw)
        self._known = [True] * len(raw)
        ticks = raw_pos + np.array(self._turns, dtype=np.int64)
        pos = ((ticks - ct.TICKS_CENTER) / _TICKS_PER_RAD - self._zero) * self._direction
        vel = st["vel"] * ct.VELOCITY_UNIT_RAD_S * self._direction
        eff = st["cur"] * self._cur_unit * self._cur_torque * self._direction
        return pos, vel, eff

    def _decode_each(self, blocks: Mapping[int, bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
        """Like :meth:`_decode_all`, joint by joint: rebooting joints keep their last position (stale)."""
        n = len(self._joints)
        pos, vel, eff = np.empty(n), np.zeros(n), np.zeros(n)
        stale = []
        base = ct.STATE_BLOCK_ADDR
        for i, j in enumerate(self._joints):
            if i in self._rebooting:
                pos[i] = self._present[i]
                stale.append(j.name)
                continue
            b = blocks[j.servo_id]
            raw_pos = _field(b, base, ct.PRESENT_POSITION, 4)
            raw_vel = _field(b, base, ct.PRESENT_VELOCITY, 4)
            raw_cur = _field(b, base, ct.PRESENT_CURRENT, 2)
            if i in self._anchor:
                self._anchor_turns(i, raw_pos)
            self._raw[i] = raw_pos
            pos[i] = cv.ticks_to_joint(j, raw_pos + self._turns[i])
            vel[i] = cv.velocity_to_joint(j, raw_vel)
            eff[i] = cv.current_to_effort(j, raw_cur)
            self._known[i] = True
        return pos, vel, eff, stale

    def write_goals(self, goals: Mapping[str, float]) -> None:
        """One sync write of Goal Position for the named joints.

        Each goal is converted on its own (clamped to the joint limits, checked against the
        servo's range at the present turn count); a goal that cannot be converted or
        placed is skipped, counted in ``goals_rejected`` and listed in
        :attr:`rejected_goals`, and the other joints' goals still go out. Rebooting
        joints are skipped (listed with reason ``rebooting``, not counted).
        """
        if not self._fresh:
            raise NotReadyError("no fresh present positions since open/reconnect: read() first")
        port = self._bus.require(self._bus.port)
        rejected: dict[str, str] = {}
        params: list[int] = []
        sent: list[tuple[int, int]] = []
        table, turns, index = self._goal_table, self._turns, self._index
        every = self._every_goal_placed(goals)
        if every is not None:   # the usual cycle: a goal per joint, each placed
            params = list(every[0])
            sent = list(enumerate(every[1]))
        for name, angle in goals.items() if every is None else ():
            i = index.get(name)
            if i is None:
                rejected[str(name)] = "unknown joint"
                self._counters.goals_rejected += 1
                continue
            if i in self._rebooting:
                rejected[name] = "rebooting"
                continue
            j = self._joints[i]
            ticks = table.ticks(i, angle, turns[i])
            if ticks is None:   # not placed: conversion.goal_ticks gives the reason
                try:
                    ticks = cv.goal_ticks(j, angle, turns[i], self._limits[i])
                except ValueError as err:
                    rejected[name] = str(err)
                    self._counters.goals_rejected += 1
                    continue
            params.append(j.servo_id)
            params += (ticks & 0xFFFFFFFF).to_bytes(4, "little")
            sent.append((i, ticks))
        self._rejected = rejected
        if params:
            self._bus.transact("sync write of goal positions", lambda: (None, self._bus.packet.syncWriteTxOnly(
                port, ct.GOAL_POSITION, 4, params, len(params))))
        register, unwrapped, bands, turns = self._goal_register, self._goal_unwrapped, self._goal_band, self._turns
        for i, ticks in sent:
            register[i] = ticks
            unwrapped[i] = ticks + turns[i]
            band = bands[i]
            if band is None:
                bands[i] = (ticks, ticks)
            elif ticks < band[0]:
                bands[i] = (ticks, band[1])
            elif ticks > band[1]:
                bands[i] = (band[0], ticks)

    def _every_goal_placed(self, goals: Mapping[str, float]) -> tuple[bytes, list[int]] | None:
        """The sync write's parameters and each joint's ticks when every joint has a goal that is placed.

        Only for a float goal per joint, in the joints' order, none rebooting: then
        :meth:`~.conversion.GoalTable.ticks_every` gives what the joint-by-joint loop of
        :meth:`write_goals` gives. None otherwise (the loop then finds the reasons).
        """
        if self._rebooting or len(goals) != len(self._names) or tuple(goals) != self._names:
            return None
        ticks = self._goal_table.ticks_every(goals.values(), self._turns)
        if ticks is None:
            return None
        frame = [v for sid, t in zip(self._ids, ticks, strict=True) for v in (sid, t & 0xFFFFFFFF)]
        return self._goal_frame.pack(*frame), ticks

    def set_torque(self, enabled: bool, names: Sequence[str] | None = None) -> None:
        """Torque on/off with one sync write; on: goal := present first (no jump); off: verified.

        Rebooting joints are left out of torque on (they come back with torque off).
        """
        joints = self._select(names)
        if enabled:
            if not self._fresh:
                raise NotReadyError("torque on needs fresh present positions: read() first")
            joints = [j for j in joints if self._index[j.name] not in self._rebooting]
            self.write_goals({j.name: float(self._present[self._index[j.name]]) for j in joints})
        self._bus.sync_write_byte(ct.TORQUE_ENABLE, int(enabled), joints)
        if not enabled:
            # Torque off must not depend on one unacknowledged packet: read back and repeat.
            live = [j for j in joints if self._index[j.name] not in self._rebooting]
            for _ in range(self._settings.retries + 1):
                state = self._bus.sync_read_block(ct.ERROR_BLOCK_ADDR, ct.ERROR_BLOCK_LEN, live)
                still_on = [j for j in live if state.get(j.servo_id, b"\x01")[0]]
                if not still_on:
                    break
                self._bus.sync_write_byte(ct.TORQUE_ENABLE, 0, still_on)
        for j in joints:
            i = self._index[j.name]
            self._torque[i] = enabled
            self._goal_register[i] = None   # torque on sets the servo's goal to its present position

    def torque_enabled(self) -> dict[str, bool]:
        """Torque state as last commanded, per joint."""
        return {j.name: self._torque[i] for i, j in enumerate(self._joints)}

    def health(self) -> list[JointHealth]:
        """Hardware error, temperature, voltage, torque, watchdog and foreign writes of every servo.

        One whole round of :meth:`health_round` at once (two sync reads).
        """
        out: list[JointHealth] = []
        for part in self.health_round(math.inf):
            out.extend(part)
        order = {name: k for k, name in enumerate(self.joint_names)}
        return sorted(out, key=lambda h: order[h.name])

    def health_round(self, period_s: float) -> Iterator[list[JointHealth]]:
        """One health poll spread over cycles: one sync read per step, sized to the cycle's slack.

        A round first reads Operating Mode (1 byte), then the health block, Torque
        Enable .. Present Temperature (83 bytes), each for as many servos per step as
        :func:`health_plan` fits into a cycle of ``period_s`` at the configured baud rate
        and latency timer. A servo's :class:`JointHealth` is yielded in the step that read
        its health block; servos that did not answer a sync read are then read one by
        one in the same step (single attempts). Hardware error bits count as confirmed
        only when a dedicated read of Hardware Error Status repeats them; otherwise they
        are ``pending_error`` and counted in ``unconfirmed_errors``. A Goal Position read
        back that differs from the last goal written (torque on, watchdog not tripped)
        means the servo refused it (``goal_refused``, ``goals_refused``), unless it lies
        outside every goal written since the servo's previous health read: then another
        program wrote it (``foreign``). Operating Mode, Bus Watchdog, Position P/I/D Gain
        and Profile Velocity/Acceleration other than what the backend wrote are ``foreign``
        too (the gains and the profile lie in the health block; a register that did not take
        at start-up is :attr:`register_mismatches`, not foreign). A tripped Bus Watchdog is
        cleared and re-armed here (goals then wait for a fresh read).
        """
        servos = [j for i, j in enumerate(self._joints) if i not in self._rebooting]
        waiting = [self._rebooting_health(j) for i, j in enumerate(self._joints) if i in self._rebooting]
        plan = health_plan(len(servos), period_s, self._settings.baud_rate, self._settings.latency_ms)
        modes: dict[int, int] = {}
        for chunk in _split(servos, plan.mode_chunks):
            live = [j for j in chunk if self._index[j.name] not in self._rebooting]
            modes.update({sid: b[0] for sid, b in self._bus.sync_read_block(ct.OPERATING_MODE, 1, live).items()})
            yield []
        for chunk in _split(servos, plan.status_chunks):
            live = [j for j in chunk if self._index[j.name] not in self._rebooting]
            blocks = self._bus.sync_read_block(ct.HEALTH_BLOCK_ADDR, ct.HEALTH_BLOCK_LEN, live)
            out = [self._decode_health(j, blocks.get(j.servo_id), modes.get(j.servo_id)) for j in live]
            tripped = [j for j, h in zip(live, out, strict=True)
                       if h.watchdog_tripped or self._index[j.name] in self._rearming]
            if tripped:
                self._fresh = False
                for j in tripped:
                    i = self._index[j.name]
                    self._goal_register[i] = None
                    # The pair clear + re-arm is the backend's own: until both went through, the
                    # servo's watchdog 0 is ours (never foreign) and the pair is retried next round.
                    self._rearming.add(i)
                    self._bus.write(j.servo_id, ct.BUS_WATCHDOG, 1, 0)
                    self._bus.write(j.servo_id, ct.BUS_WATCHDOG, 1, self._watchdog_units())
                    self._rearming.discard(i)
            out += [self._rebooting_health(j) for j in chunk if j not in live] + waiting
            waiting = []
            yield out
        if waiting:
            yield waiting

    @staticmethod
    def _rebooting_health(j: JointSpec) -> JointHealth:
        return JointHealth(j.name, -1, math.nan, math.nan, False, False, rebooting=True)

    def _decode_health(self, j: JointSpec, b: bytes | None, mode: int | None) -> JointHealth:
        """The health of one servo from its health block (None: no answer) and Operating Mode."""
        i = self._index[j.name]
        if b is None:
            return JointHealth(j.name, -1, math.nan, math.nan, None, False)
        base = ct.HEALTH_BLOCK_ADDR
        torque = bool(_field(b, base, ct.TORQUE_ENABLE, 1))
        watchdog = _field(b, base, ct.BUS_WATCHDOG, 1) & 0xFF
        wd = watchdog == ct.WATCHDOG_TRIPPED
        bits = _field(b, base, ct.HARDWARE_ERROR_STATUS, 1)
        confirmed, pending = 0, 0
        if bits:
            confirmed = self._confirm_hardware_error(j)
            if not confirmed:
                pending = bits
                self._counters.unconfirmed_errors += 1
        foreign: list[str] = []
        expected_mode = ct.OPERATING_MODES[j.operating_mode]
        if mode is not None and mode != expected_mode:
            foreign.append(f"Operating Mode {mode} (written {expected_mode})")
        if not wd and watchdog != self._watchdog_units() and not (i in self._rearming and watchdog == 0):
            foreign.append(f"Bus Watchdog {watchdog} (written {self._watchdog_units()})")
        if i not in self._mismatch:
            for key in _HEALTH_REGISTERS:
                addr, size = ct.SERVO_REGISTERS[key]
                held, written = _field(b, base, addr, size), self._registers[i][key]
                if held != written:
                    foreign.append(f"{ct.REGISTER_NAMES[key]} {held} (written {written})")
        goal_refused = False
        expected = self._goal_register[i]
        band = self._goal_band[i]
        if torque and not wd and expected is not None:
            goal = _field(b, base, ct.GOAL_POSITION, 4)
            if band is not None and not band[0] <= goal <= band[1]:
                foreign.append(f"Goal Position {goal} (written {expected})")
            elif goal != expected:
                goal_refused = True
                self._counters.goals_refused += 1
        self._goal_band[i] = (expected, expected) if expected is not None else None
        self._torque[i] = torque
        return JointHealth(
            j.name, confirmed, float(_field(b, base, ct.PRESENT_TEMPERATURE, 1)),
            _field(b, base, ct.PRESENT_INPUT_VOLTAGE, 2) * ct.VOLTAGE_UNIT_V,
            torque, wd, pending_error=pending, goal_refused=goal_refused, foreign=tuple(foreign))

    def foreign_goals(self, names: Sequence[str]) -> dict[str, str]:
        """Goal Position of the named servos read back now: those no goal of ours explains, described.

        Called before the cycle's goal write (by the supervisor, for joints drifting from their
        goals), so a goal another program wrote since the last write is still in the register.
        A value equal to the last goal written, or inside the band of goals written since the
        servo's last health read (a goal the servo refused keeps an older one of ours), is ours.
        """
        joints = [j for j in self._select(names)
                  if self._goal_register[self._index[j.name]] is not None and self._torque[self._index[j.name]]]
        if not joints or self._rebooting:
            return {}
        # Bus Watchdog .. Goal Position in one read: a tripped watchdog sets Goal Position to the
        # stop position itself (the servo's doing, not another program's; the health poll re-arms it).
        blocks = self._bus.sync_read_block(ct.BUS_WATCHDOG, _WATCHDOG_TO_GOAL_LEN, joints)
        out: dict[str, str] = {}
        for j in joints:
            b = blocks.get(j.servo_id)
            i = self._index[j.name]
            expected, band = self._goal_register[i], self._goal_band[i]
            if b is None or expected is None or b[0] == ct.WATCHDOG_TRIPPED:
                continue
            goal = _field(b, ct.BUS_WATCHDOG, ct.GOAL_POSITION, 4)
            if goal != expected and (band is None or not band[0] <= goal <= band[1]):
                out[j.name] = f"Goal Position {goal} (written {expected})"
        return out

    def reboot(self, names: Sequence[str]) -> None:
        """Send REBOOT to the named servos and return at once (clears hardware errors).

        The servos answer the instruction, then boot (about 0.4 s) with torque off. Until
        they answer a ping again they are left out of reads and writes; :meth:`read`
        pings them and re-initialises each as soon as it answers.
        """
        joints = self._select(names)
        port = self._bus.require(self._bus.port)
        for j in joints:
            self._bus.transact(f"reboot of ID {j.servo_id}", partial(
                self._bus.txrx, port, j.servo_id, INST_REBOOT, [], 0))
            self._counters.reboots += 1
            i = self._index[j.name]
            self._rebooting[i] = time.monotonic()
            self._torque[i] = False
            self._goal_register[i] = None
            self._goal_band[i] = None
            self._unwind_due.discard(i)

    # --- start-up --------------------------------------------------------------------------
    def _open_port(self) -> None:
        s = self._settings
        port = _CountingPort(s.port, s.latency_ms, self._counters)
        try:
            # One open, at the configured rate, locked before configuring (not the SDK's openPort,
            # which first opens at 57600 bps and then reopens).
            ok = port.setBaudRate(s.baud_rate)
        except Exception as err:
            # EBUSY: the holder set TIOCEXCL (a non-root opener); EWOULDBLOCK/EAGAIN: the holder's
            # flock (root passes TIOCEXCL); either way nothing of the port was changed.
            if getattr(err, "errno", None) in (errno.EBUSY, errno.EWOULDBLOCK, errno.EAGAIN):
                raise port_lock.busy_error(s.port) from None
            raise DeviceLostError(f"cannot open {s.port}: {err}") from err
        if not ok:
            raise DeviceLostError(f"cannot open {s.port} at {s.baud_rate} bps")
        try:
            port_lock.lock_port(port.ser.fd, s.port)   # TIOCEXCL too, before any byte goes out
        except BaseException:
            port.ser.close()
            raise
        self._bus.port = port
        self._fresh = False

    def _initialise(self) -> None:
        port = self._bus.require(self._bus.port)
        missing, wrong = [], []
        for j in self._joints:
            try:
                model_number = self._bus.ping(j.servo_id)
            except CommError:
                missing.append(j)
                continue
            expected = ct.model(j.model).number
            if self._settings.check_models and model_number != expected:
                wrong.append(f"ID {j.servo_id} ({j.name}) is model {model_number}, "
                             f"YAML says {j.model} ({expected})")
        if missing:
            listing = ", ".join(f"{j.servo_id} ({j.name})" for j in missing)
            raise StartupError(f"{len(missing)} of {len(self._joints)} servos do not answer on "
                               f"{self._settings.port} at {self._settings.baud_rate} bps: IDs {listing}"
                               f"{_no_answer_hint(self._settings)}")
        if wrong:
            raise StartupError("model number mismatch: " + "; ".join(wrong))
        # Clear hardware errors by rebooting the servos that report one.
        errored = [j for j in self._joints
                   if self._bus.read(j.servo_id, ct.ERROR_BLOCK_ADDR, ct.ERROR_BLOCK_LEN)[-1] != 0]
        for j in errored:
            self._bus.transact(f"reboot of ID {j.servo_id}", partial(
                self._bus.txrx, port, j.servo_id, INST_REBOOT, [], 0))
            self._counters.reboots += 1
        self._wait_for_boot(errored)
        self._write_refusals.clear()
        for j in self._joints:
            self._configure(j)
        self._verify_registers(self._joints)
        self._torque = [False] * len(self._joints)
        self._goal_register = [None] * len(self._joints)
        self._goal_band = [None] * len(self._joints)
        self._rearming.clear()                     # _configure wrote every servo's watchdog
        self._rebooting.clear()
        self._unwind_due.clear()
        self._anchor = set(range(len(self._joints)))
        self._fresh = False
        self._bus.fast_failures_in_row = 0
        fast_length = 1 + len(self._joints) * (ct.STATE_BLOCK_LEN + _FAST_SEGMENT_OVERHEAD)
        self._bus.fast = self._settings.fast_sync_read and fast_length <= _FAST_MAX_LENGTH and all(
            ct.supports_fast_sync_read(j.model, self._bus.firmware.get(j.servo_id, 0)) for j in self._joints)

    @property
    def fast_sync_read(self) -> bool:
        """Whether the present state is read with FAST SYNC READ (decided at open)."""
        return self._bus.fast

    def _wait_for_boot(self, joints: Sequence[JointSpec]) -> None:
        deadline = time.monotonic() + _STARTUP_BOOT_WAIT_S
        waiting = list(joints)
        while waiting:
            waiting = [j for j in waiting if not self._bus.ping_once(j.servo_id)]
            if waiting and time.monotonic() > deadline:
                raise StartupError("servos rebooted to clear a hardware error did not answer again: IDs "
                                   + ", ".join(f"{j.servo_id} ({j.name})" for j in waiting))

    def _configure(self, j: JointSpec) -> None:
        """Every setting of one servo, torque off (EEPROM then RAM)."""
        self._bus.write(j.servo_id, ct.TORQUE_ENABLE, 1, 0)
        self._bus.write(j.servo_id, ct.BUS_WATCHDOG, 1, 0)  # clears a tripped watchdog too
        self._bus.write(j.servo_id, ct.OPERATING_MODE, 1, ct.OPERATING_MODES[j.operating_mode])
        self._bus.write(j.servo_id, ct.HOMING_OFFSET, 4, 0)
        self._bus.write(j.servo_id, ct.RETURN_DELAY_TIME, 1, self._settings.return_delay_us // 2)
        if j.operating_mode == "position":
            lo, hi = cv.limit_ticks(j)
            self._bus.write(j.servo_id, ct.MIN_POSITION_LIMIT, 4, lo)
            self._bus.write(j.servo_id, ct.MAX_POSITION_LIMIT, 4, hi)
        self._write_limits(j)
        self._configure_ram(j)

    def _write_limits(self, j: JointSpec) -> None:
        """PWM Limit and Current Limit (EEPROM, torque off): each only where the servo holds another value.

        The servo's flash wears with every EEPROM write, and the bridge configures at every
        connect and reboot: a value already held is not written again.
        """
        i = self._index[j.name]
        held = self._bus.read(j.servo_id, ct.LIMITS_BLOCK_ADDR, ct.LIMITS_BLOCK_LEN)
        for key in ("pwm_limit", "current_limit"):
            if key not in self._registers[i]:
                continue
            addr, size = ct.SERVO_REGISTERS[key]
            if _field(held, ct.LIMITS_BLOCK_ADDR, addr, size) != self._registers[i][key]:
                self._write_register(j, key)

    def _configure_ram(self, j: JointSpec) -> None:
        """Position P/I/D Gain (one write), the profile (one write) and the Bus Watchdog of one servo."""
        regs = self._registers[self._index[j.name]]
        self._write_block(j, ("position_d_gain", "position_i_gain", "position_p_gain"),
                          struct.pack("<HHH", regs["position_d_gain"], regs["position_i_gain"],
                                      regs["position_p_gain"]))
        self._write_block(j, ("profile_acceleration", "profile_velocity"),
                          struct.pack("<II", regs["profile_acceleration"], regs["profile_velocity"]))
        self._bus.write(j.servo_id, ct.BUS_WATCHDOG, 1, self._watchdog_units())

    def _write_register(self, j: JointSpec, key: str) -> None:
        size = ct.SERVO_REGISTERS[key][1]
        value = self._registers[self._index[j.name]][key]
        self._write_block(j, (key,), value.to_bytes(size, "little"))

    def _write_block(self, j: JointSpec, keys: Sequence[str], data: bytes) -> None:
        """One WRITE of adjacent registers of :data:`ct.SERVO_REGISTERS`; a refusal is recorded, not raised.

        The read-back (:meth:`_verify_registers`) then names the register; the refusal's
        status error is kept for its message.
        """
        addr = ct.SERVO_REGISTERS[keys[0]][0]
        try:
            self._bus.write(j.servo_id, addr, len(data), int.from_bytes(data, "little"))
        except StartupError as err:   # the servo answered with an error status: not a bus failure
            i = self._index[j.name]
            names = "/".join(ct.REGISTER_NAMES[k] for k in keys)
            refusal = f"{names} refused ({err})"
            self._write_refusals[i] = "; ".join(x for x in (self._write_refusals.get(i, ""), refusal) if x)

    def _verify_registers(self, joints: Sequence[JointSpec]) -> None:
        """Read back every register of :attr:`written_registers` (two sync reads); record what differs.

        Sets or clears each joint's entry of :attr:`register_mismatches`.
        """
        limits: dict[int, bytes] = {}
        gains: dict[int, bytes] = {}
        unread = list(joints)
        for _ in range(_READ_BACK_ROUNDS):  # a read that timed out (a busy computer) says nothing: ask again
            limits.update(self._bus.sync_read_block(ct.LIMITS_BLOCK_ADDR, ct.LIMITS_BLOCK_LEN, unread))
            gains.update(self._bus.sync_read_block(ct.GAINS_BLOCK_ADDR, ct.GAINS_BLOCK_LEN, unread))
            unread = [j for j in unread if j.servo_id not in limits or j.servo_id not in gains]
            if not unread:
                break
        for j in joints:
            i = self._index[j.name]
            refused = self._write_refusals.pop(i, "")
            lb, gb = limits.get(j.servo_id), gains.get(j.servo_id)
            if lb is None or gb is None:
                self._mismatch[i] = f"ID {j.servo_id}: registers not read back (no answer)"
                continue
            wrong = []
            for key, value in self._registers[i].items():
                addr, size = ct.SERVO_REGISTERS[key]
                block, base = (lb, ct.LIMITS_BLOCK_ADDR) if addr < ct.EEPROM_END else (gb, ct.GAINS_BLOCK_ADDR)
                held = _field(block, base, addr, size)
                if held != value:
                    wrong.append(f"{ct.REGISTER_NAMES[key]} {held} (written {value})")
            if wrong or refused:
                self._mismatch[i] = f"ID {j.servo_id}: " + ", ".join(wrong + ([refused] if refused else []))
            else:
                self._mismatch.pop(i, None)

    def register_values(self, j: JointSpec) -> dict[str, int]:
        """The registers the backend writes to a joint's servo, register units.

        The joint's ``registers`` (:class:`snake_core.robot.ServoRegisters`), with Profile
        Velocity and Acceleration from :meth:`profile_units` (never 0), and without Current
        Limit on a model that has none (the XL430).
        """
        values = j.registers.as_dict()
        values["profile_velocity"], values["profile_acceleration"] = self.profile_units(j)
        if not ct.model(j.model).current_limit:
            del values["current_limit"]
        return values

    def profile_units(self, j: JointSpec) -> tuple[int, int]:
        """(Profile Velocity, Profile Acceleration) register values of a joint, never 0.

        Velocity: the joint's ``registers.profile_velocity`` if not 0, else its YAML
        ``velocity``, capped by ``settings.profile_velocity`` if set; acceleration: the
        joint's ``registers.profile_acceleration`` if not 0, else
        ``settings.profile_acceleration`` if set, else that velocity reached in 50 ms.
        """
        s = self._settings
        regs = j.registers
        if regs.profile_velocity > 0:
            vel_units = regs.profile_velocity
            if s.profile_velocity > 0:
                vel_units = min(vel_units, max(1, cv.velocity_to_units(s.profile_velocity)))
        else:
            speed = min(j.velocity, s.profile_velocity) if s.profile_velocity > 0 else j.velocity
            vel_units = max(1, cv.velocity_to_units(speed))
        speed = vel_units * ct.VELOCITY_UNIT_RAD_S
        acc_units = regs.profile_acceleration or s.profile_acceleration or max(
            1, math.ceil(speed / _PROFILE_RAMP_S / ct.ACCELERATION_UNIT_RAD_S2))
        return vel_units, acc_units

    def _watchdog_units(self) -> int:
        return math.ceil(self._settings.watchdog_s / ct.WATCHDOG_UNIT_S - 1e-9)

    # --- turns, unwinding and reboots -----------------------------------------------------------
    def _anchor_turns(self, i: int, raw: int) -> None:
        """Turn offset of a (re)initialised servo: the one putting it nearest its last known position."""
        self._anchor.discard(i)
        if not self._extended[i]:
            self._turns[i] = 0
            return
        if not self._known[i]:
            return
        j = self._joints[i]
        last = cv.joint_to_ticks(j, float(self._present[i]))
        self._turns[i] = round((last - raw) / ct.TICKS_PER_REV) * ct.TICKS_PER_REV

    def _maybe_unwind(self) -> None:
        due = [i for i in self._extended_index
               if i not in self._rebooting and self._raw[i] is not None
               and (abs(self._raw[i] or 0) > _UNWIND_TICKS or i in self._unwind_due)]
        if due:
            self._unwind(max(due, key=lambda i: abs(self._raw[i] or 0)))

    def _unwind(self, i: int) -> None:
        """Bring one extended-position servo's turn count back within one revolution.

        Torque off, Operating Mode 3 then 4 (Present Position resets to within one
        revolution, the shaft stays), new count read, turn offset shifted by the whole
        turns removed, Goal Position := the new Present Position (so that torque on can
        never chase a goal of the old frame), torque back on if it was, the goal
        rewritten in the new frame, RAM settings written again. If a step fails, the
        servo is re-initialised like a rebooted one (torque off) and the failure is
        counted (``unwind_failures``), not raised.
        """
        j = self._joints[i]
        sid = j.servo_id
        was_on = self._torque[i]
        before = self._raw[i] or 0
        try:
            if was_on:
                self._bus.write(sid, ct.TORQUE_ENABLE, 1, 0)
            self._goal_register[i] = None
            self._goal_band[i] = None
            self._bus.write(sid, ct.OPERATING_MODE, 1, ct.MODE_POSITION)
            self._bus.write(sid, ct.OPERATING_MODE, 1, ct.MODE_EXTENDED_POSITION)
            after = cv.to_signed32(self._bus.read(sid, ct.PRESENT_POSITION, 4, as_int=True))
            self._turns[i] += round((before - after) / ct.TICKS_PER_REV) * ct.TICKS_PER_REV
            self._raw[i] = after
            self._bus.write(sid, ct.GOAL_POSITION, 4, after)
            if was_on:
                self._bus.write(sid, ct.TORQUE_ENABLE, 1, 1)
                goal = self._goal_unwrapped[i]
                ticks = goal - self._turns[i] if goal is not None else after
                if abs(ticks) > ct.EXTENDED_RANGE_TICKS:
                    ticks = after
                self._bus.write(sid, ct.GOAL_POSITION, 4, ticks)
                self._goal_register[i] = ticks
                self._goal_band[i] = (ticks, ticks)
            self._configure_ram(j)
            self._verify_registers([j])
            self._counters.unwinds += 1
        except DeviceLostError:
            raise
        except BackendError:
            self._torque[i] = False
            self._goal_register[i] = None
            self._goal_band[i] = None
            self._rebooting[i] = -math.inf
            extra = self._counters.extra
            extra["unwind_failures"] = extra.get("unwind_failures", 0) + 1
        finally:
            self._unwind_due.discard(i)

    def _service_reboots(self) -> None:
        """Ping rebooting servos (one attempt each, rate-limited); re-initialise those that answer."""
        now = time.monotonic()
        for i in sorted(self._rebooting):
            if now - self._rebooting[i] < _REBOOT_PING_PERIOD_S:
                continue
            self._rebooting[i] = now
            j = self._joints[i]
            if not self._bus.ping_once(j.servo_id):
                continue
            try:
                self._configure(j)
                self._verify_registers([j])
            except DeviceLostError:
                raise
            except BackendError:
                continue
            del self._rebooting[i]
            self._torque[i] = False
            self._anchor.add(i)

    def _confirm_hardware_error(self, j: JointSpec) -> int:
        """Hardware Error Status by a dedicated read (0 if the read fails or shows none)."""
        try:
            return int(self._bus.read(j.servo_id, ct.ERROR_BLOCK_ADDR, ct.ERROR_BLOCK_LEN)[-1])
        except CommError:
            return 0

    def _select(self, names: Sequence[str] | None) -> list[JointSpec]:
        if names is None:
            return list(self._joints)
        unknown = [n for n in names if n not in self._index]
        if unknown:
            raise KeyError(f"unknown joints {unknown}")
        return [self._joints[self._index[n]] for n in names]



def _field(block: bytes, base: int, addr: int, size: int) -> int:
    """A register from a block read at ``base`` (signed for 2- and 4-byte registers)."""
    return int.from_bytes(block[addr - base:addr - base + size], "little", signed=size > 1)


def _no_answer_hint(settings: DynamixelSettings) -> str:
    """The usual causes of silent servos, with the adapter's latency timer when it can be read."""
    hint = ("; check power, cabling, IDs and baud rate (Dynamixel Wizard), and the USB latency "
            f"timer: the read timeouts assume {settings.latency_ms:g} ms (latency_ms)")
    timer = _latency_timer_ms(settings.port)
    if timer is not None:
        hint += f", the adapter's latency_timer is {timer} ms"
        if timer > settings.latency_ms:
            hint += " (set it to 1 with the udev rule in docs/hardware.md, or raise latency_ms)"
    else:
        hint += " (cat /sys/bus/usb-serial/devices/ttyUSB0/latency_timer should print 1; docs/hardware.md)"
    return hint
