"""``snake bench compare REV``: the figures of the working tree beside those of REV, run alternately."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from snake_tools.bench.all import bench_names
from snake_tools.bench.compare import BENCHES, figure_summary, tree_env
from snake_tools.cli import main

ROOT = Path(__file__).resolve().parents[3]


def test_compare_is_not_one_of_the_figures_of_bench_all() -> None:
    assert "compare" not in bench_names()
    assert {"gait", "sim", "bridge", "stack"} <= set(BENCHES) <= set(bench_names())


def test_ratio_is_new_over_old_medians_and_its_range_over_the_pairs() -> None:
    fig = figure_summary([2.0, 4.0, 3.0], [4.0, 4.0, 6.0], "lower")
    assert fig["new"] == 3.0 and fig["old"] == 4.0
    assert fig["ratio"] == pytest.approx(0.75)
    assert fig["ratio_min"] == pytest.approx(0.5) and fig["ratio_max"] == pytest.approx(1.0)
    assert fig["speedup"] == pytest.approx(4.0 / 3.0)
    assert figure_summary([6.0], [3.0], "higher")["speedup"] == pytest.approx(2.0)


def test_a_tree_process_imports_that_trees_packages_and_reads_its_config(tmp_path: Path) -> None:
    pkg = tmp_path / "src" / "snake_core" / "snake_core"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    env = tree_env(tmp_path)
    code = "import os, snake_core; print(snake_core.__file__); print(os.environ['SNAKE_CONFIG_DIR'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(pkg / "__init__.py"), str(tmp_path / "config")]


def test_compare_runs_both_trees_and_removes_the_old_one(capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    before = subprocess.run(["git", "worktree", "list"], capture_output=True, text=True, check=True).stdout
    code = main(["bench", "compare", "HEAD", "--only", "gait", "--pairs", "1",
                 "--bench-args", "gait=--steps 50 --no-dds", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out["errors"]
    fig = out["gait.step_us_median"]
    assert fig["ratio"] == pytest.approx(fig["new"] / fig["old"])
    assert len(fig["new_runs"]) == len(fig["old_runs"]) == 1
    assert out["compared"]["old_commit"] == subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                                           text=True, check=True).stdout.strip()
    assert "start" in out["load"] and "end" in out["load"]
    after = subprocess.run(["git", "worktree", "list"], capture_output=True, text=True, check=True).stdout
    # Other checkouts of the repository may add or remove their own worktrees meanwhile: only ours count.
    ours = lambda listing: {line for line in listing.splitlines() if "snake-compare-" in line}  # noqa: E731
    assert ours(after) <= ours(before)


def test_an_unknown_revision_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["bench", "compare", "no-such-rev-xyz", "--only", "gait"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_benchmark_the_old_revision_lacks_runs_on_the_new_tree_alone(tmp_path: Path) -> None:
    from snake_tools.bench.compare import compare_trees, has_bench

    assert has_bench(ROOT, "gait") and not has_bench(tmp_path, "gait")  # tmp_path: a tree without benchmarks
    out = compare_trees(ROOT, tmp_path, ["gait"], 1, {"gait": ["--steps", "50", "--no-dds"]})
    assert out["errors"] == []
    assert len(out["not_available"]) == 1 and out["not_available"][0].startswith("gait:")
    fig = out["gait.step_us_median"]
    assert fig["old"] is None and fig["ratio"] is None and fig["old_runs"] == []
    assert len(fig["new_runs"]) == 1 and fig["new"] > 0.0
