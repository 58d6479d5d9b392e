"""Experiments on a separately started Dask cluster: `dask scheduler` and `dask worker` processes on loopback.

The scheduler and its workers are real processes of the project's environment; the test
waits until the workers are registered (``Client.wait_for_workers``), never on a clock.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from snake_tools.cli import main
from snake_tools.experiment.executor import map_trials

_CONNECT_S = 120.0  # generous bound for the cluster to come up on a loaded machine, s
_FOLLOW_ARGS = ["experiment", "follow", "--robot", "wheeled_snake", "--trials", "4", "--seed", "2",
                "--no-plots", "--json"]


@dataclass
class Cluster:
    """A running `dask scheduler` with its `dask worker` processes."""

    address: str
    scheduler: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]]


def _dask() -> str:
    exe = Path(sys.executable).with_name("dask")
    return str(exe) if exe.exists() else (shutil.which("dask") or "dask")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A scheduler on a free loopback port and two single-threaded workers without nannies."""
    from distributed import Client

    sched_file = tmp_path / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    scheduler = subprocess.Popen([_dask(), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                  "--dashboard-address", "127.0.0.1:0",
                                  "--scheduler-file", str(sched_file)], env=env, cwd=tmp_path,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        with Client(scheduler_file=str(sched_file), timeout=_CONNECT_S) as client:  # waits for the file
            address = client.scheduler.address
            workers = [subprocess.Popen([_dask(), "worker", address, "--host", "127.0.0.1", "--nthreads", "1",
                                         "--no-nanny", "--no-dashboard"], env=env, cwd=tmp_path,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(2)]
            client.wait_for_workers(2, timeout=_CONNECT_S)
        yield Cluster(address, scheduler, workers)
    finally:
        for p in [*workers, scheduler]:  # our own processes; nothing in them to save
            if p.poll() is None:
                p.kill()
            p.wait()


def _follow(extra: list[str], out: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main([*_FOLLOW_ARGS, *extra, "--out", str(out)]) == 0
    return dict(json.loads(capsys.readouterr().out))


def _key(result: dict[str, Any]) -> list[Any]:
    return [result["success_rate"], result["time_to_goal_s_mean"],
            [(r["seed"], r["pegs"], r["success"], r["time_to_goal_s"], r["cross_track_m"]) for r in result["runs"]]]


def test_follow_gives_the_same_results_with_one_two_local_workers_and_a_separate_scheduler(
        cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = _follow(["--workers", "1"], tmp_path / "one", capsys)
    two = _follow(["--workers", "2"], tmp_path / "two", capsys)
    remote = _follow(["--scheduler", cluster.address], tmp_path / "remote", capsys)
    assert len(one["runs"]) == 4
    assert _key(one) == _key(two) == _key(remote)
    # the trials differ from each other (their own seeds), so equality is not trivial
    assert len({r["cross_track_m"] for r in one["runs"]}) > 1


_HELD_TRIAL = """
import os, sys, time
from pathlib import Path
index, gate, seen = int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
(seen / f"{index}-{os.getppid()}").touch()  # the worker process that runs this trial
while not gate.exists():
    time.sleep(0.01)  # polls the gate file (a condition), not a fixed delay
print(index * index)
"""


def test_killing_one_worker_mid_run_still_finishes_every_trial(cluster: Cluster, tmp_path: Path) -> None:
    seen, gate = tmp_path / "seen", tmp_path / "gate"
    seen.mkdir()
    tasks = [([sys.executable, "-c", _HELD_TRIAL, str(k), str(gate), str(seen)],) for k in range(6)]
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["results"] = map_trials(subprocess.check_output, tasks, 1, progress=False, scheduler=cluster.address)
        except BaseException as err:
            out["error"] = err

    thread = threading.Thread(target=run)
    thread.start()
    victim = cluster.workers[0]
    # wait until each worker holds a trial (a condition on the files the trials write)
    deadline = _CONNECT_S * 1e9 + time.monotonic_ns()
    while not {w.pid for w in cluster.workers} <= _pids(seen):
        assert thread.is_alive() and time.monotonic_ns() < deadline, (out, _pids(seen))
        time.sleep(0.01)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    gate.touch()
    thread.join(timeout=_CONNECT_S * 2)
    assert not thread.is_alive()
    assert "error" not in out, out.get("error")
    assert [int(r) for r in out["results"]] == [k * k for k in range(6)]
    assert cluster.workers[1].poll() is None  # the survivor ran the killed worker's trials


def _pids(seen: Path) -> set[int]:
    return {int(p.name.split("-")[1]) for p in seen.iterdir()}
