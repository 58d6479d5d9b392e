"""Local workers forked from a fork server that imported the trial code: same trials, single-threaded server."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import numpy as np
import psutil
import pytest

from snake_tools.experiment import follow
from snake_tools.experiment.executor import TrialExecutor, worker_start_method
from snake_tools.experiment.task import run_task

_WALL_CLOCK = ("plan_s", "wall_s")  # the only outputs of a trial that are not a function of its seed
_SERVER = "multiprocessing.forkserver"


def _same(a: Any, b: Any) -> bool:
    """Exact equality of two trial outputs (arrays bit for bit, nested)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype \
            and a.shape == b.shape and bool(np.array_equal(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) and type(a) is type(b)


def _environment() -> dict[str, str]:
    return dict(os.environ)


@pytest.mark.skipif(worker_start_method() != "forkserver", reason="no fork server on this platform")
def test_follow_trials_in_forked_workers_equal_the_same_trials_in_this_process() -> None:
    """Every output of a trial (arrays bit for bit) is the same in a forked worker as in this process."""
    import dask

    settings = follow.load_settings()
    tasks = [(follow.FollowTask("wheeled_snake", seed, "shortest", settings),) for seed in (0, 1)]
    here = [run_task(*t) for t in tasks]
    with TrialExecutor(2) as executor:
        there = executor.map(run_task, tasks, progress=False)
        parents = set(executor.client.run(os.getppid).values())
        environs = list(executor.client.run(_environment).values())
    for a, b in zip(here, there, strict=True):
        assert a["pegs"] > 0 and a["cross_track_m"] is not None  # trials that ran an episode
        assert _same({k: v for k, v in a.items() if k not in _WALL_CLOCK},
                     {k: v for k, v in b.items() if k not in _WALL_CLOCK})
    assert not _same(here[0]["_track"], here[1]["_track"])  # the seeds give different trials
    # The workers are children of the fork server (not spawned by their nannies), which forked them
    # from one thread and runs, as they do, with Dask's pre-spawn environment.
    assert len(parents) == 1
    server = psutil.Process(parents.pop())
    assert _SERVER in " ".join(server.cmdline())
    assert server.num_threads() == 1
    wanted = {k: str(v) for k, v in dask.config.get("distributed.nanny.pre-spawn-environ").items()}
    assert wanted and all(wanted.items() <= env.items() for env in [*environs, server.environ()])


_BUILD_ONLY = """
import sys
from snake_tools.experiment import follow
settings = follow.load_settings()
tasks = [follow.FollowTask("wheeled_snake", seed, "shortest", settings) for seed in range(4)]
heavy = ("mujoco", "networkx", "scipy.spatial", "scipy.ndimage", "snake_hardware.sim.twin",
         "snake_core.following.planning.gvg")
print(",".join(m for m in heavy if m in sys.modules))
"""


def test_building_follow_trials_imports_neither_mujoco_nor_the_planners() -> None:
    """The command's own process builds its trials without the imports that only a running trial needs."""
    out = subprocess.run([sys.executable, "-c", _BUILD_ONLY], capture_output=True, text=True, timeout=300,
                         check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == ""


_ENVIRON = """
import json, sys
from snake_tools.experiment.executor import pre_spawn_environ
before = pre_spawn_environ()
assert "distributed" not in sys.modules
import dask, distributed
print(json.dumps([before, dict(dask.config.get("distributed.nanny.pre-spawn-environ"))]))
"""


def test_the_pre_spawn_environment_read_before_distributed_is_the_one_dask_uses() -> None:
    """Read before ``distributed`` is imported, with a user setting on top: what Dask's nanny would apply."""
    import json

    env = {**os.environ, "DASK_DISTRIBUTED__NANNY__PRE_SPAWN_ENVIRON__MKL_NUM_THREADS": "3"}
    out = subprocess.run([sys.executable, "-c", _ENVIRON], capture_output=True, text=True, timeout=300,
                         check=False, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    before, dask_own = json.loads(out.stdout)
    assert before == dask_own
    assert "OPENBLAS_NUM_THREADS" in before and 3 in before.values()  # the defaults and the user's setting
