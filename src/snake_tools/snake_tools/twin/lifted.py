"""The lifted fit's stages, in the order :func:`snake_tools.twin.identify.identify` runs them.

Per candidate structure (:data:`~snake_tools.twin.structure.STRUCTURES`): the global stage and,
with a head, its refinement and the second minima's checks (:func:`_servos_begun`); the
refinement on the whole recording, the spreads and verdicts (:func:`_servos_finished`); the
structures' comparison (:func:`lifted_stage`); then, with ``servos`` auto, one servo model per
joint where the recording tells the servos apart (:mod:`snake_tools.twin.per_servo`) and the
servos' zero offsets (:mod:`snake_tools.twin.zero_offsets`); last the verdict on the model
(:func:`lifted_verdict`).

**The second minima's checks where the per-type values are kept.** With a load-dependent
friction the per-type optimum is checked against a latency a physics step away, each type
refined alone, the load-dependent frictions scaled, and probed at its intervals' ends
(:mod:`snake_tools.twin.servo_minima`). With ``servos`` auto those checks wait for the per-servo
criterion: a type that keeps one model per joint has every field of its joints refitted from
the per-type optimum (the latency and the load-dependent friction among them), and there the
checks bought nothing (docs/twin_identification.md, "Speed"). Where some moving type keeps its
per-type values, the checks run then, from the head's optimum, and the structure is finished on
the whole recording again (refinement, spreads, probe), the per-joint values of the other types
added to it; the verdict judges the twin so put together.

**The per-servo criterion on the head.** Where one structure is left on the head (chosen there,
or the only one) and ``servos`` is auto, the per-joint fit starts from the head's per-type
optimum, and the criterion is first taken on the head, where both models are at their optimum
(:func:`_per_servo_stage`). Where every moving type keeps one model per joint there by more than
:data:`~snake_tools.twin.structure.DECISIVE_BIC`, the per-type model is not refined on the whole
recording: each of its fields but ``kv`` is refitted per joint, and its spreads and verdicts are
taken at the head's optimum (:func:`_servos_finished` with ``refine`` false). Otherwise it is
refined on the whole recording, and the per-joint fit run again from there with the criterion
taken on the whole recording, as without a head (the per-joint values are fitted beside the
per-type ``kv`` and the other types' values they will be used with).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from snake_core.robot import RobotModel
from snake_core.twin_params import TwinParams, joint_types
from snake_tools.twin.data import Recording
from snake_tools.twin.noise import NoiseModel
from snake_tools.twin.per_servo import PerServo, choose_per_servo, fit_per_servo, joint_fields
from snake_tools.twin.rollout import LiftedRollout
from snake_tools.twin.servo_intervals import Spreads, judged_stage
from snake_tools.twin.servo_minima import (
    each_type_alone,
    interval_ends_probed,
    neighbour_latencies,
    scaled_load_frictions,
)
from snake_tools.twin.servo_problem import (
    PHYSICAL_RANGE,
    SERVO_FIELDS,
    ServoProblem,
    fit_head,
    servo_names,
    types_moving,
)
from snake_tools.twin.servo_starts import global_stage
from snake_tools.twin.structure import DECISIVE_BIC, STRUCTURES, _Stage, choose_structure, decisive_on_head
from snake_tools.twin.verdict import ADEQUACY_THRESHOLD, adequacy
from snake_tools.twin.zero_offsets import fit_zero_offsets

_NEIGHBOUR_STRUCTURES = ("load_friction",)
"""Structures whose optimum is checked against a latency one physics step away per joint type."""
_BY_TYPE_STRUCTURES = ("load_friction",)
"""Structures whose optimum is refined type by type on each type's own joints (:mod:`snake_tools.twin.by_type`)."""
_LOAD_FRICTION_STRUCTURES = ("load_friction",)
"""Structures whose optimum is checked against every type's load-dependent friction scaled down and up."""
_PROBE_STRUCTURES = ("load_friction",)
"""Structures whose optimum is probed at its intervals' ends, and refined again from a lower point there."""
_CHECKED_STRUCTURES = frozenset(_NEIGHBOUR_STRUCTURES + _BY_TYPE_STRUCTURES + _LOAD_FRICTION_STRUCTURES
                                + _PROBE_STRUCTURES)
"""Structures with second minima's checks (:func:`_second_minima_checked`, the probe at the intervals' ends)."""


def lifted_stage(rec: Recording, robot: RobotModel, start: TwinParams, flat0: dict[str, float], dt: float,
                 noise: NoiseModel, progress: Any, workers: int, structure: str,
                 servos: str) -> tuple[_Stage, dict[str, Any]]:
    """The lifted fit of each candidate structure, the one BIC keeps, and its per-servo values (``servos`` auto).

    Without a head every candidate is fitted on the whole recording and compared there. With one
    (and several candidates) each is fitted on the head first; those within
    :data:`~snake_tools.twin.structure.DECISIVE_BIC` of the least BIC there are finished on the
    whole recording, and compared there where more than one is left. With ``servos`` auto the
    second minima's checks wait for the per-servo criterion, and run only where some moving type
    keeps its per-type values; where one structure is left on the head, the criterion begins
    there, and a decision there leaves the per-type model unrefined on the whole recording
    (module docstring).

    Returns:
        The stage kept (its ``rollouts`` every candidate's), and the structure's report.
    """
    stages: dict[str, _Stage] = {}
    begun: dict[str, _Begun] = {}
    checks = servos != "auto"
    candidates = STRUCTURES if structure == "auto" else (structure,)
    for k, name in enumerate(candidates):
        # Every other structure starts from the none fit's optimum: the whole recording's, or the head's
        # where the structure is chosen on the head.
        warm = (stages["none"].best if "none" in stages else begun["none"].best() if "none" in begun else None)
        if progress is not None:
            progress(f"structure candidate {k + 1}/{len(candidates)}: {name}")
        begun[name] = _servos_begun(rec, robot, start, flat0, dt, noise, progress, workers, name, warm, checks)
        if begun[name].head_cost is None:
            stages[name] = _servos_finished(begun[name], rec, flat0, dt, noise, progress, name, checks)
    on_head = None
    kept = list(candidates)
    if len(stages) < len(candidates) and len(candidates) > 1:   # every candidate has a head: the choice begins there
        head = begun[candidates[0]].p.head
        assert head is not None
        kept, on_head = decisive_on_head({n: (int(b.p.free.sum()), b.head_cost) for n, b in begun.items()
                                          if b.head_cost is not None}, head[1].size)
        on_head["seconds"] = begun[candidates[0]].p.head_s
        if progress is not None:
            progress(f"structure on the first {on_head['seconds']:.0f} s: " + ", ".join(
                f"{c['name']} BIC {c['bic']:.6g}" for c in on_head["candidates"]) + "; finished on the whole "
                f"recording: {', '.join(kept)}")
    per_servo: _PerServo | None = None
    if not stages and len(kept) == 1 and servos == "auto":
        # One structure left on the head: the per-servo criterion begins there too (module docstring).
        per_servo = _per_servo_stage(rec, robot, start, begun[kept[0]].best(), kept[0], noise, dt, workers,
                                     progress, begun[kept[0]].head_joint_cost)
        stages[kept[0]] = _servos_finished(begun[kept[0]], rec, flat0, dt, noise, progress, kept[0], checks,
                                           refine=not per_servo.decided)
    for name in kept:
        if name not in stages:
            stages[name] = _servos_finished(begun[name], rec, flat0, dt, noise, progress, name, checks)
    if on_head is not None and len(stages) == 1:
        chosen, chosen_report = next(iter(stages)), on_head
    else:
        chosen, chosen_report = choose_structure({n: (st.free, st.cost) for n, st in stages.items()},
                                                 rec.q_state.size)
        chosen_report["on"] = "recording"
        if on_head is not None:
            chosen_report["head"] = on_head
    if progress is not None and len(stages) > 1:
        progress(f"structure: {chosen} (" + ", ".join(f"{c['name']} BIC {c['bic']:.6g}"
                                                      for c in chosen_report["candidates"]) + ")")
    stage = stages[chosen]
    if servos == "auto":
        if per_servo is None:
            per_servo = _per_servo_stage(rec, robot, start, stage.best, chosen, noise, dt, workers, progress)
        elif not per_servo.decided:
            per_servo = _per_servo_stage(rec, robot, start, stage.best, chosen, noise, dt, workers, progress,
                                         on_head=per_servo)
        kept_per_type = [t for t, r in per_servo.report["types"].items() if r["chosen"] == "per type"]
        if chosen not in _CHECKED_STRUCTURES:
            per_servo.report["second_minima_checks"] = f"none: the {chosen} structure has none"
        elif not per_servo.report["types"]:
            per_servo.report["second_minima_checks"] = "not run: no joint type moves"
        elif not kept_per_type:
            per_servo.report["second_minima_checks"] = "not run: every moving type keeps one model per joint"
        else:
            if progress is not None:
                progress(f"{chosen}: {', '.join(kept_per_type)} keep their per-type values: the second minima's "
                         "checks")
            stage = _checked_late(begun[chosen], rec, flat0, dt, noise, progress, chosen)
            per_servo.report["second_minima_checks"] = f"run: {', '.join(kept_per_type)} keep one model per type"
        if per_servo.judged is not None:
            _adopt(stage, flat0, per_servo.judged, per_servo.keep)
        stage.rollouts = sum(b.p.rollouts for b in begun.values()) + per_servo.rollouts
        chosen_report["per_servo"] = per_servo.report
        chosen_report["zero_offsets"] = _zero_offset_stage(rec, robot, start, stage, flat0, noise, dt, workers,
                                                           progress)
    else:
        stage.rollouts = sum(b.p.rollouts for b in begun.values())
    return stage, chosen_report


def lifted_verdict(rec: Recording, robot: RobotModel, stage: _Stage, fit_start: TwinParams,
                   target_start: TwinParams, noise: NoiseModel,
                   workers: int) -> tuple[dict[str, Any], dict[str, Any], int, list[str]]:
    """The lifted fit's adequacy at the start and at the fit, and what it identifies (:mod:`snake_tools.twin.verdict`).

    ``stage`` is changed in place: its twin and values where the fit is adequate with per-joint
    values (a joint's value not identified is not set) or not adequate (the least-squares
    optimum), and no value identified where the model does not explain the recording, or where
    it does but one joint type's residual is structured.

    Returns:
        The target's adequacy (``target_start``), the fit's, the rollouts made beyond two, and the
        values of the twin the verdict judged where it is adequate (``--write`` writes them: the
        twin that explains the recording, not only its identified values; none where it is not).
    """
    best = fit_start.with_flat(stage.best)
    sets = [target_start, stage.params] + ([best] if best != stage.params else [])
    roller = LiftedRollout(rec, robot, workers)
    qs = roller.joint_angles(sets)
    extra = len(sets) - 2
    before = adequacy(rec, qs[0], noise, robot)
    after = adequacy(rec, qs[1], noise, robot)
    if any(n.startswith("joint.") for n in stage.names) and after["adequate"]:
        # Adequate: a joint's value not identified is not set (its type's applies), not held at a start.
        own = {n: stage.fitted[n] for n in stage.names if n.startswith("joint.") and stage.identified[n]}
        stage.params = stage.params.without_joints().with_flat(own)
        if stage.params != sets[1]:
            q = roller.joint_angles([stage.params])[0]
            after = adequacy(rec, q, noise, robot)
            extra += 1
    if len(qs) > 2 and not after["adequate"]:
        # Not adequate: no value is identified and none is held at its start (snake_tools.twin.verdict,
        # "Adequacy"); the fitted twin is the least-squares optimum, every value as the fit left
        # it (holding an unidentified kv at its start moves the optimum of the others).
        after = adequacy(rec, qs[2], noise, robot)
        stage.params, stage.fitted = best, dict(stage.best)
    if not after["adequate"]:
        # A model that does not explain the recording fits biased values, however narrow their
        # spread: none of them is identified (--write changes nothing); the best fit's values are
        # still reported (and drive the report's figures and --validate).
        worst = max(after["by_type"].items(), key=lambda kv: kv[1]["ratio"])
        _identify_none(stage, f"the model does not explain the recording (residual {after['ratio']:.3g} x the noise "
                              f"floor, {worst[0]} joints {worst[1]['ratio']:.3g}; threshold {ADEQUACY_THRESHOLD:g})")
    else:
        # An adequate fit whose residual on one joint type is above the noise floor and not white
        # (Ljung's residual test) left that type in a second minimum or without an effect it has, and
        # through the body it biases the other types' values too: none is identified, however narrow
        # their spread (a drawn case's twist servo at kv 1e-4 for 0.39 moved the dorsal and lateral
        # friction losses outside their intervals). The twin still explains the recording within
        # the threshold, and --write writes it (twin_values), as this model's best for the robot.
        structured = [(t, v) for t, v in after["by_type"].items() if not v["white"] and v["ratio"] > 1.0]
        for t, v in structured[:1]:
            _identify_none(stage, f"the {t} joints' residual is {v['ratio']:.3g} x the noise floor and not white "
                                  f"(lag-1 autocorrelation {v['lag1_autocorrelation']:.2f}): a second minimum or an "
                                  "effect the model lacks")
    # --write writes the twin judged, where it is adequate: every type's values, and a joint's own
    # where the twin sets them (where identified, or every one where that twin was not adequate).
    set_here = stage.params.joint
    twin_values = [n for n in stage.names if not n.startswith("joint.") or n.split(".")[2] in
                   set_here.get(n.split(".")[1], {})] if after["adequate"] else []
    return before, after, extra, twin_values


def _identify_none(stage: _Stage, why: str) -> None:
    """Mark every identified value of ``stage`` not identified, ``why`` before its own reason."""
    for n in stage.names:
        if stage.identified[n]:
            stage.identified[n] = False
            stage.reasons[n] = f"{why}; {stage.reasons[n]}"


@dataclass
class _PerServo:
    """The per-servo stage's result (:func:`_per_servo_stage`), to add to the per-type stage kept."""

    report: dict[str, Any]
    """The criterion's report (the fit's ``structure.per_servo``)."""
    judged: PerServo | None = None
    keep: list[str] = field(default_factory=list)
    """The per-joint values kept (``joint.<name>.<field>``)."""
    rollouts: int = 0
    decided: bool = True
    """The criterion is taken (on the head, or on the whole recording); ``False``: on the head it was not
    decisive, and the stage is run again from the per-type optimum on the whole recording."""


def _per_servo_stage(rec: Recording, robot: RobotModel, start: TwinParams, best: dict[str, float], structure: str,
                     noise: NoiseModel, dt: float, workers: int, progress: Any,
                     head_type_cost: np.ndarray | None = None, on_head: _PerServo | None = None) -> _PerServo:
    """One servo model per joint where the recording tells the servos apart (:mod:`snake_tools.twin.per_servo`).

    Fits every joint of the moving types from the per-type values ``best`` and names the per-joint
    values of the types whose BIC prefers them (:func:`choose_per_servo`; their start is the type's
    value), which :func:`_adopt` adds to a stage. ``best`` is the per-type optimum on the whole
    recording, where the criterion is taken; or, with ``head_type_cost`` (each joint's ``|r_j|^2``
    there), the head's optimum, and the criterion is taken on the head: where every moving type
    keeps one model per joint by more than :data:`~snake_tools.twin.structure.DECISIVE_BIC` it is
    decided there (the report's ``on`` ``"head"``), else ``decided`` is false and the stage is run
    again from the per-type optimum on the whole recording, ``on_head`` the head's result (its
    report kept as the report's ``head``, its rollouts counted): the per-joint values are fitted
    beside the per-type ``kv`` and the other types' values they will be used with.
    """
    types = joint_types(robot)
    moves = types_moving(rec, robot)
    moving_types = [t for t in types if moves[t]]
    moving = [i for i, j in enumerate(robot.joints) if j.type in moving_types]
    if not moving:
        return _PerServo({"criterion": "BIC", "types": {}, "note": "no joint type moves"})
    base = start.with_flat(best)
    head_s, head = fit_head(rec)
    if progress is not None:
        progress(f"per servo: {len(moving)} joints of {', '.join(moving_types)}")
    ps = fit_per_servo(rec, robot, base, moving, noise, PHYSICAL_RANGE, dt, workers, structure, head, progress)
    if head_type_cost is not None and head is not None:
        _, report = _criterion(robot, moving, head_type_cost[moving], ps.head_cost_by_joint, ps.head_samples,
                               structure, ps, ps.rollouts)
        decided = all(r["chosen"] == "per joint" and r["per_type"]["bic"] - r["per_joint"]["bic"] > DECISIVE_BIC
                      for r in report["types"].values())
        report |= {"on": "head", "seconds": head_s, "margin": DECISIVE_BIC}
        _said(progress, f"on the first {head_s:.0f} s", report, "" if decided else ": not decisive, taken on the "
              "whole recording after the per-type refinement")
        if not decided:
            return _PerServo(report, ps, rollouts=ps.rollouts, decided=False)
        keep = [f"joint.{robot.joints[i].name}.{f}" for i in moving for f in joint_fields(structure)]
        return _PerServo(report, ps, keep, ps.rollouts)
    q_type = LiftedRollout(rec, robot, workers).joint_angles([base])[0]
    type_cost = (((q_type - rec.q_state) / noise.sigma)[:, moving] ** 2).sum(axis=0)
    earlier = on_head.rollouts if on_head is not None else 0
    chosen, report = _criterion(robot, moving, type_cost, ps.cost_by_joint, rec.q_state.shape[0], structure, ps,
                                ps.rollouts + 1 + earlier)
    if on_head is not None:
        report |= {"on": "recording", "head": on_head.report}
    _said(progress, "", report, "")
    keep = [f"joint.{robot.joints[i].name}.{f}" for i in moving if robot.joints[i].type in chosen
            for f in joint_fields(structure)]
    return _PerServo(report, ps, keep, ps.rollouts + 1 + earlier)


def _criterion(robot: RobotModel, moving: list[int], type_cost: np.ndarray, joint_cost: np.ndarray, samples: int,
               structure: str, ps: PerServo, rollouts: int) -> tuple[list[str], dict[str, Any]]:
    """:func:`choose_per_servo` on ``samples`` sample times, with the stage's ``rollouts`` in its report."""
    types = joint_types(robot)
    fields = joint_fields(structure)
    per_type = {t: len(servo_names(robot, structure)) // len(types) for t in types}
    chosen, report = choose_per_servo(robot, moving, type_cost, joint_cost, samples, per_type, len(fields),
                                      len(SERVO_FIELDS) - len([f for f in fields if f in SERVO_FIELDS]))
    report["rollouts"], report["evaluations"] = rollouts, ps.iterations
    report["fields"] = list(fields)
    return chosen, report


def _said(progress: Any, where: str, report: dict[str, Any], after: str) -> None:
    """The criterion's choice per type, as a progress line."""
    if progress is not None:
        progress(f"per servo{' ' + where if where else ''}: " + ", ".join(
            f"{t} {r['chosen']} (BIC {r['per_type']['bic']:.6g} per type, {r['per_joint']['bic']:.6g} per joint)"
            for t, r in report["types"].items()) + after)


def _adopt(stage: _Stage, flat0: dict[str, float], judged: PerServo | Any, names: list[str]) -> None:
    """Add the ``names`` of a later stage's ``judged`` values to ``stage`` (fitted, verdicts, twin).

    Their starts go to ``flat0``.
    """
    for n in names:
        stage.names.append(n)
        flat0[n] = judged.start[n]
        stage.fitted[n] = stage.best[n] = judged.values[n]
        stage.rel[n], stage.intervals[n] = judged.rel[n], judged.intervals[n]
        stage.identified[n], stage.reasons[n] = judged.identified[n], judged.reasons[n]
    if names:
        stage.params = stage.params.with_flat({n: judged.values[n] for n in names})


def _zero_offset_stage(rec: Recording, robot: RobotModel, start: TwinParams, stage: _Stage, flat0: dict[str, float],
                       noise: NoiseModel, dt: float, workers: int, progress: Any) -> dict[str, Any]:
    """The servos' zero offsets from the fitted twin, kept where BIC prefers them (:mod:`.zero_offsets`).

    Adds them to ``stage`` (names ``joint.<name>.zero_offset_rad``, start 0) and to ``flat0`` where kept.

    Returns:
        The criterion's report (the fit's ``structure.zero_offsets``).
    """
    moves = types_moving(rec, robot)
    joints = [i for i, j in enumerate(robot.joints) if moves[j.type]]
    if not joints:
        return {"criterion": "BIC", "kept": False, "note": "no joint type moves"}
    base = start.with_flat(stage.best)
    if progress is not None:
        progress(f"zero offsets: {len(joints)} joints")
    _, head = fit_head(rec)
    zo = fit_zero_offsets(rec, robot, base, joints, noise, dt, workers, head, progress)
    stage.rollouts += zo.rollouts
    report = zo.report | {"rollouts": zo.rollouts}
    if not zo.kept:
        return report
    _adopt(stage, flat0, zo, list(zo.values))
    return report


def _second_minima_checked(p: ServoProblem, sol: Any, structure: str, progress: Any) -> Any:
    """The refinement's optimum ``sol``, or a lower one the structure's checks of second minima found.

    :mod:`snake_tools.twin.identify`'s docstring, stage 3; :mod:`snake_tools.twin.servo_minima`.
    """
    if structure in _NEIGHBOUR_STRUCTURES:
        sol = neighbour_latencies(p, sol, structure, progress)
    if structure in _BY_TYPE_STRUCTURES:
        sol = each_type_alone(p, sol, structure, progress)
    if structure in _LOAD_FRICTION_STRUCTURES:
        sol = scaled_load_frictions(p, sol, structure, progress)
    return sol


@dataclass
class _Begun:
    """A structure's lifted fit up to the head's optimum (:func:`_servos_begun`), to finish on the whole recording."""

    p: ServoProblem
    r0: np.ndarray
    """The residual at the start, on the whole recording."""
    starts: Any
    z: np.ndarray
    """The head's optimum after the second minima's checks, or the global stage's best without a head."""
    head_cost: float | None
    """``|r|^2`` on the head at ``z`` (``None`` without a head)."""
    head_joint_cost: np.ndarray | None = None
    """Each joint's ``|r_j|^2`` on the head at ``z`` (``None`` without a head)."""

    def best(self) -> dict[str, float]:
        """Every variable's value at ``z``."""
        return self.p.values_of(self.p.full_point(self.z))


def _servos_begun(rec: Recording, robot: RobotModel, start: TwinParams, flat0: dict[str, float], dt: float,
                  noise: NoiseModel, progress: Any, workers: int, structure: str = "none",
                  warm: dict[str, float] | None = None, checks: bool = True) -> _Begun:
    """Servo model and latency per joint type from a lifted recording: the stages that roll out the head.

    The global stage, and with a head its refinement and the second minima's checks; the
    stages on the whole recording follow in :func:`_servos_finished` (at once, or after the
    structures' comparison on the head: :func:`lifted_stage`). The problem (variables within
    :data:`PHYSICAL_RANGE`, residual weighted by the noise model, Jacobian, refinement):
    :class:`~snake_tools.twin.servo_problem.ServoProblem`; the global stage:
    :mod:`snake_tools.twin.servo_starts`; the second minima's checks of a rough cost:
    :mod:`snake_tools.twin.servo_minima`. ``structure`` ``backlash`` adds a gear play per joint
    type, ``load_friction`` a load-dependent friction per joint type; ``warm`` (another
    structure's optimum) starts every value it names there and varies the structure's own
    parameter in the global stage instead of the latency (its latency starts were run for that
    optimum). ``checks`` false leaves the checks to :func:`_checked_late`.
    """
    p = ServoProblem(rec, robot, start, flat0, dt, noise, workers, structure, warm)
    r0 = p.residual(p.x0[p.free])
    if p.head is not None:   # the starts and a first refinement roll out the head only
        p.use(p.head)
    starts = global_stage(p, structure, warm, progress)
    if p.head is None:
        return _Begun(p, r0, starts, starts.z, None)
    if progress is not None:
        progress(f"{structure}: refinement on the first {p.head_s:.0f} s")
    p.unused_last = True
    sol = p.refine(starts.z)
    p.unused_last = False
    # The second minima's checks on the head too: they choose a basin, and the refinement on
    # the whole recording that follows settles in it (a third of the rollouts' steps).
    if checks:
        sol = _second_minima_checked(p, sol, structure, progress)
    joints = len(robot.joints)
    return _Begun(p, r0, starts, sol.x, float(sol.fun @ sol.fun), (sol.fun.reshape(-1, joints) ** 2).sum(axis=0))


def _servos_finished(b: _Begun, rec: Recording, flat0: dict[str, float], dt: float, noise: NoiseModel,
                     progress: Any, structure: str, checks: bool = True, refine: bool = True) -> _Stage:
    """The stages on the whole recording from :func:`_servos_begun`'s point: refinement, spreads and verdicts.

    Spreads and verdicts: :mod:`snake_tools.twin.servo_intervals`. Without a head the second
    minima's checks follow the refinement, and the probe at the intervals' ends follows the
    spreads (``checks`` false: neither). ``refine`` false (with a head): no refinement, the
    spreads and verdicts at the head's optimum (every moving type keeps one model per joint,
    each refitted from there: module docstring).
    """
    p, z = b.p, b.z
    if p.head is not None:
        p.use(p.full)
        p.restart_at(z)   # refined already: its first iteration too must lower the cost by the tolerance
    if not refine and p.head is not None:
        if progress is not None:
            progress(f"{structure}: the head's optimum on all {rec.duration:.0f} s (every moving type keeps one "
                     "model per joint)")
        sol = _at(p, z)
    else:
        if progress is not None:
            progress(f"{structure}: refinement on all {rec.duration:.0f} s")
        sol = p.refine(z)
    if p.head is None and checks:
        sol = _second_minima_checked(p, sol, structure, progress)
    spreads = Spreads(p, rec, noise, wide=structure in _BY_TYPE_STRUCTURES)
    if structure in _PROBE_STRUCTURES and checks:
        sol, std_free = interval_ends_probed(p, sol, spreads, structure, progress)
    else:
        std_free = spreads(sol)
    if progress is not None:
        progress(f"{structure}: residual/noise {np.sqrt(np.mean(b.r0 ** 2)):.4g} -> "
                 f"{np.sqrt(np.mean(sol.fun ** 2)):.4g} in {p.rollouts} rollouts")
    return judged_stage(p, sol, std_free, spreads, b.r0, flat0, dt, b.starts)


def _at(p: ServoProblem, z: np.ndarray) -> Any:
    """The residual and Jacobian at ``z`` on the recording ``p`` rolls out, as a refinement's result."""
    from scipy.optimize import OptimizeResult

    fun = p.residual(z)
    return OptimizeResult(x=z, fun=fun, jac=p.jacobian(z), cost=0.5 * float(fun @ fun))


def _checked_late(b: _Begun, rec: Recording, flat0: dict[str, float], dt: float, noise: NoiseModel,
                  progress: Any, structure: str) -> _Stage:
    """The structure's second minima's checks after the per-servo criterion, and its stage finished again.

    With a head: from the head's optimum (refined there again, which stops after its first
    Jacobian), the checks on the head, then :func:`_servos_finished` from the point they keep.
    Without one: :func:`_servos_finished` with its checks, from the global stage's point. The
    probe at the intervals' ends follows, on the whole recording.
    """
    p = b.p
    if p.head is None:
        p.previous = math.inf   # the refinement from the global stage's point again, as at first
        return _servos_finished(b, rec, flat0, dt, noise, progress, structure)
    p.use(p.head)
    p.restart_at(b.z)
    p.unused_last = True
    sol = p.refine(b.z)
    p.unused_last = False
    sol = _second_minima_checked(p, sol, structure, progress)
    return _servos_finished(replace(b, z=sol.x, head_cost=float(sol.fun @ sol.fun)), rec, flat0, dt, noise,
                            progress, structure)
