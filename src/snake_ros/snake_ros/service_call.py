"""Service calls that survive a lost answer: the request is sent again until one is answered.

With Fast DDS a service answer can be lost when the request comes soon after the client
appeared: the client sees the service ready (its own endpoints matched the server's) before
the server has matched its answer writer with the client's reader, and the server then waits
only briefly (100 ms) before it drops the answer (rclpy logs ``failed to send response
(timeout)`` on the server's side). On a loaded computer that window is wide; the client then
waits forever. Sending the request again once the first is overdue gets an answer, since by
then discovery has finished.

The server may have acted on a request whose answer was lost: a request sent again must be
one whose repetition is harmless, and the caller reads a repeated request's answer knowing
that (the bridge answers a second ``~/arm`` with ``already armed``). :class:`Answer` says how
many were sent. No rclpy import at module level: the ``snake`` CLI imports this lazily.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

RESEND_S = 2.0
"""Seconds without an answer after which a request is sent again. An answer lost to the
discovery race never comes; a slow server's answer to the first request still counts when it
arrives later (the first answer of any copy is taken)."""

_POLL_S = 0.05  # longest single executor wait while spinning for an answer

Waiter = Callable[[threading.Event, float], None]
"""Waits until the event is set or ``time.monotonic()`` reaches the deadline (its second argument)."""


@dataclass(frozen=True)
class Answer:
    """A service's answer and how many copies of the request were sent to get it."""

    response: Any
    sent: int

    @property
    def resent(self) -> bool:
        """True when the answer may be to a repeated request (the first one's answer was lost or late)."""
        return self.sent > 1


def spinning(executor: Any) -> Waiter:
    """A waiter that spins ``executor`` (no other thread spins the client's node)."""

    def wait(answered: threading.Event, until: float) -> None:
        while not answered.is_set():
            left = until - time.monotonic()
            if left <= 0.0:
                return
            executor.spin_once(timeout_sec=min(_POLL_S, left))

    return wait


def threaded(answered: threading.Event, until: float) -> None:
    """The waiter for a client whose node another thread spins."""
    answered.wait(max(0.0, until - time.monotonic()))


def call(client: Any, request: Any, wait: Waiter, deadline: float, resend_s: float = RESEND_S,
         alive: Callable[[], None] | None = None) -> Answer | None:
    """Send ``request`` on ``client`` and again every ``resend_s`` until one copy is answered.

    Args:
        client: An rclpy client whose service is ready (``wait_for_service`` first).
        request: The request; the same object is sent each time.
        wait: How to wait for an answer: :func:`spinning` or :func:`threaded`.
        deadline: ``time.monotonic()`` after which no more is sent or waited for.
        resend_s: Seconds between copies.
        alive: Called between waits; may raise to give up (a server process that died).

    Returns:
        The first answer with the number of copies sent, or None when none was answered by
        ``deadline`` (the pending copies are forgotten by the client).
    """
    answered = threading.Event()
    futures: list[Any] = []
    while True:
        future = client.call_async(request)
        future.add_done_callback(lambda _f: answered.set())
        futures.append(future)
        wait(answered, min(deadline, time.monotonic() + resend_s))
        answered.clear()  # before the look: an answer arriving after it sets it again
        for f in futures:
            if f.done() and f.result() is not None:
                _forget(client, [g for g in futures if g is not f])
                return Answer(f.result(), len(futures))
        if alive is not None:
            alive()
        if time.monotonic() >= deadline:
            _forget(client, futures)
            return None


def _forget(client: Any, futures: list[Any]) -> None:
    """Drop the client's pending requests for ``futures`` (a late answer then finds no one)."""
    for f in futures:
        if not f.done():
            client.remove_pending_request(f)
