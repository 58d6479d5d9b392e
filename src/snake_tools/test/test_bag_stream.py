"""The streaming bag analysis: column store, chunked body, streamed writer, actuator power.

Each result is compared with an independent one: the analysis of the same bag with its
rows as plain Python lists (the form read before the column store) and the body computed
in one piece; rosbags' own deserialiser for every JointState; the synthetic session's
closed-form velocities and efforts for the cost of transport.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

import snake_tools.bag.analyze as analyze_mod
import snake_tools.bag.synthetic as synthetic
from snake_core.robot import load_robot
from snake_tools.bag.analyze import analyze_series
from snake_tools.bag.series import BagSeries, GaitRows, JointRows, Series, read_series
from snake_tools.bag.storage import iter_raw, summarize, typestore_for
from snake_tools.bag.synthetic import SyntheticSession, write_session

_ROOT = Path(__file__).resolve().parents[3]
_G = 9.80665  # standard gravity, m/s^2 (the value of the definition of cost of transport)
_SCRIPT = ((0.08, 0.0, 6.0), (0.05, 0.1, 5.0), (0.0, 0.15, 4.0), (0.0, 0.0, 2.0))
_COT_KEYS = ("cost_of_transport", "cost_of_transport_segments")


def _plain(bs: BagSeries) -> BagSeries:
    """The same series with list rows and list times (no column views)."""
    series = {n: Series(t=[float(x) for x in s.t], rows=list(s.rows)) for n, s in bs.series.items()}
    return BagSeries(summary=bs.summary, time_base=bs.time_base, t0_ns=bs.t0_ns, series=series,
                     unreadable=bs.unreadable, pose_topics=bs.pose_topics)


def _assert_close(a, b, path=""):
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _assert_close(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, (list, tuple)) and not (a and hasattr(a[0], "label")):
        assert len(a) == len(b), path
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_close(x, y, f"{path}[{k}]")
    elif isinstance(a, (float, np.floating)):
        assert (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-12 * max(1.0, abs(a)), (path, a, b)
    elif isinstance(a, np.ndarray):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=path)
    else:
        assert a == b, path


@pytest.mark.parametrize("mocap_topic", ["/mocap/head_pose", "tf:snake_head"])
def test_columns_and_chunks_give_the_analysis_of_plain_rows(tmp_path, monkeypatch, mocap_topic):
    bag = write_session(tmp_path / "bag", load_robot("tsnake"), SyntheticSession(script=_SCRIPT, clock_factor=2.0),
                        mocap_topic=mocap_topic)
    bs = read_series(bag, progress=False)
    assert isinstance(bs.series["/joint_states"].rows, JointRows)
    assert isinstance(bs.series["/gait_state"].rows, GaitRows)
    monkeypatch.setattr(analyze_mod, "_BODY_CHUNK", 10**9)
    old = analyze_series(_plain(bs), recompute=True)
    monkeypatch.setattr(analyze_mod, "_BODY_CHUNK", 97)  # many chunks, boundaries mid-segment
    new = analyze_series(bs, recompute=True)
    assert len(new.arrays["t_body"]) > 5 * 97
    old.summary["missing"].pop("cost_of_transport")  # list rows carry no power: that section is skipped
    new_summary = {k: v for k, v in new.summary.items() if k not in _COT_KEYS}
    _assert_close(old.summary, new_summary)
    for key in ("t_body", "centre", "heading", "t_points", "points", "t_state", "q_state", "t_cmd", "q_cmd"):
        _assert_close(old.arrays[key], new.arrays[key], key)


def test_joint_states_match_rosbags_deserialiser(tmp_path):
    session = SyntheticSession(script=((0.05, 0.1, 3.0),), effort_amplitude=1.5)
    bag = write_session(tmp_path / "bag", load_robot("tsnake"), session, storage="sqlite3")
    bs = read_series(bag, progress=False)
    store = typestore_for(summarize(bag).topics.values())
    seen = {"/joint_states": 0, "/joint_commands": 0}
    for topic, msgtype, _stamp, data in iter_raw(bag, set(seen)):
        msg = store.deserialize_cdr(data, msgtype)
        rows = bs.series[topic].rows
        k = seen[topic]
        names, position = rows[k]
        assert names == tuple(msg.name)
        np.testing.assert_array_equal(position, msg.position)
        if len(msg.effort):
            expected = np.clip(np.asarray(msg.effort) * np.asarray(msg.velocity), 0.0, None).sum()
            assert rows.power[k] == pytest.approx(expected, rel=1e-12, abs=1e-15)
        else:
            assert math.isnan(rows.power[k])
        seen[topic] += 1
    assert seen == {n: len(bs.series[n].rows) for n in seen}
    assert seen["/joint_states"] > 100


def test_cost_of_transport_of_known_efforts(tmp_path):
    robot = load_robot("tsnake")
    session = SyntheticSession(script=((0.08, 0.0, 8.0), (0.0, 0.15, 4.0)), effort_amplitude=2.0)
    bag = write_session(tmp_path / "bag", robot, session)
    an = analyze_series(read_series(bag, progress=False))
    cot = an.summary["cost_of_transport"]

    # Independent: the session's closed form at the joint_states times (50 Hz, two periods late).
    t = np.arange(0.0, session.duration + 1e-9, 1.0 / 50.0)
    t_lag = t[np.maximum(np.arange(len(t)) - session.lag_periods, 0)]
    w = 2 * np.pi * session.frequency
    twist = [j for j, joint in enumerate(robot.joints) if joint.type == "twist"]
    qd = np.array([[w * session.amplitude * math.cos(w * x + j) for j in twist] for x in t_lag])
    tau = np.array([[session.effort_amplitude * math.cos(w * x + j + session.effort_phase) for j in twist]
                    for x in t_lag])
    power = np.maximum(tau * qd, 0.0).sum(axis=1)
    assert (tau * qd < 0).any()  # braking happens and must not count
    body = yaml.safe_load((_ROOT / "config/robots/tsnake.yaml").read_text())["body"]
    mass = body["n_modules"] * body["module_mass"]
    work = float(np.sum((power[1:] + power[:-1]) / 2 * np.diff(t)))
    centre, _psi = synthetic.drive_pose(session, t[[0, -1]])
    distance = float(np.linalg.norm(centre[1] - centre[0]))

    assert cot["mass_kg"] == pytest.approx(mass)
    assert cot["energy_j"] == pytest.approx(work, rel=1e-9)
    assert cot["mean_power_w"] == pytest.approx(work / session.duration, rel=1e-9)
    assert cot["displacement_m"] == pytest.approx(distance, rel=1e-6)
    assert cot["cost_of_transport"] == pytest.approx(work / (mass * _G * distance), rel=1e-6)
    straight = an.summary["cost_of_transport_segments"][0]
    sel = (t >= straight["start_s"]) & (t <= straight["end_s"])
    seg_work = float(np.sum((power[sel][1:] + power[sel][:-1]) / 2 * np.diff(t[sel])))
    seg_centre, _ = synthetic.drive_pose(session, t[sel][[0, -1]])
    seg_d = float(np.linalg.norm(seg_centre[1] - seg_centre[0]))
    assert straight["cost_of_transport"] == pytest.approx(seg_work / (mass * _G * seg_d), rel=1e-6)


def test_no_efforts_recorded_is_said(tmp_path):
    bag = write_session(tmp_path / "bag", load_robot("tsnake"), SyntheticSession(script=((0.05, 0.0, 2.0),)),
                        rates={"joint_commands": 0.0})
    an = analyze_series(read_series(bag, progress=False))
    assert "cost_of_transport" not in an.summary
    assert an.summary["missing"]["cost_of_transport"].startswith("no efforts recorded")


def test_streamed_writer_does_not_depend_on_its_chunk(tmp_path, monkeypatch):
    session = SyntheticSession(script=((0.05, 0.1, 2.5), (0.0, 0.0, 1.0)), clock_factor=2.0)
    whole = write_session(tmp_path / "whole", load_robot("tsnake"), session)
    monkeypatch.setattr(synthetic, "_CHUNK_S", 0.37)
    chunked = write_session(tmp_path / "chunked", load_robot("tsnake"), session)
    a = [(t, ty, s, bytes(d)) for t, ty, s, d in iter_raw(whole)]
    b = [(t, ty, s, bytes(d)) for t, ty, s, d in iter_raw(chunked)]
    assert len(a) > 500
    assert a == b


def test_header_stamps_are_given_on_the_time_axis_only_when_the_clock_stamped_them(tmp_path):
    robot = load_robot("tsnake")
    # The clock runs twice as fast as receive time; every stamped message carries its simulated time.
    bs = read_series(write_session(tmp_path / "sim", robot, SyntheticSession(clock_factor=2.0)), progress=False)
    assert bs.time_base == "simulated (/clock)"
    for topic in ("/joint_states", "/joint_commands", "/mocap/head_pose"):
        stamps = bs.header_times(topic)
        assert stamps is not None and len(stamps) == len(bs.series[topic].t), topic
        # Receive times mapped onto the clock (exact here: the clock runs at a constant rate).
        np.testing.assert_allclose(stamps, bs.series[topic].times(), atol=1e-6, err_msg=topic)
    assert bs.header_times("/cmd_vel") is None  # stamps kept for JointState and PoseStamped only
    wall = read_series(write_session(tmp_path / "wall", robot, rates={"clock": 0.0}), progress=False)
    assert wall.time_base == "receive time"
    assert wall.header_times("/joint_states") is None
    np.testing.assert_array_equal(wall.stamped_times("/joint_states"), wall.series["/joint_states"].times())
