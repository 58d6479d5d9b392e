"""Independent experiment trials on a Dask cluster: one trial function, any number of workers.

A trial is a module-level function of plain, picklable arguments that returns a
picklable result and draws all its randomness from its own arguments (a per-trial seed
or ``numpy.random.SeedSequence``); for the experiments it is
:func:`snake_tools.experiment.task.run_task` of a task object holding plain settings.
Then the results do not depend on which process or machine runs which trial nor in
which order, so ``--workers 1``, ``--workers N`` and ``--scheduler ADDRESS`` give the
same numbers (a test checks it for ``snake experiment follow``).

:func:`map_trials` hands ``fn(*args)`` for every argument tuple to Dask distributed
(:class:`TrialExecutor` does the same for several rounds of trials on one cluster):

* ``workers == 1`` and no scheduler: a direct call in this process (no cluster);
* ``--workers N``: a ``distributed.LocalCluster`` of N worker processes with one thread
  each, listening on loopback only, without the dashboard;
* ``--scheduler ADDRESS``: an existing cluster (``dask scheduler`` / ``dask worker``,
  ``dask-jobqueue``; see docs/cluster.md).

Results come back in task order, with a tqdm progress bar on stderr. When a worker
process dies, Dask runs its trials again on another worker (up to the scheduler's
``distributed.scheduler.allowed-failures``). A trial that raises does not stop the
others: every trial runs, then :class:`TrialsFailedError` names each failing trial with its
arguments and error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

_LOOPBACK = "127.0.0.1"  # the local cluster's scheduler and workers listen here only
_QUIET_LOG_LEVEL = 40  # logging.ERROR: Dask's start-up chatter stays off stderr
_ARGS_SHOWN = 200  # characters of a failing trial's arguments in the error message
_PRELOAD = "snake_tools.experiment.worker_preload"  # module every local worker runs as it starts
_FORKSERVER = "forkserver"  # multiprocessing start method of the local workers, where the platform has it


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
    """Add ``--workers`` (default: all cores) and ``--scheduler`` to an experiment's parser."""
    parser.add_argument("--workers", type=workers_arg, default=default_workers(),
                        help="worker processes of a local Dask cluster for the independent trials "
                             f"(default: all cores, {default_workers()}; 1 = this process)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="address of a running Dask scheduler (e.g. tcp://10.0.0.5:8786); "
                             "overrides --workers")


def trial_seeds(seed: int, count: int) -> list[np.random.SeedSequence]:
    """``count`` independent per-trial seed sequences spawned from ``seed`` (numpy SeedSequence.spawn)."""
    # Imported here, not at the top: every ``snake`` command imports this module for its error type.
    import numpy as np

    return np.random.SeedSequence(seed).spawn(count)


@dataclass(frozen=True)
class TrialFailure:
    """One trial that raised.

    Attributes:
        index: Its position in the task list.
        args: Its arguments.
        error: ``repr`` of the exception.
    """

    index: int
    args: tuple[Any, ...]
    error: str


class TrialsFailedError(RuntimeError):
    """Some trials raised (all the others ran); ``failures`` lists them, ``results`` holds every result."""

    def __init__(self, failures: list[TrialFailure], results: list[Any]) -> None:
        self.failures = failures
        self.results = results
        lines = [f"trial {f.index} {_shorten(repr(f.args))}: {f.error}" for f in failures]
        super().__init__(f"{len(failures)} of {len(results)} trials raised: " + "; ".join(lines))


def _shorten(text: str) -> str:
    return text if len(text) <= _ARGS_SHOWN else text[:_ARGS_SHOWN] + "..."


def _report(failure: TrialFailure) -> TrialFailure:
    """One line on stderr as soon as a trial failed (the run goes on); returns ``failure``."""
    print(f"trial {failure.index} {_shorten(repr(failure.args))} raised {failure.error}", file=sys.stderr)
    return failure


def worker_start_method() -> str:
    """How local worker processes are started: ``forkserver`` where the platform has it, else ``spawn``."""
    import multiprocessing

    return _FORKSERVER if _FORKSERVER in multiprocessing.get_all_start_methods() else "spawn"


def start_worker_server() -> bool:
    """Start this process's fork server, the process every local worker is forked from (once per process).

    It is a fresh interpreter (``multiprocessing``'s ``forkserver``) that imports Dask and
    the trial code (:data:`snake_tools.experiment.worker_preload.MODULES`) once; each worker
    of :func:`local_cluster` is then a fork of it that starts with all of that imported,
    instead of a spawned interpreter importing it again. A caller that is about to start a
    local cluster calls this first, so those imports run on another core while it builds
    its trials. The server starts with Dask's pre-spawn environment
    (``distributed.nanny.pre-spawn-environ``: one BLAS / OpenMP thread, the malloc trim
    threshold) that a spawned worker would get, so a worker computes exactly as a spawned
    one, and the server has a single thread when it forks (nothing it imports starts one).

    Returns:
        Whether a fork server is in use (False where the platform has none: workers are spawned).
    """
    import multiprocessing
    from multiprocessing import forkserver

    if worker_start_method() != _FORKSERVER:
        return False
    from snake_tools.experiment.worker_preload import MODULES

    os.environ.update({k: str(v) for k, v in pre_spawn_environ().items()})
    ctx = multiprocessing.get_context(_FORKSERVER)
    ctx.set_forkserver_preload(["distributed", *MODULES])
    forkserver.ensure_running()
    return True


def pre_spawn_environ() -> dict[str, Any]:
    """Dask's ``distributed.nanny.pre-spawn-environ``, without importing ``distributed`` when it is not yet.

    Importing ``distributed`` (half a second of a core) is what loads its defaults
    (``distributed/distributed.yaml``) into Dask's configuration; before that, the defaults
    are read from that file here, as ``distributed.config`` reads it, and what the user's
    configuration sets for the key (files, ``DASK_*`` variables) is merged over them, as Dask
    merges it. So the fork server can start before this process has imported ``distributed``.
    """
    import dask

    key = "distributed.nanny.pre-spawn-environ"
    if "distributed.config" in sys.modules:
        return dict(dask.config.get(key))
    import importlib.util
    from pathlib import Path

    import yaml

    from snake_core.schema import SAFE_LOADER

    spec = importlib.util.find_spec("distributed")
    if spec is None or spec.origin is None:
        raise ImportError("distributed is not installed")
    defaults = yaml.load((Path(spec.origin).parent / "distributed.yaml").read_text(), Loader=SAFE_LOADER)
    value = defaults["distributed"]["nanny"]["pre-spawn-environ"]
    return dict(dask.config.merge(value, dask.config.get(key, default={})))


def local_cluster(workers: int) -> Any:
    """A ``distributed.LocalCluster`` of ``workers`` processes, one thread each, loopback only, no dashboard.

    Its workers run without Dask's statistical profiler (``distributed.worker.profile``:
    every 10 ms it takes the interpreter lock to sample the running trial's stack, for the
    dashboard's profile page, which this cluster does not serve), and each has the trial
    code imported before it takes a trial: forked from the fork server of
    :func:`start_worker_server` (started here if the caller has not), which imported it
    once, and running :mod:`snake_tools.experiment.worker_preload` as Dask's preload (which
    then finds it imported).
    """
    import dask
    from distributed import LocalCluster

    method = worker_start_method()
    if method == _FORKSERVER:
        start_worker_server()
    # The scheduler always serves its small HTTP API (health checks); without a dashboard
    # it would try port 8787 first, so it gets a free loopback port instead. The workers
    # take the configuration in force when they are started, here in the constructor.
    with dask.config.set({"distributed.worker.profile.enabled": False,
                          "distributed.worker.multiprocessing-method": method}):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host=_LOOPBACK,
                            dashboard_address=None, silence_logs=_QUIET_LOG_LEVEL, preload=[_PRELOAD],
                            scheduler_kwargs={"dashboard": False, "dashboard_address": f"{_LOOPBACK}:0"})


def map_trials(fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], workers: int, desc: str = "trials",
               progress: bool = True, scheduler: str | None = None,
               each: Callable[[int, Any], Any] | None = None) -> list[Any]:
    """``[fn(*t) for t in tasks]`` on Dask workers, in task order (one :class:`TrialExecutor` for this call).

    Args:
        fn: A module-level (picklable) trial function.
        tasks: Argument tuples, one per trial.
        workers: Local worker processes (at most one per task); 1 (and no ``scheduler``) runs in this process.
        desc: Progress-bar label.
        progress: Show a tqdm bar on stderr.
        scheduler: Address of a running Dask scheduler; then ``workers`` is not used.
        each: Called here with a trial's index and result as each trial ends (in the order they end).

    Returns:
        The results, in the order of ``tasks``.

    Raises:
        TrialsFailedError: After every trial ran, when one or more raised.
    """
    tasks = list(tasks)
    with TrialExecutor(max(1, min(int(workers), len(tasks))), scheduler) as executor:
        return executor.map(fn, tasks, desc=desc, progress=progress, each=each)


class TrialExecutor:
    """One set of workers for several rounds of trials: a context manager around a Dask client.

    ``workers == 1`` without a scheduler runs every trial in this process; otherwise the
    local cluster (or the connection to ``scheduler``) is made once on entry and closed on
    exit, so a caller that hands out trials in rounds (a study asking its sampler for a
    batch at a time) pays for the cluster's start once, not per round, and its workers keep
    what they loaded (:mod:`snake_tools.experiment.cache`) from one round to the next.

    Args:
        workers: Local worker processes, one thread each.
        scheduler: Address of a running Dask scheduler; then ``workers`` is not used.
    """

    def __init__(self, workers: int, scheduler: str | None = None) -> None:
        self.workers = int(workers)
        self.scheduler = scheduler
        self._cluster: Any = None
        self._client: Any = None

    @property
    def client(self) -> Any:
        """The ``distributed.Client`` inside the ``with`` block (None when the trials run in this process)."""
        return self._client

    @property
    def local(self) -> bool:
        """Whether the trials run in this process (one worker, no scheduler)."""
        return self.scheduler is None and self.workers <= 1

    def __enter__(self) -> TrialExecutor:
        if not self.local:
            from distributed import Client

            try:
                if self.scheduler is None:
                    self._cluster = local_cluster(self.workers)
                self._client = Client(self.scheduler if self._cluster is None else self._cluster)
            except BaseException:
                self.close()
                raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the client and the local cluster (if any)."""
        client, cluster, self._client, self._cluster = self._client, self._cluster, None, None
        try:
            if client is not None:
                client.close()
        finally:
            if cluster is not None:
                cluster.close()

    def map(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], desc: str = "trials",
            progress: bool = True, each: Callable[[int, Any], Any] | None = None) -> list[Any]:
        """``[fn(*t) for t in tasks]`` on this executor's workers, in task order (see :func:`map_trials`).

        Raises:
            TrialsFailedError: After every trial ran, when one or more raised.
            RuntimeError: A cluster executor used outside its ``with`` block.
        """
        from tqdm import tqdm

        tasks = list(tasks)
        if not self.local and self._client is None:
            raise RuntimeError("TrialExecutor.map outside its with block")
        results: list[Any] = [None] * len(tasks)
        failures: list[TrialFailure] = []
        bar = tqdm(total=len(tasks), desc=desc, unit="trial", file=sys.stderr, disable=not progress, leave=False)
        try:
            if self.local:
                for i, t in enumerate(tasks):
                    try:
                        results[i] = fn(*t)
                    except Exception as err:  # reported with its arguments; the other trials go on
                        failures.append(_report(TrialFailure(i, t, repr(err))))
                    else:
                        if each is not None:
                            each(i, results[i])
                    bar.update(1)
            elif tasks:
                _on_dask(self._client, fn, tasks, results, failures, bar.update, each)
        finally:
            bar.close()
        if failures:
            raise TrialsFailedError(sorted(failures, key=lambda f: f.index), results)
        return results


def _on_dask(client: Any, fn: Callable[..., Any], tasks: list[tuple[Any, ...]], results: list[Any],
             failures: list[TrialFailure], tick: Callable[[int], Any],
             each: Callable[[int, Any], Any] | None = None) -> None:
    from distributed import as_completed

    # One graph update for the whole round (client.map); pure=False and a fresh key per trial:
    # equal arguments are still separate trials.
    run = os.urandom(6).hex()
    keys = [f"trial-{i}-{run}" for i in range(len(tasks))]
    if len({len(t) for t in tasks}) == 1 and tasks[0]:
        futures = client.map(fn, *zip(*tasks, strict=True), key=keys, pure=False)
    else:  # argument tuples of different lengths (or none): one submit each
        futures = [client.submit(fn, *t, key=k, pure=False) for k, t in zip(keys, tasks, strict=True)]
    index = {f.key: i for i, f in enumerate(futures)}
    # with_results: each result is fetched in the background as its trial ends, not one round trip at a time here
    for fut, result in as_completed(futures, with_results=True, raise_errors=False):
        i = index[fut.key]
        if fut.status == "error":
            failures.append(_report(TrialFailure(i, tasks[i], repr(fut.exception()))))
        else:
            results[i] = result
            if each is not None:
                each(i, result)
        tick(1)
