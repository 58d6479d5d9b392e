"""The bench robot (emulator with a body): written apart from the twin, seeded, its firmware's loop.

The body is stepped here by hand (:meth:`BenchRobot.step_chunk`, no real-time thread), so
every check is deterministic and independent of the machine's load.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from snake_hardware.dynamixel import control_table as ct
from snake_hardware.emulator.body import VARIATION, BenchRobot, write_truth
from snake_hardware.emulator.firmware import POSITION_P_GAIN, RAD_PER_TICK

PKG = Path(__file__).resolve().parents[1] / "snake_hardware"
BODY_MODULES = ("body", "firmware", "mocap")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_the_bench_robot_and_the_twin_never_import_each_other() -> None:
    emulator = sorted((PKG / "emulator").glob("*.py"))
    sim = sorted((PKG / "sim").glob("*.py"))
    assert {p.stem for p in emulator} >= set(BODY_MODULES) and sim
    for path in emulator:
        bad = sorted(n for n in _imports(path) if n.startswith("snake_hardware.sim"))
        assert not bad, f"{path.name} imports the twin: {bad}"
    body = tuple(f"snake_hardware.emulator.{m}" for m in BODY_MODULES)
    for path in sim:
        bad = sorted(n for n in _imports(path) if n.startswith(body) or n == "snake_hardware.emulator")
        assert not bad, f"sim/{path.name} imports the bench robot: {bad}"


@pytest.fixture(scope="module")
def robots() -> dict[int, BenchRobot]:
    return {seed: BenchRobot("tsnake", seed=seed) for seed in (3, 4)}


def test_a_seed_changes_the_robot_and_the_truth_file_says_how(robots: dict[int, BenchRobot], tmp_path: Path) -> None:
    a, b = robots[3], robots[4]
    write_truth(tmp_path / "a.yaml", a)
    truth = yaml.safe_load((tmp_path / "a.yaml").read_text())
    assert truth["seed"] == 3 and truth["robot"] == "tsnake"
    # The compiled MuJoCo model has the masses and rotor inertias the truth file names.
    for name, link in truth["links"].items():
        assert a.model.body_mass[a.model.body(name).id] == pytest.approx(link["mass_kg"], rel=1e-7)
    for name, servo in truth["servos"].items():
        j = a.model.joint(name)
        assert a.model.dof_armature[j.dofadr[0]] == pytest.approx(servo["rotor_inertia_kg_m2"], rel=1e-7)
        assert a.model.dof_frictionloss[j.dofadr[0]] == pytest.approx(servo["frictionloss_nm"], rel=1e-7)
        for key, (lo, hi) in VARIATION.items():
            if key in servo:
                assert lo <= servo[key] <= hi
    # Another seed is another robot; the same seed the same one.
    assert not np.allclose(a.model.body_mass, b.model.body_mass)
    assert a.variation.to_dict() == BenchRobot("tsnake", seed=3).variation.to_dict()
    # ... and answers the same command differently.
    present = {}
    for seed, bench in robots.items():
        _torque_on_and_goal(bench, 9, 0.5)
        for _ in range(25):
            bench.step_chunk()
        present[seed] = bench.bus.present_position(9)
    assert present[3] != present[4]


def _torque_on_and_goal(bench: BenchRobot, sid: int, angle: float) -> None:
    s = bench.bus.servos[sid]
    assert s.write(ct.TORQUE_ENABLE, b"\x01") == 0
    goal = ct.TICKS_CENTER + round(angle / RAD_PER_TICK)
    assert s.write(ct.GOAL_POSITION, goal.to_bytes(4, "little")) == 0


def test_the_firmware_loop_follows_the_p_gain_register_and_reports_its_motor() -> None:
    moved = {}
    for gain in (800, 200):
        bench = BenchRobot("tsnake", seed=3, lifted=True)
        sid = bench.robot.joint("m6_dorsal").servo_id  # a light load: the tail module
        s = bench.bus.servos[sid]
        assert s.write(POSITION_P_GAIN, gain.to_bytes(2, "little")) == 0
        _torque_on_and_goal(bench, sid, 0.4)
        currents = []
        for _ in range(25):  # 0.2 s of simulated time
            bench.step_chunk()
            currents.append(s.get(ct.PRESENT_CURRENT, 2, signed=True))
        moved[gain] = s.get(ct.PRESENT_POSITION, 4, signed=True) - ct.TICKS_CENTER
        assert max(currents) > 0  # the motor draws current while it drives towards the goal
        assert s.get(ct.PRESENT_INPUT_VOLTAGE, 2) <= 120  # the supply sags under load, never rises
        for _ in range(200):  # 1.6 s more: it gets there
            bench.step_chunk()
        assert abs(s.get(ct.PRESENT_POSITION, 4, signed=True) - (ct.TICKS_CENTER + 0.4 / RAD_PER_TICK)) < 60
    assert moved[800] > moved[200] > 0  # the lower gain drives it more slowly


def test_torque_off_leaves_the_joint_to_gravity_and_friction_only() -> None:
    bench = BenchRobot("tsnake", seed=3)
    for _ in range(50):
        bench.step_chunk()
    assert np.all(bench.firmware.motor_torque == 0.0)
    assert all(s.get(ct.PRESENT_CURRENT, 2, signed=True) == 0 for s in bench.bus.servos.values())
    pos, quat = bench.head_pose()
    assert abs(pos[2] - bench.robot.tsnake_body.radius) < 0.01 and math.isclose(np.linalg.norm(quat), 1.0)


@pytest.mark.parametrize(("position", "velocity", "effort"), [(2048.4, 0.0, 0.0), (-70000.6, -900.0, -2.5),
                                                              (5000.0, 1234.5, 4.0)])
def test_a_body_servo_reports_its_state_in_the_emulators_registers(position: float, velocity: float,
                                                                   effort: float) -> None:
    from snake_hardware.emulator.firmware import BodyServo
    from snake_hardware.emulator.servo import EmulatedServo

    servos = [cls(5, ct.model("XM430-W350").number) for cls in (EmulatedServo, BodyServo)]
    for s in servos:
        s.position, s.velocity, s.effort, s.voltage, s.temperature = position, velocity, effort, 11.7, 41.2
        s._sync()
    a, b = (s.table[ct.PRESENT_CURRENT:ct.PRESENT_TEMPERATURE + 1] for s in servos)
    assert a == b and servos[0].table[ct.MOVING] == servos[1].table[ct.MOVING]


def test_the_mocap_samples_at_its_rate_stamps_at_capture_and_adds_small_noise() -> None:
    import threading

    from snake_hardware.emulator.mocap import POSITION_NOISE_M, RATE_HZ, MocapSystem

    got: list[tuple[float, np.ndarray, np.ndarray]] = []
    done = threading.Event()

    def deliver(stamp: float, pos: np.ndarray, quat: np.ndarray) -> None:
        got.append((stamp, pos, quat))
        if len(got) >= 100:
            done.set()

    mocap = MocapSystem(deliver, seed=1).start()
    t0 = 1000.0
    truth = np.array([1.0, 2.0, 0.03])
    try:
        for k in range(250):  # 1 s of body states at 250 Hz
            mocap.offer(t0 + k * 0.004, truth, np.array([1.0, 0.0, 0.0, 0.0]))
        assert done.wait(60.0)  # failure bound only
    finally:
        mocap.stop()
    stamps = np.array([g[0] for g in got])
    offered = t0 + 0.004 * np.round((stamps - t0) / 0.004)
    assert np.all(np.diff(stamps) > 0) and np.allclose(stamps, offered, rtol=0, atol=1e-9)  # a state's own time
    assert 0.8 / RATE_HZ < float(np.median(np.diff(stamps))) < 1.25 / RATE_HZ
    err = np.array([g[1] for g in got]) - truth
    assert 0 < float(np.abs(err).max()) < 6 * POSITION_NOISE_M
    assert all(abs(np.linalg.norm(g[2]) - 1.0) < 1e-9 for g in got)


def test_gear_friction_rises_with_the_torque_the_gears_pass_on(tmp_path: Path) -> None:
    """Each step a joint's dry friction is c + l |tau| (BAM m3), c and l the drawn values of the truth file."""
    bench = BenchRobot("tsnake", seed=5, lifted=True)
    write_truth(tmp_path / "truth.yaml", bench)
    truth = yaml.safe_load((tmp_path / "truth.yaml").read_text())["servos"]
    name = "m3_dorsal"
    sid, dof = bench.robot.joint(name).servo_id, bench.model.joint(name).dofadr[0]
    c, load = truth[name]["frictionloss_nm"], truth[name]["load_friction"]
    assert VARIATION["load_friction"][0] <= load <= VARIATION["load_friction"][1]
    _torque_on_and_goal(bench, sid, 0.6)   # the tail below hangs from it: the gears carry a load
    seen = []
    for _ in range(100):
        bench.step_chunk()
        tau = float(bench.data.ctrl[bench.model.actuator(name).id])
        seen.append((tau, float(bench.model.dof_frictionloss[dof])))
    assert all(f == pytest.approx(c + load * abs(tau), rel=1e-12) for tau, f in seen)
    assert max(f for _, f in seen) > c + 1.0 * load   # it carried over 1 N m, and its friction rose with it
    # Torque off: nothing through the gears, the friction is c again.
    assert bench.bus.servos[sid].write(ct.TORQUE_ENABLE, b"\x00") == 0
    bench.step_chunk()
    assert bench.model.dof_frictionloss[dof] == pytest.approx(c, rel=1e-12)
