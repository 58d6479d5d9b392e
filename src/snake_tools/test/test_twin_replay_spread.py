"""``snake twin replay --spread N``: the head figures over starts the encoders cannot tell apart.

The "robot" is the twin with hidden physics on the ground, recorded to a real rosbag2 bag
(:func:`snake_tools.twin.recording.record_twin_run`). A target with those physics replays the
recorded start exactly (divergence 0: the oracle), so every distance above 0 in the spread is a
start moved within half an encoder count, which the replay must have applied.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from snake_core.robot import load_robot
from snake_core.servo.model import RAD_PER_TICK
from snake_core.twin_params import ContactParams, ServoParams, TwinParams
from snake_tools.cli import main
from snake_tools.twin.recording import record_twin_run
from snake_tools.twin.spread import MAX_SPREAD, OFFSET_STEP_RAD, start_offsets

ROOT = Path(__file__).resolve().parents[3]
_HIDDEN = TwinParams(servo={"twist": ServoParams(kp=3.0, latency_s=0.04)},
                     contact=ContactParams(ground_friction=0.4))


def _drive(t: float) -> tuple[float, float]:
    return (0.08, 0.0) if t < 2.0 else (0.05, 0.15)


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    return record_twin_run(tmp_path_factory.mktemp("spread") / "robot", load_robot("tsnake"), 4.0,
                           twin_params=_HIDDEN, cmd_vel=_drive)


@pytest.fixture
def hidden_target(tmp_path, monkeypatch) -> str:
    cfg = tmp_path / "config"
    shutil.copytree(ROOT / "config", cfg)
    (cfg / "calibration" / "tsnake" / "lab.yaml").write_text(yaml.safe_dump({"twin": _HIDDEN.to_yaml_dict()}))
    monkeypatch.setenv("SNAKE_CONFIG_DIR", str(cfg))
    return "lab"


def test_the_spread_holds_the_recorded_start_and_the_moved_ones(recording, hidden_target, capsys):
    assert main(["twin", "replay", str(recording), "--target", hidden_target, "--spread", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["divergence_max_m"] == pytest.approx(0.0, abs=1e-9)   # the recorded start, as without --spread
    spread = out["spread"]
    assert spread["n"] == 4
    assert spread["start_offsets_rad"] == pytest.approx([1e-4, -1e-4, 2e-4, -2e-4])
    band = spread["divergence_max_m"]
    assert band["min"] == pytest.approx(0.0, abs=1e-9)   # the recorded start is one of the five
    assert band["max"] > 1e-6                            # a moved start moves the head: the offset was applied
    assert band["min"] <= band["median"] <= band["max"]
    assert set(spread) >= {"divergence_end_m", "heading_drift_rad"}
    assert main(["twin", "replay", str(recording), "--target", hidden_target, "--spread", "2"]) == 0
    table = capsys.readouterr().out
    assert "divergence_max_m over 3 starts: least / median / largest" in table


def test_without_spread_the_replay_has_none(recording, capsys):
    assert main(["twin", "replay", str(recording), "--json"]) == 0
    assert "spread" not in json.loads(capsys.readouterr().out)


def test_the_starts_stay_within_half_an_encoder_count():
    offsets = start_offsets(MAX_SPREAD)
    assert len(set(offsets)) == MAX_SPREAD
    assert max(abs(o) for o in offsets) <= RAD_PER_TICK / 2
    assert max(abs(o) for o in offsets) + OFFSET_STEP_RAD > RAD_PER_TICK / 2   # the most that fit
    assert start_offsets(0) == []


@pytest.mark.parametrize("args, words", [
    (["--spread", str(MAX_SPREAD + 1)], f"--spread {MAX_SPREAD + 1}: from 0 to {MAX_SPREAD}"),
    (["--spread", "-1"], "--spread -1: from 0"),
    (["--spread", "2", "--lifted"], "--spread: a lifted replay has no head path"),
])
def test_a_bad_spread_is_one_line_and_exit_2(recording, capsys, args, words):
    assert main(["twin", "replay", str(recording), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]


@pytest.mark.parametrize("args, words", [
    (["--bench-spread", "2"], "--bench-spread spreads the replays of the fitted bench robot: give --bench-robot"),
    (["--bench-robot", "--bench-spread", str(MAX_SPREAD + 1)],
     f"--bench-spread {MAX_SPREAD + 1}: from 0 to {MAX_SPREAD}"),
])
def test_a_bad_bench_spread_is_one_line_and_exit_2_before_any_fit(capsys, args, words):
    assert main(["bench", "twin", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]
