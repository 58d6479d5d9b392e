"""``snake bench twin``: identify hidden twin physics from recordings, and how close the replay comes.

A "robot" is the twin with physics hidden from the fit (:data:`HIDDEN_SCALE`: kp and armature of
every joint type changed by 40-80 %, a kv of 0.25-0.9 N m s/rad where the default is 0, a command
latency of two control periods, a ground friction of 0.5 where the flat world says 0.8), recorded
to rosbag2 bags
(:func:`snake_tools.twin.recording.record_twin_run`) with 1 mm mocap noise:

* a lifted run of ``--duration`` s (default 60) under ``snake twin excite``'s lifted multisine;
* an on-ground run of ``--ground-duration`` s under the rolling gait driven by ``cmd_vel``.

Figures (``--json``): ``identify_s`` (wall time of the lifted fit, of the servo model without gear play,
``--structure none``: the hidden physics have none; goal <= 60 s for 60 s on an idle 2-core host),
``identify_cpu_s`` (its CPU time, every thread of the process and of its rollout workers: less sensitive to
other work than the wall time),
``identify_load_average`` (the host's 1, 5 and 15 min load averages as it started),
``identify_ground_s``, ``replay_realtime_factor`` (the on-ground replay with the fitted twin;
goal >= 20), ``recovery`` (per parameter ``true``, ``default``, ``fitted``, ``relative_error``,
``identifiable``, ``spread``: the fit's relative standard deviation, in physics steps for a
latency; latency errors in physics steps under ``error_steps``; for the ground friction its 95 %
profile-likelihood ``interval`` and whether it holds the true value, ``interval_covers_true``), and
``divergence_default_m`` / ``divergence_fitted_m`` (the largest twin-robot head distance of the
on-ground replay with the default and with the fitted physics); ``noise_floor_rad``,
``adequacy_before`` / ``adequacy_after`` (the lifted fit's joint residual over the noise floor),
``adequate`` and ``starts`` of the lifted fit. ``--robot-sensing`` measures ``joint_states`` as a
servo bus does (:data:`snake_tools.twin.recording.ROBOT_SENSING`). ``bench_robot``: a
``--bench-duration`` s teleop-like run of the bench robot (a robot that is not the twin,
:mod:`snake_tools.bench._bench_robot`) replayed with the default twin: ``realtime_factor`` (the
bench robot's simulated s per wall s, in-process), ``divergence_default_m``, ``joint_rms_default_rad``;
with ``--bench-robot`` the twin is also fitted to the bench robot
(:func:`snake_tools.bench._bench_robot.bench_robot_fit_figures`, as a researcher fits it: a lifted
run of ``--duration`` s fits the servo model, an on-ground run of ``--ground-duration`` s under
another drive than the teleop-like run's fits the ground friction with that servo model held; a
second lifted run and the teleop-like run are held out): ``adequacy_default`` /
``adequacy_fitted`` (and ``adequacy_fitted_by_type``, each joint type's),
``heldout_joint_rms_default_rad`` / ``heldout_joint_rms_fitted_rad``,
``divergence_fitted_m`` (the target the documented path leaves: what the lifted fit's ``--write``
writes, then the ground fit's from it; null without the flag), ``divergence_lifted_only_m`` (what
the lifted fit writes alone), ``divergence_best_fit_m`` (the lifted fit's own twin: where it is not
adequate, every value it reached, none written), ``divergence_bench_contact_m`` (what the lifted fit
writes, with the bench robot's own contact model and ground friction), ``divergence_weighed_m`` (the
default twin with the bench robot's links weighed alone: the documented path's target starts from
them), ``ground_friction``
(fitted, interval, identified, why, and the bench robot's true coefficient) and the fits'
``identify_s``, ``identify_ground_s``, ``rollouts``, ``not_identified``, ``written`` and ``fitted``
values. ``--bench-seed`` picks the bench robot (its drawn variation and mocap noise; default 0).

``--coverage N`` measures instead the coverage of the fit's 95 % intervals over N hidden physics
(:mod:`snake_tools.twin.coverage`: each drawn from ``--seed``, recorded lifted for ``--duration``
s, default 20 with it, and on the ground for ``--ground-duration`` s, measured as a servo bus does
with ``--robot-sensing``, fitted): per parameter ``coverage``, ``identified_fraction``,
``coverage_identified`` (goal >= 0.90) and ``median_width``, the other figures left out;
``--coverage-structure backlash`` draws a gear play per joint type too, ``--coverage-structure
load_friction`` a load-dependent friction per joint type, and fits that structure. The cases run
in ``--workers`` processes (default: all cores) or on a running Dask ``--scheduler``; the table
is the same for any number of workers.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from snake_tools.cli import count, non_negative_int, positive_float
from snake_tools.experiment.executor import default_workers, workers_arg
from snake_tools.output import print_json, print_table
from snake_tools.twin.structure import STRUCTURES

HIDDEN_SCALE = {"dorsal": (1.5, 1.5, 1.6), "twist": (0.6, 0.5, 1.4), "lateral": (1.4, 1.8, 0.6)}
"""Hidden kp, kv, armature of each joint type, as multiples of the defaults (kv: of :data:`HIDDEN_KV_REF`)."""
HIDDEN_KV_REF = 0.5
"""N m s/rad, what the hidden kv scales multiply: the default kv is 0 (the servo model's factory D gain 0);
the XM430-W350 gets 0.5 from a Position D Gain of about 2650 at 12 V."""
BENCH_ROBOT_FIT_FIELDS = ("adequacy_default", "adequacy_fitted", "adequacy_fitted_by_type",
                          "heldout_joint_rms_default_rad", "heldout_joint_rms_fitted_rad", "divergence_fitted_m",
                          "divergence_lifted_only_m", "divergence_best_fit_m", "divergence_bench_contact_m",
                          "divergence_weighed_m", "ground_friction", "contact", "divergence_spread")
"""Figures of ``bench_robot`` measured only with ``--bench-robot`` (null without)."""
_HIDDEN_LATENCY_PERIODS = 2      # control periods
_HIDDEN_GROUND_FRICTION = 0.5
_MOCAP_NOISE_M = 0.001


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake bench twin``."""
    p = subparsers.add_parser("twin", help="twin identification: fit time, recovery of hidden physics, replay")
    p.add_argument("--duration", type=positive_float, default=None,
                   help="lifted recording, s (default 60; 20 with --coverage)")
    p.add_argument("--ground-duration", type=positive_float, default=20.0,
                   help="on-ground recording, s (of the twin with hidden physics; with --bench-robot also of the "
                        "bench robot's ground-fit run)")
    p.add_argument("--bench-duration", type=positive_float, default=60.0,
                   help="teleop-like run of the bench robot replayed with the untuned twin, s")
    p.add_argument("--bench-robot", action="store_true",
                   help="also fit the twin to the bench robot (two lifted runs of --duration s, one fitted, one "
                        "held out; the ground friction fitted on a run of --ground-duration s under another drive) "
                        "and replay the teleop-like run with the fitted twin: the fit figures of bench_robot "
                        "(minutes; without it they are null)")
    p.add_argument("--bench-seed", type=int, default=0, help="seed of the bench robot (its drawn variation)")
    p.add_argument("--bench-spread", type=non_negative_int, default=0, metavar="N",
                   help="with --bench-robot: replay the teleop-like run N more times from starts within half an "
                        "encoder count, with the default and the fitted twin (divergence_spread: least, median and "
                        "largest head distance; snake twin replay --spread)")
    p.add_argument("--robot-sensing", action="store_true",
                   help="measure joint_states as a servo bus does: 4096 ticks per turn, stamps +-1.5 ms, 3 %% dropped")
    p.add_argument("--coverage", type=count, default=None, metavar="N",
                   help="instead: the coverage of the fit's 95 %% intervals over N drawn hidden physics (minutes per "
                        "case)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of --coverage's hidden physics")
    p.add_argument("--coverage-structure", choices=STRUCTURES, default="none",
                   help="servo model structure of --coverage's hidden physics, fitted as such (backlash: a gear "
                        "play per joint type drawn too; load_friction: a load-dependent friction per joint type)")
    p.add_argument("--workers", type=workers_arg, default=None,
                   help="--coverage's cases in this many worker processes of a local Dask cluster, each fit's "
                        f"rollouts on one thread (default: all cores, {default_workers()}; 1 = one case after the "
                        "other in this process, its rollouts on every core)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="--coverage's cases on a running Dask scheduler (docs/cluster.md); overrides --workers")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def hidden_params(robot: Any) -> Any:
    """The hidden physics of the benchmark's "robot" (module docstring)."""
    from snake_core.control import CONTROL_PERIOD_S
    from snake_core.twin_params import TwinParams

    d = TwinParams().flat(robot)
    values = {"contact.ground_friction": _HIDDEN_GROUND_FRICTION}
    for t, scales in HIDDEN_SCALE.items():
        for field, scale in zip(("kp", "kv", "armature"), scales, strict=True):
            values[f"servo.{t}.{field}"] = (HIDDEN_KV_REF if field == "kv" else d[f"servo.{t}.{field}"]) * scale
        values[f"servo.{t}.latency_s"] = _HIDDEN_LATENCY_PERIODS * CONTROL_PERIOD_S
    return TwinParams().with_flat(values)


def run(args: argparse.Namespace) -> int:
    """Record, identify, replay; print the figures (with ``--coverage``: the intervals' coverage)."""
    if getattr(args, "coverage", None):
        return _run_coverage(args)
    if args.workers is not None or args.scheduler is not None:
        raise ValueError("--workers and --scheduler run the cases of --coverage N: give --coverage")
    if getattr(args, "bench_spread", 0):
        from snake_tools.twin.spread import start_offsets

        if not getattr(args, "bench_robot", False):
            raise ValueError("--bench-spread spreads the replays of the fitted bench robot: give --bench-robot")
        start_offsets(args.bench_spread, "--bench-spread")   # out of range: one line before the fits' minutes
    if args.duration is None:
        args.duration = 60.0
    from snake_core.excitation import JointBounds, plan_excitation
    from snake_core.robot import load_robot
    from snake_core.twin_params import TwinParams
    from snake_hardware.sim.worlds import load_world
    from snake_tools.bench._bench_robot import bench_robot_figures, bench_robot_fit_figures
    from snake_tools.twin.ground import start_std
    from snake_tools.twin.identify import identify, read_recording
    from snake_tools.twin.recording import ROBOT_SENSING, record_twin_run
    from snake_tools.twin.replay import replay
    from snake_tools.twin.rollout_pool import cpu_s

    robot = load_robot("tsnake")
    hidden = hidden_params(robot)
    friction = load_world("flat").friction
    bounds = [JointBounds(j.lower, j.upper, j.velocity) for j in robot.joints]
    motion = plan_excitation([0.0] * len(robot.joints), bounds, variant="lifted", duration=args.duration)
    sensing = ROBOT_SENSING if getattr(args, "robot_sensing", False) else None
    with tempfile.TemporaryDirectory() as tmp:
        lifted_bag = record_twin_run(Path(tmp) / "lifted", robot, args.duration, twin_params=hidden, world=None,
                                     lifted=True, controller=lambda tw: motion.positions(np.array([tw.time]))[0],
                                     mocap_noise_m=_MOCAP_NOISE_M, sensing=sensing)
        ground_bag = record_twin_run(Path(tmp) / "ground", robot, args.ground_duration, twin_params=hidden,
                                     mocap_noise_m=_MOCAP_NOISE_M, seed=1, sensing=sensing,
                                     cmd_vel=lambda t: (0.08, 0.0) if t < args.ground_duration / 2 else (0.05, 0.15))
        load = os.getloadavg()
        wall, cpu = time.perf_counter(), cpu_s()   # its rollout workers' too
        # The hidden physics have no gear play: the fit of today's structure (a researcher's default,
        # --structure auto, also fits the play and compares: about 1.5 times the wall time).
        lifted = identify(read_recording(lifted_bag, robot), robot, TwinParams(), lifted=True, structure="none")
        identify_s, identify_cpu_s = time.perf_counter() - wall, cpu_s() - cpu
        wall = time.perf_counter()
        ground = identify(read_recording(ground_bag, robot), robot, lifted.params, world="flat",
                          world_friction=friction, start_std=start_std(lifted.intervals, lifted.names))
        identify_ground_s = time.perf_counter() - wall
        default = replay(ground_bag, robot, None)
        fitted = replay(ground_bag, robot, ground.params)
    truth = hidden.flat(robot, friction)
    start = TwinParams().flat(robot, friction)
    recovery: dict[str, dict[str, Any]] = {}
    for fit in (lifted, ground):
        for name in fit.names:
            entry: dict[str, Any] = {"true": truth[name], "default": start[name], "fitted": fit.fitted[name],
                                     "relative_error": abs(fit.fitted[name] / truth[name] - 1.0)
                                     if truth[name] else None,
                                     "identifiable": fit.identified[name], "spread": fit.rel_std[name]}
            if name.endswith("latency_s"):
                entry["error_steps"] = abs(fit.fitted[name] - truth[name]) / fit.timestep_s
            if name in fit.intervals:
                lo, hi = fit.intervals[name]
                entry["interval"] = [lo, hi if np.isfinite(hi) else None]
                entry["interval_covers_true"] = lo <= truth[name] <= hi
            recovery[name] = entry
    out = {
        "lifted_recording_s": args.duration, "ground_recording_s": args.ground_duration, "joints": len(robot.joints),
        "identify_s": identify_s, "identify_rollouts": lifted.rollouts, "identify_ground_s": identify_ground_s,
        "identify_cpu_s": identify_cpu_s, "identify_load_average": list(load),
        "replay_realtime_factor": fitted["replay_realtime_factor"],
        "residual_rms_before": lifted.rms_before, "residual_rms_after": lifted.rms_after,
        "robot_sensing": sensing is not None, "noise_floor_rad": lifted.noise.get("noise_floor_rad"),
        "adequacy_before": lifted.adequacy_before.get("ratio"), "adequacy_after": lifted.adequacy_after.get("ratio"),
        "adequate": lifted.adequacy_after.get("adequate"), "starts": lifted.starts,
        "recovery": recovery,
        "divergence_default_m": default["divergence_max_m"], "divergence_fitted_m": fitted["divergence_max_m"],
        "divergence_end_default_m": default["divergence_end_m"], "divergence_end_fitted_m": fitted["divergence_end_m"],
    }
    seed = getattr(args, "bench_seed", 0)
    if getattr(args, "bench_robot", False):   # its teleop run gives bench_robot_figures' figures too
        out["bench_robot"] = bench_robot_fit_figures(args.duration, args.bench_duration, seed=seed,
                                                     ground_duration=args.ground_duration,
                                                     spread=getattr(args, "bench_spread", 0))
    else:
        out["bench_robot"] = bench_robot_figures(args.bench_duration, seed=seed) | dict.fromkeys(BENCH_ROBOT_FIT_FIELDS)
    if args.json:
        print_json(out)
        return 0
    rows: list[tuple[str, object]] = [(k, v) for k, v in out.items() if k not in ("recovery", "bench_robot")]
    rows += [(f"bench_robot.{k}", v) for k, v in out["bench_robot"].items()]
    rows += [(f"{n}: true / fitted", f"{r['true']:.4g} / {r['fitted']:.4g}") for n, r in recovery.items()]
    print_table(rows, title="snake bench twin")
    return 0


def _run_coverage(args: argparse.Namespace) -> int:
    """``--coverage N``: the coverage table (:func:`snake_tools.twin.coverage.coverage_figures`)."""
    import sys

    from snake_tools.twin.coverage import coverage_figures
    from snake_tools.twin.recording import ROBOT_SENSING

    wall = time.perf_counter()
    load = os.getloadavg()
    out = coverage_figures(args.coverage, args.seed, args.duration or 20.0, args.ground_duration,
                           ROBOT_SENSING if args.robot_sensing else None,
                           progress=lambda line: print(line, file=sys.stderr, flush=True),
                           structure=args.coverage_structure,
                           trial_workers=default_workers() if args.workers is None else args.workers,
                           scheduler=args.scheduler)
    out |= {"wall_s": time.perf_counter() - wall, "load_average": list(load)}
    if args.json:
        print_json({"coverage": out})
        return 0
    rows: list[tuple[str, object]] = [(k, v) for k, v in out.items() if k not in ("parameters", "detail",
                                                                                    "hidden_ranges")]
    rows += [(n, f"coverage {r['coverage']:.2f}, identified {r['identified_fraction']:.2f}, coverage of the "
                 f"identified {'-' if r['coverage_identified'] is None else format(r['coverage_identified'], '.2f')}, "
                 f"median width {r['median_width']}") for n, r in out["parameters"].items()]
    print_table(rows, title="snake bench twin --coverage")
    return 0
