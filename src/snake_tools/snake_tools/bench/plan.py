"""``snake bench plan``: GVG planning time for 100 and 1,000 pegs; the viscous model's real-time factor."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

import numpy as np

from snake_tools.cli import count, positive_float
from snake_tools.output import print_json, print_table

if TYPE_CHECKING:
    from snake_core.following.planning.gvg import Arena

_PEG_DIAMETER_M = 0.06  # m
_DENSITY = 10.0  # pegs per m^2 of the benchmark fields
_REQUIRED_CLEARANCE_M = 0.05  # m, half-width 0.03 + margin 0.02


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake bench plan``."""
    p = subparsers.add_parser("plan", help="GVG build time (100 / 1,000 pegs) and viscous-model speed")
    p.add_argument("--repeats", type=count, default=7, help="timed repetitions (median reported)")
    p.add_argument("--sim-seconds", type=positive_float, default=60.0, help="simulated time per viscous-model run, s")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def _field(n: int, seed: int = 0) -> tuple[np.ndarray, Arena]:
    from snake_core.following.planning.gvg import Arena
    from snake_core.following.viscous import random_pegs

    side = float(np.sqrt(n / _DENSITY))
    pegs = random_pegs(_DENSITY, (0.0, side), (0.0, side), _PEG_DIAMETER_M, np.random.default_rng(seed))
    return pegs, Arena(-0.3, side + 0.3, -0.3, side + 0.3)


def plan_times(n: int, repeats: int) -> dict[str, float]:
    """Median wall times, ms: GVG build only, and GVG + start/goal + clearance-aware A*."""
    from snake_core.following.planning.gvg import build_gvg, pegs_to_discs
    from snake_core.following.planning.planner import PlannerConfig, plan_shortest

    pegs, arena = _field(n)
    discs = pegs_to_discs(pegs, _PEG_DIAMETER_M)
    side = arena.xmax - 0.3
    start, goal = np.array([-0.2, -0.2]), np.array([side + 0.2, side + 0.2])  # m, just outside the field
    build, full = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        g = build_gvg(discs, arena, _REQUIRED_CLEARANCE_M)
        build.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        plan_shortest(discs, arena, start, goal, PlannerConfig())
        full.append(time.perf_counter() - t0)
    return {"graph_ms": 1e3 * float(np.median(build)), "plan_ms": 1e3 * float(np.median(full)),
            "nodes": g.number_of_nodes(), "edges": g.number_of_edges(), "pegs": len(pegs)}


def viscous_rtf(seconds: float, repeats: int, density: float) -> float:
    """Median simulated seconds per wall second, 9 links, serpenoid gait, pegs at ``density``."""
    from snake_core.following.viscous import equal_link_robot, peg_field_for, run_serpenoid

    robot = equal_link_robot(9)
    pegs = peg_field_for(9, seconds, density, 0, link_length=0.12, diameter=_PEG_DIAMETER_M)
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run_serpenoid(9, seconds, pegs, robot=robot)
        out.append(seconds / (time.perf_counter() - t0))
    return float(np.median(out))


def run(args: argparse.Namespace) -> int:
    """Time planning and the kinematic model; print the numbers."""
    if args.repeats < 1:
        raise ValueError(f"--repeats: need >= 1, got {args.repeats}")
    if not args.sim_seconds > 0:
        raise ValueError(f"--sim-seconds: must be positive, got {args.sim_seconds}")
    p100, p1000 = plan_times(100, args.repeats), plan_times(1000, args.repeats)
    reps = max(1, args.repeats // 2)
    result = {
        "plan_ms_100": p100["graph_ms"],
        "plan_ms_1000": p1000["graph_ms"],
        "plan_ms_goal_1000": 100.0,
        "plan_with_search_ms_100": p100["plan_ms"],
        "plan_with_search_ms_1000": p1000["plan_ms"],
        "graph_nodes_1000": p1000["nodes"],
        "graph_edges_1000": p1000["edges"],
        "viscous_realtime_factor": viscous_rtf(args.sim_seconds, reps, _DENSITY),
        "viscous_realtime_factor_no_pegs": viscous_rtf(args.sim_seconds, reps, 0.0),
        "viscous_realtime_factor_goal": 1000.0,
        "viscous_links": 9,
        "viscous_dt_s": 0.05,
    }
    if args.json:
        print_json(result)
    else:
        print_table(list(result.items()), title="snake bench plan")
    return 0
