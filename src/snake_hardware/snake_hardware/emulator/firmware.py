"""X-series servo firmware and DC motor of the bench robot (:mod:`snake_hardware.emulator.body`).

A servo of the bench robot closes its own position loop the way the X-series firmware
does (ROBOTIS e-Manual, XM430-W350, "Position P/I/D Gain" and the position controller
block diagram), on the control-table registers the host writes:

- Profile (Profile Velocity(112), Profile Acceleration(108); 0 = unlimited): the desired
  position moves towards Goal Position with at most that velocity and acceleration
  (a trapezoidal profile; the e-Manual's "velocity-based profile").
- PID in register units: the e-Manual's conversion of the gain registers,
  ``KPP = Position P Gain / 128``, ``KPI = Position I Gain / 65536``,
  ``KPD = Position D Gain / 16``, acting on the position error in encoder ticks,
  gives the output in PWM units; it is clipped to PWM Limit(36) (885 = 100 % duty).
- DC motor (output side, through the gear): the linear torque-speed line of the robot
  YAML's joint ``effort`` (stall torque, N m) and ``velocity`` (no-load speed, rad/s) at
  :data:`NOMINAL_VOLTAGE_V`, scaled by the applied voltage (duty x supply):
  ``tau = tau_stall (V / V_nom - omega / omega_0)`` (back-EMF is the ``omega`` term).
  The current ``tau / k_t`` is clipped to Current Limit(38).
- Gear backlash: the motor side crosses a play of ``backlash`` rad with the rotor's own
  inertia before any torque reaches the joint (a dead zone on every torque reversal). Where
  the rotor meets the far flank the impact is inelastic: its momentum relative to the joint,
  ``I_r (omega_rotor - omega_joint)``, passes to the joint within that control period (the
  joint's armature carries the rotor from then on), so no torque the motor made is lost in
  the play, only delayed.
- The joint's dry friction (rising with the torque passed on, ``body.gear_friction``) and
  viscous gear loss are the body's (MuJoCo ``frictionloss`` and ``damping`` of the hinge);
  the torque reaches it through a ``motor`` actuator.

Velocity mode (1) runs a P loop on Goal Velocity with Velocity P Gain / 128; current (0),
current-based position (5) and PWM (16) modes are not modelled (no torque).
Feedforward gains are accepted and ignored (factory value 0).

Everything here is vectorised over the servos of one bus (numpy arrays, one entry per
servo) so that one firmware step of 18 servos is a handful of array operations.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np

from snake_hardware.dynamixel import control_table as ct
from snake_hardware.emulator.servo import _WRITABLE, EmulatedServo

# --- control-table registers the firmware reads (e-Manual); the first four are control_table's ---
PWM_LIMIT = ct.PWM_LIMIT    # 2 bytes, EEPROM, PWM units (885 = 100 %)
POSITION_D_GAIN = ct.POSITION_D_GAIN  # 2 bytes
POSITION_I_GAIN = ct.POSITION_I_GAIN  # 2 bytes
POSITION_P_GAIN = ct.POSITION_P_GAIN  # 2 bytes
VELOCITY_I_GAIN = 76        # 2 bytes
VELOCITY_P_GAIN = 78        # 2 bytes
FEEDFORWARD_2ND_GAIN = 88   # 2 bytes
FEEDFORWARD_1ST_GAIN = 90   # 2 bytes
PRESENT_PWM = 124           # 2 bytes, signed

PWM_FULL = 885              # PWM units at 100 % duty
NOMINAL_VOLTAGE_V = 12.0    # V, the voltage of the YAML's stall torque and no-load speed
RAD_PER_TICK = 2.0 * math.pi / ct.TICKS_PER_REV
# Factory values of the XM430-W350's velocity and feedforward gains (e-Manual control table);
# PWM Limit and the position gains are EmulatedServo's (per model).
FACTORY = {VELOCITY_I_GAIN: 1920, VELOCITY_P_GAIN: 100, FEEDFORWARD_2ND_GAIN: 0, FEEDFORWARD_1ST_GAIN: 0}
FIRMWARE_PERIOD_S = 1.0e-3  # s, control period the gain units refer to (assumed: not in the e-Manual)
_INTEGRAL_LIMIT_TICKS_S = 1.0e4  # anti-windup bound of the integral of the error, tick s (firmware detail not given)

_BODY_WRITABLE = {**_WRITABLE, VELOCITY_I_GAIN: 2, VELOCITY_P_GAIN: 2, FEEDFORWARD_2ND_GAIN: 2,
                  FEEDFORWARD_1ST_GAIN: 2}


class BodyServo(EmulatedServo):
    """A servo whose shaft is a joint of the bench robot's body.

    The control table gains the velocity and feedforward gains (factory values of the
    XM430-W350; the position gains and PWM Limit are :class:`EmulatedServo`'s);
    :meth:`move` does nothing, the body sets position, velocity
    and effort. Watchdog, heat and register bookkeeping are :class:`EmulatedServo`'s.
    """

    writable = _BODY_WRITABLE
    version = 0
    """Counts writes and resets: :meth:`settings` is recomputed only when it changed."""
    _settings_version = -1
    _settings: tuple[float, ...] = ()

    def _reset_ram(self) -> None:
        super()._reset_ram()
        for addr, value in FACTORY.items():
            if addr >= ct.EEPROM_END:
                self._put(addr, 2, value)
        self.version += 1

    def write(self, addr: int, data: bytes) -> int:
        """As :meth:`EmulatedServo.write`; counts the write in :attr:`version`."""
        self.version += 1
        return super().write(addr, data)

    def settings(self) -> tuple[float, ...]:
        """The slow-changing firmware inputs of this servo's control table.

        Returns:
            Mode, goal velocity (ticks/s), KPP, KPI, KPD, KVP, profile velocity (ticks/s) and
            acceleration (ticks/s^2; inf: unlimited), PWM limit (PWM units), current limit (A).
        """
        if self._settings_version != self.version:
            self._settings_version = self.version
            m = ct.MODEL_BY_NUMBER.get(self.model_number, ct.MODELS["XM430-W350"])
            vel_unit = ct.VELOCITY_UNIT_RAD_S / RAD_PER_TICK
            acc_unit = ct.ACCELERATION_UNIT_RAD_S2 / RAD_PER_TICK
            pv, pa = self.get(ct.PROFILE_VELOCITY, 4), self.get(ct.PROFILE_ACCELERATION, 4)
            unit = m.current_unit_a or 1.0e-3 * m.stall_torque / m.torque_constant
            limit = self.get(ct.CURRENT_LIMIT, 2)
            self._settings = (
                float(self.table[ct.OPERATING_MODE]), self.get(ct.GOAL_VELOCITY, 4, signed=True) * vel_unit,
                self.get(POSITION_P_GAIN, 2) / 128.0, self.get(POSITION_I_GAIN, 2) / 65536.0,
                self.get(POSITION_D_GAIN, 2) / 16.0, self.get(VELOCITY_P_GAIN, 2) / 128.0 / vel_unit,
                pv * vel_unit if pv else math.inf, pa * acc_unit if pa else math.inf,
                float(min(self.get(PWM_LIMIT, 2), PWM_FULL)), limit * unit if limit else math.inf)
        return self._settings

    def move(self, dt: float) -> None:
        """The body moves the shaft: nothing to do here."""

    def _sync(self) -> None:
        """The present registers, as :class:`EmulatedServo` writes them, packed in place (the body's hot path)."""
        m = ct.MODEL_BY_NUMBER.get(self.model_number, ct.MODELS["XM430-W350"])
        unit = m.current_unit_a * m.torque_constant if m.current_unit_a > 0 else 1e-3 * m.stall_torque
        t = self.table
        vel_units = round(self.velocity * RAD_PER_TICK / ct.VELOCITY_UNIT_RAD_S)
        struct.pack_into("<h", t, ct.PRESENT_CURRENT, max(-32768, min(32767, round(self.effort / unit))))
        struct.pack_into("<i", t, ct.PRESENT_VELOCITY, vel_units)
        struct.pack_into("<i", t, ct.PRESENT_POSITION, self.present_ticks)
        struct.pack_into("<H", t, ct.PRESENT_INPUT_VOLTAGE, round(self.voltage / ct.VOLTAGE_UNIT_V) & 0xFFFF)
        t[ct.PRESENT_TEMPERATURE] = max(0, min(255, round(self.temperature)))
        t[ct.MOVING] = int(vel_units != 0)


@dataclass
class Registers:
    """What the firmware reads from the control tables, one entry per servo.

    Attributes:
        active: Torque on and watchdog not tripped.
        mode: Operating Mode.
        goal: Goal Position, physical ticks.
        goal_velocity: Goal Velocity, ticks/s.
        kpp: Position P gain, PWM units per tick of error.
        kpi: Position I gain, PWM units per tick of error summed over control periods.
        kpd: Position D gain, PWM units per tick of error change over a control period.
        kvp: Velocity P gain, PWM units per (tick/s).
        profile_velocity: ticks/s (inf: unlimited).
        profile_acceleration: ticks/s^2 (inf: unlimited).
        pwm_limit: PWM units.
        current_limit: A.
    """

    active: np.ndarray
    mode: np.ndarray
    goal: np.ndarray
    goal_velocity: np.ndarray
    kpp: np.ndarray
    kpi: np.ndarray
    kpd: np.ndarray
    kvp: np.ndarray
    profile_velocity: np.ndarray
    profile_acceleration: np.ndarray
    pwm_limit: np.ndarray
    current_limit: np.ndarray


def read_registers(servos: list[BodyServo]) -> Registers:
    """The firmware's inputs from each servo's control table (hold the bus lock).

    Goal Position and the torque state are read every time; the gains, limits and profile
    only after a write to the servo (:attr:`BodyServo.version`).
    """
    n = len(servos)
    out = Registers(*(np.zeros(n) for _ in range(12)))
    for i, s in enumerate(servos):
        out.active[i] = s.active
        out.goal[i] = s.goal_physical()
        (out.mode[i], out.goal_velocity[i], out.kpp[i], out.kpi[i], out.kpd[i], out.kvp[i],
         out.profile_velocity[i], out.profile_acceleration[i], out.pwm_limit[i], out.current_limit[i]) = s.settings()
    return out


@dataclass
class MotorParams:
    """Per-servo motor and gear constants (drawn per robot; see ``body.draw_variation``).

    Attributes:
        stall_torque: N m at :data:`NOMINAL_VOLTAGE_V`.
        no_load_speed: rad/s at :data:`NOMINAL_VOLTAGE_V`.
        torque_constant: N m/A, output side.
        gain_scale: Drive electronics tolerance: duty actually applied per commanded duty.
        backlash: Total gear play, rad.
        rotor_inertia: Reflected rotor inertia, kg m^2 (moves across the play alone).
        direction: +1/-1, servo angle per joint angle.
        zero: Servo angle at joint zero, rad (YAML zero offset plus the horn's mounting error).
    """

    stall_torque: np.ndarray
    no_load_speed: np.ndarray
    torque_constant: np.ndarray
    gain_scale: np.ndarray
    backlash: np.ndarray
    rotor_inertia: np.ndarray
    direction: np.ndarray
    zero: np.ndarray


class Firmware:
    """The position loops and motors of every servo of a bus, stepped together.

    Args:
        motors: Motor and gear constants, one entry per servo.
        dt: Control period, s (the body's physics step).
    """

    def __init__(self, motors: MotorParams, dt: float) -> None:
        """Zero state: profiles start at the present position on the first step."""
        self.motors = motors
        self.dt = dt
        n = len(motors.stall_torque)
        self.desired = np.full(n, np.nan)   # profile position, physical ticks
        self.desired_velocity = np.zeros(n)  # profile velocity, ticks/s
        self.integral = np.zeros(n)          # tick s
        self.last_error = np.zeros(n)        # ticks
        self.gap = np.zeros(n)               # motor side within the play, rad (-b/2 .. b/2)
        self.gap_velocity = np.zeros(n)      # rad/s
        self.pwm = np.zeros(n)               # PWM units
        self.current = np.zeros(n)           # A
        self.motor_torque = np.zeros(n)      # N m, produced by the motor
        self.supply = np.full(n, NOMINAL_VOLTAGE_V)
        self._half_backlash = motors.backlash / 2.0
        self.prepare(Registers(*(np.zeros(n) for _ in range(12))))

    def prepare(self, reg: Registers) -> None:
        """Take new register inputs (once per exchange with the control tables)."""
        m = self.motors
        self.reg = reg
        active = reg.active > 0
        positional = (reg.mode == ct.MODE_POSITION) | (reg.mode == ct.MODE_EXTENDED_POSITION)
        self._velocity_mode = active & (reg.mode == ct.MODE_VELOCITY)
        driven = active & (positional | self._velocity_mode)
        self._any_velocity_mode = bool(self._velocity_mode.any())
        self._pwm_limit = np.where(driven, reg.pwm_limit, 0.0)   # 0: no output (torque off)
        self._torque_limit = np.minimum(reg.current_limit * m.torque_constant, 1e6)
        self._any_profile = bool(np.any(np.isfinite(reg.profile_velocity) | np.isfinite(reg.profile_acceleration)))
        self._any_integral = bool(np.any(reg.kpi > 0))
        self._any_derivative = bool(np.any(reg.kpd > 0))
        self._volts_per_pwm = m.gain_scale / PWM_FULL / NOMINAL_VOLTAGE_V  # x supply -> V / V_nom
        # Inactive servos: the profile and the integral restart from where the shaft is.
        self.desired = np.where(active, self.desired, np.nan)
        self.desired_velocity = np.where(active, self.desired_velocity, 0.0)
        self.integral = np.where(active, self.integral, 0.0)

    def step(self, ticks: np.ndarray, joint_velocity: np.ndarray) -> np.ndarray:
        """One control period on the inputs of :meth:`prepare`: joint torques, N m (what the gear passes on).

        Args:
            ticks: Encoder reading, physical ticks (integers, 4096 per turn).
            joint_velocity: Joint velocities, rad/s.
        """
        m, dt, reg = self.motors, self.dt, self.reg
        servo_velocity = m.direction * joint_velocity  # rad/s, servo frame
        if self._any_profile:
            goal = self._profile(reg, ticks)
        else:
            goal = reg.goal
        # Position PID in PWM units (e-Manual gain conversion), clipped to PWM Limit.
        error = goal - ticks
        pwm = reg.kpp * error
        if self._any_integral:
            self.integral = np.clip(self.integral + error * dt, -_INTEGRAL_LIMIT_TICKS_S, _INTEGRAL_LIMIT_TICKS_S)
            # The firmware sums errors over its own control period: sum e ~ integral / T.
            pwm += reg.kpi * self.integral / FIRMWARE_PERIOD_S
        if self._any_derivative:
            # e_k - e_(k-1) over the firmware's period ~ (de/dt) T.
            pwm += reg.kpd * (error - self.last_error) / dt * FIRMWARE_PERIOD_S
            self.last_error = error
        if self._any_velocity_mode:
            velocity_pwm = reg.kvp * (reg.goal_velocity - servo_velocity / RAD_PER_TICK)
            pwm = np.where(self._velocity_mode, velocity_pwm, pwm)
        pwm = np.clip(pwm, -self._pwm_limit, self._pwm_limit)
        self.pwm = pwm
        # DC motor: linear torque-speed line scaled by the applied voltage (back-EMF term).
        torque = m.stall_torque * (self._volts_per_pwm * self.supply * pwm - servo_velocity / m.no_load_speed)
        torque = np.clip(torque, -self._torque_limit, self._torque_limit)
        torque[self._pwm_limit == 0] = 0.0   # torque off: windings open, no back-EMF braking
        self.motor_torque = torque
        self.current = torque / m.torque_constant
        return m.direction * self._backlash(torque)

    def _profile(self, reg: Registers, ticks: np.ndarray) -> np.ndarray:
        """Trapezoidal profile towards Goal Position: the desired position now, physical ticks."""
        dt = self.dt
        start = np.isnan(self.desired)
        self.desired = np.where(start, ticks, self.desired)
        to_go = reg.goal - self.desired
        brake = np.sqrt(2.0 * np.minimum(reg.profile_acceleration, 1e12) * np.abs(to_go))
        v_target = np.sign(to_go) * np.minimum(reg.profile_velocity, brake)
        dv = np.clip(v_target - self.desired_velocity, -reg.profile_acceleration * dt, reg.profile_acceleration * dt)
        v_new = self.desired_velocity + dv
        unlimited = np.isinf(reg.profile_velocity) & np.isinf(reg.profile_acceleration)
        step = v_new * dt
        done = unlimited | (np.abs(step) >= np.abs(to_go))
        self.desired = np.where(done, reg.goal, self.desired + step)
        self.desired_velocity = np.where(done, 0.0, v_new)
        return self.desired

    def _backlash(self, torque: np.ndarray) -> np.ndarray:
        """Torque passed to the joints: none while the rotor crosses the gear play alone, its momentum at the flank.

        Crossing, the rotor's speed relative to the joint grows by ``torque / I_r`` per second;
        where it reaches a flank moving into it, that relative momentum ``I_r v`` passes to the
        joint as the torque ``I_r v / dt`` over this control period (an inelastic impact: the
        joint's armature is the rotor's inertia, so the momentum of rotor and joint is kept).
        A zero torque (torque off) leaves the rotor where it is in the play, at rest against the joint.
        """
        half = self._half_backlash
        gap = self.gap
        engaged = ((gap >= half) & (torque > 0)) | ((gap <= -half) & (torque < 0)) | (torque == 0)
        if engaged.all():
            self.gap_velocity[:] = 0.0
            return torque
        free = ~engaged
        inertia, dt = self.motors.rotor_inertia, self.dt
        velocity = np.where(free, self.gap_velocity + torque / inertia * dt, 0.0)
        moved = gap + velocity * dt
        impact = free & (np.abs(moved) >= half) & (moved * velocity > 0)
        self.gap = np.where(free, np.clip(moved, -half, half), gap)
        self.gap_velocity = np.where(impact, 0.0, velocity)
        return np.where(free, np.where(impact, inertia * velocity / dt, 0.0), torque)
