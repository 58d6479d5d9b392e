"""Fit the twin's physics (a calibration target's ``twin:`` block) to a recorded run of the robot.

The recording gives what the robot was told (``/joint_commands``) and what it did
(``/joint_states``, and the head pose of mocap or ground truth). The twin
(:class:`snake_hardware.sim.twin.SimTwin`) is driven by the same commands on the bag's time
base from the recorded initial joint angles (:func:`simulate`). Two recordings, two fits:

* **lifted** (the robot hanging from its head, ``snake twin excite --variant lifted``; the
  twin's :class:`~snake_hardware.sim.mjcf.SimOptions` ``lifted``): the servo model of every
  joint type, p = (``kp``, ``kv``, ``armature``, ``frictionloss``, ``latency_s``) per type,
  minimising ``r(p) = (q_twin(p) - q_robot) / sigma`` over every joint sample (``sigma``: the
  noise model, :mod:`snake_tools.twin.noise`) with ``scipy.optimize.least_squares`` (trust-region reflective; ``kp``,
  ``kv``, ``armature`` as log values, ``frictionloss`` and the latency, in physics steps, plain;
  every variable within its :data:`PHYSICAL_RANGE`; a forward-difference Jacobian, one rollout
  of the whole recording per column, the columns rolled out in one batch in C by
  :class:`LiftedRollout`, bit for bit :func:`simulate`'s joint angles). The twin blends a
  fractional latency over one physics step, so the latency is a continuous parameter. The
  refinement stops when an iteration lowers ``|r|^2`` by less than :data:`_COST_TOL` times
  ``max(1, |r|^2 / (m - n))``: ``|r|^2`` rises by that scale over one standard deviation of a
  parameter (:func:`noise_covariance`), so the least left is a fraction of one away. Global
  stage: the latency is the least convex direction (a softer, more damped servo mimics a
  delay: a local minimum), so a short refinement (:data:`_START_NFEV` evaluations) runs from
  each of :data:`_LATENCY_STARTS`; each joint type takes its values from the start that left its
  own joints the least residual (the types' latencies are separate parameters, and one type's
  best start can be another's worst: a lifted body barely couples them); then each type's best
  start again with its ``kp`` times :data:`_KP_START_FACTORS` (a servo stiffer than the start's:
  from a soft start its cost is flat towards a low ``kv`` and armature), each type keeping its
  best; that mix, or the best single start where it is better, is refined to the end. On a recording at least
  :data:`_HEAD_MIN_RATIO` times its head long (up to :data:`_HEAD_S` after the first command
  that moves), the starts and a first refinement of the best roll out only the head
  (:func:`recording_head`), and the refinement on the whole recording starts from there (it
  stops after one iteration if that lowers the cost by less than the tolerance). With a
  load-dependent friction (:data:`_NEIGHBOUR_STRUCTURES`) the optimum is then checked against
  a latency one physics step away: the refinement stops near a whole step of a joint type's
  latency in a second minimum (the twin's fractional latency blends two steps' controls, and
  there the cost bends), measured on the coverage benchmark's drawn physics with the twist
  servo 0.7 steps late, its kv 23 % and armature 61 % low, flagged identified. From the
  optimum with every type's latency one step earlier, and one later, a refinement of
  :data:`_NEIGHBOUR_NFEV` evaluations each; every type takes its values from the one of the
  three that leaves its own joints the least residual, and that mix, refined as long, replaces
  the optimum where it leaves less. Last (:data:`_BY_TYPE_STRUCTURES`), each joint type is
  refined on its own joints' residual, the others held (:mod:`snake_tools.twin.by_type`: a
  friction set from the load every physics step makes the other types' joints' share of the
  cost rough, and the refinement over every type stops on it), the types' results put together
  and refined over every type; that replaces the optimum where it leaves less. Then
  (:data:`_PROBE_STRUCTURES`) the optimum is probed at each variable's 95 % interval ends on its
  linearized profile path, one batch of rollouts, and refined again from the least point there
  where it leaves less (:mod:`snake_tools.twin.probe`: a small move of one type's timing can
  change when another type's joints stick), up to :data:`_PROBE_ROUNDS` times. On such a rough
  cost a Jacobian of 1 % steps sees the roughness's slopes as information: the spreads are
  also taken from a Jacobian of :data:`_WIDE_DIFF_STEP` steps, and each variable keeps the
  larger (:func:`_fit_servos`).
* **on the ground** (a gait run, :mod:`snake_tools.twin.ground`): the ground friction mu, with
  the servo model held at the target's (fit it lifted first): the ground's friction loads the
  servos, and the load shows as their tracking error, fitted per window by a scan over log mu
  and Brent's method.

The stages live beside this module, one concern each: what a fit reads from a bag
(:mod:`snake_tools.twin.data`), the recording checks (:mod:`snake_tools.twin.checks`), the noise
model (:mod:`snake_tools.twin.noise`), the rollouts (:mod:`snake_tools.twin.rollout`), the
ground friction's fit (:mod:`snake_tools.twin.ground`), the spreads, intervals and the held-out
segment check that say what is identified (:mod:`snake_tools.twin.uncertainty`), the verdict on
the model (:mod:`snake_tools.twin.verdict`: a lifted fit that is not adequate identifies
nothing), the structure's choice (:mod:`snake_tools.twin.structure`) and what a fit writes
(:mod:`snake_tools.twin.report`). This module runs them (:func:`identify`) and re-exports their
public names.

Why scipy and not ``mujoco.sysid``: the twin's command path (per-type latency, the target
checks of :meth:`SimTwin.set_targets`) and the parameters' mapping to several MJCF fields with
derived defaults (:mod:`snake_core.twin_params`) live in :class:`SimTwin`; rolling out SimTwin
itself keeps one code path for the fit, ``snake twin replay`` and every experiment, where the
toolbox rolls out a bare ``MjModel`` of its own; and its HTML report loads plotly from a CDN.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.robot import RobotModel
from snake_core.twin_params import TwinParams, joint_types
from snake_tools.twin.by_type import refine_by_type
from snake_tools.twin.data import MIN_DURATION_S, IdentifyError, Recording, read_recording
from snake_tools.twin.ground import LOAD_WINDOW_S, SIGMA_LOAD, _load_residual, fit_friction
from snake_tools.twin.noise import ENCODER_TICKS, NoiseModel, noise_model, stamp_spread
from snake_tools.twin.per_servo import (
    _FRICTION_SCALE,
    _LOAD_FRICTION_SCALE,
    choose_per_servo,
    fit_per_servo,
    joint_fields,
)
from snake_tools.twin.probe import lower_at_interval_ends
from snake_tools.twin.report import html_report, write_block
from snake_tools.twin.rollout import LiftedRollout, simulate
from snake_tools.twin.structure import STRUCTURE_FIELDS, STRUCTURES, _Stage, choose_structure
from snake_tools.twin.uncertainty import (
    CORRELATION_WINDOW_S,
    IDENTIFIABLE_REL_STD,
    LATENCY_STD_STEPS,
    SEGMENT_Z,
    SEGMENTS,
    UNBOUNDED_STD,
    correlated_covariance,
    grid_offsets,
    judge,
    noise_covariance,
    parameter_std,
    profile_interval,
    quantization_std,
    segment_stability,
    time_base_std_steps,
)
from snake_tools.twin.verdict import (
    ADEQUACY_THRESHOLD,
    FEATURE_EXPLAINED,
    WHITE_LAGS,
    WHITE_OUTSIDE,
    adequacy,
    residual_features,
)

__all__ = [
    "ADEQUACY_THRESHOLD",
    "CORRELATION_WINDOW_S",
    "ENCODER_TICKS",
    "FEATURE_EXPLAINED",
    "IDENTIFIABLE_REL_STD",
    "LATENCY_STD_STEPS",
    "LOAD_WINDOW_S",
    "MAX_LATENCY_STEPS",
    "MAX_LIFTED_TRAVEL_M",
    "MIN_DURATION_S",
    "PHYSICAL_RANGE",
    "SEGMENTS",
    "SEGMENT_Z",
    "SERVOS",
    "SERVO_FIELDS",
    "SIGMA_LOAD",
    "STRUCTURES",
    "UNBOUNDED_STD",
    "WHITE_LAGS",
    "WHITE_OUTSIDE",
    "Fit",
    "IdentifyError",
    "LiftedRollout",
    "NoiseModel",
    "Recording",
    "adequacy",
    "choose_structure",
    "correlated_covariance",
    "grid_offsets",
    "head_seconds",
    "html_report",
    "identify",
    "joint_replay",
    "noise_covariance",
    "noise_model",
    "parameter_std",
    "profile_interval",
    "quantization_std",
    "read_recording",
    "recording_head",
    "residual_features",
    "segment_stability",
    "servo_names",
    "simulate",
    "stamp_spread",
    "time_base_std_steps",
    "validate",
    "write_block",
]

SERVO_FIELDS = ("kp", "kv", "armature", "frictionloss", "latency_s")
"""Servo parameters fitted per joint type (``damping`` enters only as kv + damping: kept; ``effort_scale``
needs saturated motion: kept)."""
SERVOS = ("type", "auto")
"""A lifted fit's servo models: one per joint type, or one per joint where the recording supports it (``auto``)."""
MAX_LATENCY_STEPS = 25
"""Largest command latency fitted, physics steps (0.1 s at the 4 ms step)."""
MAX_LIFTED_TRAVEL_M = 0.05
"""Largest head travel of a lifted recording (the head is held), m: more is a run on the ground."""
_MIN_MOTION_RAD = 0.02      # rad, a joint type whose commands move less than this is not excited
_COST_TOL = 0.1            # the refinement stops when an iteration lowers |r|^2 by less than this times max(1, s^2)
_DIFF_STEP = 1e-2           # relative step of the forward-difference Jacobian (log space)
_LOG_FIELDS = ("kp", "kv", "armature")  # fitted as log values
_LATENCY_STARTS = (0.0, 5.0, 10.0, 20.0)  # physics steps of the global stage's starts
_KP_START_FACTORS = (2.0, 4.0)  # the global stage's starts of a stiffer servo: each type's best start, kp times these
_START_NFEV = 3             # evaluations (each with its Jacobian of rollouts) of a start's short refinement
_MAX_NFEV = 80              # least-squares iterations (each one Jacobian of rollouts)
_HEAD_S = 20.0              # s, the global stage and a first refinement roll out only the recording's first this long
_HEAD_MIN_RATIO = 1.5       # ... when the recording is at least this many times longer (else all of it)
PHYSICAL_RANGE: dict[str, tuple[float, float]] = {
    "kp": (0.1, 1000.0),           # N m/rad: from a limp hobby servo to a stiff industrial joint
    "kv": (1e-4, 100.0),           # N m s/rad
    "armature": (1e-4, 1.0),       # kg m^2: rotor 1e-8..1e-6 kg m^2 times a gear ratio of 100..1000 squared
    "frictionloss": (0.0, 5.0),    # N m: at most a few stall torques
    "latency_s": (0.0, MAX_LATENCY_STEPS * 0.004),  # s (bounded in physics steps)
    "backlash_rad": (1e-4, math.radians(1.0)),  # rad: X-series gear trains have 0.1 to 0.4 deg; above 1 deg is worn
    "load_friction": (0.0, 0.5),   # N m per N m: BAM's m3 XL330 0.12; the eight XL330 logs 0.14 to 0.21
}
"""Physical range of each fitted servo field (the bounds of the fit; a value on a bound is not identified)."""
_BACKLASH_START = math.radians(0.2)  # rad, the play a cold backlash fit starts from (a new X-series gear train's)
# N m s/rad, the least kv a fit starts from: a start of 0 (the factory D gain's) sits on the range's floor, where
# kv does nothing and its log-space gradient vanishes (an overdamped servo was left far below its kv).
_KV_START = 0.05
_BACKLASH_STARTS = (0.05, 0.2, 0.4, 0.7)  # deg, the plays (every type at once) of a warm backlash fit's global stage
_BACKLASH_UNIT = 1e-3      # rad, the play is fitted in mrad (the Jacobian's step and x_scale in that unit)
_LOAD_FRICTION_START = 0.05   # N m per N m, where a cold load_friction fit starts
_LOAD_FRICTION_STARTS = (0.02, 0.08, 0.15, 0.3)  # the values (every type at once) of a warm one's global stage
_NEIGHBOUR_STRUCTURES = ("load_friction",)
"""Structures whose optimum is checked against a latency one physics step away per joint type (module docstring)."""
_NEIGHBOUR_NFEV = 25        # evaluations of each refinement of that check
_BY_TYPE_STRUCTURES = ("load_friction",)
"""Structures whose optimum is refined type by type on each type's own joints (:mod:`snake_tools.twin.by_type`)."""
_BY_TYPE_NFEV = 25          # evaluations of each run of a type's refinement there
_BY_TYPE_ROUNDS = 3         # runs of a type's refinement at most (each starts a new trust region) ...
_BY_TYPE_ROUND_TOL = 1.0    # ... while a run lowers its |r|^2 by this times max(1, s^2) or more
_WIDE_DIFF_STEP = 5e-2      # relative step of the second Jacobian whose spread such a structure's intervals hold too
_PROBE_STRUCTURES = ("load_friction",)
"""Structures whose optimum is probed at its intervals' ends, and refined again from a lower point there."""
_PROBE_ROUNDS = 2           # such a fit starts again from a lower point at its intervals' ends at most this often ...
_PROBE_TOL = 1.0            # ... where that point leaves less by this times max(1, s^2) or more


def recording_head(rec: Recording, seconds: float) -> tuple[Recording, np.ndarray]:
    """The first ``seconds`` of a recording: commands, samples and poses stamped up to ``rec.start + seconds``.

    :attr:`Recording.start` (from the first command's and the first joint state's stamps, which the head keeps) is
    where :func:`simulate` and :class:`LiftedRollout` start, so the head's rollout is the recording's rollout up to its
    last kept sample, bit for bit (a lifted twin's controls depend on no later command).

    Returns:
        The head, and the mask of ``rec``'s ``joint_states`` samples it keeps.
    """
    end = rec.start + seconds
    keep_cmd, keep, keep_pose = rec.t_cmd <= end, rec.t_state <= end, rec.t_pose <= end
    head = Recording(rec.path, rec.t_cmd[keep_cmd], rec.q_cmd[keep_cmd], rec.t_state[keep], rec.q_state[keep],
                     rec.t_pose[keep_pose], rec.xy_pose[keep_pose], rec.pose_source)
    return head, keep


def head_seconds(rec: Recording, seconds: float | None = None) -> float:
    """Length of the head the servo fit's global stage rolls out: up to ``seconds`` after the first command that moves.

    A recording may begin at rest; the head counts its motion from the first command farther
    than a tenth of the least fitted motion (2 mrad) from the first one, measured from the
    recording's first stamp. ``seconds`` defaults to :data:`_HEAD_S`.
    """
    moved = np.flatnonzero(np.abs(rec.q_cmd - rec.q_cmd[0]).max(axis=1) > _MIN_MOTION_RAD / 10)
    lead = float(rec.t_cmd[moved[0]]) - rec.start if len(moved) else 0.0
    return lead + (_HEAD_S if seconds is None else seconds)


@dataclass
class Fit:
    """Result of :func:`identify` (see :meth:`as_dict`)."""

    variant: str
    names: list[str]
    start: dict[str, float]
    fitted: dict[str, float]
    rel_std: dict[str, float]
    identified: dict[str, bool]
    timestep_s: float
    rms_before: float
    rms_after: float
    rollouts: int
    wall_s: float
    params: TwinParams
    held: list[str]
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    noise: dict[str, float] = field(default_factory=dict)
    adequacy_before: dict[str, Any] = field(default_factory=dict)
    adequacy_after: dict[str, Any] = field(default_factory=dict)
    starts: dict[str, Any] = field(default_factory=dict)
    validation: dict[str, Any] | None = None
    structure: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain data: per parameter start, fitted, spread, 95 % interval, identified and why; residuals, verdict."""
        params: dict[str, dict[str, Any]] = {
            n: {"start": self.start[n], "fitted": self.fitted[n], "relative_std": self.rel_std[n],
                "identified": self.identified[n], "why": self.reasons.get(n, "")} for n in self.names}
        for n, (lo, hi) in self.intervals.items():
            params[n]["interval"] = [lo, hi if math.isfinite(hi) else None]
        out = {
            "variant": self.variant,
            "parameters": params,
            "timestep_s": self.timestep_s,
            "not_identified": [n for n in self.names if not self.identified[n]] + self.held,
            "residual_rms_before": self.rms_before,
            "residual_rms_after": self.rms_after,
            "rollouts": self.rollouts,
            "wall_s": self.wall_s,
            "noise_floor_rad": self.noise.get("noise_floor_rad"),
            "noise_model": self.noise,
            "adequacy": {k: self.adequacy_after[k] for k in ("ratio", "adequate", "threshold")},
            "adequacy_detail": self.adequacy_after,
            "adequacy_before": self.adequacy_before.get("ratio"),
            "starts": self.starts,
            "structure": self.structure,
        }
        if self.validation is not None:
            out["validation"] = self.validation
        return out


def servo_names(robot: RobotModel, structure: str = "none") -> list[str]:
    """Parameters a lifted recording fits: ``servo.<type>.<field>`` of :data:`SERVO_FIELDS`.

    With the ``backlash`` structure, ``servo.<type>.backlash_rad`` of every type after them; with
    ``load_friction``, ``servo.<type>.load_friction`` (:data:`STRUCTURE_FIELDS`).
    """
    types = joint_types(robot)
    extra = STRUCTURE_FIELDS[structure]
    return [f"servo.{t}.{f}" for t in types for f in SERVO_FIELDS] + [f"servo.{t}.{f}" for f in extra for t in types]


def identify(rec: Recording, robot: RobotModel, start: TwinParams, world: str | Path | None = "flat",
             lifted: bool = False, world_friction: float = 0.8, progress: Any = None,
             workers: int | None = None, structure: str = "none", servos: str = "type",
             start_std: Mapping[str, float] | None = None) -> Fit:
    """Fit the twin's parameters to ``rec`` from ``start`` (module docstring).

    A lifted recording (the robot hanging from its head, ``snake twin excite --lifted``)
    fits the servo model of every joint type and its latency; an on-ground recording fits the
    ground friction with the servo model held at ``start`` (fit it from a lifted recording
    first): on the ground, contact couples every joint to every other and to the terrain,
    and the joint-level fit would chase the contacts.

    Args:
        rec: The recording (:func:`read_recording`).
        robot: The robot recorded.
        start: Starting parameters (the target's block, or the defaults).
        world: World of an on-ground recording.
        lifted: The recording is of the lifted robot.
        world_friction: Ground friction of ``world`` (the start when ``start`` sets none).
        progress: Called as ``progress(message)`` after each stage (or ``None``).
        workers: Threads of the lifted fit's rollouts (default: the CPU count).
        structure: The lifted fit's servo model structure (:data:`STRUCTURES`; default ``none``,
            today's model), or ``auto`` (``snake twin identify``'s default): fit each and keep the
            one of the least BIC (:func:`choose_structure`).
        servos: ``type`` (one servo model per joint type, the Python default) or ``auto``
            (``snake twin identify``'s default): after the structure's choice, one servo model per
            joint (:mod:`snake_tools.twin.per_servo`) for each joint type whose BIC says the
            recording tells its servos apart, per type for the others.
        start_std: Standard deviations of ``start``'s servo values (flat names; a lifted fit's,
            :func:`snake_tools.twin.ground.start_std`): an on-ground fit carries them into the
            ground friction's interval (:mod:`snake_tools.twin.ground`); ``None``: the servo
            model held as exact.

    Returns:
        The fit.

    Raises:
        ValueError: An unknown ``structure``.
    """
    if structure != "auto" and structure not in STRUCTURES:
        raise ValueError(f"structure: one of auto, {', '.join(STRUCTURES)}, got {structure!r}")
    if servos not in SERVOS:
        raise ValueError(f"servos: one of {', '.join(SERVOS)}, got {servos!r}")
    wall = time.perf_counter()
    if progress is not None:
        report = progress

        def timed(message: str) -> None:  # every stage's line with the time since the fit began
            report(f"[{time.perf_counter() - wall:.1f} s] {message}")

        progress = timed
    flat0 = start.flat(robot, world_friction)
    from snake_hardware.sim.mjcf import SimOptions

    dt = SimOptions().timestep  # the physics step of every twin simulate() builds
    noise = noise_model(rec, dt)
    if lifted:
        travel = float(np.hypot(*np.ptp(rec.xy_pose, axis=0))) if len(rec.t_pose) else 0.0
        if travel > MAX_LIFTED_TRAVEL_M:
            raise IdentifyError(f"{rec.path}: the head moved {travel:.3f} m: not a lifted run (a lifted head moves at "
                                f"most {MAX_LIFTED_TRAVEL_M} m; drop --lifted to fit the ground friction)")
        stages: dict[str, _Stage] = {}
        candidates = STRUCTURES if structure == "auto" else (structure,)
        target_start = start   # the target's own joint values: reported as the start, replaced by this fit's
        start = start.without_joints()   # every joint fitted from its type's values
        for k, name in enumerate(candidates):
            warm = stages["none"].best if "none" in stages else None
            if progress is not None:
                progress(f"structure candidate {k + 1}/{len(candidates)}: {name}")
            stages[name] = _fit_servos(rec, robot, start, flat0, dt, noise, progress, workers or os.cpu_count() or 1,
                                       name, warm)
        chosen, chosen_report = choose_structure(stages, rec.q_state.size)
        if progress is not None and len(stages) > 1:
            progress(f"structure: {chosen} (" + ", ".join(f"{c['name']} BIC {c['bic']:.6g}"
                                                          for c in chosen_report["candidates"]) + ")")
        stage = stages[chosen]
        stage.rollouts = sum(st.rollouts for st in stages.values())
        if servos == "auto":
            chosen_report["per_servo"] = _per_servo_stage(rec, robot, start, stage, chosen, flat0, noise, dt,
                                                          workers or os.cpu_count() or 1, progress)
        held = ["contact.ground_friction"]
    else:
        stage = fit_friction(rec, robot, start, flat0, world, progress, start_std)
        held = servo_names(robot)
        played = any(start.servo_of(t).backlash_rad > 0 for t in joint_types(robot))
        loaded = any(start.servo_of(t).load_friction > 0 for t in joint_types(robot))
        chosen_report = {"chosen": "backlash" if played else "load_friction" if loaded else "none", "criterion": None,
                         "candidates": [],
                  "note": "an on-ground fit holds the servo model (and its structure) of its start"}
    extra = 0
    if lifted:
        best = start.with_flat(stage.best)
        start = target_start
        sets = [start, stage.params] + ([best] if best != stage.params else [])
        qs = LiftedRollout(rec, robot, workers or os.cpu_count() or 1).joint_angles(sets)
        q_start, q = qs[0], qs[1]
        extra = len(sets) - 2
    else:
        q_start, _ = simulate(rec, robot, start, world, lifted)
        q, _ = simulate(rec, robot, stage.params, world, lifted)
    before = adequacy(rec, q_start, noise, robot)
    after = adequacy(rec, q, noise, robot)
    if lifted and any(n.startswith("joint.") for n in stage.names) and after["adequate"]:
        # Adequate: a joint's value not identified is not set (its type's applies), not held at a start.
        own = {n: stage.fitted[n] for n in stage.names if n.startswith("joint.") and stage.identified[n]}
        stage.params = stage.params.without_joints().with_flat(own)
        if stage.params != sets[1]:
            q = LiftedRollout(rec, robot, workers or os.cpu_count() or 1).joint_angles([stage.params])[0]
            after = adequacy(rec, q, noise, robot)
            extra += 1
    if lifted and extra and not after["adequate"]:
        # Not adequate: no value is identified and none is held at its start (module docstring,
        # "Adequacy"); the fitted twin is the least-squares optimum, every value as the fit left
        # it (holding an unidentified kv at its start moves the optimum of the others).
        q = qs[2]
        after = adequacy(rec, q, noise, robot)
        stage.params, stage.fitted = best, dict(stage.best)
    if lifted and not after["adequate"]:
        # A model that does not explain the recording fits biased values, however narrow their
        # spread: none of them is identified (--write changes nothing); the best fit's values are
        # still reported (and drive the report's figures and --validate).
        worst = max(after["by_type"].items(), key=lambda kv: kv[1]["ratio"])
        _identify_none(stage, f"the model does not explain the recording (residual {after['ratio']:.3g} x the noise "
                              f"floor, {worst[0]} joints {worst[1]['ratio']:.3g}; threshold {ADEQUACY_THRESHOLD:g})")
    if lifted and after["adequate"]:
        # An adequate fit whose residual on one joint type is above the noise floor and not white
        # (Ljung's residual test) left that type in a second minimum or without an effect it has, and
        # through the body it biases the other types' values too: none is identified, however narrow
        # their spread (a drawn case's twist servo at kv 1e-4 for 0.39 moved the dorsal and lateral
        # friction losses outside their intervals).
        structured = [(t, v) for t, v in after["by_type"].items() if not v["white"] and v["ratio"] > 1.0]
        for t, v in structured[:1]:
            _identify_none(stage, f"the {t} joints' residual is {v['ratio']:.3g} x the noise floor and not white "
                                  f"(lag-1 autocorrelation {v['lag1_autocorrelation']:.2f}): a second minimum or an "
                                  "effect the model lacks")
    if progress is not None:
        told = [n for n in stage.names if stage.identified[n]]
        progress(f"verdict: {len(told)} of {len(stage.names)} parameters identified"
                 + (f"; the model is {'adequate' if after['adequate'] else 'NOT adequate'} (residual "
                    f"{after['ratio']:.3g} x the noise floor, threshold {ADEQUACY_THRESHOLD:g})" if lifted else ""))
    if lifted:
        rms_before, rms_after = before["ratio"], after["ratio"]
    else:
        rms_before = stage.rms_before
        r_final = _load_residual(rec, q)
        rms_after = float(np.sqrt(np.mean(r_final ** 2)))
    return Fit(variant="lifted" if lifted else "on the ground", names=stage.names,
               start={n: flat0[n] for n in stage.names}, fitted=stage.fitted, rel_std=stage.rel,
               identified=stage.identified, timestep_s=dt, rms_before=rms_before, rms_after=rms_after,
               rollouts=stage.rollouts + 2 + extra, wall_s=time.perf_counter() - wall, params=stage.params, held=held,
               intervals=stage.intervals, reasons=stage.reasons, noise=noise.as_dict(), adequacy_before=before,
               adequacy_after=after, starts=stage.starts, structure=chosen_report)


def _types_moving(rec: Recording, robot: RobotModel) -> dict[str, bool]:
    """Per joint type: whether some joint of it is commanded over at least :data:`_MIN_MOTION_RAD` (excited)."""
    return {t: float(np.ptp(rec.q_cmd[:, [i for i, j in enumerate(robot.joints) if j.type == t]], axis=0).max())
            >= _MIN_MOTION_RAD for t in joint_types(robot)}


def _identify_none(stage: _Stage, why: str) -> None:
    """Mark every identified value of ``stage`` not identified, ``why`` before its own reason."""
    for n in stage.names:
        if stage.identified[n]:
            stage.identified[n] = False
            stage.reasons[n] = f"{why}; {stage.reasons[n]}"


def _per_servo_stage(rec: Recording, robot: RobotModel, start: TwinParams, stage: _Stage, structure: str,
                     flat0: dict[str, float], noise: NoiseModel, dt: float, workers: int,
                     progress: Any) -> dict[str, Any]:
    """One servo model per joint where the recording tells the servos apart (:mod:`snake_tools.twin.per_servo`).

    Fits every joint of the moving types from the per-type optimum ``stage.best``, keeps the
    per-joint values of the types whose BIC prefers them (:func:`choose_per_servo`) and adds them to
    ``stage`` (names ``joint.<name>.<field>``; their start is the type's optimum) and to ``flat0``.

    Returns:
        The criterion's report (the fit's ``structure.per_servo``).
    """
    types = joint_types(robot)
    moves = _types_moving(rec, robot)
    moving_types = [t for t in types if moves[t]]
    moving = [i for i, j in enumerate(robot.joints) if j.type in moving_types]
    if not moving:
        return {"criterion": "BIC", "types": {}, "note": "no joint type moves"}
    base = start.with_flat(stage.best)
    head_s = head_seconds(rec)
    head = recording_head(rec, head_s) if rec.duration >= _HEAD_MIN_RATIO * head_s else None
    if progress is not None:
        progress(f"per servo: {len(moving)} joints of {', '.join(moving_types)}")
    ps = fit_per_servo(rec, robot, base, moving, noise, PHYSICAL_RANGE, dt, workers, structure, head, progress)
    q_type = LiftedRollout(rec, robot, workers).joint_angles([base])[0]
    type_cost = (((q_type - rec.q_state) / noise.sigma)[:, moving] ** 2).sum(axis=0)
    fields = joint_fields(structure)
    per_type = {t: len(servo_names(robot, structure)) // len(types) for t in moving_types}
    chosen, report = choose_per_servo(robot, moving, type_cost, ps.cost_by_joint, rec.q_state.shape[0], per_type,
                                      len(fields), len(SERVO_FIELDS) - len([f for f in fields if f in SERVO_FIELDS]))
    stage.rollouts += ps.rollouts + 1
    report["rollouts"], report["evaluations"] = ps.rollouts + 1, ps.iterations
    report["fields"] = list(fields)
    keep = [f"joint.{robot.joints[i].name}.{f}" for i in moving if robot.joints[i].type in chosen for f in fields]
    for n in keep:
        stage.names.append(n)
        flat0[n] = ps.start[n]
        stage.fitted[n] = stage.best[n] = ps.values[n]
        stage.rel[n], stage.intervals[n] = ps.rel[n], ps.intervals[n]
        stage.identified[n], stage.reasons[n] = ps.identified[n], ps.reasons[n]
    if keep:
        stage.params = stage.params.with_flat({n: ps.values[n] for n in keep})
    if progress is not None:
        progress("per servo: " + ", ".join(f"{t} {r['chosen']} (BIC {r['per_type']['bic']:.6g} per type, "
                                          f"{r['per_joint']['bic']:.6g} per joint)"
                                          for t, r in report["types"].items()))
    return report


def joint_replay(rec: Recording, robot: RobotModel, params: TwinParams) -> dict[str, Any]:
    """A lifted recording replayed through the lifted twin: the joint residual, no pose needed.

    Returns:
        ``joint_rms_rad`` per joint (twin minus recording), ``joint_residual_rms_rad`` over
        every joint, ``noise_floor_rad`` and ``ratio_to_noise`` (:func:`noise_model`).
    """
    from snake_hardware.sim.mjcf import SimOptions

    noise = noise_model(rec, SimOptions().timestep)
    q, _ = simulate(rec, robot, params, None, lifted=True)
    e = q - rec.q_state
    return {"bag": str(rec.path), "drive": "joint_commands", "variant": "lifted", "duration_s": rec.duration,
            "joint_rms_rad": {j.name: float(np.sqrt(np.mean(e[:, i] ** 2))) for i, j in enumerate(robot.joints)},
            "joint_residual_rms_rad": float(np.sqrt(np.mean(e ** 2))), "noise_floor_rad": noise.floor_rad,
            "ratio_to_noise": float(np.sqrt(np.mean((e / noise.sigma) ** 2)))}


def validate(fit: Fit, rec: Recording, robot: RobotModel, start: TwinParams,
             world: str | Path | None = "flat") -> dict[str, Any]:
    """The fitted twin on a held-out recording (not used in the fit): joint residual against its noise floor.

    Returns:
        ``joint_rms_rad`` (fitted twin), ``joint_rms_per_joint_rad``, ``ratio_to_noise`` (the
        residual's RMS in units of the held-out recording's per-sample sigma), ``adequate``
        (at most :data:`ADEQUACY_THRESHOLD`), and ``joint_rms_start_rad``, ``ratio_to_noise_start``
        of the starting twin, for comparison.
    """
    lifted = fit.variant == "lifted"
    noise = noise_model(rec, fit.timestep_s)
    out: dict[str, Any] = {"bag": str(rec.path), "noise_floor_rad": noise.floor_rad}
    for key, params in (("", fit.params), ("_start", start)):
        q, _ = simulate(rec, robot, params, world, lifted)
        e = q - rec.q_state
        out[f"joint_rms{key}_rad"] = float(np.sqrt(np.mean(e ** 2)))
        out[f"ratio_to_noise{key}"] = float(np.sqrt(np.mean((e / noise.sigma) ** 2)))
        if not key:
            out["joint_rms_per_joint_rad"] = {j.name: float(np.sqrt(np.mean(e[:, i] ** 2)))
                                              for i, j in enumerate(robot.joints)}
    out["adequate"] = out["ratio_to_noise"] <= ADEQUACY_THRESHOLD
    return out


def _fit_servos(rec: Recording, robot: RobotModel, start: TwinParams, flat0: dict[str, float], dt: float,
                noise: NoiseModel, progress: Any, workers: int, structure: str = "none",
                warm: dict[str, float] | None = None) -> _Stage:
    """Servo model and latency per joint type from a lifted recording (one least-squares fit).

    ``kp``, ``kv`` and ``armature`` are fitted as log values (positive, relative steps);
    ``frictionloss`` (N m) and ``latency_s`` (fitted in physics steps, which the twin blends
    continuously) as plain values; every one within its :data:`PHYSICAL_RANGE`. The residual
    is weighted by the noise model (``r = (q_twin - q_robot) / sigma``), and the covariance
    comes from it (:func:`noise_covariance`). Every rollout is :class:`LiftedRollout`'s (the
    same joint angles as :func:`simulate`), the Jacobian's columns in one batch on ``workers``
    threads. ``structure`` ``backlash`` adds a gear play per joint type (fitted in mrad, from
    :data:`_BACKLASH_START`), ``load_friction`` a load-dependent friction per joint type (from
    :data:`_LOAD_FRICTION_START`); ``warm`` (another structure's optimum) starts every value it names
    there and varies the structure's own parameter in the global stage instead of the latency (its
    latency starts were run for that optimum).
    """
    from scipy.optimize import least_squares

    names = servo_names(robot, structure)
    fields = [n.rsplit(".", 1)[-1] for n in names]
    log = np.array([f in _LOG_FIELDS for f in fields])
    # latency: s <-> physics steps; play: rad <-> mrad
    scale = np.array([dt if f == "latency_s" else _BACKLASH_UNIT if f == "backlash_rad" else 1.0 for f in fields])
    moving = _types_moving(rec, robot)
    free = np.array([moving[n.split(".")[1]] for n in names])
    count = [0, 0]   # rollouts: all, of the head only
    full = (LiftedRollout(rec, robot, max(workers, 1)), rec.q_state, noise.sigma)
    on = [full]      # what the residual rolls out: (rollout, recorded angles, their sigma)
    head_s = head_seconds(rec)
    headed = rec.duration >= _HEAD_MIN_RATIO * head_s
    if headed:
        head_rec, head_keep = recording_head(rec, head_s)
        head = (LiftedRollout(head_rec, robot, max(workers, 1)), head_rec.q_state, noise.sigma[head_keep])

    def values_of(x: np.ndarray) -> dict[str, float]:
        v = np.where(log, np.exp(x), x) * scale
        return {n: float(val) for n, val in zip(names, v, strict=True)}

    cache: dict[bytes, np.ndarray] = {}   # residuals of the last few points (a start's point is evaluated again)
    evals = [0]                           # function evaluations of the current least-squares run

    def residuals(zs: list[np.ndarray]) -> list[np.ndarray]:
        roller, q_rec, sigma = on[0]
        count[0] += len(zs)
        count[1] += len(zs) if on[0] is not full else 0
        params = []
        for z in zs:
            x = x0.copy()
            x[free] = z
            params.append(start.with_flat(values_of(x)))
        return [((q - q_rec) / sigma).ravel() for q in roller.joint_angles(params)]

    def use(what: tuple[LiftedRollout, np.ndarray, np.ndarray]) -> None:
        """Roll out ``what`` from now on (the cached residuals are of the other)."""
        on[0] = what
        cache.clear()

    def residual(z: np.ndarray) -> np.ndarray:
        evals[0] += 1
        key = np.asarray(z, dtype=float).tobytes()
        if key not in cache:
            if len(cache) >= 8:
                cache.pop(next(iter(cache)))
            cache[key] = residuals([np.asarray(z, dtype=float)])[0]
        return cache[key]

    def jacobian(z: np.ndarray, limit: int | None = None, step: float = _DIFF_STEP) -> np.ndarray:
        """Forward differences (steps as scipy's ``2-point``, relative ``step``), the columns' rollouts in one batch.

        With ``limit``: zeros once the run has made ``limit`` evaluations (a start's short
        refinement ends there: its last Jacobian would not be used). While ``unused_last``
        (the head's refinement, whose Jacobian is not kept): zeros where :func:`converged`
        will stop the run at this point (scipy takes the Jacobian of an accepted point before
        it calls back with the same cost).
        """
        z = np.asarray(z, dtype=float)
        if limit is not None and evals[0] >= limit:
            return np.zeros((on[0][1].size, z.size))
        f0 = cache.get(z.tobytes())
        if f0 is None:
            f0 = residual(z)
        if unused_last[0] and stops(float(f0 @ f0)):
            return np.zeros((on[0][1].size, z.size))
        h = step * np.maximum(1.0, np.abs(z))
        h = np.where(z + h > upper[free], -h, h)   # stay within the bounds
        shifted = []
        for i in range(z.size):
            zi = z.copy()
            zi[i] += h[i]
            shifted.append(zi)
        cols = [(r - f0) / h[i] for i, r in enumerate(residuals(shifted))]
        return np.stack(cols, axis=1)

    def cost_scale(cost: float) -> float:
        """``max(1, s^2)`` of a ``|r|^2`` on the recording rolled out: the unit of the tolerances."""
        return max(cost / max(on[0][1].size - int(free.sum()), 1), 1.0)

    def stops(cost: float) -> bool:
        """Whether an iteration that reached ``cost`` (``|r|^2``) lowered it by less than the tolerance."""
        return previous[0] - cost < _COST_TOL * cost_scale(cost)

    def converged(intermediate_result: Any) -> None:
        """Stop once an iteration lowers ``|r|^2`` by less than :data:`_COST_TOL` ``max(1, s^2)`` (module docstring)."""
        cost = 2.0 * float(intermediate_result.cost)
        if stops(cost):
            raise StopIteration
        previous[0] = cost

    previous = [math.inf]
    unused_last = [False]
    phys = np.array([PHYSICAL_RANGE[f] for f in fields]) / scale[:, None]
    lower = np.where(log, np.log(np.maximum(phys[:, 0], 1e-300)), phys[:, 0])
    upper = np.where(log, np.log(phys[:, 1]), phys[:, 1])
    start_values = {n: max(flat0[n], _BACKLASH_START) if n.endswith("backlash_rad")
                    else max(flat0[n], _LOAD_FRICTION_START) if n.endswith(".load_friction")
                    else max(flat0[n], _KV_START) if n.endswith(".kv") else flat0[n] for n in names}
    raw = np.array([(warm or {}).get(n, start_values[n]) for n in names]) / scale
    x0 = np.clip(np.where(log, np.log(np.maximum(raw, 1e-300)), raw), lower, upper)
    r0 = residual(x0[free])
    # Global stage: the delay is the least convex direction (a softer, more damped servo mimics
    # it, a local minimum of the cost): a short refinement from each of a few latencies, the
    # best of them refined to the end. On a long recording the starts and a first refinement of
    # the best roll out only its head (_HEAD_S), the refinement on all of it starts from there.
    if headed:
        use(head)
    # Varied by the global stage: the latency; from another structure's optimum (warm), the structure's own instead.
    if warm is None or structure == "none":
        varied, start_points, varied_name = "latency_s", list(_LATENCY_STARTS), "servo.*.latency_s"
    elif structure == "load_friction":
        varied, varied_name, start_points = "load_friction", "servo.*.load_friction", list(_LOAD_FRICTION_STARTS)
    else:
        varied, varied_name = "backlash_rad", "servo.*.backlash_rad"
        start_points = [math.radians(d) / _BACKLASH_UNIT for d in _BACKLASH_STARTS]
    lat = np.array([f == varied for f in fields]) & free
    x_scale = np.where(log, 1.0, np.where(scale != 1.0, 1.0, _FRICTION_SCALE))
    x_scale[[f == "load_friction" for f in fields]] = _LOAD_FRICTION_SCALE
    costs: list[float] = []
    # Each joint type may keep its own best start: the types' values are separate parameters that the
    # lifted body barely couples, and one type's best start can be another's worst.
    type_of = np.array([n.split(".")[1] for n in names])[free]   # each fitted variable's joint type
    joint_type = np.array([j.type for j in robot.joints])

    def type_costs(fun: np.ndarray) -> dict[str, float]:
        """Each joint type's share of ``|r|^2``: its own joints'."""
        per_joint = (fun.reshape(-1, joint_type.size) ** 2).sum(axis=0)
        return {t: float(per_joint[joint_type == t].sum()) for t in dict.fromkeys(map(str, type_of))}

    def mix_types(base: np.ndarray, picks: dict[str, tuple[float, np.ndarray]]) -> np.ndarray:
        """``base`` with each joint type's variables taken from its pick (``type: (cost, variables)``)."""
        out = base.copy()
        for t, (_, z) in picks.items():
            out[type_of == t] = z[type_of == t]
        return out

    by_type: dict[str, dict[str, float]] = {}   # joint type: its best start (its joints' |r|^2, the start's values)
    if lat.any():
        best = (math.inf, x0[free])
        type_best: dict[str, tuple[float, np.ndarray]] = {}

        def run_start(trial: np.ndarray, label: str, what: dict[str, float]) -> None:
            nonlocal best
            evals[0] = 0
            short = least_squares(residual, trial, jac=lambda z: jacobian(z, _START_NFEV),
                                  bounds=(lower[free], upper[free]), method="trf", x_scale=x_scale[free],
                                  max_nfev=_START_NFEV)
            cost = float(short.fun @ short.fun)
            costs.append(cost)
            if cost < best[0]:
                best = (cost, short.x)
            for t, c_t in type_costs(short.fun).items():
                if c_t < type_best.get(t, (math.inf, trial))[0]:
                    type_best[t], by_type[t] = (c_t, short.x), {"cost": c_t} | what
            if progress is not None:
                progress(f"{structure}: start {len(costs)}/{n_starts} ({label}): |r|^2 {cost:.6g}")

        stiffer = [f for f in _KP_START_FACTORS if warm is None]
        n_starts = len(start_points) + len(stiffer)
        for steps in start_points:
            trial = x0.copy()
            trial[lat] = steps
            run_start(trial[free], f"{varied} {steps * scale[lat][0]:.4g}", {varied: float(steps * scale[lat][0])})
        # A stiffer servo than the start's: each type's best start with its kp raised (the kp's
        # range is wide and a stiff servo's cost is flat towards a soft one's kv and armature).
        kp_col = np.array([f == "kp" for f in fields])[free]
        base = mix_types(best[1], type_best)
        base_what = {t: dict(v) for t, v in by_type.items()}
        for factor in stiffer:
            trial = base.copy()
            trial[kp_col] = np.minimum(trial[kp_col] + math.log(factor), upper[free][kp_col])
            run_start(trial, f"kp x{factor:g}", {"kp_factor": factor})
            for t, v in by_type.items():   # the latency it started from: the type's best of the first starts
                if v.get("kp_factor") == factor and varied not in v:
                    v[varied] = base_what[t][varied]
        mixed = mix_types(best[1], type_best)
        f_mixed = residual(mixed)
        mixed_cost = float(f_mixed @ f_mixed)
        if progress is not None:
            progress(f"{structure}: each joint type from its own best start: |r|^2 {mixed_cost:.6g}")
        x0[free] = mixed if mixed_cost < best[0] else best[1]
        if mixed_cost >= best[0]:
            by_type = {}

    def refine(z: np.ndarray, nfev: int | None = None) -> Any:
        """The refinement from ``z`` until :func:`converged` (or :data:`_MAX_NFEV`), or ``nfev`` evaluations.

        Near a whole number of physics steps of latency the cost bends (the twin's fractional
        latency blends two steps' controls), the trust region shrinks and an iteration there
        can lower the cost by less than the tolerance well before the optimum: a fixed count
        goes on past it.
        """
        if nfev is not None:
            return least_squares(residual, z, jac=jacobian, bounds=(lower[free], upper[free]), method="trf",
                                 x_scale=x_scale[free], xtol=1e-10, ftol=1e-12, max_nfev=nfev)
        return least_squares(residual, z, jac=jacobian, bounds=(lower[free], upper[free]), method="trf",
                             x_scale=x_scale[free], xtol=1e-8, ftol=1e-10, max_nfev=_MAX_NFEV, callback=converged)

    def neighbour_latencies(sol: Any) -> Any:
        """The optimum, or a lower one with some joint type's latency a physics step away (module docstring).

        From the optimum with every type's latency one physics step earlier, and one later,
        refined each; every joint type takes its values from the one of the three that leaves
        its own joints the least residual (the lifted body barely couples the types); that mix
        is refined, and the least of the four (the optimum, the two refinements and the mix's)
        is kept: one refinement from a latency a step away can leave less than the mix.
        """
        lat_col = np.array([f == "latency_s" for f in fields])[free]
        if not lat_col.any():
            return sol
        best_of = {t: (c, sol.x) for t, c in type_costs(sol.fun).items()}
        found = [sol]   # every refinement's result: the least of them is kept
        for shift in (-1.0, 1.0):
            trial = sol.x.copy()
            trial[lat_col] = np.clip(trial[lat_col] + shift, lower[free][lat_col], upper[free][lat_col])
            if progress is not None:
                progress(f"{structure}: refinement with every latency {shift:+g} physics step")
            moved = refine(trial, _NEIGHBOUR_NFEV)
            found.append(moved)
            for t, c in type_costs(moved.fun).items():
                if c < best_of[t][0]:
                    best_of[t] = (c, moved.x)
        if all(z is sol.x for _, z in best_of.values()):
            return sol
        mixed = mix_types(sol.x, best_of)
        if progress is not None:
            moved_types = [t for t, (_, z) in best_of.items() if z is not sol.x]
            progress(f"{structure}: a latency a physics step away is better for {', '.join(moved_types)}: refined")
        found.append(refine(mixed, _NEIGHBOUR_NFEV))
        return min(found, key=lambda r: float(r.fun @ r.fun))

    def each_type_alone(sol: Any) -> Any:
        """The optimum, or a lower one found by refining each type on its own joints (:mod:`snake_tools.twin.by_type`).

        The types' results put together are refined over every type (until :func:`converged`),
        which also gives the Jacobian at the point kept; that replaces the optimum where it leaves less.
        """
        if progress is not None:
            progress(f"{structure}: each joint type refined on its own joints")
        cost = float(sol.fun @ sol.fun)
        mixed = refine_by_type(residuals, sol.x, type_of, joint_type, (lower[free], upper[free]), x_scale[free],
                               _DIFF_STEP, _BY_TYPE_NFEV, _BY_TYPE_ROUNDS, _BY_TYPE_ROUND_TOL * cost_scale(cost))
        f_mixed = residual(mixed)
        previous[0] = float(f_mixed @ f_mixed)
        final = refine(mixed)
        lowered = float(final.fun @ final.fun)
        if progress is not None:
            progress(f"{structure}: each type on its own joints: |r|^2 {cost:.6g} -> {lowered:.6g}")
        return final if lowered < cost else sol

    if headed:
        if progress is not None:
            progress(f"{structure}: refinement on the first {head_s:.0f} s")
        unused_last[0] = True
        x0[free] = refine(x0[free]).x
        unused_last[0] = False
        use(full)
        # Refined already: its first iteration too must lower the cost by the tolerance, or it stops there.
        f_head = residual(x0[free])
        previous[0] = float(f_head @ f_head)
    if progress is not None:
        progress(f"{structure}: refinement on all {rec.duration:.0f} s")
    sol = refine(x0[free])
    if structure in _NEIGHBOUR_STRUCTURES:
        sol = neighbour_latencies(sol)
    # Spreads that hold for errors correlated in time, and the held-out segment check (uncertainty module).
    samples = rec.q_state.shape[0]
    lags = max(round(CORRELATION_WINDOW_S / float(np.median(np.diff(rec.t_state)))), 1)
    offsets = grid_offsets(rec.q_state, noise.resolution_rad)

    def spread(jac: np.ndarray, fun: np.ndarray) -> np.ndarray:
        """The free variables' standard deviations from the Jacobian ``jac`` at an optimum whose residual is ``fun``."""
        std_free = parameter_std(jac, fun, x_scale[free], samples, lags)
        if offsets is not None:   # angles rounded to the encoder's ticks: their effect on the estimate too
            q_fit = rec.q_state + noise.sigma * fun.reshape(rec.q_state.shape)   # the twin's angles there
            quant = quantization_std(jac, q_fit, noise.sigma, noise.resolution_rad, offsets, x_scale[free])
            std_free = np.sqrt(std_free ** 2 + quant ** 2)
        return std_free

    def spreads(sol: Any) -> np.ndarray:
        """The free variables' standard deviations at the optimum ``sol``.

        On a rough cost (:data:`_BY_TYPE_STRUCTURES`) also from a Jacobian of :data:`_WIDE_DIFF_STEP`
        steps, the larger kept.
        """
        std_free = spread(sol.jac, sol.fun)
        if structure in _BY_TYPE_STRUCTURES:
            std_free = np.maximum(std_free, spread(jacobian(sol.x, step=_WIDE_DIFF_STEP), sol.fun))
        return std_free

    def interval_ends_probed(sol: Any) -> tuple[Any, np.ndarray]:
        """The optimum, or a lower one refined from a point at its intervals' ends, and its spreads.

        (:mod:`snake_tools.twin.probe`.)
        """
        std_free = spreads(sol)
        for _ in range(_PROBE_ROUNDS):
            cost = float(sol.fun @ sol.fun)
            found = lower_at_interval_ends(residuals, sol.x, sol.fun, sol.jac, std_free, x_scale[free],
                                           (lower[free], upper[free]), _PROBE_TOL * cost_scale(cost))
            if found is None:
                break
            if progress is not None:
                progress(f"{structure}: an interval's end leaves |r|^2 {found[1]:.6g} < {cost:.6g}: refined from there")
            previous[0] = found[1]
            moved = refine(found[0])
            if float(moved.fun @ moved.fun) >= cost:
                break
            sol = moved
            std_free = spreads(sol)
        return sol, std_free

    if structure in _BY_TYPE_STRUCTURES:
        sol = each_type_alone(sol)
    std = np.full(len(names), math.inf)
    if structure in _PROBE_STRUCTURES:
        sol, std[free] = interval_ends_probed(sol)
    else:
        std[free] = spreads(sol)
    x = x0.copy()
    x[free] = sol.x
    if progress is not None:
        progress(f"{structure}: residual/noise {np.sqrt(np.mean(r0 ** 2)):.4g} -> {np.sqrt(np.mean(sol.fun ** 2)):.4g} "
                 f"in {count[0]} rollouts")
    # The latency is read between the commands' stamps and the joint states': an error common to the
    # joint states' stamps shifts every sample at once (uncertainty module).
    latency = np.array([f == "latency_s" for f in fields])
    std[latency] = np.sqrt(std[latency] ** 2 + time_base_std_steps(noise.stamp_std_s, dt) ** 2)
    stability = segment_stability(sol.jac, sol.fun, x_scale[free], samples, lags)
    stable = np.ones(len(names), dtype=bool)
    stable[free] = stability.stable
    worst = {int(i): stability.worst(k) for k, i in enumerate(np.flatnonzero(free))}
    fitted = values_of(x)
    rel: dict[str, float] = {}
    reasons: dict[str, str] = {}
    identified: dict[str, bool] = {}
    intervals: dict[str, tuple[float, float]] = {}
    for i, n in enumerate(names):
        sd = float(std[i]) * (_BACKLASH_UNIT if fields[i] == "backlash_rad" else 1.0)   # mrad -> rad
        judged = judge(fields[i], fitted[n], sd, log=bool(log[i]), step_s=dt, physical=PHYSICAL_RANGE[fields[i]],
                       search=(x[i], lower[i], upper[i]), stability=(bool(stable[i]), worst.get(i, (-1, math.nan))))
        rel[n], intervals[n] = judged.rel, judged.interval
        identified[n] = bool(free[i]) and judged.identified
        reasons[n] = judged.reason if free[i] else "its joint type does not move in the recording"
    optimum = dict(fitted)
    keep = {n: flat0[n] for n in names if not identified[n]}  # not told by the recording: held
    fitted.update(keep)
    starts = {"count": len(costs), "varied": varied_name, "values_steps": start_points,
              "refinement_nfev": _START_NFEV, "costs": costs, "cost_min": min(costs) if costs else None,
              "per_type": by_type,
              "cost_max": max(costs) if costs else None, "cost_final": float(sol.fun @ sol.fun),
              "head_s": head_s if headed else None, "head_rollouts": count[1]}
    return _Stage(names, fitted, rel, count[0], float(np.sqrt(np.mean(r0 ** 2))), start.with_flat(fitted),
                  intervals, identified, reasons, starts, optimum, free=int(free.sum()), cost=float(sol.fun @ sol.fun))
