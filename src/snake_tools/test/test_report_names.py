"""The session report says what it plots: which point, net displacement beside path lengths, units, bag name."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from snake_core.analysis.session import chain_points_batch
from snake_core.robot import load_robot
from snake_tools.bag.analyze import analyze
from snake_tools.bag.report import _name_unit, report_title, write_report
from snake_tools.bag.synthetic import SyntheticSession, write_session

_ROBOT = load_robot("tsnake")


def _rows(page: str) -> dict[str, tuple[str, str]]:
    """quantity -> (value, unit) of every three-column row of the report's tables."""
    cells = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td></tr>", page)
    return {q: (v, u) for q, v, u in cells}


def test_turning_in_place_names_a_small_displacement_and_the_heads_long_path(tmp_path: Path) -> None:
    """A straight body turning in place about its centre: the centre stays, the head runs a circle's arc."""
    omega, seconds = 0.2, 6.0
    bag = write_session(tmp_path / "run" / "bag", _ROBOT, SyntheticSession(script=((0.0, omega, seconds),)))
    an = analyze(bag, progress=False)
    s = an.summary
    straight = chain_points_batch(_ROBOT, np.zeros((1, 3)), np.array([[1.0, 0, 0, 0]]),
                                  np.zeros((1, len(_ROBOT.joints))))[0][:, :2]
    radius = float(np.linalg.norm(straight[0] - straight.mean(axis=0)))   # head to body centre, m
    turned = abs(np.radians(s["heading_change_deg"]))
    assert s["displacement_m"] < 0.02 * radius * turned
    assert s["head_path_length_m"] == pytest.approx(radius * turned, rel=0.02)
    written = write_report(an, tmp_path / "report")
    page = written["report"].read_text()
    rows = _rows(page)
    assert rows["body centre net displacement"][1] == "m"
    assert rows["head path length"][1] == "m"
    assert "body centre (mean of the backbone points)" in page
    # the title names the bag by its folder: a bag called "bag" alone names nothing
    assert report_title(s).endswith("(run/bag)") and "<h1>" + report_title(s) in page


def test_gait_rates_are_rad_per_s_not_celsius(tmp_path: Path) -> None:
    bag = write_session(tmp_path / "bag", _ROBOT, SyntheticSession(script=((0.05, 0.0, 3.0),)))
    page = write_report(analyze(bag, progress=False), tmp_path / "report")["report"].read_text()
    units = {q: u for q, (_v, u) in _rows(page).items()}
    for rate in ("omega h", "omega t", "omega c"):
        assert units[f"last / {rate}"] == "rad/s"
    assert units["last / v"] == "m/s"
    assert _name_unit("temperature_max_c") == ("temperature max", "C")   # Celsius stays for temperatures
