"""The supervisor's health poll: when a round runs, and what a polled servo says about foreign writes.

ROS-free and free of state transitions: :class:`HealthRounds` schedules the poll (a round
over every joint starts every ``health_period_s`` and spans cycles, one part per cycle,
as :meth:`~snake_hardware.backend.Backend.health_round` yields them) and counts complete
rounds; :func:`foreign_settings` reads one part for settings that the bridge did not write,
and :func:`describe_foreign` names them for a message. What a finding does (FAULT, limp,
a warning) is decided by :class:`snake_hardware.supervisor.Supervisor`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping

from snake_hardware.backend import JointHealth


class HealthRounds:
    """Schedule of the health poll over the joints ``names``.

    Attributes:
        polls: Rounds completed (every joint polled once).
    """

    def __init__(self, names: Iterable[str]) -> None:
        """No round running; the first is due at once."""
        self._names = set(names)
        self._round: Iterator[list[JointHealth]] | None = None
        self._seen: set[str] = set()
        self._last_start = -math.inf   # ``now`` at which the last round started, s
        self.polls = 0

    def next_part(self, now: float, period_s: float,
                  start: Callable[[], Iterable[list[JointHealth]]]) -> list[JointHealth] | None:
        """This cycle's part of the poll at ``now``, s, or None (no round due, or the round ended).

        Args:
            now: The cycle's time, s.
            period_s: Seconds between the starts of two rounds (``health_period_s``).
            start: Starts a round (the backend's ``health_round``); called when one is due.

        Raises:
            BaseException: Whatever ``start`` or the round raises; the round is dropped.
        """
        if self._round is None:
            if now - self._last_start < period_s:
                return None
            self._last_start = now
            self._round = iter(start())
            self._seen = set()
        try:
            part = next(self._round)
        except StopIteration:
            part = None
        except BaseException:
            self._round = None
            raise
        if part is None:
            self._round = None
            return None
        self._seen.update(h.name for h in part)
        if self._seen >= self._names:
            self._round = None
            self.polls += 1
        return part

    def drop(self) -> None:
        """Drop the round under way (the bus was lost); the next starts when due."""
        self._round = None

    def restart(self) -> None:
        """Drop the round under way and make the next one due at once (the bus is ready again)."""
        self._round = None
        self._last_start = -math.inf


def foreign_settings(part: Iterable[JointHealth], holding: bool, skip: Collection[str],
                     limp: Collection[str]) -> dict[str, str]:
    """Settings the bridge did not write, by joint, as one part of the poll reports them.

    Args:
        part: The polled joints' health.
        holding: The bridge holds torque on (torque found off then counts as foreign).
        skip: Joints not judged (a servo in hardware error has turned its own torque off).
        limp: Joints the bridge left limp on purpose (their torque off is not foreign).

    Returns:
        ``{joint: "setting, setting"}`` for each joint with something foreign; rebooting
        servos are not judged.
    """
    found: dict[str, str] = {}
    for h in part:
        if h.rebooting or h.name in skip:
            continue
        what = list(h.foreign)
        if holding and h.torque_enabled is False and h.name not in limp:
            what.insert(0, "Torque Enable 0 (torque off)")
        if what:
            found[h.name] = ", ".join(what)
    return found


def describe_foreign(ids: Mapping[str, int], found: Mapping[str, str]) -> str:
    """``joint (ID n): what; ...`` for joints whose settings someone else changed (``ids``: servo IDs)."""
    return "; ".join(f"{n} (ID {ids[n]}): {w}" for n, w in sorted(found.items()))
