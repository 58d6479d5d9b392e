"""Independent experiment trials on every core: one trial function, any number of worker processes.

A trial is a module-level function of plain, picklable arguments that returns a
picklable result and draws all its randomness from its own arguments (a per-trial seed
or ``numpy.random.SeedSequence``); for the experiments it is
:func:`snake_tools.experiment.task.run_task` of a task object holding plain settings.
Then the results do not depend on which process runs which trial nor in which order,
so ``--workers 1`` and ``--workers N`` give the same numbers (a test checks it for
``snake experiment follow``).

:func:`map_trials` runs ``fn(*args)`` for every argument tuple in worker processes
(``fork`` where the platform has it: a worker starts in milliseconds instead of
re-importing numpy, scipy and MuJoCo; ``spawn`` elsewhere) and returns the results in
task order, with a tqdm progress bar on stderr. Trials take everything from their
arguments, so what a forked worker inherits from the parent does not change them.

The same trial function can go to a cluster engine unchanged; for example with Ray,
``ray.get([ray.remote(fn).remote(*a) for a in tasks])``, or with Dask,
``client.gather(client.map(fn, *zip(*tasks)))``: both keep the task order, and the
per-trial seeds keep the results identical to a local run.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import numpy as np


def default_workers() -> int:
    """All cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def workers_arg(text: str) -> int:
    """The ``type=`` of ``--workers``: an integer >= 1 (else argparse.ArgumentTypeError)."""
    try:
        value = int(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}") from err
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


def add_workers_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--workers`` (default: all cores) to an experiment's parser."""
    parser.add_argument("--workers", type=workers_arg, default=default_workers(),
                        help=f"worker processes for the independent trials (default: all cores, {default_workers()})")


def trial_seeds(seed: int, count: int) -> list[np.random.SeedSequence]:
    """``count`` independent per-trial seed sequences spawned from ``seed`` (numpy SeedSequence.spawn)."""
    return np.random.SeedSequence(seed).spawn(count)


def map_trials(fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], workers: int, desc: str = "trials",
               progress: bool = True) -> list[Any]:
    """``[fn(*t) for t in tasks]``, in ``workers`` processes, in task order.

    Args:
        fn: A module-level (picklable) trial function.
        tasks: Argument tuples, one per trial.
        workers: Processes; 1 runs in this process.
        desc: Progress-bar label.
        progress: Show a tqdm bar on stderr.

    Returns:
        The results, in the order of ``tasks``.
    """
    from tqdm import tqdm

    workers = max(1, min(int(workers), len(tasks)))
    bar = tqdm(total=len(tasks), desc=desc, unit="trial", file=sys.stderr, disable=not progress, leave=False)
    results: list[Any] = [None] * len(tasks)
    try:
        if workers == 1:
            for i, t in enumerate(tasks):
                results[i] = fn(*t)
                bar.update(1)
            return results
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = {pool.submit(fn, *t): i for i, t in enumerate(tasks)}
            for fut in as_completed(futures):
                results[futures[fut]] = fut.result()
                bar.update(1)
        return results
    finally:
        bar.close()
