"""``snake bench slippage``: sweep times of 004's case studies, exact extrema per shape.

``sweep_s`` is the wall time of the whole 784-configuration sweep of case study 1 for one
scenario (``--scenario``, default 2: the friction-bounded wheels, the slowest) in this
process, best of ``--repeats``; the goal is <= 2 s. The same sweep with ``--workers``
processes and the other scenarios are reported beside it. ``case_study_2_s`` is the wall
time of case study 2 (21952 configurations, all three scenarios, ``--workers`` processes,
one run; goal <= 5 s) and ``exact_max_us`` the time per shape of the closed-form extrema
(:func:`~snake_core.slippage.extrema.exact_extrema`, batched over case study 2's shapes,
scenario 3).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from snake_core.slippage import SCENARIOS, build_system
from snake_core.slippage.extrema import exact_extrema
from snake_core.slippage.studies import joint_grid, load_case_study, params_from_config, sweep
from snake_tools.cli import count
from snake_tools.output import print_json, print_table

_GOAL_S = 2.0  # s, goal for one scenario's 784-configuration sweep
_GOAL_CASE_2_S = 5.0  # s, goal for case study 2 (three scenarios)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake bench slippage``."""
    p = subparsers.add_parser("slippage", help="case study 1 sweep (784 configurations) time per scenario (004)")
    p.add_argument("--scenario", type=int, choices=SCENARIOS, default=2, help="scenario timed for sweep_s")
    p.add_argument("--repeats", type=count, default=3, help="repetitions (best is reported)")
    p.add_argument("--workers", type=count, default=2, help="processes for the parallel timing and case study 2")
    p.add_argument("--skip-case-2", action="store_true", help="leave out the case study 2 timing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def _time(fn: object, repeats: int) -> float:
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - t0)
    return float(best)


def run(args: argparse.Namespace) -> int:
    """Time the sweeps and print the numbers."""
    if args.repeats < 1:
        raise ValueError(f"--repeats: must be >= 1, got {args.repeats}")
    cfg = load_case_study("case_study_1")
    params = params_from_config(cfg)
    q = joint_grid(params.n_a, cfg["joint_min_deg"], cfg["joint_max_deg"], cfg["joint_step_deg"])
    n_dir = int(cfg["n_directions"])
    radii = tuple(cfg["radii"])
    n_inputs = n_dir * len(radii)
    per_scenario = {}
    for sc in SCENARIOS:
        per_scenario[str(sc)] = _time(lambda sc=sc: sweep(params, q, sc, n_directions=n_dir, radii=radii), args.repeats)
    sweep_s = per_scenario[str(args.scenario)]
    parallel_s = _time(lambda: sweep(params, q, args.scenario, n_directions=n_dir, radii=radii,
                                     workers=args.workers), args.repeats)
    cfg2 = load_case_study("case_study_2")
    params2 = params_from_config(cfg2)
    q2 = joint_grid(params2.n_a, cfg2["joint_min_deg"], cfg2["joint_max_deg"], cfg2["joint_step_deg"])
    system = build_system(params2, q2, 3)
    exact_s = _time(lambda: exact_extrema(system), args.repeats)
    case_2: dict[str, float] = {}
    if not args.skip_case_2:
        for sc in SCENARIOS:
            case_2[str(sc)] = _time(lambda sc=sc: sweep(params2, q2, sc, n_directions=int(cfg2["n_directions"]),
                                                         radii=tuple(cfg2["radii"]), workers=args.workers), 1)
    out = {
        "sweep_s": sweep_s,
        "scenario": args.scenario,
        "n_configurations": int(q.shape[0]),
        "inputs_per_configuration": n_inputs,
        "configurations_per_s": q.shape[0] / sweep_s,
        "evaluations_per_s": q.shape[0] * n_inputs / sweep_s,
        "sweep_s_per_scenario": per_scenario,
        "parallel_sweep_s": parallel_s,
        "workers": args.workers,
        "goal_s": _GOAL_S,
        "meets_goal": sweep_s <= _GOAL_S,
        "exact_max_us": exact_s / q2.shape[0] * 1e6,
        "case_study_2_configurations": int(q2.shape[0]),
    }
    if case_2:
        out.update({"case_study_2_s": sum(case_2.values()), "case_study_2_s_per_scenario": case_2,
                    "case_study_2_goal_s": _GOAL_CASE_2_S,
                    "case_study_2_meets_goal": sum(case_2.values()) <= _GOAL_CASE_2_S})
    if args.json:
        print_json(out)
    else:
        print_table([(k, v) for k, v in out.items() if not isinstance(v, dict)], title="slippage case study 1 sweep")
        print_table(list(per_scenario.items()), title="sweep_s per scenario (single process)")
        if case_2:
            print_table(list(case_2.items()), title=f"case study 2 s per scenario ({args.workers} workers)")
    return 0
