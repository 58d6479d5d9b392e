"""Dask worker preload: each worker process imports the trial code once, as it starts.

Given to the local cluster's workers by :func:`snake_tools.experiment.executor.local_cluster`
and to separately started workers with ``dask worker ADDRESS --preload
snake_tools.experiment.worker_preload`` (docs/cluster.md). Dask runs :func:`dask_setup` in
every worker process before it takes tasks, so the imports of the experiments (MuJoCo, scipy,
networkx, the robot and world loaders and the trial tasks) are paid while the cluster
starts, not by the first trial each worker runs; what a trial loads from files
(:mod:`snake_tools.experiment.cache`) is then kept by the process from trial to trial.
"""

from __future__ import annotations

import importlib
from typing import Any

MODULES = (
    "mujoco",
    "networkx",
    "snake_core.robot",
    "snake_hardware.sim.twin",
    "snake_core.following.planning.planner",
    "snake_core.following.planning.dfs",
    "snake_tools.experiment.cache",
    "snake_tools.experiment.task",
    "snake_tools.experiment.follow",
)
"""What every trial of the experiments imports (the heavy part of a fresh process's first trial)."""


def preload() -> None:
    """Import :data:`MODULES` into this process."""
    for name in MODULES:
        importlib.import_module(name)


def dask_setup(worker: Any) -> None:
    """Dask's preload hook: called once in each worker process before it runs tasks."""
    preload()
