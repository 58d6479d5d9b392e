"""Dynamixel X-series servos over Protocol 2.0 with dynamixel-sdk 4.1.

Start-up (:meth:`DynamixelBackend.open`): ping every configured ID (a
:class:`~snake_hardware.backend.StartupError` lists the missing IDs and their
joints), check model numbers, reboot servos that report a hardware error, then with
torque off: operating mode (position, or extended position for continuous joints),
Min/Max Position Limit from the YAML limits, Return Delay Time, profile velocity and
acceleration, and the Bus Watchdog armed so a silent bus stops every servo even if
this process dies. Goals are refused until a sync read of present positions
succeeded after open, reconnect, reboot or a watchdog trip.

Each cycle is one GroupSyncWrite of Goal Position (116) and one GroupSyncRead of
Present Current/Velocity/Position (126..135). Timeouts and CRC errors are retried
and counted; serial exceptions (device gone) close the port and raise
:class:`~snake_hardware.backend.DeviceLostError`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from dynamixel_sdk import (
    COMM_RX_CORRUPT,
    COMM_RX_TIMEOUT,
    COMM_SUCCESS,
    GroupSyncRead,
    GroupSyncWrite,
    PacketHandler,
    PortHandler,
)

from snake_core.robot import JointSpec, RobotModel
from snake_hardware.backend import (
    Backend,
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

_REBOOT_WAIT_S = 0.5          # s, a rebooted X-series servo answers again after ~0.4 s
_PROTOCOL = 2.0
_READ_CHUNK = 4096            # bytes per read system call


@dataclass(frozen=True)
class DynamixelSettings:
    """Bus settings of the Dynamixel backend.

    Attributes:
        port: Serial device (U2D2), or the emulator's pty path.
        baud_rate: bps; must match the servos' Baud Rate register.
        retries: Extra attempts of a failed transaction.
        latency_ms: USB adapter latency timer, ms (1 after the udev rule; sets read timeouts).
        return_delay_us: Return Delay Time written to every servo, us (2 us units, 0..508).
        profile_velocity: Profile Velocity, rad/s (0: no profile, the servo's velocity limit).
        profile_acceleration: Profile Acceleration in register units (0: none).
        watchdog_s: Bus Watchdog timeout, s (0 disables; 0.02..2.54 s).
        check_models: Refuse servos whose model number differs from the YAML.
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


class _CountingPort(PortHandler):
    """PortHandler with the real latency timer and byte counters."""

    def __init__(self, port_name: str, latency_ms: float, counters: BusCounters) -> None:
        super().__init__(port_name)
        self._latency_ms = latency_ms
        self._counters = counters
        self.wait_s = 0.0          # s spent waiting for answers (see readPort)
        self._rx = bytearray()
        self._last_empty = False
        self._last_poll = 0.0

    def setPacketTimeout(self, packet_length: int) -> None:  # noqa: N802 (SDK name)
        self.packet_start_time = self.getCurrentTime()
        self.packet_timeout = self.tx_time_per_byte * packet_length + 2.0 * self._latency_ms + 2.0

    def writePort(self, packet: Any) -> int:  # noqa: N802
        n = super().writePort(packet)
        self._counters.bytes_tx += int(n or 0)
        return n

    def readPort(self, length: int) -> Any:  # noqa: N802
        """Up to ``length`` bytes; one non-blocking read of everything pending feeds a buffer.

        The SDK asks for a few bytes at a time; reading all that is pending in one
        system call (instead of pyserial's select + read per call) is what keeps a
        18-servo cycle under 1 ms of software.
        """
        t0 = time.perf_counter()
        if len(self._rx) < length:
            try:
                chunk = os.read(self.ser.fd, _READ_CHUNK)
            except BlockingIOError:
                chunk = b""
            if not chunk and not self._rx and not self.ser.is_open:
                raise OSError("port closed")
            self._rx += chunk
            self._counters.bytes_rx += len(chunk)
        data = bytes(self._rx[:length])
        del self._rx[:length]
        t1 = time.perf_counter()
        # Time spent polling an empty port (waiting for the bus), including the SDK's
        # loop between two empty polls: the part of a cycle that is not our software.
        if not data:
            self.wait_s += t1 - (self._last_poll if self._last_empty else t0)
        self._last_empty = not data
        self._last_poll = t1
        return data

    def clearPort(self) -> None:  # noqa: N802
        self._rx.clear()
        super().clearPort()

    def getBytesAvailable(self) -> int:  # noqa: N802
        return len(self._rx) + int(self.ser.in_waiting)


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
        self._counters = BusCounters()
        self._port: _CountingPort | None = None
        self._packet = PacketHandler(_PROTOCOL)
        self._sync_write: GroupSyncWrite | None = None
        self._sync_read: GroupSyncRead | None = None
        self._fresh = False
        self._present = np.zeros(len(self._joints))
        self._torque = [False] * len(self._joints)

    # --- Backend interface ----------------------------------------------------------------
    @property
    def joint_names(self) -> tuple[str, ...]:
        """Joint names, head to tail."""
        return tuple(j.name for j in self._joints)

    @property
    def counters(self) -> BusCounters:
        """Live communication counters."""
        return self._counters

    @property
    def settings(self) -> DynamixelSettings:
        """The bus settings."""
        return self._settings

    @property
    def bus_wait_s(self) -> float:
        """Seconds spent polling the port for answers since it was opened (0 if closed)."""
        return self._port.wait_s if self._port is not None else 0.0

    @property
    def ready(self) -> bool:
        """True once fresh present positions were read (goals accepted)."""
        return self._fresh

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
        port, self._port = self._port, None
        self._fresh = False
        if port is not None:
            try:
                port.closePort()
            except Exception:
                pass

    def reconnect(self) -> None:
        """Close, reopen and re-initialise; goals wait for the next :meth:`read`."""
        self.close()
        self.open()
        self._counters.reconnects += 1

    def read(self) -> JointReading:
        """Sync read of present current, velocity and position of every servo."""
        group = self._require(self._sync_read)
        self._transact("sync read of present state", partial(_checked_sync_read, group))
        pos = np.empty(len(self._joints))
        vel = np.empty(len(self._joints))
        eff = np.empty(len(self._joints))
        for i, j in enumerate(self._joints):
            sid = j.servo_id
            raw_pos = cv.to_signed32(group.getData(sid, ct.PRESENT_POSITION, 4))
            raw_vel = cv.to_signed32(group.getData(sid, ct.PRESENT_VELOCITY, 4))
            raw_cur = cv.to_signed16(group.getData(sid, ct.PRESENT_CURRENT, 2))
            pos[i] = cv.ticks_to_joint(j, raw_pos)
            vel[i] = cv.velocity_to_joint(j, raw_vel)
            eff[i] = cv.current_to_effort(j, raw_cur)
        self._present = pos
        self._fresh = True
        return JointReading(self.joint_names, pos, vel, eff, time.monotonic())

    def write_goals(self, goals: Mapping[str, float]) -> None:
        """One sync write of Goal Position for the named joints (clamped to their limits)."""
        if not self._fresh:
            raise NotReadyError("no fresh present positions since open/reconnect: read() first")
        group = self._require(self._sync_write)
        group.clearParam()
        for name, angle in goals.items():
            i = self._index.get(name)
            if i is None:
                raise KeyError(f"unknown joint {name!r}")
            if not math.isfinite(angle):
                raise ValueError(f"{name}: goal {angle} is not finite")
            j = self._joints[i]
            ticks = cv.joint_to_ticks(j, j.clamp(float(angle)))
            group.addParam(j.servo_id, int(ticks).to_bytes(4, "little", signed=True))
        if goals:
            self._transact("sync write of goal positions", group.txPacket)

    def set_torque(self, enabled: bool, names: Sequence[str] | None = None) -> None:
        """Torque on/off with one sync write; on: goal := present first (no jump); off: verified."""
        joints = self._select(names)
        if enabled:
            if not self._fresh:
                raise NotReadyError("torque on needs fresh present positions: read() first")
            self.write_goals({j.name: float(self._present[self._index[j.name]]) for j in joints})
        self._sync_write_byte(ct.TORQUE_ENABLE, int(enabled), joints)
        if not enabled:
            # Torque off must not depend on one unacknowledged packet: read back and repeat.
            for _ in range(self._settings.retries + 1):
                state = self._sync_read_block(ct.TORQUE_ENABLE, 1)
                still_on = [j for j in joints if state.get(j.servo_id, b"\x01")[0]]
                if not still_on:
                    break
                self._sync_write_byte(ct.TORQUE_ENABLE, 0, still_on)
        for j in joints:
            self._torque[self._index[j.name]] = enabled

    def torque_enabled(self) -> dict[str, bool]:
        """Torque state as last commanded, per joint."""
        return {j.name: self._torque[i] for i, j in enumerate(self._joints)}

    def health(self) -> list[JointHealth]:
        """Hardware error, temperature, voltage, torque and watchdog of every servo.

        Uses sync reads; if one fails, each servo is asked alone so a silent servo
        shows as ``hardware_error == -1`` instead of failing the whole poll. A tripped
        Bus Watchdog is cleared and re-armed here (goals then wait for a fresh read).
        """
        blocks: dict[int, dict[int, int]] = {j.servo_id: {} for j in self._joints}
        for addr, size in ((ct.TORQUE_ENABLE, ct.HARDWARE_ERROR_STATUS + 1 - ct.TORQUE_ENABLE),
                           (ct.BUS_WATCHDOG, 1), (ct.HEALTH_BLOCK_ADDR, ct.HEALTH_BLOCK_LEN)):
            got = self._sync_read_block(addr, size)
            for sid, data in got.items():
                for k, byte in enumerate(data):
                    blocks[sid][addr + k] = byte
        out = []
        tripped = []
        for j in self._joints:
            b = blocks[j.servo_id]
            if ct.HARDWARE_ERROR_STATUS not in b:
                out.append(JointHealth(j.name, -1, math.nan, math.nan, None, False))
                continue
            wd = b.get(ct.BUS_WATCHDOG, 0) == ct.WATCHDOG_TRIPPED
            if wd:
                tripped.append(j)
            volts = (b.get(ct.PRESENT_INPUT_VOLTAGE, 0) | (b.get(ct.PRESENT_INPUT_VOLTAGE + 1, 0) << 8))
            temp = b.get(ct.PRESENT_TEMPERATURE)
            torque = bool(b[ct.TORQUE_ENABLE])
            self._torque[self._index[j.name]] = torque
            out.append(JointHealth(
                j.name, b[ct.HARDWARE_ERROR_STATUS],
                float(temp) if temp is not None else math.nan,
                volts * ct.VOLTAGE_UNIT_V if ct.PRESENT_INPUT_VOLTAGE in b else math.nan,
                torque, wd))
        if tripped:
            self._fresh = False
            for j in tripped:
                self._write(j.servo_id, ct.BUS_WATCHDOG, 1, 0)
                self._write(j.servo_id, ct.BUS_WATCHDOG, 1, self._watchdog_units())
        return out

    def reboot(self, names: Sequence[str]) -> None:
        """Reboot servos (clears hardware errors); RAM settings are written again."""
        joints = self._select(names)
        port = self._require(self._port)
        for j in joints:
            self._transact(f"reboot of ID {j.servo_id}", partial(self._packet.reboot, port, j.servo_id))
        if joints:
            time.sleep(_REBOOT_WAIT_S)
        self._fresh = False
        for j in joints:
            self._torque[self._index[j.name]] = False
            self._configure_ram(j)

    # --- start-up --------------------------------------------------------------------------
    def _open_port(self) -> None:
        s = self._settings
        port = _CountingPort(s.port, s.latency_ms, self._counters)
        try:
            ok = port.openPort() and port.setBaudRate(s.baud_rate)
        except Exception as err:
            raise DeviceLostError(f"cannot open {s.port}: {err}") from err
        if not ok:
            raise DeviceLostError(f"cannot open {s.port} at {s.baud_rate} bps")
        self._port = port
        self._fresh = False

    def _initialise(self) -> None:
        port = self._require(self._port)
        missing, wrong = [], []
        found: dict[int, int] = {}
        for j in self._joints:
            try:
                model_number = self._transact(
                    f"ping of ID {j.servo_id}", partial(self._packet.ping, port, j.servo_id))
            except CommError:
                missing.append(j)
                continue
            found[j.servo_id] = int(model_number)
            expected = ct.model(j.model).number
            if self._settings.check_models and model_number != expected:
                wrong.append(f"ID {j.servo_id} ({j.name}) is model {model_number}, "
                             f"YAML says {j.model} ({expected})")
        if missing:
            listing = ", ".join(f"{j.servo_id} ({j.name})" for j in missing)
            raise StartupError(f"{len(missing)} of {len(self._joints)} servos do not answer on "
                               f"{self._settings.port} at {self._settings.baud_rate} bps: IDs {listing}")
        if wrong:
            raise StartupError("model number mismatch: " + "; ".join(wrong))
        # Clear hardware errors by rebooting the servos that report one.
        errored = [j for j in self._joints
                   if self._read(j.servo_id, ct.HARDWARE_ERROR_STATUS, 1) != 0]
        for j in errored:
            self._transact(f"reboot of ID {j.servo_id}", partial(self._packet.reboot, port, j.servo_id))
        if errored:
            time.sleep(_REBOOT_WAIT_S)
        for j in self._joints:
            self._write(j.servo_id, ct.TORQUE_ENABLE, 1, 0)
            self._write(j.servo_id, ct.BUS_WATCHDOG, 1, 0)  # clears a tripped watchdog too
            self._write(j.servo_id, ct.OPERATING_MODE, 1, ct.OPERATING_MODES[j.operating_mode])
            self._write(j.servo_id, ct.RETURN_DELAY_TIME, 1, self._settings.return_delay_us // 2)
            if j.operating_mode == "position":
                lo, hi = cv.limit_ticks(j)
                self._write(j.servo_id, ct.MIN_POSITION_LIMIT, 4, lo)
                self._write(j.servo_id, ct.MAX_POSITION_LIMIT, 4, hi)
            self._configure_ram(j)
        self._torque = [False] * len(self._joints)
        self._sync_write = GroupSyncWrite(port, self._packet, ct.GOAL_POSITION, 4)
        self._sync_read = GroupSyncRead(port, self._packet, ct.STATE_BLOCK_ADDR, ct.STATE_BLOCK_LEN)
        for j in self._joints:
            self._sync_read.addParam(j.servo_id)
        self._fresh = False

    def _configure_ram(self, j: JointSpec) -> None:
        s = self._settings
        self._write(j.servo_id, ct.PROFILE_ACCELERATION, 4, s.profile_acceleration)
        self._write(j.servo_id, ct.PROFILE_VELOCITY, 4, cv.velocity_to_units(s.profile_velocity))
        self._write(j.servo_id, ct.BUS_WATCHDOG, 1, self._watchdog_units())

    def _watchdog_units(self) -> int:
        return math.ceil(self._settings.watchdog_s / ct.WATCHDOG_UNIT_S - 1e-9)

    # --- transactions ------------------------------------------------------------------------
    def _transact(self, what: str, call: Callable[[], Any]) -> Any:
        """Run an SDK call with retries; returns its payload (first element if a tuple)."""
        c = self._counters
        last = COMM_SUCCESS
        for attempt in range(self._settings.retries + 1):
            if attempt:
                c.retries += 1
            c.transactions += 1
            try:
                result = call()
            except _StatusError:
                raise
            except Exception as err:
                self._device_lost(what, err)
            payload: Any = None
            if isinstance(result, tuple):
                # (data, comm, error) for reads, (model, comm, error) for ping, (comm, error) else.
                if len(result) == 3:
                    payload, comm, _err = result
                else:
                    comm, _err = result
            else:
                comm = result
            if comm == COMM_SUCCESS:
                c.consecutive_failures = 0
                return payload
            last = comm
            if comm == COMM_RX_TIMEOUT:
                c.timeouts += 1
            elif comm == COMM_RX_CORRUPT:
                c.crc_errors += 1
            port = self._port
            if port is not None:
                port.is_using = False
                try:
                    port.clearPort()
                except Exception as err:
                    self._device_lost(what, err)
        c.failures += 1
        c.consecutive_failures += 1
        raise CommError(f"{what} failed after {self._settings.retries + 1} attempts: "
                        f"{self._packet.getTxRxResult(last)}")

    def _device_lost(self, what: str, err: BaseException) -> None:
        self.close()
        self._counters.failures += 1
        self._counters.consecutive_failures += 1
        raise DeviceLostError(f"{self._settings.port} lost during {what}: {err}") from err

    def _write(self, sid: int, addr: int, size: int, value: int) -> None:
        port = self._require(self._port)
        fn = {1: self._packet.write1ByteTxRx, 2: self._packet.write2ByteTxRx, 4: self._packet.write4ByteTxRx}[size]
        value &= (1 << (8 * size)) - 1

        def call() -> Any:
            comm, err = fn(port, sid, addr, value)
            if comm == COMM_SUCCESS and err & 0x7F:
                raise _StatusError(err)
            return comm, err

        try:
            self._transact(f"write of {value} to address {addr} of ID {sid}", call)
        except _StatusError as err:
            raise StartupError(f"ID {sid} refused {value} at address {addr}: "
                               f"{self._packet.getRxPacketError(err.error)}") from None

    def _read(self, sid: int, addr: int, size: int) -> int:
        port = self._require(self._port)
        fn = {1: self._packet.read1ByteTxRx, 2: self._packet.read2ByteTxRx, 4: self._packet.read4ByteTxRx}[size]
        return int(self._transact(f"read of address {addr} of ID {sid}", lambda: fn(port, sid, addr)))

    def _sync_write_byte(self, addr: int, value: int, joints: Sequence[JointSpec]) -> None:
        port = self._require(self._port)
        group = GroupSyncWrite(port, self._packet, addr, 1)
        for j in joints:
            group.addParam(j.servo_id, bytes([value]))
        self._transact(f"sync write of {value} to address {addr}", group.txPacket)

    def _sync_read_block(self, addr: int, size: int) -> dict[int, bytes]:
        """Sync read of one block; servo by servo if the group read fails."""
        port = self._require(self._port)
        group = GroupSyncRead(port, self._packet, addr, size)
        for j in self._joints:
            group.addParam(j.servo_id)
        out: dict[int, bytes] = {}
        try:
            self._transact(f"sync read of address {addr}", partial(_checked_sync_read, group))
            for j in self._joints:
                out[j.servo_id] = bytes(group.getData(j.servo_id, addr + k, 1) for k in range(size))
            return out
        except CommError:
            pass
        for j in self._joints:
            try:
                data = self._transact(f"read of address {addr} of ID {j.servo_id}",
                                      partial(self._packet.readTxRx, port, j.servo_id, addr, size))
            except CommError:
                continue
            out[j.servo_id] = bytes(data)
        return out

    def _select(self, names: Sequence[str] | None) -> list[JointSpec]:
        if names is None:
            return list(self._joints)
        unknown = [n for n in names if n not in self._index]
        if unknown:
            raise KeyError(f"unknown joints {unknown}")
        return [self._joints[self._index[n]] for n in names]

    def _require(self, obj: Any) -> Any:
        if obj is None or self._port is None:
            raise DeviceLostError(f"{self._settings.port} is not open")
        return obj


def _checked_sync_read(group: GroupSyncRead) -> int:
    """``group.txRxPacket()``, with answers of the wrong length counted as corrupt.

    The SDK matches answers by ID only: a late answer to an earlier read of another
    block would otherwise be taken for this one and parsed as garbage.
    """
    comm = group.txRxPacket()
    if comm == COMM_SUCCESS and any(len(v) != group.data_length for v in group.data_dict.values()):
        group.last_result = False
        return COMM_RX_CORRUPT
    return int(comm)


class _StatusError(Exception):
    """A servo answered with an error in its status packet (not retried)."""

    def __init__(self, error: int) -> None:
        super().__init__(error)
        self.error = error
