"""Calibration targets: per-target files, selection by argument or environment, the older layout."""

from __future__ import annotations

from snake_core.robot import calibration_path, load_robot


def test_target_chosen_by_environment_and_legacy_layout(tmp_path, monkeypatch, config_copy):
    cal = config_copy / "calibration"
    (cal / "tsnake" / "lab_robot.yaml").write_text("gaits:\n  reduction:\n    k: 0.031\n")
    monkeypatch.setenv("SNAKE_CALIBRATION_TARGET", "lab_robot")
    assert load_robot("tsnake").gait("reduction")["k"] == 0.031
    monkeypatch.delenv("SNAKE_CALIBRATION_TARGET")
    twin_k = load_robot("tsnake").gait("reduction")["k"]
    # The single-file layout still counts as the default (twin) target.
    (cal / "tsnake" / "twin.yaml").rename(cal / "tsnake.yaml")
    assert calibration_path("tsnake") == cal / "tsnake.yaml"
    assert load_robot("tsnake").gait("reduction")["k"] == twin_k


def test_which_calibration_is_described(config_copy):
    from snake_core.robot import describe_calibration

    twin = describe_calibration("tsnake")
    assert twin.startswith("calibration 'twin' of tsnake: ") and "tsnake/twin.yaml" in twin
    assert "snake experiment calibrate --write" in twin
    absent = describe_calibration("tsnake", "nowhere")
    assert "none" in absent and "nominal" in absent
