"""``snake bench view``: its JSON contract from a short real run (twin, gait, ``snake view``, protocol clients).

Only the shape and the sanity of the figures are checked (every count present, CPU and memory
positive, every client of the largest count receiving messages, the per-client increment derived
from the medians it reports), never a speed.
"""

from __future__ import annotations

import argparse
import json
import math
import os

import pytest

from snake_tools.bench import view
from snake_tools.bench.all import bench_names
from snake_tools.bench.compare import BENCHES
from snake_tools.cli import main


def test_view_is_a_figure_of_bench_all_and_of_compare() -> None:
    assert "view" in bench_names()
    assert "view" in BENCHES
    assert "--clients" in BENCHES["view"].flags


def test_client_counts_are_sorted_distinct_and_positive() -> None:
    assert view._client_counts("5,1,5") == (1, 5)
    for bad in ("0,1", "a", "", "1,-2"):
        with pytest.raises(argparse.ArgumentTypeError):
            view._client_counts(bad)


@pytest.mark.graph
def test_bench_view_json_has_every_figure_and_five_clients_receive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "view", "--json", "--clients", "1,5", "--duration", "3", "--runs", "1",
                 "--no-warmup"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["clients"] == [0, 1, 5]
    assert out["subprotocol"] == "foxglove.websocket.v1"
    assert out["warmup"] is False and out["warmup_s"] >= 0.0
    assert set(out["by_clients"]) == {"0", "1", "5"}
    cores = os.cpu_count() or 1
    for n, fig in out["by_clients"].items():
        for key in ("cpu_percent", "rss_mb", "stack_cpu_percent", "messages_per_s_per_client"):
            stat = fig[key]
            assert len(stat["runs"]) == 1, (n, key)
            assert stat["min"] <= stat["median"] <= stat["max"], (n, key)
        assert 0.0 < fig["cpu_percent"]["median"] <= 100.0 * cores, n   # the view works even with no client
        assert 0.0 < fig["stack_cpu_percent"]["median"] <= 100.0 * cores, n
        assert fig["rss_mb"]["median"] > 0.0, n
    assert out["by_clients"]["0"]["messages_per_s_per_client"]["median"] == 0.0
    for n in ("1", "5"):   # every client of the count received messages within the window
        assert out["by_clients"][n]["messages_per_s_min_client"]["median"] > 0.0, n
    medians = {n: f["cpu_percent"]["median"] for n, f in out["by_clients"].items()}
    for n in ("1", "5"):
        assert out["cpu_percent_per_client"][n] == pytest.approx((medians[n] - medians["0"]) / int(n))
    assert out["cpu_percent_per_client_max"] == max(out["cpu_percent_per_client"].values())
    assert out["within_goal"] is (out["cpu_percent_per_client_max"] <= out["goal_cpu_percent_per_client"])
    assert out["rss_mb_max_clients"] == out["by_clients"]["5"]["rss_mb"]["median"]
    stack_cpu = {n: f["stack_cpu_percent"]["median"] for n, f in out["by_clients"].items()}
    assert out["stack_cpu_ratio_max_clients"] == pytest.approx(stack_cpu["5"] / stack_cpu["0"])
    assert all(math.isfinite(x) and x >= 0.0 for x in out["load_average_1_5_15"]["start"])


def test_the_trail_counted_is_the_one_the_view_draws() -> None:
    import numpy as np

    from snake_core.robot import load_robot
    from snake_tools.live_view import scene_update

    robot = load_robot("tsnake")
    points = np.zeros((len(robot.joints) + 2, 3))
    for k in (0, 1, 37):
        scene = json.loads(json.dumps(scene_update(robot, points, np.ones((k, 3)), 0)))  # as the wire carries it
        assert view._trail_points(scene) == k
    assert view._trail_points({"entities": []}) == 0
