"""``snake bench trials``: experiment trials per minute through the Dask executor.

The trial is ``snake experiment follow``'s (wheeled snake, default settings, seeds 0, 1, ...).
Measured, each over the same ``--trials`` trials:

* ``direct``: ``run_task`` called in a loop in this process (no executor);
* ``local_1`` / ``local_2``: a local Dask cluster of 1 / 2 worker processes (started before
  the clock runs, so process start-up is not a trial's cost);
  every variant first runs one untimed warm-up trial in every worker process (``Client.run``:
  imports and model compilation happen once per process, not per trial);
* ``scheduler_2``: a separately started ``dask scheduler`` with two ``dask worker`` processes
  on loopback, reached by address like ``--scheduler``.

``overhead_per_trial_s`` is ``(T_local_1 - T_direct) / trials`` and ``overhead_fraction`` that
over the direct time per trial (goal <= 5 %); ``scaling_efficiency_2`` is
``rate_local_2 / (2 rate_local_1)`` (goal >= 0.9 on an idle machine).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from snake_tools.cli import count
from snake_tools.output import print_json, print_table

_GOAL_OVERHEAD = 0.05  # executor overhead per trial over a direct call, fraction
_GOAL_EFFICIENCY = 0.9  # trials-per-minute at 2 workers over twice 1 worker
_CONNECT_S = 120.0  # bound for a separately started cluster to come up, s


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake bench trials``."""
    p = subparsers.add_parser("trials", help="experiment trials per minute: direct, 1 and 2 Dask workers, scheduler")
    p.add_argument("--trials", type=count, default=16, help="follow trials per measurement")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


@contextmanager
def separate_cluster(workers: int, workdir: Path) -> Iterator[str]:
    """A ``dask scheduler`` and ``workers`` ``dask worker`` processes on loopback; yields its address."""
    from distributed import Client

    exe = Path(sys.executable).with_name("dask")
    dask = str(exe) if exe.exists() else (shutil.which("dask") or "dask")
    sched_file = workdir / "scheduler.json"
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(sched_file)],
                              cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        with Client(scheduler_file=str(sched_file), timeout=_CONNECT_S) as client:
            address = str(client.scheduler.address)
            procs += [subprocess.Popen([dask, "worker", address, "--host", "127.0.0.1", "--nthreads", "1",
                                        "--no-dashboard"], cwd=workdir,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(workers)]
            client.wait_for_workers(workers, timeout=_CONNECT_S)
        yield address
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=_CONNECT_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _rate(run: Callable[[], Any], trials: int) -> float:
    start = time.perf_counter()
    run()
    return 60.0 * trials / (time.perf_counter() - start)


def run(args: argparse.Namespace) -> int:
    """Measure and print trials per minute."""
    from snake_tools.experiment import follow
    from snake_tools.experiment.executor import local_cluster, map_trials
    from snake_tools.experiment.task import run_task

    settings = follow.load_settings()
    tasks = [(follow.FollowTask("wheeled_snake", seed, "shortest", settings),) for seed in range(args.trials)]

    def on(address: str) -> float:
        from distributed import Client

        # warm-up: one trial on every worker (imports, model compilation), then the timed run
        with Client(address) as client:
            client.run(run_task, *tasks[0])
        return _rate(lambda: map_trials(run_task, tasks, 1, progress=False, scheduler=address), args.trials)

    run_task(*tasks[0])  # the same warm-up for the direct calls
    rates: dict[str, float] = {"direct": _rate(lambda: [run_task(*t) for t in tasks], args.trials)}
    for n in (1, 2):
        with local_cluster(n) as cluster:
            rates[f"local_{n}"] = on(str(cluster.scheduler_address))
    with tempfile.TemporaryDirectory() as tmp, separate_cluster(2, Path(tmp)) as address:
        rates["scheduler_2"] = on(address)
    direct_s, local_s = 60.0 / rates["direct"], 60.0 / rates["local_1"]
    overhead = local_s - direct_s
    efficiency = rates["local_2"] / (2.0 * rates["local_1"])
    out: dict[str, Any] = {
        "trials": args.trials,
        **{f"trials_per_minute_{k}": v for k, v in rates.items()},
        "overhead_per_trial_s": overhead,
        "overhead_fraction": overhead / direct_s,
        "overhead_goal": _GOAL_OVERHEAD,
        "scaling_efficiency_2": efficiency,
        "scaling_efficiency_goal": _GOAL_EFFICIENCY,
    }
    if args.json:
        print_json(out)
    else:
        print_table(list(out.items()), title="snake bench trials")
    return 0
