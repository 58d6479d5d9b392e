"""Servo model files and the servo's equations (snake_core.servo), against independent numbers."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.integrate import solve_ivp

from snake_core.config_files import available, config_path
from snake_core.robot import SERVO_RANGES
from snake_core.servo.actuator import duty_cycle, friction_budget, motor_torque, position_actuator, stopping_friction
from snake_core.servo.model import Motor, Registers, ServoModelError, load_servo_model, parse_servo_model
from snake_core.servo.pendulum import GRAVITY, BenchLog, batch, rollout

_MENAGERIE_XM430_KP = 21.1  # N m/rad, MuJoCo Menagerie robotis_op3: an XM430 identified by its authors


def test_every_servo_model_file_loads_and_names_itself() -> None:
    names = available("servo")
    assert "XM430-W350" in names and "XL330-M288" in names
    for name in names:
        assert load_servo_model(name).model == name


@pytest.mark.parametrize("name", sorted(SERVO_RANGES))
def test_datasheet_motor_is_the_robot_tables_servo(name: str) -> None:
    """The servo model file and the robot loader's table (the bridge's numbers) agree."""
    spec = load_servo_model(name)
    assert spec.motor.stall_torque == pytest.approx(SERVO_RANGES[name].stall_torque, rel=1e-6)
    assert spec.motor.no_load_speed == pytest.approx(SERVO_RANGES[name].max_velocity, rel=1e-4)


def test_motor_constants_pass_through_the_datasheet_points() -> None:
    """tau = k_t (V - k_t w) / R: the stall torque at rest, zero at the no-load speed."""
    m = load_servo_model("XM430-W350").motor
    v = m.nominal_voltage
    assert motor_torque(1.0, v, 0.0, m.torque_constant, m.resistance) == pytest.approx(m.stall_torque)
    assert motor_torque(1.0, v, m.no_load_speed, m.torque_constant, m.resistance) == pytest.approx(0.0, abs=1e-12)
    back = Motor.from_constants(m.torque_constant, m.resistance, v, m.gear_ratio, m.armature)
    assert back.stall_torque == pytest.approx(m.stall_torque) and back.no_load_speed == pytest.approx(m.no_load_speed)
    assert back.rotor_inertia == pytest.approx(m.rotor_inertia)


@pytest.mark.parametrize("slow_decay", [0.0, 0.4, 1.0])
@pytest.mark.parametrize(("duty", "velocity"), [(0.2, 1.5), (-0.6, 2.0), (1.0, -3.0), (0.0, 1.0)])
def test_motor_torque_is_the_pwm_periods_mean_current(slow_decay: float, duty: float, velocity: float) -> None:
    """Eq. (2) against one PWM period stepped through: on, the winding sees +-V and the back-EMF;
    off, shorted (back-EMF only) for the slow-decay fraction, open (no current) for the rest."""
    kt, res, volts = 0.4, 3.0, 7.4
    steps = 10_000
    phase = (np.arange(steps) + 0.5) / steps
    on = phase < abs(duty)
    shorted = ~on & (phase < abs(duty) + slow_decay * (1.0 - abs(duty)))
    current = np.where(on, (math.copysign(volts, duty) - kt * velocity) / res,
                       np.where(shorted, -kt * velocity / res, 0.0))
    mean = kt * float(current.mean())
    assert motor_torque(duty, volts, velocity, kt, res, slow_decay) == pytest.approx(mean, rel=1e-3, abs=1e-6)
    # Torque off (duty 0, bridge open) gives no braking only where the off-time is open.
    if duty == 0.0:
        assert motor_torque(0.0, volts, velocity, kt, res, 0.0) == 0.0


def test_duty_is_the_e_manuals_kpp_on_ticks_and_clips_at_the_pwm_limit() -> None:
    tick = 2 * math.pi / 4096
    # e-Manual: KPP = P / 128 PWM units per tick of error; 885 PWM units = 100 %.
    assert duty_cycle(10 * tick, 800, 128, 885, 885) == pytest.approx(10 * 800 / 128 / 885)
    assert duty_cycle(1.0, 800, 128, 885, 442) == pytest.approx(442 / 885)
    assert duty_cycle(-1.0, 800, 128, 885, 885) == pytest.approx(-1.0)


def test_xm430_actuator_at_factory_gains_is_near_menageries_identified_kp() -> None:
    """An independent identification (MuJoCo Menagerie, robotis_op3) found kp 21.1 N m/rad for an XM430."""
    act = position_actuator(load_servo_model("XM430-W350"))
    assert act.kp == pytest.approx(_MENAGERIE_XM430_KP, rel=0.15)
    assert act.effort == pytest.approx(4.1)
    assert act.damping == pytest.approx(4.1 / (46 * 2 * math.pi / 60), rel=1e-4)  # back-EMF: stall / no-load speed


def test_actuator_scales_with_gain_and_voltage_and_current_limit_caps_it() -> None:
    spec = load_servo_model("XM430-W350")
    base = position_actuator(spec, voltage=12.0)
    half = position_actuator(spec, Registers(position_p_gain=400, pwm_limit=885), voltage=12.0)
    low = position_actuator(spec, voltage=6.0)
    assert half.kp == pytest.approx(base.kp / 2) and half.effort == pytest.approx(base.effort)
    assert low.kp == pytest.approx(base.kp / 2) and low.effort == pytest.approx(base.effort / 2)
    assert low.damping == pytest.approx(base.damping)  # back-EMF does not depend on the supply
    capped = position_actuator(spec, Registers(position_p_gain=800, pwm_limit=885, current_limit=100), voltage=12.0)
    assert capped.effort == pytest.approx(spec.motor.torque_constant * 100 * 2.69e-3)


def test_friction_budget_structures() -> None:
    kw = {"motor": 0.3, "external": -0.1, "velocity": 0.0}
    assert friction_budget(0.02, 0.1, 0.0, 0.0, 0.0, 0.1, **kw) == pytest.approx(0.02)
    assert friction_budget(0.02, 0.1, 0.5, 0.0, 0.0, 0.1, **kw) == pytest.approx(0.02 + 0.5 * 0.4)
    assert friction_budget(0.02, 0.1, 0.0, 0.03, 0.0, 0.1, **kw) == pytest.approx(0.05)  # Stribeck at rest
    moving = friction_budget(0.02, 0.1, 0.0, 0.03, 0.0, 0.1, 0.3, -0.1, 1.0)
    assert moving == pytest.approx(0.02 + 0.03 * math.exp(-100) + 0.1)


def test_stopping_friction_holds_at_rest_and_opposes_motion() -> None:
    assert stopping_friction(0.5, 1.0, 0.0, 0.2, 0.01) == pytest.approx(-0.2)  # held: net zero
    assert stopping_friction(0.1, 1.0, 0.0, 0.2, 0.01) == pytest.approx(-0.1)  # slips
    assert stopping_friction(0.1, 1.0, 2.0, 0.0, 0.01) == pytest.approx(-0.1)  # moving: opposes


def test_limp_pendulum_swings_as_the_exact_pendulum() -> None:
    """Torque off, no friction: the rollout against scipy's solution of m l^2 q'' = -m g l sin q."""
    t = np.arange(0.0, 2.0, 0.001)
    q0 = 0.4
    log = BenchLog("limp", 0.5, 0.2, 100.0, t, np.full(len(t), q0), np.zeros(len(t)), np.zeros(len(t)),
                   np.full(len(t), 7.4))
    data = batch([log], dt=0.0005)
    params = {"torque_constant": [0.4], "resistance": [4.0], "armature": [1e-9], "p_gain_divisor": [256.0],
              "slow_decay": [1.0], "max_current": [math.inf], "coulomb": [0.0], "viscous": [0.0], "load": [0.0],
              "stribeck_torque": [0.0], "stribeck_load": [0.0], "stribeck_velocity": [1.0], "offset": [0.0]}
    q = rollout(data, {k: np.array(v) for k, v in params.items()}, dt=0.0005)[0, 0]
    grid = np.arange(len(q)) * 0.0005
    exact = solve_ivp(lambda _, y: [y[1], -GRAVITY / 0.2 * math.sin(y[0])], (0, grid[-1]), [q0, 0.0],
                      t_eval=grid, rtol=1e-10, atol=1e-12).y[0]
    assert np.max(np.abs(q - exact)) < 0.01


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d["motor"].update(gear_ratio=0), "motor.gear_ratio"),
    (lambda d: d["motor"].update(stall_torque=-1.0), "motor.stall_torque"),
    (lambda d: d["motor"].update(torque_constant=1.0), "torque_constant"),
    (lambda d: d["friction"].update(structure="magic"), "friction.structure"),
    (lambda d: d["friction"].update(load=0.1), "friction.load"),
    (lambda d: d["firmware"]["factory"].update(pwm_limit=900), "firmware.factory.pwm_limit"),
    (lambda d: d["firmware"].pop("p_gain_divisor"), "firmware.p_gain_divisor"),
    (lambda d: d["firmware"].update(slow_decay=1.5), "firmware.slow_decay"),
    (lambda d: d["firmware"].update(max_current_a=0.0), "firmware.max_current_a"),
    (lambda d: d["firmware"].update(max_current_a=-1.0), "firmware.max_current_a"),
    (lambda d: d.update(colour="red"), "colour"),
])
def test_bad_servo_model_is_one_line_naming_file_and_field(tmp_path: Path, edit, field: str) -> None:
    data = yaml.safe_load(config_path("servo", "XM430-W350").read_text())
    edit(data)
    path = tmp_path / "XM430-W350.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ServoModelError, match=rf"{path}: .*{field.rsplit('.', maxsplit=1)[-1]}") as err:
        load_servo_model(path)
    assert "\n" not in str(err.value)


def test_servo_model_round_trips_through_its_yaml(tmp_path: Path) -> None:
    spec = load_servo_model("XL330-M288")
    limited = replace(spec, firmware=replace(spec.firmware, max_current_a=1.2))
    for s in (spec, limited):
        again = parse_servo_model(yaml.safe_load(yaml.safe_dump(s.to_yaml_dict())), "x")
        assert again == s
    assert "max_current_a" not in spec.to_yaml_dict()["firmware"]  # no limit: no key


@pytest.mark.parametrize("max_current", [0.5, 0.8])
def test_a_current_limited_servo_holds_the_pendulum_where_its_limit_balances_gravity(max_current: float) -> None:
    """Goal far above, viscous friction only: the pendulum settles where m g l sin q = k_t I_max (statics).

    The limited current does not brake with the back-EMF: the viscous friction damps the swing.
    """
    mass, length, kt = 0.5, 0.1, 0.4
    t = np.arange(0.0, 10.0, 0.005)
    log = BenchLog("stall", mass, length, 800.0, t, np.zeros(len(t)), np.full(len(t), 3.0), np.ones(len(t)),
                   np.full(len(t), 7.4))
    params = {"torque_constant": [kt], "resistance": [3.0], "armature": [0.002], "p_gain_divisor": [256.0],
              "slow_decay": [1.0], "max_current": [max_current], "coulomb": [0.0], "viscous": [0.05], "load": [0.0],
              "stribeck_torque": [0.0], "stribeck_load": [0.0], "stribeck_velocity": [1.0], "offset": [0.0]}
    q = rollout(batch([log]), {k: np.array(v) for k, v in params.items()})[0, 0]
    assert q[-1] == pytest.approx(math.asin(kt * max_current / (mass * GRAVITY * length)), abs=1e-3)
    assert motor_torque(1.0, 7.4, 0.0, kt, 3.0) > kt * max_current  # the PWM alone would lift it higher
