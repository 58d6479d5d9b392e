"""``snake singularity`` / ``snake bench singularity``: the interface contract (keys, paper figures)."""

from __future__ import annotations

import json

import pytest

from snake_tools.cli import main


def run_json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_evaluate_contract(capsys):
    out = run_json(capsys, ["singularity", "evaluate", "--d", "0.7", "--l", "0.5",
                            "--angles", "1.2", "1.381", "1.694", "--json"])
    assert out["singular"] is True and 0.0 <= out["margin"] < 1e-3 and out["rank"] == 1
    assert out["meeting_point"][1] == pytest.approx(0.9454, abs=1e-3)
    regular = run_json(capsys, ["singularity", "evaluate", "--d", "0.7", "--l", "0.5",
                                "--angles", "1.2", "-1.2", "0.3", "--slipping", "3", "--json"])
    assert regular["singular"] is False and regular["margin"] > 0.01 and regular["slipping_links"] == [3]
    parallel = run_json(capsys, ["singularity", "evaluate", "--d", "0.7", "0.6", "0.5", "--l", "0.5",
                                 "--angles", "0", "0", "--json"])
    assert parallel["singular"] is True and parallel["meeting_point"] is None and parallel["parallel"] is True


def test_solve_contract(capsys):
    out = run_json(capsys, ["singularity", "solve", "--d", "0.7", "--l", "0.5", "--angles", "1.2", "1.381", "--json"])
    assert any(abs(s - 1.69) < 0.01 for s in out["solutions"])
    fig15 = run_json(capsys, ["singularity", "solve", "--d", "0.2", "--l", "0.8", "--angles", "1.0471976", "-1.2",
                              "--slipping", "3", "--json"])
    assert any(abs(s + 1.50) < 0.01 for s in fig15["solutions"])


def test_bad_flags_exit_2(capsys):
    assert main(["singularity", "evaluate", "--d", "0.7", "0.5", "--l", "0.5", "--angles", "1", "1", "1"]) == 2
    assert "--d" in capsys.readouterr().err
    assert main(["singularity", "evaluate", "--d", "0.7", "--l", "0.5", "--angles", "1", "1", "--slipping", "9"]) == 2
    assert "slipping" in capsys.readouterr().err


def test_bench_keys(capsys):
    out = run_json(capsys, ["bench", "singularity", "--evals", "200", "--json"])
    for key in ("eval_us_4", "eval_us_8", "eval_us_16"):
        assert out[key] > 0.0


def test_sweep_writes_figures_and_matches_paper(capsys, tmp_path):
    out = run_json(capsys, ["singularity", "sweep", "--out", str(tmp_path), "--points", "25", "--json"])
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert len(pngs) == 8 and all((tmp_path / p).stat().st_size > 10_000 for p in pngs)
    assert [c["figure"] for c in out["figures_12_15"]] == [12, 13, 14, 15]
    for comp in out["figures_12_15"]:
        assert comp["max_abs_diff"] <= 0.0051 and comp["margin"] < 1e-12
