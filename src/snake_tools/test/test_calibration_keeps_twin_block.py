"""Writers of a calibration file keep its ``twin:`` block (the twin's physics are not theirs to change)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from snake_core.robot import load_twin_params
from snake_core.twin_params import ServoParams, TwinParams
from snake_tools.experiment import calibrate

ROOT = Path(__file__).resolve().parents[3]


def test_experiment_calibrate_write_keeps_the_twin_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "config"
    shutil.copytree(ROOT / "config", cfg)
    path = cfg / "calibration" / "tsnake" / "twin.yaml"
    data = yaml.safe_load(path.read_text())
    data["twin"] = {"servo": {"twist": {"latency_s": 0.02}}}
    path.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("SNAKE_CONFIG_DIR", str(cfg))
    result = {"reduction": {"k": 0.05, "d_prime": 1.1, "v_rms_error": 0.0, "omega_rms_error": 0.0},
              "conical": {"k": 0.04, "curvature_max": 1.2}}
    assert calibrate.write(result, 5.0) == path
    written = yaml.safe_load(path.read_text())
    assert written["gaits"]["reduction"] == {"k": 0.05, "d_prime": 1.1}
    assert load_twin_params("tsnake")[0] == TwinParams(servo={"twist": ServoParams(latency_s=0.02)})
