"""The experiments' Dask executor: task order, worker-count independence, per-trial seeds, failing trials."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from snake_tools.experiment.executor import TrialsFailedError, map_trials, trial_seeds


def _draw(seed: np.random.SeedSequence, n: int) -> list[float]:
    return np.random.default_rng(seed).random(n).tolist()


def _inverse(x: float) -> float:
    return 1.0 / x


def test_results_come_back_in_task_order_for_any_worker_count() -> None:
    tasks = [(3, k) for k in range(7)]
    assert map_trials(pow, tasks, 1, progress=False) == [3**k for k in range(7)]
    assert map_trials(pow, tasks, 2, progress=False) == [3**k for k in range(7)]


def test_spawned_trial_seeds_do_not_depend_on_how_many_are_spawned() -> None:
    few, many = trial_seeds(42, 3), trial_seeds(42, 10)
    for a, b in zip(few, many[:3], strict=True):
        assert _draw(a, 4) == _draw(b, 4)
    draws = [tuple(_draw(s, 4)) for s in many]
    assert len(set(draws)) == len(draws)  # independent streams
    serial = map_trials(_draw, [(s, 4) for s in many], 1, progress=False)
    parallel = map_trials(_draw, [(s, 4) for s in many], 2, progress=False)
    assert serial == parallel == [list(d) for d in draws]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_raising_trial_is_reported_with_its_arguments_and_the_others_finish(
        workers: int, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = [(2.0,), (0.0,), (4.0,)]
    with pytest.raises(TrialsFailedError) as info:
        map_trials(_inverse, tasks, workers, progress=False)
    assert [(f.index, f.args) for f in info.value.failures] == [(1, (0.0,))]
    assert "ZeroDivisionError" in info.value.failures[0].error
    assert "(0.0,)" in str(info.value)
    assert info.value.results == [0.5, None, 0.25]
    assert "trial 1 (0.0,) raised ZeroDivisionError" in capsys.readouterr().err


def test_calibrate_and_motion_modes_agree_between_one_and_two_workers(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The two experiments moved onto the executor give the same numbers in this process and on 2 workers."""
    import json

    from snake_tools.cli import main

    for cmd, drop in ((["experiment", "calibrate", "--duration", "6"], ()),
                      (["experiment", "motion-modes", "--duration", "3"], ("figure",))):
        outs = []
        for workers in ("1", "2"):
            main([*cmd, "--workers", workers, "--out", str(tmp_path / workers), "--json"])
            out = json.loads(capsys.readouterr().out)
            outs.append({k: v for k, v in out.items() if k not in drop})
        assert outs[0] == outs[1]


def test_one_executor_keeps_its_workers_for_every_round_of_trials() -> None:
    """Rounds of trials on one TrialExecutor run in the worker processes it started, in task order."""
    import os

    from snake_tools.experiment.executor import TrialExecutor

    with TrialExecutor(2) as executor:
        workers = set(executor.client.run(os.getpid).values())
        assert len(workers) == 2 and os.getpid() not in workers
        # Before any trial: each worker imported the trial code as it started (the preload).
        from snake_tools.experiment.worker_preload import MODULES

        loaded = executor.client.run(lambda: [m for m in MODULES if m in __import__("sys").modules])
        assert all(names == list(MODULES) for names in loaded.values())
        for round_ in range(3):
            tasks = [(round_, k) for k in range(5)]
            results = executor.map(_where, tasks, progress=False)
            assert [r[:2] for r in results] == tasks
            assert {r[2] for r in results} <= workers  # no new processes for a new round
    assert executor.client is None  # closed on exit


def _where(round_: int, k: int) -> tuple[int, int, int]:
    import os

    return (round_, k, os.getpid())
