"""A lifted fit finds a load-dependent friction the recording has, and BIC keeps it, against known truth.

The "robot" is the twin with the benchmark's hidden physics (:func:`snake_tools.bench.twin.hidden_params`)
and a dry friction that grows with each servo's torque (``load_friction``, BAM's model m3; the twin sets it
before every physics step), recorded lifted under ``snake twin excite``'s multisine to a real rosbag2 bag.
The dorsal and lateral servos hold the hanging body's weight, so their torque, and with it their friction,
is large; the fit must recover every type's coefficient, and BIC must prefer the structure that has it to
the model without it (which refits kp, kv and a constant friction to 2.4 times the noise floor) and to the
gear play.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from snake_core.excitation import JointBounds, plan_excitation
from snake_core.robot import load_robot
from snake_core.twin_params import TwinParams
from snake_tools.bench.twin import hidden_params
from snake_tools.cli import main
from snake_tools.twin.coverage import draw_hidden
from snake_tools.twin.identify import identify, read_recording
from snake_tools.twin.recording import ROBOT_SENSING, record_twin_run
from snake_tools.twin.structure import DECISIVE_BIC, STRUCTURES

_DURATION_S = 8.0
_LOAD = 0.15            # N m of dry friction per N m of torque (BAM's m3 XL330: 0.12)
_TYPES = ("dorsal", "twist", "lateral")


def _loaded_recording(robot, bag):
    """The lifted multisine recorded from the twin whose every servo has the load-dependent friction :data:`_LOAD`."""
    truth = hidden_params(robot).with_flat({f"servo.{t}.load_friction": _LOAD for t in _TYPES})
    bounds = [JointBounds(j.lower, j.upper, j.velocity) for j in robot.joints]
    motion = plan_excitation([0.0] * len(robot.joints), bounds, variant="lifted", duration=_DURATION_S)
    return record_twin_run(bag, robot, _DURATION_S, twin_params=truth, world=None, lifted=True,
                           controller=lambda tw: motion.positions(np.array([tw.time]))[0])


# Three structures fitted, load_friction's and backlash's rollouts stepped from Python: 372 s alone on a slow
# day of the shared 2-core host, over the default 600 s beside another fit there; as generous a bound as
# test_twin_structure.py's.
@pytest.mark.timeout(1800)
def test_a_recording_with_load_dependent_friction_chooses_it_and_recovers_the_coefficient(tmp_path, config_copy,
                                                                                           capsys):
    robot = load_robot("tsnake")
    bag = _loaded_recording(robot, tmp_path / "loaded")
    assert main(["twin", "identify", str(bag), "--robot", "tsnake", "--lifted", "--servos", "type", "--json",
                 "--report", str(tmp_path / "r.html")]) == 0
    out = json.loads(capsys.readouterr().out)
    structure = out["structure"]
    assert {c["name"] for c in structure["candidates"]} == {"none", "backlash", "load_friction"}
    bic = {c["name"]: c["bic"] for c in structure["candidates"]}
    assert structure["chosen"] == "load_friction", bic
    assert bic["load_friction"] < min(bic["none"], bic["backlash"])
    for t in _TYPES:   # found (the twist servos too: they accelerate the links they turn) and identified
        value = out["parameters"][f"servo.{t}.load_friction"]
        assert value["fitted"] == pytest.approx(_LOAD, rel=0.05) and value["identified"], (t, value)
    assert out["adequacy"]["ratio"] <= 1.0 < out["adequacy_before"]


@pytest.mark.slow
def test_a_load_friction_fit_leaves_a_second_minimum_a_latency_step_from_the_truths(tmp_path):
    # The coverage benchmark's case 11 of seed 0 (snake bench twin --coverage 12 --robot-sensing
    # --coverage-structure load_friction): the refinement alone stopped with the twist servo's latency
    # 0.7 physics steps late (4.21 for 3.52) and its load friction 0.088 for 0.147, each flagged
    # identified with an interval that missed the truth. The latency one step earlier, refined, leaves
    # less: the intervals of both hold the truth (its kv and armature, 13 % and 32 % low, still do not).
    robot = load_robot("tsnake")
    hidden = draw_hidden(robot, np.random.default_rng([0, 11]), "load_friction")
    bounds = [JointBounds(j.lower, j.upper, j.velocity) for j in robot.joints]
    motion = plan_excitation([0.0] * len(robot.joints), bounds, variant="lifted", duration=20.0)
    bag = record_twin_run(tmp_path / "case11", robot, 20.0, twin_params=TwinParams().with_flat(hidden), world=None,
                          lifted=True, controller=lambda tw: motion.positions(np.array([tw.time]))[0], seed=22,
                          sensing=ROBOT_SENSING)
    fit = identify(read_recording(bag, robot), robot, TwinParams(), lifted=True, structure="load_friction")
    for name in ("servo.twist.latency_s", "servo.twist.load_friction"):
        lo, hi = fit.intervals[name]
        assert fit.identified[name] and lo <= hidden[name] <= hi, (name, hidden[name], fit.fitted[name], lo, hi)


@pytest.mark.timeout(1800)   # three structures on the head, one on the whole recording: 197 s alone that day
def test_on_a_long_recording_the_structure_and_the_second_minima_are_settled_on_its_head_and_the_fit_recovers_the_truth(
        tmp_path, monkeypatch):
    # A recording 1.5 times its head long or longer (here a head of 3 s of the 8 s): the structures are
    # compared on the head first, and one whose BIC there is more than 10 above the least is never
    # rolled out on the whole recording; the latency-step, type-by-type and scaled load-friction checks
    # run on the head, the refinement and the probe at the intervals' ends on the whole recording;
    # every type's coefficient is still recovered.
    from snake_tools.twin import lifted as lifted_module
    from snake_tools.twin import servo_problem

    monkeypatch.setattr(servo_problem, "_HEAD_S", 3.0)
    seen: list[tuple[str, bool]] = []

    def spied(name):
        check = getattr(lifted_module, name)

        def run(p, *args, **kwargs):
            seen.append((name, p._on is p.head))
            return check(p, *args, **kwargs)

        monkeypatch.setattr(lifted_module, name, run)

    for name in ("neighbour_latencies", "each_type_alone", "scaled_load_frictions", "interval_ends_probed"):
        spied(name)
    finished: list[tuple[str, int]] = []   # each structure fitted on the whole recording, its head rollouts then
    finish = lifted_module._servos_finished

    def spied_finish(b, rec, flat0, dt, noise, progress, structure, *args, **kwargs):
        finished.append((structure, b.p.head_rollouts))
        return finish(b, rec, flat0, dt, noise, progress, structure, *args, **kwargs)

    monkeypatch.setattr(lifted_module, "_servos_finished", spied_finish)
    robot = load_robot("tsnake")
    bag = _loaded_recording(robot, tmp_path / "loaded")
    fit = identify(read_recording(bag, robot), robot, TwinParams(), lifted=True, structure="auto")
    report = fit.structure
    assert report["on"] == "head" and report["chosen"] == "load_friction" and report["kept"] == ["load_friction"]
    assert [name for name, _ in finished] == ["load_friction"] and finished[0][1] > 0
    bic = {c["name"]: c["bic"] for c in report["candidates"]}
    assert set(bic) == set(STRUCTURES) and min(bic["none"], bic["backlash"]) > bic["load_friction"] + DECISIVE_BIC
    assert seen == [("neighbour_latencies", True), ("each_type_alone", True), ("scaled_load_frictions", True),
                    ("interval_ends_probed", False)]
    assert 3.0 <= fit.starts["head_s"] <= 3.5 and fit.adequacy_after["adequate"]
    for t in _TYPES:
        name = f"servo.{t}.load_friction"
        assert fit.fitted[name] == pytest.approx(_LOAD, rel=0.05) and fit.identified[name], (t, fit.fitted[name])


@pytest.mark.timeout(1800)
def test_with_one_servo_model_per_joint_the_checks_wait_for_the_criterion_and_run_for_the_types_kept_per_type(
        tmp_path, monkeypatch):
    # Two dorsal servos with other gains (the dorsal joints keep one model per joint), the others alike (the
    # lateral joints keep one model per type; the twist joints' own values pay for themselves in BIC here),
    # every servo with the load-dependent friction: the per-type second minima's checks run after the
    # per-servo criterion, for the types it keeps per type, and those types' coefficients are recovered;
    # the dorsal servos' gains too.
    from snake_tools.twin import lifted as lifted_module

    robot = load_robot("tsnake")
    events: list[str] = []
    checked = ("neighbour_latencies", "each_type_alone", "scaled_load_frictions", "interval_ends_probed")
    for name in checked:
        check = getattr(lifted_module, name)

        def run(*args, _check=check, _name=name, **kwargs):
            events.append(_name)
            return _check(*args, **kwargs)

        monkeypatch.setattr(lifted_module, name, run)
    hidden = hidden_params(robot)
    kp = hidden.flat(robot)["servo.dorsal.kp"]
    gains = {"m2_dorsal": 1.35, "m4_dorsal": 0.7}
    truth = hidden.with_flat({f"servo.{t}.load_friction": _LOAD for t in _TYPES}
                             | {f"joint.{name}.kp": kp * k for name, k in gains.items()})
    bounds = [JointBounds(j.lower, j.upper, j.velocity) for j in robot.joints]
    motion = plan_excitation([0.0] * len(robot.joints), bounds, variant="lifted", duration=_DURATION_S)
    bag = record_twin_run(tmp_path / "differ", robot, _DURATION_S, twin_params=truth, world=None, lifted=True,
                          controller=lambda tw: motion.positions(np.array([tw.time]))[0])
    fit = identify(read_recording(bag, robot), robot, TwinParams(), lifted=True, structure="load_friction",
                   servos="auto", progress=events.append)
    per = fit.structure["per_servo"]
    chosen = {t: r["chosen"] for t, r in per["types"].items()}
    kept = [t for t in _TYPES if chosen[t] == "per type"]
    assert chosen["dorsal"] == "per joint" and "lateral" in kept, chosen
    assert per["second_minima_checks"] == f"run: {', '.join(kept)} keep one model per type"
    criterion = next(k for k, e in enumerate(events) if "] per servo: dorsal per joint" in e)
    checks = [k for k, e in enumerate(events) if e in checked]
    assert [events[k] for k in checks] == list(checked) and min(checks) > criterion, events
    for t in kept:
        assert fit.fitted[f"servo.{t}.load_friction"] == pytest.approx(_LOAD, rel=0.05), t
    for name, k in gains.items():
        assert fit.fitted[f"joint.{name}.kp"] == pytest.approx(kp * k, rel=0.1), name
    assert fit.adequacy_after["adequate"]
