"""One emulated X-series servo: control table, first-order motion, current, heat, watchdog.

Position semantics follow the X-series e-Manual (XM430-W350, sections Homing Offset(20),
Operating Mode(11), Goal Position(116), Present Position(132)):

- The shaft's physical angle is continuous (:attr:`EmulatedServo.position`, ticks in the
  frame of power-on). The servo counts turns from its last *turn reset*:
  Present Position = (physical - turn base) + Homing Offset, where the turn base is a
  multiple of 4096 ticks.
- A turn reset puts the count back within one revolution (0..4095 before the Homing
  Offset is added): at power-on, on REBOOT, when Operating Mode is changed to position
  control (3), when torque is turned on in position control mode, and on the CLEAR
  instruction (refused with Result Fail while the servo moves).
- Goal Position is in the Present Position frame. Position mode accepts goals within
  Min/Max Position Limit, extended position mode within +-1,048,575 ticks (+-256 rev);
  other goals are refused with a Data Limit Error and the register keeps its value.
- Homing Offset (EEPROM, torque off only) accepts +-1,044,479 ticks.
- REBOOT answers, then resets the RAM area (torque off, Bus Watchdog off, profiles 0,
  Position P/I/D Gain back to the model's factory values, goal := present) and the turn
  count; EEPROM values (ID, mode, Homing Offset, limits, PWM and Current Limit) survive.
  The servo does not answer while it boots.
- Position P/I/D Gain (0..16,383), Profile Velocity/Acceleration (0..32,767), PWM Limit
  (0..885) and Current Limit (0..the model's factory value; absent on the XL430) refuse a
  value beyond their range with a Data Range Error; EEPROM writes are counted per address
  (:attr:`EmulatedServo.eeprom_writes`: flash wears with each).
- Present Input Voltage is :attr:`EmulatedServo.voltage` (the model's recommended supply
  unless set: 12 V for the X430 series).
"""

from __future__ import annotations

import math

from snake_hardware.dynamixel import control_table as ct
from snake_hardware.dynamixel.hardware_errors import HW_OVERHEATING
from snake_hardware.emulator import protocol as p

_TAU_S = 0.03                 # s, time constant of the first-order approach to the goal
_STIFFNESS_NM_PER_RAD = 6.0   # N m/rad, effort per rad of tracking error (current ~ effort)
_AMBIENT_C = 30.0             # deg C
_HEAT_C_PER_NM2_S = 0.05      # deg C/s per (N m)^2 of effort
_COOL_TAU_S = 120.0           # s, thermal time constant
_RAD_PER_TICK = 2.0 * math.pi / ct.TICKS_PER_REV
_HOMING_OFFSET_MAX = 1_044_479  # ticks, Homing Offset range (e-Manual)
_MOVING_THRESHOLD = 10          # velocity units, factory Moving Threshold (0.229 rev/min units)

# Registers whose writes are accepted and their sizes (address -> bytes).
_WRITABLE = {
    ct.ID: 1, ct.BAUD_RATE: 1, ct.RETURN_DELAY_TIME: 1, ct.DRIVE_MODE: 1, ct.OPERATING_MODE: 1,
    ct.HOMING_OFFSET: 4, ct.TEMPERATURE_LIMIT: 1, ct.MAX_VOLTAGE_LIMIT: 2, ct.MIN_VOLTAGE_LIMIT: 2,
    ct.CURRENT_LIMIT: 2, ct.VELOCITY_LIMIT: 4, ct.MAX_POSITION_LIMIT: 4, ct.MIN_POSITION_LIMIT: 4,
    ct.SHUTDOWN: 1, ct.TORQUE_ENABLE: 1, ct.LED: 1, ct.STATUS_RETURN_LEVEL: 1, ct.BUS_WATCHDOG: 1,
    ct.GOAL_CURRENT: 2, ct.GOAL_VELOCITY: 4, ct.PROFILE_ACCELERATION: 4, ct.PROFILE_VELOCITY: 4,
    ct.GOAL_POSITION: 4, ct.PWM_LIMIT: 2, ct.POSITION_D_GAIN: 2, ct.POSITION_I_GAIN: 2, ct.POSITION_P_GAIN: 2,
}
_GAIN_MAX = 16_383      # Position P/I/D Gain range (e-Manual)
_PROFILE_MAX = 32_767   # Profile Velocity / Acceleration range (velocity-based profile)
_PWM_MAX = 885          # PWM Limit range, PWM units
_GOALS = (ct.GOAL_CURRENT, ct.GOAL_VELOCITY, ct.GOAL_POSITION)


class EmulatedServo:
    """Control table and physics of one servo (not thread safe: the bus holds the lock).

    Subclasses may accept more registers (:attr:`writable`) and move the shaft otherwise
    (:meth:`move`); the watchdog, heat and register bookkeeping of :meth:`step` stay.

    Args:
        servo_id: Dynamixel ID.
        model_number: Model Number register value.
        position_ticks: Initial present position, ticks.
    """

    writable: dict[int, int] = _WRITABLE
    """Registers whose writes are accepted, address -> size in bytes."""

    def __init__(self, servo_id: int, model_number: int, position_ticks: int = ct.TICKS_CENTER) -> None:
        """Factory-default servo at ``position_ticks``."""
        self.table = bytearray(ct.TABLE_SIZE)
        self.model_number = model_number
        self.position = float(position_ticks)   # ticks, continuous
        self.velocity = 0.0                      # ticks/s
        self.effort = 0.0                        # N m
        self.external_load = 0.0                 # N m, injected
        self.temperature = _AMBIENT_C            # deg C
        self.voltage = _model_for(model_number).nominal_voltage  # V, Present Input Voltage
        self.watchdog_trips = 0
        self.goal_log: list[int] = []            # every Goal Position accepted, ticks
        self.refused_goals = 0                   # Goal Position writes refused (range, watchdog)
        self.refuse_all_goals = False            # fault injection: refuse every Goal Position
        self.turn_resets = 0                     # times the multi-turn count was reset
        self.boot_until = -math.inf              # emulator time until which a reboot keeps it silent
        self.eeprom_writes: dict[int, int] = {}  # address -> writes accepted into the EEPROM area (flash wear)
        self.stuck: set[int] = set()             # fault injection: registers that acknowledge writes, keep their value
        self._turn_base = 0                      # ticks, multiple of 4096 (see module docstring)
        self._factory_reset(servo_id)

    # --- registers ---------------------------------------------------------------
    def _factory_reset(self, servo_id: int) -> None:
        t = self.table
        t[:] = bytes(len(t))
        self._put(ct.MODEL_NUMBER, 2, self.model_number)
        self._put(ct.FIRMWARE_VERSION, 1, 46)
        self._put(ct.ID, 1, servo_id)
        self._put(ct.BAUD_RATE, 1, 3)
        self._put(ct.RETURN_DELAY_TIME, 1, 250)
        self._put(ct.OPERATING_MODE, 1, ct.MODE_POSITION)
        self._put(ct.TEMPERATURE_LIMIT, 1, 80)
        self._put(ct.MAX_VOLTAGE_LIMIT, 2, 160)
        self._put(ct.MIN_VOLTAGE_LIMIT, 2, 95)
        model = _model_for(self.model_number)
        self._put(ct.PWM_LIMIT, 2, _PWM_MAX)
        self._put(ct.CURRENT_LIMIT, 2, model.current_limit)
        self._put(ct.VELOCITY_LIMIT, 4, 200)
        self._put(ct.MAX_POSITION_LIMIT, 4, ct.POSITION_MAX_TICKS)
        self._put(ct.MIN_POSITION_LIMIT, 4, 0)
        self._put(ct.SHUTDOWN, 1, 0x34)
        self._reset_ram()

    def _reset_ram(self) -> None:
        for addr in range(ct.EEPROM_END, ct.TABLE_SIZE):
            self.table[addr] = 0
        self._put(ct.STATUS_RETURN_LEVEL, 1, 2)
        model = _model_for(self.model_number)
        self._put(ct.POSITION_P_GAIN, 2, model.factory_p_gain)
        self._put(ct.POSITION_D_GAIN, 2, model.factory_d_gain)
        self.velocity = 0.0
        self._put(ct.GOAL_POSITION, 4, self.present_ticks)
        self._sync()

    # --- multi-turn position ---------------------------------------------------------
    @property
    def homing_offset(self) -> int:
        """Homing Offset register, ticks."""
        return self.get(ct.HOMING_OFFSET, 4, signed=True)

    @property
    def present_ticks(self) -> int:
        """Present Position register value: turns counted since the last reset plus Homing Offset."""
        return round(self.position) - self._turn_base + self.homing_offset

    def _physical(self, register_ticks: int) -> float:
        """Physical angle, ticks, of a Goal/Present Position register value."""
        return float(register_ticks - self.homing_offset + self._turn_base)

    def reset_turns(self) -> None:
        """Bring the turn count back within one revolution (the shaft does not move)."""
        self._turn_base = (round(self.position) // ct.TICKS_PER_REV) * ct.TICKS_PER_REV
        self.turn_resets += 1
        self._sync()

    def _put(self, addr: int, size: int, value: int) -> None:
        self.table[addr:addr + size] = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")

    def get(self, addr: int, size: int, signed: bool = False) -> int:
        """Register value at ``addr`` (``size`` bytes, little endian)."""
        return int.from_bytes(self.table[addr:addr + size], "little", signed=signed)

    @property
    def id(self) -> int:
        """Current ID register."""
        return self.table[ct.ID]

    @property
    def torque_enabled(self) -> bool:
        """Torque Enable register."""
        return bool(self.table[ct.TORQUE_ENABLE])

    @property
    def hardware_error(self) -> int:
        """Hardware Error Status register."""
        return self.table[ct.HARDWARE_ERROR_STATUS]

    def error_byte(self, error: int = 0) -> int:
        """Status packet error byte: ``error`` plus the alert bit when a hardware error is set."""
        return error | (p.ERR_ALERT if self.hardware_error else 0)

    def read(self, addr: int, size: int) -> tuple[int, bytes]:
        """(error, data) for a READ of ``size`` bytes at ``addr``."""
        if size <= 0 or addr + size > ct.TABLE_SIZE:
            return p.ERR_ACCESS, b""
        self._sync()
        return 0, bytes(self.table[addr:addr + size])

    def write(self, addr: int, data: bytes) -> int:
        """Apply a WRITE; returns the status error number (0 on success)."""
        # Validate every register touched before writing any.
        pos = addr
        items: list[tuple[int, int]] = []
        while pos < addr + len(data):
            size = self.writable.get(pos)
            if size is None or pos + size > addr + len(data):
                return p.ERR_ACCESS
            items.append((pos, int.from_bytes(data[pos - addr:pos - addr + size], "little")))
            pos += size
        for reg, value in items:
            if reg < ct.EEPROM_END and self.torque_enabled:
                return p.ERR_ACCESS
            if reg in _GOALS and self.table[ct.BUS_WATCHDOG] == ct.WATCHDOG_TRIPPED:
                if reg == ct.GOAL_POSITION:
                    self.refused_goals += 1
                return p.ERR_DATA_RANGE
            if reg == ct.BUS_WATCHDOG and value > 127 and value != 0:
                return p.ERR_DATA_RANGE
            if reg == ct.GOAL_POSITION and (self.refuse_all_goals or not self._goal_in_range(_signed32(value))):
                self.refused_goals += 1
                return p.ERR_DATA_LIMIT
            if reg == ct.HOMING_OFFSET and abs(_signed32(value)) > _HOMING_OFFSET_MAX:
                return p.ERR_DATA_RANGE
            if reg == ct.OPERATING_MODE and value not in (0, 1, 3, 4, 5, 16):
                return p.ERR_DATA_RANGE
            if reg == ct.CURRENT_LIMIT and not _model_for(self.model_number).current_limit:
                return p.ERR_ACCESS  # the XL430 has no Current Limit register
            if value > self._register_max(reg):
                return p.ERR_DATA_RANGE
        for reg, value in items:
            size = self.writable[reg]
            if reg == ct.TORQUE_ENABLE and value and self.hardware_error & self.table[ct.SHUTDOWN]:
                return p.ERR_RESULT_FAIL  # a shutdown error blocks torque until a reboot
            if reg in self.stuck:
                continue
            mode_before = self.table[ct.OPERATING_MODE]
            turning_on = reg == ct.TORQUE_ENABLE and value and not self.torque_enabled
            self._put(reg, size, value)
            if reg < ct.EEPROM_END:
                self.eeprom_writes[reg] = self.eeprom_writes.get(reg, 0) + 1
            if reg == ct.OPERATING_MODE and value == ct.MODE_POSITION and mode_before != ct.MODE_POSITION:
                self.reset_turns()
            if turning_on:
                if self.table[ct.OPERATING_MODE] == ct.MODE_POSITION:
                    self.reset_turns()
                # Torque on: the goal becomes the present position (no jump).
                self._put(ct.GOAL_POSITION, 4, self.present_ticks)
            if reg == ct.GOAL_POSITION:
                self.goal_log.append(self.get(ct.GOAL_POSITION, 4, signed=True))
        self._sync()
        return 0

    def _register_max(self, reg: int) -> float:
        """Greatest value a register of the robot description's set accepts (inf for the others)."""
        if reg in (ct.POSITION_P_GAIN, ct.POSITION_I_GAIN, ct.POSITION_D_GAIN):
            return _GAIN_MAX
        if reg in (ct.PROFILE_VELOCITY, ct.PROFILE_ACCELERATION):
            return _PROFILE_MAX
        if reg == ct.PWM_LIMIT:
            return _PWM_MAX
        if reg == ct.CURRENT_LIMIT:
            return _model_for(self.model_number).current_limit
        return math.inf

    def clear_multi_turn(self) -> int:
        """CLEAR instruction (multi-turn): status error number; refused while moving."""
        if abs(self.velocity * _RAD_PER_TICK / ct.VELOCITY_UNIT_RAD_S) > _MOVING_THRESHOLD:
            return p.ERR_RESULT_FAIL
        self.reset_turns()
        return 0

    def _goal_in_range(self, ticks: int) -> bool:
        mode = self.table[ct.OPERATING_MODE]
        if mode == ct.MODE_POSITION:
            lo = self.get(ct.MIN_POSITION_LIMIT, 4, signed=True)
            hi = self.get(ct.MAX_POSITION_LIMIT, 4, signed=True)
            return lo <= ticks <= hi
        return -ct.EXTENDED_RANGE_TICKS <= ticks <= ct.EXTENDED_RANGE_TICKS

    def reboot(self, boot_until: float = -math.inf) -> None:
        """REBOOT: turn count reset, RAM back to defaults (hardware error cleared, torque off, goal = present).

        Args:
            boot_until: Emulator time until which the servo stays silent (booting).
        """
        self._turn_base = (round(self.position) // ct.TICKS_PER_REV) * ct.TICKS_PER_REV
        self.turn_resets += 1
        self.boot_until = boot_until
        self._reset_ram()

    # --- faults ------------------------------------------------------------------
    def raise_hardware_error(self, bits: int) -> None:
        """Set hardware error bits; bits listed in Shutdown turn torque off."""
        self._put(ct.HARDWARE_ERROR_STATUS, 1, self.hardware_error | bits)
        if bits & self.table[ct.SHUTDOWN]:
            self._put(ct.TORQUE_ENABLE, 1, 0)

    # --- physics -------------------------------------------------------------------
    def step(self, dt: float, bus_silent_s: float) -> None:
        """Advance ``dt`` seconds; ``bus_silent_s`` is the time since the last instruction."""
        wd = self.table[ct.BUS_WATCHDOG]
        if self.torque_enabled and 1 <= wd <= 127 and bus_silent_s > wd * ct.WATCHDOG_UNIT_S:
            self._put(ct.BUS_WATCHDOG, 1, ct.WATCHDOG_TRIPPED)
            self._put(ct.GOAL_POSITION, 4, self.present_ticks)
            self.watchdog_trips += 1
        self.move(dt)
        heat = _HEAT_C_PER_NM2_S * self.effort ** 2 - (self.temperature - _AMBIENT_C) / _COOL_TAU_S
        self.temperature += heat * dt
        if self.temperature > self.table[ct.TEMPERATURE_LIMIT]:
            self.raise_hardware_error(HW_OVERHEATING)
        self._sync()

    @property
    def active(self) -> bool:
        """Torque on and the Bus Watchdog not tripped: the servo drives its shaft."""
        return self.torque_enabled and self.table[ct.BUS_WATCHDOG] != ct.WATCHDOG_TRIPPED

    def goal_physical(self) -> float:
        """Goal Position as a physical angle, ticks in the frame of power-on."""
        return self._physical(self.get(ct.GOAL_POSITION, 4, signed=True))

    def move(self, dt: float) -> None:
        """Move the shaft ``dt`` s: first-order approach to the goal (sets position, velocity, effort)."""
        if self.active:
            goal = self.goal_physical()
            vmax_units = self.get(ct.PROFILE_VELOCITY, 4) or self.get(ct.VELOCITY_LIMIT, 4)
            vmax = vmax_units * ct.VELOCITY_UNIT_RAD_S / _RAD_PER_TICK  # ticks/s
            self.position, self.velocity = _approach(self.position, goal, vmax, dt)
            stall = _model_for(self.model_number).stall_torque
            track = _STIFFNESS_NM_PER_RAD * (goal - self.position) * _RAD_PER_TICK
            self.effort = max(-stall, min(stall, track)) + self.external_load
        else:
            self.velocity = 0.0
            self.effort = 0.0

    def _sync(self) -> None:
        m = _model_for(self.model_number)
        if m.current_unit_a > 0:
            current = round(self.effort / (m.current_unit_a * m.torque_constant))
        else:
            current = round(self.effort / (1e-3 * m.stall_torque))
        self._put(ct.PRESENT_CURRENT, 2, max(-32768, min(32767, current)))
        vel_units = round(self.velocity * _RAD_PER_TICK / ct.VELOCITY_UNIT_RAD_S)
        self._put(ct.PRESENT_VELOCITY, 4, vel_units)
        self._put(ct.PRESENT_POSITION, 4, self.present_ticks)
        self._put(ct.PRESENT_INPUT_VOLTAGE, 2, round(self.voltage / ct.VOLTAGE_UNIT_V))
        self._put(ct.PRESENT_TEMPERATURE, 1, max(0, min(255, round(self.temperature))))
        self._put(ct.MOVING, 1, int(abs(vel_units) > 0))


def _approach(x: float, goal: float, vmax: float, dt: float) -> tuple[float, float]:
    """Exact solution over ``dt`` of dx/dt = clamp((goal - x) / tau, -vmax, vmax).

    Saturated (linear at ``vmax``) while the error exceeds vmax * tau, then an exponential
    approach with time constant tau; exact for any step, so simulated time can advance in
    large steps. Returns (position, velocity at the end of the step), ticks and ticks/s.
    """
    err = goal - x
    sign = 1.0 if err >= 0 else -1.0
    a = abs(err)
    if vmax <= 0 or dt <= 0 or a == 0:
        return x, 0.0
    knee = vmax * _TAU_S
    t = dt
    if a > knee:
        t_sat = (a - knee) / vmax
        if t_sat >= t:
            return x + sign * vmax * t, sign * vmax
        t -= t_sat
        a = knee
    a *= math.exp(-t / _TAU_S)
    return goal - sign * a, sign * a / _TAU_S


def _signed32(value: int) -> int:
    return value - (1 << 32) if value & 0x80000000 else value


def _model_for(number: int) -> ct.ServoModel:
    return ct.MODEL_BY_NUMBER.get(number, ct.MODELS["XM430-W350"])
