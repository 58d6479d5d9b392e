"""X-series (XL430 / XM430 / XH430 / XL330) Protocol 2.0 control table: the subset the stack uses.

Addresses and sizes from the ROBOTIS e-Manual control tables of the XM430-W350,
XL430-W250, XH430-W350 and XL330-M288 (identical for these addresses). Shared by the bridge's
Dynamixel backend and the servo emulator so both speak the same table; the
protocol itself is implemented twice (dynamixel-sdk in the bridge, our own code in
the emulator).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# --- EEPROM area (writable only while Torque Enable is 0) ------------------------
MODEL_NUMBER = 0            # 2 bytes
FIRMWARE_VERSION = 6        # 1 byte
ID = 7                      # 1 byte
BAUD_RATE = 8               # 1 byte (index, see BAUD_INDEX)
RETURN_DELAY_TIME = 9       # 1 byte, unit 2 us
DRIVE_MODE = 10             # 1 byte
OPERATING_MODE = 11         # 1 byte (see MODE_*)
HOMING_OFFSET = 20          # 4 bytes, ticks
TEMPERATURE_LIMIT = 31      # 1 byte, deg C
MAX_VOLTAGE_LIMIT = 32      # 2 bytes, 0.1 V
MIN_VOLTAGE_LIMIT = 34      # 2 bytes, 0.1 V
PWM_LIMIT = 36              # 2 bytes, PWM units (885 = 100 % duty)
CURRENT_LIMIT = 38          # 2 bytes, current units (not on XL430)
VELOCITY_LIMIT = 44         # 4 bytes, 0.229 rev/min
MAX_POSITION_LIMIT = 48     # 4 bytes, ticks
MIN_POSITION_LIMIT = 52     # 4 bytes, ticks
SHUTDOWN = 63               # 1 byte, hardware error bits that turn torque off
EEPROM_END = 64             # first RAM address

# --- RAM area ---------------------------------------------------------------------
TORQUE_ENABLE = 64          # 1 byte
LED = 65                    # 1 byte
STATUS_RETURN_LEVEL = 68    # 1 byte
HARDWARE_ERROR_STATUS = 70  # 1 byte, read only
POSITION_D_GAIN = 80        # 2 bytes, 0..16383 (KPD = value / 16)
POSITION_I_GAIN = 82        # 2 bytes, 0..16383 (KPI = value / 65536)
POSITION_P_GAIN = 84        # 2 bytes, 0..16383 (KPP = value / 128)
BUS_WATCHDOG = 98           # 1 byte, unit 20 ms; 0 off, 1..127 armed, 0xFF (-1) tripped
GOAL_CURRENT = 102          # 2 bytes
GOAL_VELOCITY = 104         # 4 bytes
PROFILE_ACCELERATION = 108  # 4 bytes, 214.577 rev/min^2
PROFILE_VELOCITY = 112      # 4 bytes, 0.229 rev/min
GOAL_POSITION = 116         # 4 bytes, ticks
REALTIME_TICK = 120         # 2 bytes, ms
MOVING = 122                # 1 byte
PRESENT_CURRENT = 126       # 2 bytes, signed (Present Load, 0.1 %, on XL430)
PRESENT_VELOCITY = 128      # 4 bytes, signed, 0.229 rev/min
PRESENT_POSITION = 132      # 4 bytes, signed, ticks
PRESENT_INPUT_VOLTAGE = 144  # 2 bytes, 0.1 V
PRESENT_TEMPERATURE = 146   # 1 byte, deg C
TABLE_SIZE = 147            # bytes of the table the emulator models

# The block the loop reads every cycle, Goal Position .. Present Position (20 bytes): the goal
# (read before the cycle's write: another program's goal is seen in the first read after it was
# written), current(2) + velocity(4) + position(4).
STATE_BLOCK_ADDR = GOAL_POSITION
STATE_BLOCK_LEN = PRESENT_POSITION + 4 - GOAL_POSITION  # 20 bytes
# The block the health poll reads, Torque Enable .. Present Temperature (83 bytes): torque,
# hardware error, Bus Watchdog, Goal Position (read back), present position, voltage and
# temperature in ONE answer per servo; the health poll reads Operating Mode (1 byte) besides.
# Every block the backend reads has its own length (state 20, health 83, error 7, present
# position 4, ping 3, operating mode 1), so a late answer to one read can never pass the
# length check of another.
HEALTH_BLOCK_ADDR = TORQUE_ENABLE
HEALTH_BLOCK_LEN = PRESENT_TEMPERATURE + 1 - TORQUE_ENABLE
# Torque Enable .. Hardware Error Status (7 bytes): torque read-back and error confirmation.
ERROR_BLOCK_ADDR = TORQUE_ENABLE
ERROR_BLOCK_LEN = HARDWARE_ERROR_STATUS + 1 - TORQUE_ENABLE
# The registers a robot description sets (snake_core.robot.SERVO_REGISTERS): key -> (address, bytes).
SERVO_REGISTERS: dict[str, tuple[int, int]] = {
    "position_p_gain": (POSITION_P_GAIN, 2), "position_i_gain": (POSITION_I_GAIN, 2),
    "position_d_gain": (POSITION_D_GAIN, 2), "profile_velocity": (PROFILE_VELOCITY, 4),
    "profile_acceleration": (PROFILE_ACCELERATION, 4), "pwm_limit": (PWM_LIMIT, 2), "current_limit": (CURRENT_LIMIT, 2),
}
REGISTER_NAMES = {"position_p_gain": "Position P Gain", "position_i_gain": "Position I Gain",
                  "position_d_gain": "Position D Gain", "profile_velocity": "Profile Velocity",
                  "profile_acceleration": "Profile Acceleration", "pwm_limit": "PWM Limit",
                  "current_limit": "Current Limit"}
"""The e-Manual's name of each register of :data:`SERVO_REGISTERS` (for messages)."""
# PWM Limit .. Acceleration Limit's reserved end (8 bytes): the EEPROM limits, read before
# they are written (an EEPROM write only where the value differs) and read back.
LIMITS_BLOCK_ADDR = PWM_LIMIT
LIMITS_BLOCK_LEN = 8
# Position D Gain .. Profile Velocity (36 bytes): the RAM registers of a robot description, read back.
GAINS_BLOCK_ADDR = POSITION_D_GAIN
GAINS_BLOCK_LEN = PROFILE_VELOCITY + 4 - POSITION_D_GAIN

# Operating modes (address 11).
MODE_CURRENT = 0
MODE_VELOCITY = 1
MODE_POSITION = 3
MODE_EXTENDED_POSITION = 4
MODE_CURRENT_BASED_POSITION = 5
MODE_PWM = 16
OPERATING_MODES = {"velocity": MODE_VELOCITY, "position": MODE_POSITION,
                   "extended_position": MODE_EXTENDED_POSITION}

# Baud rate register (address 8) index -> bps.
BAUD_INDEX = {0: 9600, 1: 57600, 2: 115200, 3: 1_000_000, 4: 2_000_000,
              5: 3_000_000, 6: 4_000_000, 7: 4_500_000}

# Units.
TICKS_PER_REV = 4096
TICKS_CENTER = 2048                       # ticks at servo angle 0 (horn centred)
POSITION_MAX_TICKS = TICKS_PER_REV - 1    # position mode range 0..4095
EXTENDED_RANGE_TICKS = 1_048_575          # extended position mode Goal Position range: +-256 rev
HOMING_OFFSET_MAX_TICKS = 1_044_479       # Homing Offset range: +-255 rev
VELOCITY_UNIT_RAD_S = 0.229 * 2.0 * math.pi / 60.0   # rad/s per velocity unit
VOLTAGE_UNIT_V = 0.1                      # V per voltage unit
ACCELERATION_UNIT_RAD_S2 = 214.577 * 2.0 * math.pi / 3600.0  # rad/s^2 per Profile Acceleration unit
WATCHDOG_UNIT_S = 0.020                   # s per Bus Watchdog unit
WATCHDOG_TRIPPED = 0xFF                   # -1 as an unsigned byte
RETURN_DELAY_UNIT_S = 2e-6                # s per Return Delay Time unit


@dataclass(frozen=True)
class ServoModel:
    """Per-model constants.

    Attributes:
        name: Model name as in the robot YAML (``XM430-W350``).
        number: Model Number register value.
        current_unit_a: A per Present Current unit (0 if the model reports load instead).
        torque_constant: N m per A, stall torque / stall current at ``nominal_voltage`` (approximate).
        stall_torque: N m at ``nominal_voltage``.
        max_velocity: No-load speed at ``nominal_voltage``, rad/s.
        current_limit: Factory (and greatest) Current Limit, current units (0: no such register).
        nominal_voltage: Recommended supply, V (the emulator's default input voltage).
        factory_p_gain: Factory Position P Gain.
        factory_d_gain: Factory Position D Gain.
    """

    name: str
    number: int
    current_unit_a: float
    torque_constant: float
    stall_torque: float
    max_velocity: float
    current_limit: int = 1193
    nominal_voltage: float = 12.0
    factory_p_gain: int = 800
    factory_d_gain: int = 0


_RPM = 2.0 * math.pi / 60.0  # rad/s per rev/min

MODELS: dict[str, ServoModel] = {m.name: m for m in (
    ServoModel("XM430-W350", 1020, 2.69e-3, 4.1 / 2.3, 4.1, 46 * _RPM, 1193),
    ServoModel("XM430-W210", 1030, 2.69e-3, 3.0 / 2.3, 3.0, 77 * _RPM, 1193),
    ServoModel("XH430-W350", 1000, 2.69e-3, 3.4 / 1.3, 3.4, 30 * _RPM, 648),
    ServoModel("XH430-W210", 1010, 2.69e-3, 2.5 / 1.3, 2.5, 52 * _RPM, 648),
    # 24 V servos (e-Manual XH430-V350: 3.3 N m, 0.7 A, 31 rev/min at 24 V; XH430-V210: 2.6 N m,
    # 0.7 A, 52 rev/min at 24 V; about 1.34 mA per current unit).
    ServoModel("XH430-V350", 1040, 1.34e-3, 3.3 / 0.7, 3.3, 31 * _RPM, 689, nominal_voltage=24.0),
    ServoModel("XH430-V210", 1050, 1.34e-3, 2.6 / 0.7, 2.6, 52 * _RPM, 689, nominal_voltage=24.0),
    ServoModel("XL430-W250", 1060, 0.0, 1.5 / 1.4, 1.5, 57 * _RPM, 0, factory_p_gain=640, factory_d_gain=4000),
    # 5 V servo of the BAM bench logs (e-Manual XL330-M288: 0.52 N m, 1.47 A, 103 rev/min at 5 V; 1 mA units).
    ServoModel("XL330-M288", 1200, 1.0e-3, 0.52 / 1.47, 0.52, 103 * _RPM, 1750, nominal_voltage=5.0,
               factory_p_gain=400),
)}
MODEL_BY_NUMBER: dict[int, ServoModel] = {m.number: m for m in MODELS.values()}

# FAST SYNC READ (instruction 0x8A): least firmware version per model (X430 series: v45).
FAST_SYNC_READ_FIRMWARE: dict[str, int] = dict.fromkeys(MODELS, 45)


def supports_fast_sync_read(name: str, firmware: int) -> bool:
    """Whether a servo of model ``name`` with firmware version ``firmware`` answers FAST SYNC READ."""
    least = FAST_SYNC_READ_FIRMWARE.get(name)
    return least is not None and firmware >= least


def model(name: str) -> ServoModel:
    """The constants of a servo model; raises KeyError naming the known models."""
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown servo model {name!r}; known: {sorted(MODELS)}") from None
