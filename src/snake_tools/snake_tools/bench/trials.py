"""``snake bench trials``: experiment trials per minute through the Dask executor.

The trial is ``snake experiment follow``'s (wheeled snake, default settings, seeds 0, 1, ...).
Measured, each over the same ``--trials`` trials:

* ``direct``: ``run_task`` called in a loop in this process (no executor);
* ``local_1`` / ``local_2``: a local Dask cluster of 1 / 2 worker processes
  (:class:`~snake_tools.experiment.executor.TrialExecutor`, started before the clock runs, so
  process start-up is not a trial's cost);
* ``scheduler_2``: a separately started ``dask scheduler`` with two ``dask worker`` processes
  on loopback, reached by address like ``--scheduler``.

Before the clock runs, every worker runs one untimed trial as a task (the thread that runs
the timed trials: imports, caches and model compilation happen once per process) and this
process does the same for the direct calls. Each variant is timed ``--repeats`` times; the
direct and the 1-worker runs alternate (direct, cluster, direct, cluster, ...) so that a
change of the machine's load falls on both alike. Reported per variant: the median rate
and every run's.

``overhead_fraction`` is the median over the alternating pairs of
``(T_local_1 - T_direct) / T_direct`` (goal <= 5 %), ``overhead_per_trial_s`` that times the
direct time per trial. On a shared machine the pairs' spread is mostly load; two parts of
the overhead are measured apart and depend less on it: ``dispatch_s_per_trial``, the wall
time of a 1-worker run not spent inside the trials (sending, scheduling, results back;
each trial timed in the worker), and ``worker_cpu_ratio``, the CPU time of a trial's thread
in the worker over that in this process (a slower environment in the worker would show
here). ``scaling_efficiency_2`` is ``rate_local_2 / (2 rate_local_1)`` (goal >= 0.9 on an
idle machine). ``load_average`` is the 1-minute load average before each variant.

What two cores can give at all is measured without Dask: ``plain_1`` runs the trials in one
plain process, ``plain_2`` splits them over two plain processes started together (each warmed
by one trial, then released at once; the slowest one's time counts), the two alternating.
``scaling_ceiling_2`` is ``rate_plain_2 / (2 rate_plain_1)``: below 1 where the two cores are
not independent (hyperthreads of one physical core, a shared cache, a host's other guests),
and ``scaling_efficiency_vs_ceiling`` is ``scaling_efficiency_2 / scaling_ceiling_2``, the
part of the shortfall that is the executor's.

``--workers 1,2,4,...`` measures the scaling instead, from a cold cluster (no untimed trial):
for each worker count N, a local cluster of N workers (forked from the fork server that
imported the trial code once, :func:`snake_tools.experiment.executor.start_worker_server`,
started before the trials are built) runs the ``--trials`` trials, and ``plain`` N processes
run them without Dask. Per N:

* ``trials_per_min``: trials over the time from the first trial's start to the last result;
* ``efficiency``: ``trials_per_min`` over N times that of 1 worker; ``plain_trials_per_min``
  and ``ceiling``: the same for the plain processes (what the machine's N cores give at all);
  ``efficiency_vs_ceiling``: ``efficiency / ceiling``, the executor's part of the shortfall;
* ``start_s``: from the cluster's creation to the first trial running in a worker (for the
  first N it includes what is left of the fork server's imports);
* ``overhead_per_trial_s``: worker time not spent inside a trial (N times the window minus
  the trials' own wall time), per trial: dispatch, results, idle workers at the end.

``command_to_first_trial_s`` is from this process's start (``/proc/self/stat``) to the first
trial of the first worker count. This mode imports no ROS package.
"""

from __future__ import annotations

import argparse
import multiprocessing
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
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
    p.add_argument("--trials", type=count, default=16, help="follow trials per timed run")
    p.add_argument("--repeats", type=count, default=3, help="timed runs per variant (median reported)")
    p.add_argument("--workers", type=worker_counts, default=None, metavar="N,N,...",
                   help="measure the scaling over these worker counts instead (e.g. 1,2,4,8,16)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def worker_counts(text: str) -> list[int]:
    """The ``type=`` of ``--workers``: distinct integers >= 1, comma-separated, 1 first."""
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"need integers >= 1 separated by commas, got {text!r}") from None
    if not counts or min(counts) < 1 or len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError(f"need distinct integers >= 1 separated by commas, got {text!r}")
    return sorted(counts) if 1 in counts else [1, *sorted(counts)]  # efficiency is against 1 worker


def process_start_epoch() -> float | None:
    """Wall-clock time this process started, s since the epoch (Linux ``/proc``; None elsewhere).

    The kernel gives the start in clock ticks since boot (``/proc/self/stat``); it is put on the
    wall clock through the time since boot now (``CLOCK_BOOTTIME``, the clock those ticks count),
    not through ``btime`` of ``/proc/stat``, which is the boot time truncated to a whole second
    (up to a second early).
    """
    import os

    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # starttime (field 22): clock ticks after boot
        since_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
        now = time.time()
        return now - (since_boot - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _stamped(fn: Callable[..., Any], *args: Any) -> tuple[float, float]:
    """Run ``fn(*args)``; its start (s since the epoch) and wall time, s (module level: sent to the workers)."""
    start = time.time()
    wall = time.perf_counter()
    fn(*args)
    return start, time.perf_counter() - wall


def scaling(tasks: list[tuple[Any, ...]], counts: list[int]) -> dict[str, Any]:
    """Per worker count: rate, efficiency against 1 worker and against plain processes, start, overhead."""
    import os

    from snake_tools.experiment.executor import TrialExecutor, local_cluster

    trials = len(tasks)
    per: dict[str, dict[str, Any]] = {}
    first_trial: float | None = None
    for n in counts:
        load = os.getloadavg()[0]
        created = time.time()
        with local_cluster(n) as cluster, TrialExecutor(n, str(cluster.scheduler_address)) as executor:
            stamps = executor.map(_stamped, tasks, progress=False)
            done = time.time()
        starts = [s for s, _ in stamps]
        first_trial = min(starts) if first_trial is None else first_trial
        window = max(done - min(starts), 1e-9)
        plain = plain_processes(tasks, n)
        per[str(n)] = {"trials_per_min": 60.0 * trials / window, "plain_trials_per_min": 60.0 * trials / plain,
                       "start_s": min(starts) - created,
                       "overhead_per_trial_s": (n * window - sum(w for _, w in stamps)) / trials,
                       "trial_s_median": statistics.median(w for _, w in stamps), "load_average": load}
    one, plain_one = per["1"]["trials_per_min"], per["1"]["plain_trials_per_min"]
    for key, fig in per.items():
        n = int(key)
        fig["efficiency"] = fig["trials_per_min"] / (n * one)
        fig["ceiling"] = fig["plain_trials_per_min"] / (n * plain_one)
        fig["efficiency_vs_ceiling"] = fig["efficiency"] / fig["ceiling"]
    started = process_start_epoch()
    return {"trials": trials, "workers": per, "cpu_count": os.cpu_count(),
            "command_to_first_trial_s": first_trial - started if started is not None and first_trial else None}


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


def _timed(fn: Callable[..., Any], *args: Any) -> tuple[float, float]:
    """Run ``fn(*args)``; its wall and thread CPU time, s (module level: sent to the workers)."""
    wall, cpu = time.perf_counter(), time.thread_time()
    fn(*args)
    return time.perf_counter() - wall, time.thread_time() - cpu


@dataclass
class Runs:
    """One variant's timed runs.

    Attributes:
        wall_s: Wall time of each run, s.
        inside_s: Sum over each run's trials of the wall time inside the trial, s.
        cpu_s: Sum over each run's trials of the trial thread's CPU time, s.
    """

    wall_s: list[float] = field(default_factory=list)
    inside_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)

    def add(self, wall: float, timings: list[tuple[float, float]]) -> None:
        """Record a run of wall ``wall`` s and its trials' ``(wall, cpu)`` times."""
        self.wall_s.append(wall)
        self.inside_s.append(sum(t[0] for t in timings))
        self.cpu_s.append(sum(t[1] for t in timings))

    def rates(self, trials: int) -> list[float]:
        """Trials per minute of each run."""
        return [60.0 * trials / max(w, 1e-9) for w in self.wall_s]


def _plain_process(share: list[tuple[Any, ...]], warm_task: tuple[Any, ...], barrier: Any, results: Any) -> None:
    """In a plain process: one untimed trial, wait for the others, time ``share`` (module level: spawned)."""
    _timed(*warm_task)
    barrier.wait()
    start = time.perf_counter()
    for task in share:
        _timed(*task)
    results.put(time.perf_counter() - start)


def plain_processes(tasks: list[tuple[Any, ...]], n: int) -> float:
    """Run ``tasks`` split over ``n`` plain processes started together; the slowest one's wall time, s.

    Process start-up and the warm-up trial are not timed (each process times its own share
    after all are warm).

    Raises:
        RuntimeError: A process ended without reporting its time.
    """
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_plain_process, args=(tasks[i::n], tasks[0], barrier, results)) for i in range(n)]
    for p in procs:
        p.start()
    walls: list[float] = []
    try:
        while len(walls) < n:
            try:
                walls.append(results.get(timeout=1.0))
            except queue.Empty:
                if any(p.exitcode not in (None, 0) for p in procs):
                    raise RuntimeError("a plain trial process failed") from None
    finally:
        for p in procs:
            p.join(timeout=_CONNECT_S)
            if p.is_alive():
                p.kill()
                p.join()
    return max(walls)


def _run_once(run: Callable[[], list[tuple[float, float]]], into: Runs) -> None:
    start = time.perf_counter()
    timings = run()
    into.add(time.perf_counter() - start, timings)


def warm(executor: Any, task: tuple[Any, ...]) -> None:
    """One untimed trial as a task on every worker of ``executor``."""
    from snake_tools.experiment.task import run_task

    for address in executor.client.scheduler_info()["workers"]:
        executor.client.submit(run_task, *task, workers=[address], allow_other_workers=False,
                               pure=False).result()


def run(args: argparse.Namespace) -> int:
    """Measure and print trials per minute."""
    import os

    from snake_tools.experiment.executor import TrialExecutor, local_cluster, start_worker_server

    if args.workers is not None:
        start_worker_server()  # the workers' imports run in the fork server while the trials are built
    from snake_tools.experiment import follow
    from snake_tools.experiment.task import run_task

    settings = follow.load_settings()
    tasks = [(run_task, follow.FollowTask("wheeled_snake", seed, "shortest", settings)) for seed in range(args.trials)]
    if args.workers is not None:
        result = scaling(tasks, args.workers)
        if args.json:
            print_json(result)
        else:
            print_table([(f"{n} workers {k}", v) for n, fig in result["workers"].items() for k, v in fig.items()]
                        + [("command to first trial, s", result["command_to_first_trial_s"])],
                        title=f"snake bench trials: scaling over {args.trials} trials")
        return 0
    runs = {k: Runs() for k in ("direct", "local_1", "local_2", "scheduler_2", "plain_1", "plain_2")}
    load: dict[str, float] = {}

    def direct() -> list[tuple[float, float]]:
        return [_timed(*t) for t in tasks]

    def on(executor: Any, name: str, interleave: bool) -> None:
        warm(executor, tasks[0][1:])
        load[name] = os.getloadavg()[0]
        for _ in range(args.repeats):
            if interleave:
                _run_once(direct, runs["direct"])
            _run_once(lambda: executor.map(_timed, tasks, progress=False), runs[name])

    for _ in range(args.repeats):  # plain processes: what two cores give without any executor
        for n in (1, 2):
            runs[f"plain_{n}"].add(plain_processes(tasks, n), [])
    run_task(*tasks[0][1:])  # the direct calls' warm-up
    for n in (1, 2):
        with local_cluster(n) as cluster, TrialExecutor(n, str(cluster.scheduler_address)) as executor:
            on(executor, f"local_{n}", interleave=n == 1)
    with tempfile.TemporaryDirectory() as tmp, separate_cluster(2, Path(tmp)) as address, \
            TrialExecutor(2, address) as executor:
        on(executor, "scheduler_2", interleave=False)
    out = summary(runs, args.trials)
    out["load_average"] = load
    if args.json:
        print_json(out)
    else:
        print_table([(k, v) for k, v in out.items() if not isinstance(v, (list, dict))], title="snake bench trials")
    return 0


def summary(runs: dict[str, Runs], trials: int) -> dict[str, Any]:
    """The bench's numbers from every variant's runs (module docstring)."""
    med = lambda xs: float(statistics.median(xs))  # noqa: E731
    rates = {k: r.rates(trials) for k, r in runs.items()}
    direct, local = runs["direct"], runs["local_1"]
    overheads = [(loc - d) / d for d, loc in zip(direct.wall_s, local.wall_s, strict=True)]
    direct_s = med(direct.wall_s) / trials
    dispatch = [(w - i) / trials for w, i in zip(local.wall_s, local.inside_s, strict=True)]
    cpu_ratio = [loc / d for d, loc in zip(direct.cpu_s, local.cpu_s, strict=True)]
    efficiency = med(rates["local_2"]) / (2.0 * med(rates["local_1"]))
    ceiling = {}
    if "plain_1" in runs and "plain_2" in runs:
        ceiling_2 = med(rates["plain_2"]) / (2.0 * med(rates["plain_1"]))
        ceiling = {"scaling_ceiling_2": ceiling_2, "scaling_efficiency_vs_ceiling": efficiency / ceiling_2}
    return {
        "trials": trials,
        "repeats": len(direct.wall_s),
        **{f"trials_per_minute_{k}": med(v) for k, v in rates.items()},
        **{f"trials_per_minute_{k}_runs": v for k, v in rates.items()},
        "overhead_fraction": med(overheads),
        "overhead_fraction_runs": overheads,
        "overhead_per_trial_s": med(overheads) * direct_s,
        "overhead_goal": _GOAL_OVERHEAD,
        "dispatch_s_per_trial": med(dispatch),
        "dispatch_fraction": med(dispatch) / direct_s,
        "worker_cpu_ratio": med(cpu_ratio),
        "worker_cpu_ratio_runs": cpu_ratio,
        "scaling_efficiency_2": efficiency,
        "scaling_efficiency_goal": _GOAL_EFFICIENCY,
        **ceiling,
    }
