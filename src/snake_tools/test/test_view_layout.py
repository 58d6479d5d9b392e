"""``config/foxglove_layout.json``: what the shipped layout shows, against the view's channels and the robot."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from snake_core.robot import load_robot
from snake_tools.live_view import CHANNELS, COMMAND_SERVICES, HEAD_FRAME

ROOT = Path(__file__).resolve().parents[3]
_ROBOT = load_robot("tsnake")  # the default robot, whose joints the plots name


@pytest.fixture(scope="module")
def layout() -> dict[str, Any]:
    return dict(json.loads((ROOT / "config" / "foxglove_layout.json").read_text()))


def _panels(node: Any) -> list[str]:
    """The panel ids a mosaic layout (or a tab's) places."""
    if isinstance(node, str):
        return [node]
    return _panels(node["first"]) + _panels(node["second"])


def test_every_panel_is_placed_and_every_placed_panel_configured(layout: dict[str, Any]) -> None:
    config = layout["configById"]
    placed = _panels(layout["layout"])
    for panel in placed:
        if panel.startswith("Tab!"):
            placed += [p for tab in config[panel]["tabs"] for p in _panels(tab["layout"])]
    assert sorted(placed) == sorted(config)


def test_one_plot_per_joint_type_covers_every_joint_once_by_its_index(layout: dict[str, Any]) -> None:
    plots = {k: v for k, v in layout["configById"].items() if k.startswith("Plot!")}
    assert sorted(plots) == sorted(f"Plot!{t}" for t in {j.type for j in _ROBOT.joints})
    seen = []
    for panel, config in plots.items():
        kind = panel.removeprefix("Plot!")
        for path in config["paths"]:
            index = int(re.fullmatch(r"/joint_states\.position\[(\d+)\]", path["value"]).group(1))  # type: ignore[union-attr]
            joint = _ROBOT.joints[index]
            assert (path["label"], joint.type) == (joint.name, kind)  # joint_states are in the robot's order
            seen.append(joint.name)
        assert config["showPlotValuesInLegend"] is True
    assert sorted(seen) == sorted(_ROBOT.joint_names)


def test_the_panels_read_channels_the_view_serves(layout: dict[str, Any]) -> None:
    config = layout["configById"]
    three_d = config["3D!snake"]
    assert set(three_d["topics"]) == {"/robot/scene", "/mocap/head_pose", "/plan", "/goal_pose"} <= set(CHANNELS)
    assert three_d["followTf"] == HEAD_FRAME and three_d["followMode"] == "follow-position"
    assert config["DiagnosticSummary!all"]["topicToRender"] == "/diagnostics"
    assert [p["value"] for p in config["StateTransitions!bridge"]["paths"]] == ["/bridge/state.state"]
    assert config["RawMessages!monitors"]["topicPath"] in CHANNELS


def test_a_button_for_every_command_service(layout: dict[str, Any]) -> None:
    buttons = {v["serviceName"] for k, v in layout["configById"].items() if k.startswith("CallService!")}
    assert buttons == {f"/bridge/{s}" for s in COMMAND_SERVICES}
