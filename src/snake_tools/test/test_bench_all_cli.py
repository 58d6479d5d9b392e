"""``snake bench all``: one file with every figure (median, min, max of the runs), the commit and the load."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from snake_tools.bench.all import bench_names, compare, flatten, summarise
from snake_tools.cli import main

ROOT = Path(__file__).resolve().parents[3]


def test_every_other_bench_subcommand_is_run_by_default() -> None:
    names = bench_names()
    assert "all" not in names
    assert {"gait", "sim", "bridge"} <= set(names)


def test_figures_are_median_min_max_of_the_numeric_leaves() -> None:
    runs = [{"a": 1.0, "b": {"c": 5, "ok": True}, "d": [2.0, 3.0], "s": "x"},
            {"a": 3.0, "b": {"c": 4, "ok": False}, "d": [2.0, 1.0], "s": "y"},
            {"a": 2.0, "b": {"c": 9, "ok": True}, "d": [2.0, 2.0], "s": "z"}]
    assert flatten(runs[0]) == {"a": 1.0, "b.c": 5.0, "d.0": 2.0, "d.1": 3.0}
    figures = summarise(runs)
    assert set(figures) == {"a", "b.c", "d.0", "d.1"}
    for key in figures:
        values = [flatten(r)[key] for r in runs]
        assert figures[key] == {"median": np.median(values), "min": min(values), "max": max(values), "runs": values}


def test_bench_all_writes_the_file_and_compares(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    out = tmp_path / "new.json"
    args = ["bench", "all", "--only", "gait", "--runs", "2", "--bench-args", "gait=--steps 50 --no-dds",
            "--out", str(out), "--json"]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    written = json.loads(out.read_text())
    assert printed == written
    git = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    head = git.stdout.strip()
    assert written["commit"] == head
    assert len(written["load_average_start"]) == 3
    gait = written["benches"]["gait"]
    assert gait["errors"] == []
    assert len(gait["load_average_1min"]["runs"]) == 2
    step = gait["figures"]["step_us_median"]
    assert len(step["runs"]) == 2
    assert step["min"] <= step["median"] <= step["max"]
    assert step["median"] == pytest.approx(np.median(step["runs"]))
    # An older file with doubled figures: every ratio is one half, and the comparison is stored.
    old = json.loads(json.dumps(written))
    for fig in old["benches"]["gait"]["figures"].values():
        fig["median"] *= 2
    ratios = {k: r for k, _, _, r in compare(written, old)}
    assert ratios and all(r == pytest.approx(0.5) for r in ratios.values() if r is not None)
    old_file = tmp_path / "old.json"
    old_file.write_text(json.dumps(old))
    assert main([*args, "--compare", str(old_file)]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["compared_with"]["file"] == str(old_file)
    assert set(again["compared_with"]["ratios"]) == set(ratios)


def test_bench_all_refuses_an_unknown_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "all", "--only", "nope"]) == 2
    assert "--only" in capsys.readouterr().err
