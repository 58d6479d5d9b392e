"""``snake bench trials``: the executor's overhead from alternating direct and 1-worker runs."""

from __future__ import annotations

import json

import pytest

from snake_tools.bench.trials import Runs, summary


def _runs(walls: list[float], inside: list[float], cpu: list[float]) -> Runs:
    return Runs(wall_s=walls, inside_s=inside, cpu_s=cpu)


def test_the_overhead_is_the_median_over_pairs_of_direct_and_one_worker_runs() -> None:
    trials = 10
    direct = _runs([10.0, 20.0, 11.0], [10.0, 20.0, 11.0], [9.0, 9.0, 9.0])  # a loaded second pair
    local = _runs([10.5, 20.0, 11.0 * 1.02], [10.3, 19.9, 10.9], [9.0, 9.9, 9.18])
    out = summary({"direct": direct, "local_1": local, "local_2": local, "scheduler_2": local}, trials)
    assert out["overhead_fraction_runs"] == pytest.approx([0.05, 0.0, 0.02])
    assert out["overhead_fraction"] == pytest.approx(0.02)  # the median pair, not the ratio of medians
    assert out["overhead_per_trial_s"] == pytest.approx(0.02 * 11.0 / trials)
    assert out["dispatch_s_per_trial"] == pytest.approx(0.02)  # median of (wall - inside) / trials: 0.02, 0.01, 0.032
    assert out["worker_cpu_ratio"] == pytest.approx(1.02)
    assert out["trials_per_minute_direct"] == pytest.approx(60.0 * trials / 11.0)
    assert out["scaling_efficiency_2"] == pytest.approx(0.5)  # "2 workers" here ran as fast as one


def test_the_ceiling_is_what_two_plain_processes_give_and_the_executor_is_read_against_it() -> None:
    trials = 12
    one = _runs([12.0, 12.0, 12.0], [12.0] * 3, [12.0] * 3)       # 60 trials/min
    two = _runs([6.0, 6.0, 6.0], [6.0] * 3, [6.0] * 3)            # 120: twice as fast
    plain_1 = _runs([10.0, 9.0, 11.0], [], [])                   # median 10 s: 72 trials/min
    plain_2 = _runs([6.25, 6.0, 7.0], [], [])                    # median 6.25 s: 115.2 trials/min
    out = summary({"direct": one, "local_1": one, "local_2": _runs([7.5] * 3, [7.5] * 3, [7.5] * 3),
                   "scheduler_2": two, "plain_1": plain_1, "plain_2": plain_2}, trials)
    assert out["trials_per_minute_plain_1"] == pytest.approx(72.0)
    assert out["scaling_ceiling_2"] == pytest.approx(115.2 / 144.0)          # 0.8
    assert out["scaling_efficiency_2"] == pytest.approx(96.0 / 120.0)         # 0.8
    assert out["scaling_efficiency_vs_ceiling"] == pytest.approx(1.0)


def test_the_bench_runs_every_variant_the_given_number_of_times(capsys: pytest.CaptureFixture[str]) -> None:
    from snake_tools.cli import main

    assert main(["bench", "trials", "--trials", "2", "--repeats", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for variant in ("direct", "local_1", "local_2", "scheduler_2", "plain_1", "plain_2"):
        assert len(out[f"trials_per_minute_{variant}_runs"]) == 2
        assert all(r > 0.0 for r in out[f"trials_per_minute_{variant}_runs"])
    assert len(out["overhead_fraction_runs"]) == 2 and out["dispatch_s_per_trial"] >= 0.0
    assert set(out["load_average"]) == {"local_1", "local_2", "scheduler_2"}
    assert out["scaling_ceiling_2"] > 0.0 and out["scaling_efficiency_vs_ceiling"] > 0.0
