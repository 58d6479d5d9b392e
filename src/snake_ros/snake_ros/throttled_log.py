"""rclpy's throttled logging, without rclpy's per-call cost for the calls its throttle drops.

rclpy's logger names the call site of every call before its filters decide (``CallerId``: it
walks the stack and reads the caller's source line with :mod:`inspect`): 0.4 to 2 ms of CPU per
call on a 2-core development host, also for a call that its throttle then drops. A node that
warns, throttled, about each message of a flood of bad messages would spend that on every
message (the gait node's warning about a NaN ``cmd_vel``: 0.43 ms through rclpy alone, 0.015 ms
here).

:func:`log_throttled` keeps rclpy's throttling and output. It skips only the calls that
rclpy's throttle filter would drop anyway: those made before the throttle period of the call
site's last logged message has passed, read on rclpy's throttle's own clock (its default time
source, the system clock). Every other call goes to rclpy, which decides, logs and names the call site
as before: this module adds itself to rclpy's list of files that logging calls pass through
(``rcutils_logger._internal_callers``, kept for third-party wrappers), so the call site that
rclpy records, and shows on ``/rosout``, is the caller's, not this module's.
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Any

from rclpy.impl import rcutils_logger
from rclpy.logging import LoggingSeverity

if os.path.realpath(__file__) not in rcutils_logger._internal_callers:
    rcutils_logger._internal_callers.append(os.path.realpath(__file__))

_clock = time.time  # the system clock: rclpy's throttle's default time source (rclpy.clock.Clock())
# (logger name, caller's code, caller's instruction) -> system time before which rclpy drops the call.
_window_end: dict[tuple[str, Any, int], float] = {}


def log_throttled(logger: Any, text: str, period_s: float,
                  severity: LoggingSeverity = LoggingSeverity.WARN) -> bool:
    """``logger.log(text, severity, throttle_duration_sec=period_s)`` from the caller's line; whether it was logged.

    The caller's line is the call site, as for a direct call: each line has its own throttle.
    """
    caller = sys._getframe(1)
    key = (logger.name, caller.f_code, caller.f_lasti)
    now = _clock()
    if now < _window_end.get(key, -math.inf):
        return False
    logged = bool(logger.log(text, severity, throttle_duration_sec=period_s))
    if logged:  # rclpy's window began at or after ``now``: it ends at or after this
        _window_end[key] = now + period_s
    return logged
