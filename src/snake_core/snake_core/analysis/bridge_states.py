"""The bridge's safety states over a recorded session, and the command segments they overlap (pure).

The bridge (``snake_hardware.supervisor``) is in one of ``DISARMED``, ``ARMING``, ``ARMED``,
``HOLDING``, ``ESTOPPED`` or ``FAULT``; only in ``ARMED`` do the servos follow the commands
as sent. A recording tells its states two ways, both read here as
:class:`StateSample` lists on the analysis' time base:

- ``/diagnostics``, status ``bridge: bus`` (every 0.5 s): key ``state`` and a message
  ``"<STATE>: <reason>"`` (``"FAULT: tracking: m3_twist ..."``);
- ``/rosout``, the bridge's log line at each change: ``"<FROM> -> <TO>: <reason>"``
  (exact to the message, where the periodic status is exact to its period).

:func:`state_spans` joins them into spans (a change logged on ``/rosout`` wins over the
status that has not yet caught up with it); :func:`spans_overlapping` names the spans a
time interval overlaps (a command segment measured while the servos were not following
it is not a measurement of the gait).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

BRIDGE_STATES: tuple[str, ...] = ("DISARMED", "ARMING", "ARMED", "HOLDING", "ESTOPPED", "FAULT")
"""The bridge's states (``snake_hardware.supervisor.BridgeState`` values)."""
FOLLOWING = "ARMED"
"""The one state in which the servos apply the commands as sent."""
STOPPED = "STOPPED"
"""Pseudo-state after the bridge's exit status (``stopped: bridge exiting, ...``)."""

_TRANSITION = re.compile(r"^(?P<src>[A-Z]+) -> (?P<dst>[A-Z]+): (?P<reason>.*)$", re.S)
_STATUS = re.compile(r"^(?P<state>[A-Z]+): (?P<reason>.*)$", re.S)


@dataclass(frozen=True)
class StateSample:
    """The bridge's state seen at one time.

    Attributes:
        t: Time, s (the analysis' time base).
        state: One of :data:`BRIDGE_STATES` or :data:`STOPPED`.
        reason: Why the bridge is in it (the supervisor's reason), or "".
        source: Topic it was read from.
        change: A logged change (exact time) rather than a periodic status.
    """

    t: float
    state: str
    reason: str
    source: str
    change: bool = False


@dataclass(frozen=True)
class StateSpan:
    """A stretch of one bridge state.

    Attributes:
        state: The state.
        start_s: First time it held, s.
        end_s: Last time it held (the next span's start, or the recording's end), s.
        reason: The reason given when the span began (or the first one given during it).
        source: Topic(s) the span was read from.
    """

    state: str
    start_s: float
    end_s: float
    reason: str
    source: str

    @property
    def duration_s(self) -> float:
        """Length of the span, s."""
        return self.end_s - self.start_s


def from_bus_status(t: float, message: str, values: dict[str, object], source: str = "/diagnostics") -> \
        StateSample | None:
    """The state in one ``bridge: bus`` status, or None when it names none.

    Args:
        t: Time of the message, s.
        message: The status message (``"FAULT: tracking: ..."``, ``"ARMED: armed"``,
            ``"stopped: bridge exiting, torque_off"``).
        values: Its key/values (``state`` read when present).
        source: Topic name recorded with the sample.
    """
    state = values.get("state")
    m = _STATUS.match(message)
    reason = m.group("reason") if m and m.group("state") in BRIDGE_STATES else message
    if isinstance(state, str) and state in BRIDGE_STATES:
        return StateSample(t, state, reason.strip(), source)
    if message.startswith("stopped:"):
        return StateSample(t, STOPPED, message[len("stopped:"):].strip(), source)
    if m and m.group("state") in BRIDGE_STATES:
        return StateSample(t, m.group("state"), reason.strip(), source)
    return None


def from_log_line(t: float, text: str, source: str = "/rosout") -> StateSample | None:
    """The state a ``"<FROM> -> <TO>: <reason>"`` log line changes to, or None for any other line."""
    m = _TRANSITION.match(text.strip())
    if not m or m.group("src") not in BRIDGE_STATES or m.group("dst") not in BRIDGE_STATES:
        return None
    return StateSample(t, m.group("dst"), m.group("reason").strip(), source, change=True)


def state_spans(samples: Sequence[StateSample], end_s: float) -> list[StateSpan]:
    """Join state samples into spans of one state each.

    Samples are taken in time order. A logged change holds until the next logged change;
    periodic statuses between two changes that still name the state before the last change
    (a status published before the change, received after it) are ignored, so a change
    seen on both topics is one edge, at the logged time. Without logged changes the
    periodic statuses alone give the spans (each state from the first status naming it).

    Args:
        samples: Samples from any sources.
        end_s: End of the recording, s (the last span ends there).

    Returns:
        Spans in time order, adjacent ones of different states.
    """
    ordered = sorted(samples, key=lambda s: (s.t, not s.change))
    states: list[str] = []
    starts: list[float] = []
    reasons: list[str] = []
    sources: list[set[str]] = []
    last_change: StateSample | None = None
    for s in ordered:
        if last_change is not None and not s.change and s.state != last_change.state and \
                s.t - last_change.t < _STALE_AFTER_CHANGE_S:
            continue  # a status older than the logged change
        if s.change:
            last_change = s
        if states and states[-1] == s.state:
            reasons[-1] = reasons[-1] or s.reason
            sources[-1].add(s.source)
            continue
        states.append(s.state)
        starts.append(float(s.t))
        reasons.append(s.reason)
        sources.append({s.source})
    ends = [*starts[1:], max(float(end_s), starts[-1])] if starts else []
    return [StateSpan(st, a, b, why, ", ".join(sorted(src)))
            for st, a, b, why, src in zip(states, starts, ends, reasons, sources, strict=True)]


_STALE_AFTER_CHANGE_S = 1.0  # s: a status naming another state this soon after a logged change predates it


def spans_overlapping(start_s: float, end_s: float, spans: Sequence[StateSpan],
                      following: str = FOLLOWING) -> list[StateSpan]:
    """The spans of any state but ``following`` that overlap [start_s, end_s] by a positive time.

    Args:
        start_s: Interval start, s.
        end_s: Interval end, s.
        spans: :func:`state_spans` output.
        following: The state that does not count.
    """
    return [s for s in spans if s.state != following and s.start_s < end_s and start_s < s.end_s]
