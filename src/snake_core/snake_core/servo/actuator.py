"""The equations of a position-controlled Dynamixel: firmware P loop, DC motor, gear friction.

A servo in position mode runs a P(D) loop on the position error in encoder ticks and sets
the motor's PWM duty from it (ROBOTIS e-Manual, "Position PID Gain": ``KPP = Position P
Gain / 128`` PWM units per tick, clipped to PWM Limit; Duclusaud & Passault, BAM: "Better
Actuator Models", found ``/ 256`` on the XL330):

    d = clip((P / div_p) e / theta_tick / pwm_full, -pwm_limit / pwm_full, +pwm_limit / pwm_full)    (1)

with ``e`` the error in rad and ``theta_tick`` the encoder's rad per tick. The duty puts a
fraction of the supply voltage ``V`` on a DC motor (BAM, voltage-controlled actuator), whose
back-EMF ``k_t qdot`` drives a current through the winding only while the H-bridge closes a
loop: during the on-time (a fraction ``|d|`` of the PWM period) and, in slow decay, during the
off-time (the bridge shorts the winding); in fast decay the winding is open then and carries
no current (the coreless motor's L / R is short against the PWM period). With ``s`` the
fraction of the off-time the bridge shorts the winding, the period's mean current gives

    tau_m = k_t (d V - (s + (1 - s) |d|) k_t qdot) / R                                           (2)

(``s = 1``: the averaged DC motor, back-EMF braking at every duty; ``s = 0``: braking only in
proportion to the duty.) With torque off the bridge is open: no torque, no back-EMF braking.
A drive that limits the motor's current to ``I_max`` lowers the duty until the current of (2)
is within it (BAM's firmware current limiter: a window on the duty about the back-EMF, met
whenever the window holds a duty the PWM can give, which it does below the no-load speed),
so that

    tau_m = clip(tau_m of (2), -k_t I_max, +k_t I_max)                                          (2b)

and the gear train takes a dry-friction budget out of it (BAM, friction models m1-m4):

    f = c + l |tau_e - tau_m| + s(qdot) (c_s + l_s |tau_e - tau_m|) + b |qdot|,
    s(qdot) = exp(-(qdot / v_s)^2)                                                               (3)

``c`` the Coulomb friction, ``b`` the viscous one, ``l`` the load-dependent part (friction
rising with the torque through the gears, ``tau_e`` the external torque on the joint),
``c_s``, ``l_s`` the Stribeck part (more friction at rest). The friction opposes motion and
holds the joint at rest as long as it can (BAM's stopping torque):

    tau_f = -sign(tau_stop) min(|tau_stop|, f),   tau_stop = J qdot / dt + tau_m + tau_e           (4)

In the MuJoCo twin, (1)-(2) are a position actuator: ``kp = k_t V (P / div_p) / (R theta_tick
pwm_full)``, ``forcerange = k_t V (pwm_limit / pwm_full) / R`` (and ``k_t I_limit``, ``k_t I_max``), a joint
damping ``s k_t^2 / R`` (the back-EMF at the set point, ``d = 0``, not clipped) and
``frictionloss = c`` (:func:`position_actuator`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from snake_core.servo.model import RAD_PER_TICK, Registers, ServoSpec

_FIRMWARE_PERIOD_MS = 1.0  # ms: the D gain acts on the error's change per millisecond


def duty_cycle(error: Any, p_gain: Any, p_gain_divisor: Any, pwm_full: float, pwm_limit: Any) -> Any:
    """PWM duty of the firmware's P loop, Eq. (1).

    Args:
        error: Goal minus present position, rad.
        p_gain: Position P Gain register.
        p_gain_divisor: PWM units per tick = P / this.
        pwm_full: PWM units at 100 % duty.
        pwm_limit: PWM Limit register, PWM units.

    Returns:
        Duty in [-pwm_limit / pwm_full, +pwm_limit / pwm_full].
    """
    limit = np.asarray(pwm_limit) / pwm_full
    return np.clip(np.asarray(p_gain) / p_gain_divisor * np.asarray(error) / RAD_PER_TICK / pwm_full, -limit, limit)


def motor_torque(duty: Any, voltage: Any, velocity: Any, torque_constant: Any, resistance: Any,
                 slow_decay: Any = 1.0) -> Any:
    """Output torque of the voltage-driven DC motor, Eq. (2), N m.

    Args:
        duty: PWM duty ``d`` in [-1, 1].
        voltage: Supply voltage ``V``, V.
        velocity: Joint velocity ``qdot``, rad/s.
        torque_constant: ``k_t``, N m/A (= V s/rad).
        resistance: ``R``, ohm.
        slow_decay: ``s``, the fraction of the PWM off-time the bridge shorts the winding (1: the
            averaged DC motor).
    """
    braking = slow_decay + (1.0 - slow_decay) * np.abs(duty)
    return torque_constant * (duty * voltage - braking * torque_constant * velocity) / resistance


def current_limited(torque: Any, torque_constant: Any, max_current: Any) -> Any:
    """Motor torque of a drive that limits the current to ``max_current``, Eq. (2b), N m.

    Args:
        torque: :func:`motor_torque`, N m.
        torque_constant: ``k_t``, N m/A.
        max_current: ``I_max``, A (``inf``: no limit).
    """
    ceiling = np.asarray(torque_constant) * np.asarray(max_current)
    return np.clip(torque, -ceiling, ceiling)


def friction_budget(coulomb: Any, viscous: Any, load: Any, stribeck_torque: Any, stribeck_load: Any,
                    stribeck_velocity: Any, motor: Any, external: Any, velocity: Any) -> Any:
    """The largest friction torque the gear train can give, Eq. (3), N m.

    Args:
        coulomb: ``c``, N m.
        viscous: ``b``, N m s/rad.
        load: ``l``, friction per N m through the gears.
        stribeck_torque: ``c_s``, N m.
        stribeck_load: ``l_s``, per N m.
        stribeck_velocity: ``v_s``, rad/s.
        motor: Motor torque ``tau_m``, N m.
        external: External torque on the joint ``tau_e`` (gravity, the load), N m.
        velocity: Joint velocity, rad/s.
    """
    through = np.abs(external - motor)
    s = np.exp(-np.square(velocity / stribeck_velocity))
    return coulomb + load * through + s * (stribeck_torque + stribeck_load * through) + viscous * np.abs(velocity)


def stopping_friction(budget: Any, inertia: Any, velocity: Any, torque: Any, dt: float) -> Any:
    """Friction torque of one step, Eq. (4): what stops the joint within ``dt``, at most ``budget``, N m.

    Args:
        budget: :func:`friction_budget`, N m.
        inertia: Inertia about the joint, kg m^2.
        velocity: Joint velocity, rad/s.
        torque: Every other torque on the joint (motor and external), N m.
        dt: Step, s.
    """
    stop = inertia / dt * velocity + torque
    return -np.sign(stop) * np.minimum(np.abs(stop), budget)


@dataclass(frozen=True)
class PositionActuator:
    """A servo as the twin's MuJoCo position actuator (units SI, output side).

    Attributes:
        kp: Position gain, N m/rad.
        kv: Velocity gain of the D term, N m s/rad.
        effort: Torque limit, N m.
        damping: Back-EMF plus viscous friction, N m s/rad.
        frictionloss: Dry friction, N m.
        armature: Reflected rotor inertia, kg m^2.
    """

    kp: float
    kv: float
    effort: float
    damping: float
    frictionloss: float
    armature: float


def position_actuator(spec: ServoSpec, registers: Registers | None = None,
                      voltage: float | None = None) -> PositionActuator:
    """The twin's actuator of a servo model at its registers and supply voltage, Eqs. (1)-(2).

    Inside the duty's linear range, Eq. (2) at rest is ``tau = kp e`` with ``kp = (k_t V / R)
    (P / div_p) / (theta_tick pwm_full)``; the duty's clip is a torque limit ``k_t V
    (pwm_limit / pwm_full) / R``, lowered to ``k_t I_limit`` by a Current Limit and to ``k_t I_max``
    by the drive's own limit (Eq. (2b)); the back-EMF
    damps by ``s k_t^2 / R`` about the set point (``d = 0`` in Eq. (2)); the D gain adds
    ``(k_t V / R) (D / div_d) / (theta_tick pwm_full)`` per rad/ms of error rate.

    Args:
        spec: The servo model.
        registers: The registers the bridge writes (``None``: the factory ones).
        voltage: Supply voltage, V (``None``: the motor's nominal voltage).
    """
    regs = registers or spec.firmware.factory
    volts = spec.motor.nominal_voltage if voltage is None else voltage
    kt, res, fw = spec.motor.torque_constant, spec.motor.resistance, spec.firmware
    stall = kt * volts / res  # N m at full duty and rest
    per_duty = stall / (RAD_PER_TICK * fw.pwm_full)  # N m per rad of error at one PWM unit per tick
    kp = per_duty * regs.position_p_gain / fw.p_gain_divisor
    kv = per_duty * regs.position_d_gain / fw.d_gain_divisor * _FIRMWARE_PERIOD_MS * 1e-3
    effort = min(stall * min(regs.pwm_limit, fw.pwm_full) / fw.pwm_full, kt * fw.max_current_a)
    if fw.current_unit_a > 0.0 and regs.current_limit > 0:
        effort = min(effort, kt * regs.current_limit * fw.current_unit_a)
    return PositionActuator(kp=kp, kv=kv, effort=effort,
                            damping=fw.slow_decay * kt * kt / res + spec.friction.viscous,
                            frictionloss=spec.friction.coulomb, armature=spec.motor.armature)
