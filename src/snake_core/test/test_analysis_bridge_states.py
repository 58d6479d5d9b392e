"""The bridge's state spans from its bus status and its logged changes."""

from __future__ import annotations

import pytest

from snake_core.analysis.bridge_states import (
    StateSample,
    from_bus_status,
    from_log_line,
    spans_overlapping,
    state_spans,
)


def _status(t: float, state: str, reason: str) -> StateSample:
    s = from_bus_status(t, f"{state}: {reason}", {"state": state})
    assert s is not None
    return s


def test_the_periodic_status_alone_gives_the_spans_and_their_reasons():
    samples = [_status(0.5 * k, "ARMED", "armed") for k in range(10)]
    samples += [_status(5.0 + 0.5 * k, "FAULT", "tracking: m3_twist 1.6 rad from its goal") for k in range(6)]
    spans = state_spans(samples, end_s=9.0)
    assert [(s.state, s.start_s, s.end_s) for s in spans] == [("ARMED", 0.0, 5.0), ("FAULT", 5.0, 9.0)]
    assert spans[1].reason == "tracking: m3_twist 1.6 rad from its goal" and spans[1].duration_s == 4.0


def test_a_logged_change_wins_over_a_status_that_has_not_caught_up():
    change = from_log_line(4.2, "ARMED -> HOLDING: command timeout (0.5 s)")
    back = from_log_line(6.1, "HOLDING -> ARMING: new command")
    armed = from_log_line(6.4, "ARMING -> ARMED: arming gap closed")
    assert change is not None and back is not None and armed is not None
    samples = [_status(0.5 * k, "ARMED", "armed") for k in range(9)] + [change, back, armed]
    samples.append(_status(4.3, "ARMED", "armed"))  # published before the change, received after it
    samples += [_status(4.5 + 0.5 * k, "HOLDING", "command timeout (0.5 s)") for k in range(3)]
    samples.append(_status(6.2, "HOLDING", "command timeout (0.5 s)"))  # late again
    spans = state_spans(samples, end_s=8.0)
    assert [(s.state, s.start_s, s.end_s) for s in spans] == [
        ("ARMED", 0.0, 4.2), ("HOLDING", 4.2, 6.1), ("ARMING", 6.1, 6.4), ("ARMED", 6.4, 8.0)]
    assert spans[1].reason == "command timeout (0.5 s)" and "/rosout" in spans[1].source


@pytest.mark.parametrize(("message", "values", "expected"), [
    ("stopped: bridge exiting, torque_off", {}, ("STOPPED", "bridge exiting, torque_off")),
    ("disconnected: device gone", {"state": "FAULT"}, ("FAULT", "disconnected: device gone")),
    ("ok", {}, None),
    ("HOLDING: several commanders", {}, ("HOLDING", "several commanders")),
])
def test_bus_status_messages(message, values, expected):
    s = from_bus_status(1.0, message, values)
    assert (None if s is None else (s.state, s.reason)) == expected


def test_other_log_lines_are_not_changes():
    assert from_log_line(1.0, "bus ready: 18 servos") is None
    assert from_log_line(1.0, "A -> B: not states") is None


def test_segments_overlapping_spans_that_are_not_armed():
    spans = state_spans([_status(0.0, "ARMED", "armed"), _status(5.0, "FAULT", "x"), _status(7.0, "ARMED", "y")],
                        end_s=10.0)
    assert spans_overlapping(0.0, 5.0, spans) == []  # touching is not overlapping
    assert [s.state for s in spans_overlapping(4.0, 6.0, spans)] == ["FAULT"]
    assert spans_overlapping(7.0, 10.0, spans) == []
