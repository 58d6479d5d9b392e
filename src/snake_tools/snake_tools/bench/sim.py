"""``snake bench sim``: real-time factor of the headless twin with the rolling gait in the loop.

For the T-Snake on flat ground and on the uneven terrain, the rolling-vector gait
(``snake_core.gait.make_gait('rolling', robot)``) is stepped once per 20 ms control period
with the native command that its ``cmd_vel`` mapping gives for a pure translation
(``--speed`` m/s). The loop is :meth:`SimTwin.advance`'s (controller, ``set_targets``,
``substeps`` physics steps in one call) written out with a clock around each part, so the
wall time splits into ``gait``, ``physics`` and ``bookkeeping`` (everything else: target
checks, the loop itself) shares, and a regression shows where it is. The real-time factor
is simulated seconds per wall-clock second of the whole loop, the median of ``--repeats``
runs of ``--duration`` s, each after a warm-up. The goal is >= 100x on flat ground and
>= 40x on the uneven terrain. ``physics_realtime_factor_<world>`` is simulated seconds per
wall-clock second of the physics steps alone (``SimTwin.step``: MuJoCo's steps, the delayed
targets applied between them): the loop's real-time factor if the gait and the
bookkeeping took no time, the ceiling that no change outside the physics can pass.

``trials_per_minute`` is the throughput of ``snake experiment follow`` (wheeled snake,
default settings, ``--follow-trials`` trials with seeds 0, 1, ...) run through the
experiments' executor with 1 process and with all cores, each warmed up before the clock
runs; the speed-up is their ratio. Its 1-process side calls the trials directly and its
many-process side goes through a local Dask cluster, so the ratio carries the executor's own
overhead on one side only; ``snake bench trials`` measures the executor in detail, and its
``scaling_efficiency_2`` compares 1 and 2 cluster workers, like with like.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from snake_core.control import CONTROL_PERIOD_S
from snake_core.gait import make_gait
from snake_core.robot import load_robot, load_twin_params
from snake_tools.cli import count, finite_float, non_negative_int, positive_float
from snake_tools.output import print_json, print_table

if TYPE_CHECKING:
    from snake_core.gait.base import Gait
    from snake_hardware.sim.twin import SimTwin

_GOAL_RTF = {"flat": 100.0, "uneven": 40.0}  # goals: real-time factor per world
_CONTROL_DT_S = CONTROL_PERIOD_S  # s
_WARMUP_S = 1.0            # s simulated before timing (the gait starts and the body settles)
_WORLDS = ("flat", "uneven")


class BenchArgumentError(ValueError):
    """A bad ``snake bench sim`` flag; the message names it."""


@dataclass
class LoopTiming:
    """Timing of the twin + gait loop in one world.

    Attributes:
        rtf: Median real-time factor (simulated s per wall s).
        rtf_runs: Real-time factor of each timed run.
        gait_share: Fraction of the wall time spent in the gait's steps.
        physics_share: Fraction spent in MuJoCo's steps.
        bookkeeping_share: The rest: target checks and the loop itself.
        physics_rtf: Simulated s per wall s of the physics steps alone (the loop's ceiling).
        com_distance_m: Horizontal centre-of-mass displacement over the timed runs, m.
        command: The gait's native command (rad/s).
    """

    rtf: float
    rtf_runs: list[float]
    gait_share: float
    physics_share: float
    bookkeeping_share: float
    physics_rtf: float
    com_distance_m: float
    command: list[float]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake bench sim``."""
    p = subparsers.add_parser("sim", help="real-time factor of the MuJoCo twin with the rolling gait in the loop")
    p.add_argument("--duration", type=positive_float, default=20.0, help="simulated s per timed run")
    p.add_argument("--repeats", type=count, default=3, help="timed runs per world (median reported)")
    p.add_argument("--speed", type=finite_float, default=0.1, help="commanded translation, m/s (cmd_vel linear.x)")
    p.add_argument("--follow-trials", type=non_negative_int, default=8,
                   help="trials of experiment follow timed per worker count (0: skip)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def timed_advance(twin: SimTwin, duration: float, gait: Gait, command: tuple[float, ...],
                  totals: dict[str, float]) -> None:
    """:meth:`SimTwin.advance` with ``gait`` as its controller, the gait and physics timed.

    The same sequence as ``advance`` (one gait step and ``set_targets`` per control period,
    then up to ``substeps`` physics steps in one call), so the simulated result is the same.

    Args:
        twin: The twin.
        duration: Simulated seconds; rounded to whole physics steps.
        gait: Stepped once per control period of ``twin.substeps`` physics steps.
        command: The gait's native command.
        totals: ``gait`` and ``physics`` wall seconds, accumulated.
    """
    clock = time.perf_counter
    period = twin.substeps * twin.timestep
    remaining = round(duration / twin.timestep)
    gait_s = physics_s = 0.0
    while remaining > 0:
        t0 = clock()
        q = gait.step(period, command)
        t1 = clock()
        twin.set_targets(q)
        n = min(twin.substeps, remaining)
        t2 = clock()
        twin.step(n)
        physics_s += clock() - t2
        gait_s += t1 - t0
        remaining -= n
    totals["gait"] = totals.get("gait", 0.0) + gait_s
    totals["physics"] = totals.get("physics", 0.0) + physics_s


def measure(world: str, duration: float, repeats: int, speed: float) -> LoopTiming:
    """Time the twin + gait loop in one world.

    Returns:
        The timing; the centre-of-mass displacement shows that the loop moved the robot.
    """
    from snake_hardware.sim.twin import SimTwin

    robot = load_robot("tsnake")
    twin = SimTwin(robot, world, control_dt=_CONTROL_DT_S, twin_params=load_twin_params(robot)[0])
    gait = make_gait("rolling", robot)
    command = gait.mapping.to_command(speed, 0.0)
    timed_advance(twin, _WARMUP_S, gait, command, {})
    com0 = twin.centre_of_mass()
    rtfs, wall_total, totals = [], 0.0, {"gait": 0.0, "physics": 0.0}
    for _ in range(repeats):
        start = time.perf_counter()
        timed_advance(twin, duration, gait, command, totals)
        wall = time.perf_counter() - start
        wall_total += wall
        rtfs.append(duration / max(wall, 1e-9))
    com1 = twin.centre_of_mass()
    wall_total = max(wall_total, 1e-9)
    return LoopTiming(
        rtf=float(np.median(rtfs)),
        rtf_runs=rtfs,
        gait_share=totals["gait"] / wall_total,
        physics_share=totals["physics"] / wall_total,
        bookkeeping_share=max(0.0, 1.0 - (totals["gait"] + totals["physics"]) / wall_total),
        physics_rtf=duration * repeats / max(totals["physics"], 1e-9),
        com_distance_m=float(np.linalg.norm((com1 - com0)[:2])),
        command=[float(c) for c in command],
    )


def follow_throughput(trials: int, workers: int) -> float:
    """``snake experiment follow`` trials per wall-clock minute with ``workers`` processes.

    The workers (1: this process) are started and each has run one untimed trial before the
    clock runs, so neither the cluster's start nor a process's first imports count as trials.
    """
    from snake_tools.bench.trials import warm
    from snake_tools.experiment import follow
    from snake_tools.experiment.executor import TrialExecutor
    from snake_tools.experiment.task import run_task

    settings = follow.load_settings()
    tasks = [(follow.FollowTask("wheeled_snake", seed, "shortest", settings),) for seed in range(trials)]
    with TrialExecutor(workers) as executor:
        if executor.local:
            run_task(*tasks[0])
        else:
            warm(executor, tasks[0])
        start = time.perf_counter()
        executor.map(run_task, tasks, progress=False)
        return 60.0 * trials / (time.perf_counter() - start)


def run(args: argparse.Namespace) -> int:
    """Measure both worlds and print the numbers beside the goal."""
    if not args.duration > 0:
        raise BenchArgumentError(f"--duration: must be > 0 s, got {args.duration}")
    if args.repeats < 1:
        raise BenchArgumentError(f"--repeats: must be >= 1, got {args.repeats}")
    if args.follow_trials < 0:
        raise BenchArgumentError(f"--follow-trials: must be >= 0, got {args.follow_trials}")
    results = {w: measure(w, args.duration, args.repeats, args.speed) for w in _WORLDS}
    out: dict[str, object] = {
        "robot": "tsnake",
        "gait": "rolling",
        "speed_command_mps": args.speed,
        "native_command": dict(zip(("omega_h", "omega_t", "omega_c"), results["flat"].command, strict=False)),
        "control_dt_s": _CONTROL_DT_S,
        "duration_s": args.duration,
        "repeats": args.repeats,
    }
    for w, r in results.items():
        out[f"realtime_factor_{w}"] = r.rtf
    for w, r in results.items():
        out[f"realtime_factor_goal_{w}"] = _GOAL_RTF[w]
        out[f"meets_goal_{w}"] = r.rtf >= _GOAL_RTF[w]
        out[f"realtime_factor_runs_{w}"] = r.rtf_runs
        out[f"gait_time_share_{w}"] = r.gait_share
        out[f"physics_time_share_{w}"] = r.physics_share
        out[f"bookkeeping_time_share_{w}"] = r.bookkeeping_share
        out[f"physics_realtime_factor_{w}"] = r.physics_rtf
        out[f"com_distance_m_{w}"] = r.com_distance_m
    if args.follow_trials:
        from snake_tools.experiment.executor import default_workers

        cores = default_workers()
        one = follow_throughput(args.follow_trials, 1)
        many = follow_throughput(args.follow_trials, cores)
        out.update({"follow_trials": args.follow_trials, "trials_per_minute_1_worker": one,
                    f"trials_per_minute_{cores}_workers": many, "trials_per_minute_speedup": many / one})
    if args.json:
        print_json(out)
    else:
        rows = [(k, v) for k, v in out.items() if not isinstance(v, (list, dict))]
        print_table(rows, title="snake bench sim")
    return 0
