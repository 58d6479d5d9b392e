"""The stepped rollouts of a batch on worker processes: one core each.

A parameter set whose physics step depends on its state (a load-dependent friction, a gear
play's loop on the output: :class:`snake_tools.twin.rollout.LiftedRollout`) is stepped from
Python, one ``mj_step`` at a time, and so is every run on the ground (its path:
:func:`snake_tools.twin.rollout.simulate_paths`, the ground fit's scans and its choice of
contact model). The step's Python work holds the GIL, so threads do not run
such sets side by side (measured: slower on two threads than on one). Processes do: the sets of
one batch (a Jacobian's columns, a check's points) are split into one chunk per worker, and each
worker rolls its chunk out one set after the other, as this process would. Each set's joint
angles are those of the same code on the same inputs, so the fit is the same bit for bit on one
worker or many.

The workers are kept for the process's life (:func:`pool`, one pool per worker count), forked
from ``multiprocessing``'s fork server where the platform has one (a single-threaded process:
a fork of this one, whose rollouts run threads, could inherit a lock held), else spawned; like
every ``multiprocessing`` program, a script that fits starts its work under
``if __name__ == "__main__":``. Each task carries the recording and the robot pickled once per
:class:`~snake_tools.twin.rollout.LiftedRollout` (about 1.2 MB for 60 s of the tsnake: a few
milliseconds, where each of the chunk's rollouts takes a few hundred); a worker keeps the last few it
was given. A worker that dies (killed, out of memory) fails its batch, and the next batch starts
a fresh pool. A daemonic process (a Dask worker's trial) may start none: its sets are stepped in
the process, as on one worker.
"""

from __future__ import annotations

import functools
import multiprocessing
import pickle
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.robot import RobotModel
from snake_core.twin_params import TwinParams
from snake_tools.twin.data import Recording

_KEPT = 4   # recordings a worker keeps rolled out (a fit alternates between a recording and its head)
_pools: dict[int, ProcessPoolExecutor] = {}
_rollers: OrderedDict[str, Any] = OrderedDict()   # in a worker: the LiftedRollout of each recording token
_recordings: OrderedDict[str, Any] = OrderedDict()   # in a worker: the (recording, robot) of each token on the ground
_worker_cpu = [0.0]   # CPU seconds of the chunks this process's workers rolled out


def can_fork() -> bool:
    """Whether this process may start worker processes (a daemonic one, such as a Dask worker's, may not)."""
    return not multiprocessing.current_process().daemon


def pool(workers: int) -> ProcessPoolExecutor:
    """The process's pool of ``workers`` worker processes (started on first use, kept for the process's life)."""
    found = _pools.get(workers)
    if found is None:
        from snake_tools.experiment.executor import worker_start_method

        found = _pools[workers] = ProcessPoolExecutor(workers,
                                                      mp_context=multiprocessing.get_context(worker_start_method()))
    return found


class Payload:
    """A recording and its robot pickled once, when first sent, with a token the workers know it by."""

    def __init__(self, rec: Recording, robot: RobotModel) -> None:
        self.token = uuid.uuid4().hex
        self._pair = (rec, robot)

    @functools.cached_property
    def data(self) -> bytes:
        """The pickled recording and robot (made on first use: a fit on one process sends nothing)."""
        return pickle.dumps(self._pair, protocol=pickle.HIGHEST_PROTOCOL)


def stepped_on_workers(payload: Payload, params: list[TwinParams], workers: int) -> list[np.ndarray]:
    """Joint angles of stepped parameter sets, ``params`` split into ``workers`` chunks, one per worker process."""
    return _on_workers(_roll_chunk, payload, params, workers)


def paths_on_workers(payload: Payload, params: list[TwinParams], world: str | Path | None,
                     workers: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`~snake_tools.twin.rollout.simulate_path` of each set in ``world``, in ``workers`` chunks, one per worker.

    Each set's run is the one this process would make (joint angles, head xy and heading), bit for bit.
    """
    return _on_workers(_path_chunk, payload, params, workers, world)


def _on_workers(chunk: Any, payload: Payload, params: list[TwinParams], workers: int, *args: Any) -> list[Any]:
    """``chunk(token, data, sets, *args)`` on each of up to ``workers`` chunks of ``params``; their results in order."""
    chunks = [c for c in np.array_split(np.arange(len(params)), min(workers, len(params))) if c.size]
    out: list[Any] = []
    try:
        futures = [pool(workers).submit(chunk, payload.token, payload.data, [params[i] for i in c], *args)
                   for c in chunks]
        for f in futures:
            results, cpu = f.result()
            _worker_cpu[0] += cpu
            out += results
    except BrokenProcessPool:
        _pools.pop(workers, None)   # a worker died (killed, out of memory): the next batch starts a fresh pool
        raise
    return out


def worker_cpu_s() -> float:
    """CPU seconds this process's workers have spent on its rollouts so far (``time.process_time`` counts its own)."""
    return _worker_cpu[0]


def cpu_s() -> float:
    """CPU seconds of this process (every thread) and of its rollout workers so far: a fit's is the difference."""
    return time.process_time() + _worker_cpu[0]


def _roll_chunk(token: str, data: bytes, params: list[TwinParams]) -> tuple[list[np.ndarray], float]:
    """In a worker: the chunk's joint angles and the CPU seconds they took.

    The sets are rolled out one after the other (:meth:`LiftedRollout.joint_angles` on one thread).
    """
    from snake_tools.twin.rollout import LiftedRollout

    def make() -> LiftedRollout:
        rec, robot = pickle.loads(data)
        return LiftedRollout(rec, robot, 1)

    cpu = time.process_time()
    roller = _kept(_rollers, token, make)
    return roller.joint_angles(params), time.process_time() - cpu


def _path_chunk(token: str, data: bytes, params: list[TwinParams],
                world: str | Path | None) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], float]:
    """In a worker: each set's :func:`~snake_tools.twin.rollout.simulate_path` in ``world``, and the CPU seconds."""
    from snake_tools.twin.rollout import simulate_path

    cpu = time.process_time()
    rec, robot = _kept(_recordings, token, lambda: pickle.loads(data))
    return [simulate_path(rec, robot, p, world) for p in params], time.process_time() - cpu


def _kept(cache: OrderedDict[str, Any], token: str, make: Callable[[], Any]) -> Any:
    """In a worker: ``cache``'s entry for ``token``, made by ``make()`` where missing; the last :data:`_KEPT` kept."""
    found = cache.get(token)
    if found is None:
        found = cache[token] = make()
        while len(cache) > _KEPT:
            cache.popitem(last=False)
    else:
        cache.move_to_end(token)
    return found
