"""``snake bag analyze`` says what happened: the bridge's states, and path lengths without the noise.

Real rosbag2 files written by :mod:`snake_tools.bag.synthetic` (rosbags' writer), with the
bridge's bus status on ``/diagnostics`` and its change lines on ``/rosout`` as the bridge
publishes them, and motion capture with known gaussian noise; expected values come from the
session's script (closed form), not from the analysis.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from itertools import combinations

import pytest

from snake_core.robot import load_robot
from snake_tools.bag.synthetic import SyntheticSession, write_session
from snake_tools.cli import main

_FAULT_REASON = "tracking: m3_twist 1.62 rad from its goal"
_SCRIPT = ((0.08, 0.0, 6.0), (0.05, 0.1, 6.0), (0.0, 0.2, 6.0), (0.06, 0.0, 6.0))
_BRIDGE = ((0.0, "ARMED", "armed"), (13.0, "FAULT", _FAULT_REASON), (16.5, "DISARMED", "disarm"),
           (17.0, "ARMING", "armed by ~/arm"), (17.4, "ARMED", "arming gap closed"))


def _analyze(capsys, bag, out, *extra: str) -> dict:
    code = main(["bag", "analyze", str(bag), "--out", str(out), "--json", *extra])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(stdout)


class _Tables(HTMLParser):
    """Every table of a page: (header cells, rows of cells)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[list[str], list[list[str]]]] = []
        self._cell: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append(([], []))
        elif tag == "tr" and self.tables:
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self.tables:
            head, rows = self.tables[-1]
            (head if tag == "th" else rows[-1]).append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


@pytest.mark.parametrize("rosout", [True, False], ids=["status and log", "status only"])
def test_a_fault_is_in_the_report_and_its_segments_leave_the_means(tmp_path, capsys, monkeypatch, rosout):
    import snake_tools.bag.report as report

    legends: dict[str, list[str]] = {}
    save = report._save

    def keep(fig, path):
        legends[path.name] = [t.get_text() for ax in fig.axes for a in ax.get_children()
                              if type(a).__name__ == "Legend" for t in a.get_texts()]
        save(fig, path)

    monkeypatch.setattr(report, "_save", keep)
    session = SyntheticSession(script=_SCRIPT, bridge=_BRIDGE)
    bag = write_session(tmp_path / "bag", load_robot("tsnake"), session, rates=None if rosout else {"rosout": 0})
    s = _analyze(capsys, bag, tmp_path / "r")
    # The status comes every 0.5 s: without the logged changes an edge is known to that period.
    edge = 1e-9 if rosout else 0.5
    (fault,) = s["bridge_faults"]
    assert fault["reason"] == _FAULT_REASON
    assert fault["start_s"] == pytest.approx(13.0, abs=edge) and fault["end_s"] == pytest.approx(16.5, abs=edge)
    spans = s["bridge_states"]["not_armed"]
    assert [sp["state"] for sp in spans] == ["FAULT", "DISARMED", "ARMING"]
    assert s["bridge_states"]["sources"] == (["/diagnostics", "/rosout"] if rosout else ["/diagnostics"])
    # Segments 3 (12-18 s) overlaps the FAULT, DISARMED and ARMING spans; the others do not.
    rows = s["segments"]
    assert [g["left_out"] for g in rows] == [False, False, True, False]
    assert rows[2]["measured"] is False and _FAULT_REASON in rows[2]["flag"] and "DISARMED" in rows[2]["flag"]
    assert [g["index"] for g in s["segments_bridge_not_armed"]] == [3]
    means = s["segment_means"]
    assert (means["measured"], means["left_out"]) == (3, 1)
    kept = [(v, w) for k, (v, w, _d) in enumerate(_SCRIPT) if k != 2]
    # The motion is exactly the command: the means over the kept segments are (near) zero, and the
    # left-out segment's own twist is still reported beside it.
    assert means["v_error_abs_mean_m_s"] == pytest.approx(0.0, abs=1e-4)
    assert len(kept) == means["measured"]
    assert rows[2]["omega"] == pytest.approx(0.2, abs=1e-4)
    # The report: the span table with its reason, the left-out table, the bands' legend.
    page = (tmp_path / "r" / "report.html").read_text()
    assert _FAULT_REASON in page and "left out of the means" in page
    assert "bridge FAULT" in legends["joint_angles.png"] and "bridge FAULT" in legends["gait_state.png"]


def test_a_still_robot_under_noisy_motion_capture_travels_its_net_displacement(tmp_path, capsys):
    lengths = {}
    for rate in (50.0, 200.0):
        session = SyntheticSession(script=((0.0, 0.0, 29.0),), mocap_noise_m=5e-4, seed=int(rate))
        bag = write_session(tmp_path / f"bag{rate:.0f}", load_robot("tsnake"), session,
                            rates={"mocap": rate, "joint_commands": 25.0, "gait_state": 5.0})
        s = _analyze(capsys, bag, tmp_path / f"r{rate:.0f}")
        head = s["head_paths"]["/mocap/head_pose"]
        sigma = head["noise_sigma_mm"] * 1e-3
        assert sigma == pytest.approx(5e-4, rel=0.1)
        assert head["path_length_m"] <= head["displacement_m"] + 3 * sigma
        assert head["path_length_raw_polyline_m"] > 0.5  # what the polyline through the samples "travels"
        assert s["trajectory"]["pose_topic"] == "/mocap/head_pose"
        assert s["head_path_length_m"] <= s["displacement_m"] + 0.01
        lengths[rate] = head["path_length_m"]
    assert abs(lengths[200.0] - lengths[50.0]) < 3 * 5e-4


def test_the_head_path_from_motion_capture_agrees_with_ground_truth(tmp_path, capsys):
    session = SyntheticSession(script=_SCRIPT, mocap_noise_m=5e-4)
    bag = write_session(tmp_path / "bag", load_robot("tsnake"), session, rates={"mocap": 100.0})
    s = _analyze(capsys, bag, tmp_path / "r")
    paths = s["head_paths"]
    truth = paths["/ground_truth/base_pose"]["path_length_m"]
    assert paths["/mocap/head_pose"]["path_length_m"] == pytest.approx(truth, rel=0.02)
    assert paths["/mocap/head_pose"]["path_length_raw_polyline_m"] > 1.3 * truth
    assert s["trajectory"]["path_method"].startswith("cubic smoothing spline")


def test_segment_numbers_never_overlap_and_every_number_has_a_unit(tmp_path, capsys, monkeypatch):
    import snake_tools.bag.report as report

    boxes: dict[str, list] = {}
    save = report._save

    def keep(fig, path):
        renderer = fig.canvas.get_renderer()
        boxes[path.name] = [t.get_window_extent(renderer) for ax in fig.axes for t in ax.texts
                            if t.get_gid() == report.SEGMENT_LABEL_GID]
        save(fig, path)

    monkeypatch.setattr(report, "_save", keep)
    script = tuple((0.02 * (k % 3), 0.05 * (k % 2), 0.3 if k % 4 else 2.0) for k in range(24))
    bag = write_session(tmp_path / "bag", load_robot("tsnake"), SyntheticSession(script=script, bridge=_BRIDGE[:2]))
    _analyze(capsys, bag, tmp_path / "r")
    for name in ("joint_angles.png", "gait_state.png"):
        assert len(boxes[name]) >= 5, name
        assert not [(a, b) for a, b in combinations(boxes[name], 2) if a.overlaps(b)], name
    page = _Tables()
    page.feed((tmp_path / "r" / "report.html").read_text())
    number = re.compile(r"-?\d+(\.\d+)?(e[-+]?\d+)?")
    for head, rows in page.tables:
        named = head == ["quantity", "value", "unit"]
        for row in (r for r in rows if r):  # the header's row holds no td
            for col, cell in enumerate(row):
                if not number.fullmatch(cell) or head[col] in ("#",):
                    continue
                if named:
                    assert row[2], (row, "a number without a unit")
                else:
                    assert ", " in head[col], (head, col, "a column of numbers without a unit")
    gait = {r[0]: r[2] for _head, rows in page.tables for r in rows if r and r[0].startswith("last / ")}
    assert gait["last / phi h"] == "rad" and gait["last / v"] == "m/s" and gait["last / resets"] == "count"
