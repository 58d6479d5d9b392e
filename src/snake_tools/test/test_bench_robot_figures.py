"""``snake bench twin``'s ``bench_robot`` block: a bench-robot run replayed with the default twin."""

from __future__ import annotations

import math

from snake_tools.bench._bench_robot import bench_robot_figures, teleop_script


def test_a_short_bench_robot_run_moves_and_the_default_twin_does_not_replay_it_exactly() -> None:
    figures = bench_robot_figures(duration=4.0, seed=1)
    assert {"realtime_factor", "divergence_default_m", "joint_rms_default_rad"} <= set(figures)
    assert figures["travelled_m"] > 0.05  # the teleop script drives it forward
    assert figures["realtime_factor"] > 0 and math.isfinite(figures["realtime_factor"])
    # Another robot: the twin's joints and head do not follow the recording exactly.
    assert figures["joint_rms_default_rad"] > 1e-3
    assert figures["divergence_default_m"] > 1e-3


def test_the_teleop_script_drives_forward_then_turns_both_ways() -> None:
    spans = [teleop_script(t) for t in (1.0, 16.0, 31.0, 46.0)]
    assert spans[0][1] == 0.0 and spans[1][1] > 0 and spans[3][1] < 0 and all(v > 0 for v, _ in spans)


def test_servo_emulator_help_documents_every_body_flag(capsys) -> None:  # type: ignore[no-untyped-def]
    from snake_tools.cli import main

    assert main(["servo-emulator", "--help"]) == 0
    text = capsys.readouterr().out
    for flag in ("--body", "--seed", "--truth", "--world", "--lifted", "--mocap-topic", "--link"):
        assert flag in text, flag


def test_body_flags_without_a_body_or_for_what_it_does_not_model_are_one_line_exit_2(capsys) -> None:  # type: ignore[no-untyped-def]
    from snake_tools.cli import main

    for argv, said in ((["--truth", "t.yaml"], "--truth: needs --body"), (["--lifted"], "--lifted: needs --body"),
                       (["--body", "wheeled_snake"], "tsnake only"),
                       (["--body", "tsnake", "--world", "uneven"], "plane ground only")):
        assert main(["servo-emulator", *argv, "--duration", "0.1"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], (argv, err)


def test_a_lifted_bench_run_follows_the_given_targets_with_its_head_held(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    from snake_core.robot import load_robot
    from snake_tools.bench._bench_robot import record_bench_run
    from snake_tools.twin.identify import MAX_LIFTED_TRAVEL_M, read_recording

    robot = load_robot("tsnake")
    wave = 0.3 * np.sin(np.arange(len(robot.joints)))  # a distinct target per joint
    record_bench_run(tmp_path / "lifted", robot, 5.5, lifted=True, targets=lambda t: min(t, 1.0) * wave)
    rec = read_recording(tmp_path / "lifted", robot)   # joint_commands and joint_states in the robot's order
    np.testing.assert_allclose(rec.q_cmd[-1], wave)
    assert np.abs(rec.q_state[-1] - wave).max() < 0.1          # the servos went there
    assert float(np.hypot(*np.ptp(rec.xy_pose, axis=0))) < MAX_LIFTED_TRAVEL_M  # the head is held


def test_the_ground_fit_drive_is_not_the_held_out_teleop_drive_and_covers_its_speeds_and_turns() -> None:
    from snake_tools.bench._bench_robot import ground_fit_script

    ts = [0.5 + 0.5 * k for k in range(60)]  # 30 s, the documented ground run
    drive = [ground_fit_script(t) for t in ts]
    teleop = [teleop_script(t) for t in [0.5 + 0.5 * k for k in range(120)]]
    assert {v for v, _ in drive} == {0.03, 0.1}                      # both speeds
    # Straight and both turning directions, up to the teleop run's fastest turn.
    assert {w for _, w in drive} >= {0.0} and min(w for _, w in drive) <= min(w for _, w in teleop)
    assert max(w for _, w in drive) >= max(w for _, w in teleop)
    assert sum(a != b for a, b in zip(drive, (teleop_script(t) for t in ts), strict=True)) == len(ts)


def test_the_bench_robots_contact_in_the_twins_terms_compiles_to_the_bench_robots_contact() -> None:
    """``divergence_bench_contact_m`` replays a twin whose contact is the bench robot's, field for field.

    The oracle is the bench robot's own compiled model: the cone, and the ground's and a link's
    friction, condim, solref and solimp (a contact's are its ground's under the ground's
    priority, and the mean of both geoms' for solref and solimp).
    """
    import numpy as np

    from snake_core.robot import load_robot
    from snake_core.twin_params import TwinParams
    from snake_hardware.emulator.body import BenchRobot
    from snake_hardware.sim.twin import SimTwin
    from snake_tools.bench._bench_robot import bench_contact

    robot = load_robot("tsnake")
    bench = BenchRobot(robot, seed=3)
    mu = bench.variation.ground_friction
    twin = SimTwin(robot, "flat", twin_params=TwinParams(contact=bench_contact(mu))).model
    default = SimTwin(robot, "flat").model
    assert twin.opt.cone == bench.model.opt.cone != default.opt.cone

    def plane(m):  # type: ignore[no-untyped-def]
        import mujoco

        return int(np.flatnonzero(m.geom_type == mujoco.mjtGeom.mjGEOM_PLANE)[0])

    for field in ("geom_friction", "geom_condim", "geom_solref", "geom_solimp"):
        ours, theirs = getattr(twin, field)[plane(twin)], getattr(bench.model, field)[plane(bench.model)]
        np.testing.assert_allclose(ours, theirs, err_msg=field)
    head_geom = int(np.flatnonzero(twin.geom_bodyid == twin.body("head").id)[0])
    bench_head = int(np.flatnonzero(bench.model.geom_bodyid == bench.model.body("head").id)[0])
    for field in ("geom_condim", "geom_solref", "geom_solimp"):
        np.testing.assert_allclose(getattr(twin, field)[head_geom], getattr(bench.model, field)[bench_head],
                                   err_msg=field)
    assert default.geom_condim[plane(default)] != bench.model.geom_condim[plane(bench.model)]


def test_the_bench_robots_links_weighed_give_the_twin_the_bench_robots_masses_to_the_scales_resolution() -> None:
    """The documented path's target starts from the links weighed: the twin's masses are the bench robot's.

    The oracle is the bench robot's own compiled model: each body's mass within half the scale's
    resolution of the twin's, and the drawn spread (several grams) larger than that, so that the
    weighed twin is not the default one.
    """
    import mujoco
    import numpy as np

    from snake_core.robot import load_robot
    from snake_core.twin_params import TwinParams, link_names
    from snake_hardware.emulator.body import BenchRobot
    from snake_hardware.sim.twin import SimTwin
    from snake_tools.bench._bench_robot import SCALE_RESOLUTION_KG, weighed_links

    robot = load_robot("tsnake")
    bench = BenchRobot(robot, seed=3).model
    weighed = TwinParams(link=weighed_links(robot, 3))
    twin, default = SimTwin(robot, "flat", twin_params=weighed).model, SimTwin(robot, "flat").model

    def masses(m: mujoco.MjModel) -> np.ndarray:
        return np.array([m.body_mass[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n)]
                         for n in link_names(robot.joint_names)])

    truth = masses(bench)
    assert np.all(np.abs(masses(twin) - truth) <= SCALE_RESOLUTION_KG / 2 + 1e-12)
    assert np.max(np.abs(masses(default) - truth)) > 5 * SCALE_RESOLUTION_KG
