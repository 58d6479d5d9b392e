"""Fit the twin's physics (a calibration target's ``twin:`` block) to a recorded run of the robot.

The recording gives what the robot was told (``/joint_commands``) and what it did
(``/joint_states``, and the head pose of mocap or ground truth). The twin
(:class:`snake_hardware.sim.twin.SimTwin`) is driven by the same commands on the bag's time
base from the recorded initial joint angles (:func:`simulate`). Two recordings, two fits:

* **lifted** (the robot hanging from its head, ``snake twin excite --variant lifted``; the
  twin's :class:`~snake_hardware.sim.mjcf.SimOptions` ``lifted``): the servo model of every
  joint type, p = (``kp``, ``kv``, ``armature``, ``frictionloss``, ``latency_s``) per type,
  minimising ``r(p) = (q_twin(p) - q_robot) / sigma`` over every joint sample (``sigma``: the
  noise model, :mod:`snake_tools.twin.noise`) with ``scipy.optimize.least_squares``, every
  variable within its :data:`PHYSICAL_RANGE`, one rollout of the whole recording per Jacobian
  column, the columns rolled out in one batch in C by :class:`LiftedRollout`, bit for bit
  :func:`simulate`'s joint angles (the problem: :mod:`snake_tools.twin.servo_problem`). The
  twin blends a fractional latency over one physics step, so the latency is a continuous
  parameter. Stage by stage (:mod:`snake_tools.twin.lifted`):

  1. the global stage (:mod:`snake_tools.twin.servo_starts`): short refinements from a few
     latencies and from stiffer servos, each joint type keeping its best start (the latency is
     the least convex direction: a softer, more damped servo mimics a delay);
  2. on a recording at least :data:`~snake_tools.twin.servo_problem.HEAD_MIN_RATIO` times its
     head long (20 s after the first command that moves), the starts and a first refinement of
     the best roll out only the head (:func:`recording_head`), and the refinement on the whole
     recording starts from there (it stops after one iteration if that lowers the cost by less
     than the tolerance); where several structures are fitted, they are compared on the head
     first, and one that loses there by more than :data:`~snake_tools.twin.structure.DECISIVE_BIC`
     is not fitted on the whole recording (:func:`~snake_tools.twin.structure.decisive_on_head`);
  3. with a load-dependent friction (the ``_*_STRUCTURES`` of :mod:`snake_tools.twin.lifted`), whose
     cost is rough, the optimum is checked against a latency one physics step away, refined type by type on each
     type's own joints, checked against each type's load-dependent friction scaled down and up,
     and probed at its intervals' ends (:mod:`snake_tools.twin.servo_minima`), each replacing it
     where it leaves less; with a head, all but the probe run on the head's optimum, before the
     refinement on the whole recording (they choose the basin at the head's steps, a third of a
     60 s recording's; the whole recording's refinement settles in it), and the probe on the
     whole recording's; with ``servos`` auto only where some type keeps its per-type values
     (:mod:`snake_tools.twin.lifted`, "The second minima's checks where the per-type values are kept");
  4. the spreads, 95 % intervals and verdict per value (:mod:`snake_tools.twin.servo_intervals`;
     on a rough cost the spreads also from a Jacobian of 5 % steps, the larger kept).
* **on the ground** (a gait run, :mod:`snake_tools.twin.ground`): the ground friction mu, with
  the servo model held at the target's (fit it lifted first): the ground's friction loads the
  servos, and the load shows as their tracking error, fitted per window, and it decides how fast
  the body moves and turns, fitted per span of constant ``cmd_vel`` where the servo model comes
  with its spreads (:mod:`snake_tools.twin.path_rates`), by a scan over log mu and Brent's method;
  with ``contact="choose"`` the contact model is first chosen from a grid by the same statistics
  (:mod:`snake_tools.twin.contact`).

The stages live beside this module, one concern each: what a fit reads from a bag
(:mod:`snake_tools.twin.data`), the recording checks (:mod:`snake_tools.twin.checks`), the noise
model (:mod:`snake_tools.twin.noise`), the rollouts (:mod:`snake_tools.twin.rollout`), the lifted
fit's stages (``servo_problem``, ``servo_starts``, ``servo_minima``, ``servo_intervals``, above; per
joint: :mod:`snake_tools.twin.per_servo`), the ground friction's fit
(:mod:`snake_tools.twin.ground`; its span rates: :mod:`snake_tools.twin.path_rates`), the
spreads, intervals and the held-out segment check that say what is identified
(:mod:`snake_tools.twin.uncertainty`), the verdict on the model (:mod:`snake_tools.twin.verdict`:
a lifted fit that is not adequate identifies nothing), the structure's choice
(:mod:`snake_tools.twin.structure`) and what a fit writes (:mod:`snake_tools.twin.report`). This
module runs them (:func:`identify`) and re-exports their public names.

Why scipy and not ``mujoco.sysid``: the twin's command path (per-type latency, the target
checks of :meth:`SimTwin.set_targets`) and the parameters' mapping to several MJCF fields with
derived defaults (:mod:`snake_core.twin_params`) live in :class:`SimTwin`; rolling out SimTwin
itself keeps one code path for the fit, ``snake twin replay`` and every experiment, where the
toolbox rolls out a bare ``MjModel`` of its own; and its HTML report loads plotly from a CDN.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.robot import RobotModel
from snake_core.twin_params import ContactParams, TwinParams, joint_types
from snake_tools.twin.contact import choose_contact
from snake_tools.twin.data import MIN_DURATION_S, IdentifyError, Recording, read_recording
from snake_tools.twin.ground import LOAD_WINDOW_S, SIGMA_LOAD, _load_residual, fit_friction
from snake_tools.twin.lifted import lifted_stage, lifted_verdict
from snake_tools.twin.noise import ENCODER_TICKS, NoiseModel, noise_model, stamp_spread
from snake_tools.twin.report import html_report, write_block
from snake_tools.twin.rollout import LiftedRollout, simulate
from snake_tools.twin.servo_problem import (
    MAX_LATENCY_STEPS,
    PHYSICAL_RANGE,
    SERVO_FIELDS,
    head_seconds,
    recording_head,
    servo_names,
)
from snake_tools.twin.structure import STRUCTURES, choose_structure
from snake_tools.twin.uncertainty import (
    CORRELATION_WINDOW_S,
    IDENTIFIABLE_REL_STD,
    LATENCY_STD_STEPS,
    SEGMENT_Z,
    SEGMENTS,
    UNBOUNDED_STD,
    correlated_covariance,
    grid_offsets,
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

CONTACT = ("keep", "choose")
"""An on-ground fit's contact model: the start's, or one chosen by the recording (:mod:`snake_tools.twin.contact`)."""
SERVOS = ("type", "auto")
"""A lifted fit's servo models: one per joint type, or one per joint where the recording supports it (``auto``)."""
MAX_LIFTED_TRAVEL_M = 0.05
"""Largest head travel of a lifted recording (the head is held), m: more is a run on the ground."""


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
    written: dict[str, bool] = field(default_factory=dict)
    """What ``--write`` writes (:func:`write_block`): an adequate lifted fit's twin (``params``: every
    value of each joint type, and a joint's own values that twin sets, :mod:`snake_tools.twin.verdict`),
    nothing of a lifted fit that is not adequate, an on-ground fit's identified values."""
    contact: dict[str, Any] | None = None
    """An on-ground fit's choice of contact model (:func:`snake_tools.twin.contact.choose_contact`'s report;
    ``None``: the start's kept). ``--write`` writes the chosen model with the friction."""
    contact_model: ContactParams | None = None
    """The contact model chosen (``None``: the start's kept)."""

    def writes(self, name: str) -> bool:
        """Whether ``--write`` writes parameter ``name``."""
        return self.written[name]

    def written_not_identified(self) -> list[str]:
        """The parameters ``--write`` writes that the fit does not identify (of an adequate lifted fit's twin)."""
        return [n for n in self.names if self.written[n] and not self.identified[n]]

    def as_dict(self) -> dict[str, Any]:
        """Plain data: per parameter start, fitted, spread, 95 % interval, identified and why; residuals, verdict."""
        params: dict[str, dict[str, Any]] = {
            n: {"start": self.start[n], "fitted": self.fitted[n], "relative_std": self.rel_std[n],
                "identified": self.identified[n], "written": self.writes(n), "why": self.reasons.get(n, "")}
            for n in self.names}
        for n, (lo, hi) in self.intervals.items():
            params[n]["interval"] = [lo, hi if math.isfinite(hi) else None]
        out = {
            "variant": self.variant,
            "parameters": params,
            "timestep_s": self.timestep_s,
            "not_identified": [n for n in self.names if not self.identified[n]] + self.held,
            "written_not_identified": self.written_not_identified(),
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
            "contact": self.contact,
        }
        if self.validation is not None:
            out["validation"] = self.validation
        return out


def identify(rec: Recording, robot: RobotModel, start: TwinParams, world: str | Path | None = "flat",
             lifted: bool = False, world_friction: float = 0.8, progress: Any = None,
             workers: int | None = None, structure: str = "none", servos: str = "type",
             start_std: Mapping[str, float] | None = None, contact: str = "keep") -> Fit:
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
        workers: Threads of the lifted fit's rollouts, processes of an on-ground fit's (default: the CPU count).
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
        contact: An on-ground fit's contact model: ``keep`` the start's, or ``choose`` one of a grid by
            BIC before the friction is fitted (:mod:`snake_tools.twin.contact`).

    Returns:
        The fit.

    Raises:
        ValueError: An unknown ``structure``, ``servos`` or ``contact``.
    """
    from threadpoolctl import threadpool_limits

    # BLAS on one thread: a multi-threaded BLAS sums in another order (OpenBLAS on two threads,
    # a Dask worker on one), and on a rough cost (a load-dependent friction) the last bits send the
    # refinement to another optimum. One thread gives every machine the same fit; the problem has
    # 15 to 21 variables, and the rollouts take nearly all of a fit's time.
    with threadpool_limits(limits=1, user_api="blas"):
        return _identify(rec, robot, start, world, lifted, world_friction, progress, workers, structure, servos,
                         start_std, contact)


def _identify(rec: Recording, robot: RobotModel, start: TwinParams, world: str | Path | None, lifted: bool,
              world_friction: float, progress: Any, workers: int | None, structure: str, servos: str,
              start_std: Mapping[str, float] | None, contact: str) -> Fit:
    """:func:`identify` with BLAS on one thread."""
    if structure != "auto" and structure not in STRUCTURES:
        raise ValueError(f"structure: one of auto, {', '.join(STRUCTURES)}, got {structure!r}")
    if servos not in SERVOS:
        raise ValueError(f"servos: one of {', '.join(SERVOS)}, got {servos!r}")
    if contact not in CONTACT:
        raise ValueError(f"contact: one of {', '.join(CONTACT)}, got {contact!r}")
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
    extra = 0
    contact_model: ContactParams | None = None
    contact_report: dict[str, Any] | None = None
    cores = workers or os.cpu_count() or 1   # the lifted fit's threads, an on-ground fit's processes
    if lifted:
        travel = float(np.hypot(*np.ptp(rec.xy_pose, axis=0))) if len(rec.t_pose) else 0.0
        if travel > MAX_LIFTED_TRAVEL_M:
            raise IdentifyError(f"{rec.path}: the head moved {travel:.3f} m: not a lifted run (a lifted head moves at "
                                f"most {MAX_LIFTED_TRAVEL_M} m; drop --lifted to fit the ground friction)")
        fit_start = start.without_joints()   # every joint fitted from its type's values
        stage, chosen_report = lifted_stage(rec, robot, fit_start, flat0, dt, noise, progress, cores, structure,
                                            servos)
        held = ["contact.ground_friction"]
        # The target's own joint values are reported as the start, replaced by this fit's.
        before, after, extra, twin_values = lifted_verdict(rec, robot, stage, fit_start, start, noise, cores)
    else:
        twin_values = None
        ground_start = start   # the friction's fit starts from the contact model chosen, the verdict's "before" not
        if contact == "choose":
            contact_model, contact_report = choose_contact(rec, robot, start, world,
                                                           flat0["contact.ground_friction"], progress,
                                                           span_rates=bool(start_std), workers=cores)
            ground_start = dataclasses.replace(start, contact=contact_model)
            extra = contact_report["rollouts"]
        stage = fit_friction(rec, robot, ground_start, flat0, world, progress, start_std, cores)
        held = servo_names(robot)
        played = any(start.servo_of(t).backlash_rad > 0 for t in joint_types(robot))
        loaded = any(start.servo_of(t).load_friction > 0 for t in joint_types(robot))
        chosen_report = {"chosen": "backlash" if played else "load_friction" if loaded else "none", "criterion": None,
                         "candidates": [],
                         "note": "an on-ground fit holds the servo model (and its structure) of its start"}
        q_start, _ = simulate(rec, robot, start, world, lifted)
        q, _ = simulate(rec, robot, stage.params, world, lifted)
        before = adequacy(rec, q_start, noise, robot)
        after = adequacy(rec, q, noise, robot)
    if progress is not None:
        told = [n for n in stage.names if stage.identified[n]]
        progress(f"verdict: {len(told)} of {len(stage.names)} parameters identified"
                 + (f", {len(twin_values)} written (the adequate fit's twin)" if twin_values else "")
                 + (f"; the model is {'adequate' if after['adequate'] else 'NOT adequate'} (residual "
                    f"{after['ratio']:.3g} x the noise floor, threshold {ADEQUACY_THRESHOLD:g})" if lifted else ""))
    if lifted:
        rms_before, rms_after = before["ratio"], after["ratio"]
    else:
        rms_before = stage.rms_before if contact_model is None else float(np.sqrt(np.mean(
            _load_residual(rec, q_start) ** 2)))   # the target's twin, before its contact model was chosen
        rms_after = float(np.sqrt(np.mean(_load_residual(rec, q) ** 2)))
    return Fit(variant="lifted" if lifted else "on the ground", names=stage.names,
               start={n: flat0[n] for n in stage.names}, fitted=stage.fitted, rel_std=stage.rel,
               identified=stage.identified, timestep_s=dt, rms_before=rms_before, rms_after=rms_after,
               rollouts=stage.rollouts + 2 + extra, wall_s=time.perf_counter() - wall, params=stage.params, held=held,
               intervals=stage.intervals, reasons=stage.reasons, noise=noise.as_dict(), adequacy_before=before,
               adequacy_after=after, starts=stage.starts, structure=chosen_report,
               written={n: stage.identified[n] if twin_values is None else n in twin_values for n in stage.names},
               contact=contact_report, contact_model=contact_model)


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


