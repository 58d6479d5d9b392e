"""The experiments' worker pool: task order, worker-count independence, per-trial seeds."""

from __future__ import annotations

import numpy as np

from snake_tools.experiment._parallel import map_trials, trial_seeds


def _draw(seed: np.random.SeedSequence, n: int) -> list[float]:
    return np.random.default_rng(seed).random(n).tolist()


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
