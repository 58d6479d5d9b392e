"""log_throttled: rclpy's throttled logging, with the calls that rclpy's throttle drops skipped before rclpy."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rclpy.logging
from rclpy.impl import rcutils_logger

from snake_ros import throttled_log
from snake_ros.throttled_log import log_throttled

_HOUR_S = 3600.0  # a throttle period no test run outlasts


@pytest.fixture
def inspections(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many times rclpy named a call site (its costly per-call work), as a one-item list."""
    count = [0]
    find_caller = rcutils_logger._find_caller

    def counting(frame: Any) -> Any:
        count[0] += 1
        return find_caller(frame)

    monkeypatch.setattr(rcutils_logger, "_find_caller", counting)
    yield count


def _logger(tag: str) -> Any:
    return rclpy.logging.get_logger(f"snake_test_throttled_log_{tag}_{os.getpid()}")


def test_a_flood_reaches_rclpy_once_per_period_and_its_first_message_is_logged(inspections: list[int]) -> None:
    logger = _logger("flood")
    logged = [log_throttled(logger, "bad message", _HOUR_S) for _ in range(500)]
    assert logged == [True] + [False] * 499
    assert inspections[0] == 1


def test_rclpy_alone_inspects_every_call_of_a_flood(inspections: list[int]) -> None:
    """The oracle for the test above: without the gate, rclpy names the call site at every call."""
    logger = _logger("oracle")
    logged = [logger.warning("bad message", throttle_duration_sec=_HOUR_S) for _ in range(50)]
    assert logged == [True] + [False] * 49
    assert inspections[0] == 50


def test_the_call_site_rclpy_records_is_the_callers_line_and_each_line_has_its_own_throttle() -> None:
    logger = _logger("sites")
    first = log_throttled(logger, "from the first line", _HOUR_S)
    second = log_throttled(logger, "from the second line", _HOUR_S)
    assert first and second   # two lines: neither throttles the other
    sites = list(logger.contexts)
    assert len(sites) == 2
    here = os.path.abspath(__file__)
    for site in sites:
        assert site.function_name == sys._getframe().f_code.co_name
        assert site.file_path == here
    assert len({site.line_number for site in sites}) == 2


def test_the_severity_is_kept() -> None:
    logger = _logger("severity")
    assert log_throttled(logger, "an error", _HOUR_S, rclpy.logging.LoggingSeverity.ERROR)
    (context,) = logger.contexts.values()
    assert context["severity"] == rclpy.logging.LoggingSeverity.ERROR


def test_once_the_window_seems_over_rclpy_decides_and_a_dropped_call_keeps_the_gate_open(
        inspections: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate's clock runs ahead of rclpy's: rclpy (its window not over) drops, and is asked again next time."""
    logger = _logger("window")
    period = 60.0

    def site() -> bool:
        return log_throttled(logger, "bad message", period)

    assert site() and inspections[0] == 1
    clock = throttled_log._clock
    now = clock()
    monkeypatch.setattr(throttled_log, "_clock", lambda: now + 2 * period)
    assert not site() and inspections[0] == 2   # rclpy's own clock: still inside its window
    assert not site() and inspections[0] == 3   # not gated: rclpy asked again
    monkeypatch.setattr(throttled_log, "_clock", clock)
    assert not site() and inspections[0] == 3   # the real clock: inside the gate's window again


def test_every_throttled_message_of_the_nodes_goes_through_the_gate() -> None:
    """A direct ``throttle_duration_sec=`` call in a node would pay rclpy's per-call cost again."""
    package = Path(throttled_log.__file__).parent
    direct = [path.name for path in sorted(package.glob("*.py"))
              if path.name != "throttled_log.py" and "throttle_duration_sec" in path.read_text()]
    assert direct == []
