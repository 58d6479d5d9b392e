"""``snake experiment rolling-advantage``: the ratio table is built from the twin runs it reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from snake_tools.cli import main
from snake_tools.experiment import rolling_advantage
from snake_tools.experiment.task import run_task


def test_ratios_come_from_the_runs_and_a_weaker_baseline_is_slower(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "rolling-advantage", "--frictions", "0.8", "--amplitude-scales", "0.5,1",
                 "--duration", "5", "--workers", "2", "--json", "--out", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    cells = {(c["mode"], c["amplitude_scale"]): c for c in out["cells"]}
    assert len(cells) == 4
    for c in cells.values():
        assert c["ratio"] == pytest.approx(c["rolling"] / c["conical"])
    # an independent run of one cell in this process gives the same number
    again = run_task(rolling_advantage.SpeedTask("conical", "translate", 0.8, 0.5, 5.0))
    assert again == pytest.approx(cells[("translate", 0.5)]["conical"], rel=1e-9)
    # the baseline's speed grows with its wave amplitude, so the ratio falls
    for mode in ("translate", "turn"):
        assert cells[(mode, 0.5)]["conical"] < cells[(mode, 1.0)]["conical"]
        assert cells[(mode, 0.5)]["ratio"] > cells[(mode, 1.0)]["ratio"]
    assert Path(out["figure"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
