"""``snake bench singularity``: time per singularity evaluation for 4, 8 and 16 links.

Times the monitor's fast path (:class:`snake_core.singularity.FastEvaluator`: margin
of J_s and the axes' meeting point) on random non-uniform links and random angles,
with and without side-slipping links, and the reference path (the paper's matrices
with numpy SVD) for comparison. Goal: <= 50 us for 16 links (1 kHz joint states).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from snake_core.singularity import FastEvaluator, evaluate, make_params
from snake_tools.cli import count, non_negative_int
from snake_tools.output import print_json, print_table

_SIZES = (4, 8, 16)
_GOAL_US = 50.0  # us per evaluation for 16 links


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake bench singularity``."""
    p = subparsers.add_parser("singularity", help="time per singularity evaluation (4, 8, 16 links)")
    p.add_argument("--evals", type=count, default=20000, help="evaluations timed per size")
    p.add_argument("--seed", type=non_negative_int, default=0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def _time_fast(n: int, evals: int, rng: np.random.Generator, slipping: tuple[int, ...]) -> float:
    params = make_params(n, rng.uniform(0.05, 0.1, n), rng.uniform(0.04, 0.1, n))
    ev = FastEvaluator(params, slipping)
    angles = [list(a) for a in rng.uniform(-1.4, 1.4, (256, n - 1))]
    for a in angles:  # warm-up
        ev.evaluate(a)
    t0 = time.perf_counter()
    for k in range(evals):
        ev.evaluate(angles[k & 255])
    return (time.perf_counter() - t0) / evals * 1e6


def _time_reference(n: int, evals: int, rng: np.random.Generator) -> float:
    params = make_params(n, rng.uniform(0.05, 0.1, n), rng.uniform(0.04, 0.1, n))
    angles = rng.uniform(-1.4, 1.4, (evals, n - 1))
    t0 = time.perf_counter()
    for a in angles:
        evaluate(params, a)
    return (time.perf_counter() - t0) / evals * 1e6


def run(args: argparse.Namespace) -> int:
    """Print the per-evaluation times, us."""
    if args.evals < 1:
        raise ValueError(f"--evals: must be >= 1, got {args.evals}")
    rng = np.random.default_rng(args.seed)
    data: dict[str, object] = {}
    for n in _SIZES:
        data[f"eval_us_{n}"] = _time_fast(n, args.evals, rng, ())
    for n in _SIZES:
        data[f"eval_us_{n}_slipping"] = _time_fast(n, args.evals, rng, tuple(range(2, n + 1, 3)))
    ref_evals = max(1, args.evals // 20)
    for n in _SIZES:
        data[f"reference_eval_us_{n}"] = _time_reference(n, ref_evals, rng)
    data["goal_us_16"] = _GOAL_US
    data["meets_goal"] = bool(data["eval_us_16"] <= _GOAL_US)  # type: ignore[operator]
    data["evals"] = args.evals
    if args.json:
        print_json(data)
    else:
        print_table([(k, v) for k, v in data.items()], title="singularity evaluation, us per call")
    return 0
