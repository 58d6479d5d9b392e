"""The resending service call: a lost answer is recovered, a late one still counts, none is a None.

The client here is a stand-in whose answers the test script decides (which copy is answered,
and when), with rclpy's own futures; the waiter runs the script instead of an executor. Real
DDS services go through the same function in every graph test (the ``ros`` fixture's ``call``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from rclpy.task import Future

from snake_ros import service_call


class ScriptedClient:
    """Answers copy ``k`` of the request (0-based) at the ``k``-th wait when ``answers[k]`` is given."""

    def __init__(self, answers: dict[int, tuple[int, str]]) -> None:
        self.answers = answers          # copy index -> (wait index at which it is answered, answer)
        self.futures: list[Future] = []
        self.forgotten: list[int] = []
        self.waits = 0

    def call_async(self, request: Any) -> Future:
        future = Future()
        self.futures.append(future)
        return future

    def remove_pending_request(self, future: Future) -> None:
        self.forgotten.append(self.futures.index(future))

    def waiter(self, answered: threading.Event, until: float) -> None:
        for copy, (at, answer) in self.answers.items():
            if at == self.waits and copy < len(self.futures) and not self.futures[copy].done():
                self.futures[copy].set_result(answer)
        self.waits += 1


def test_the_copy_sent_after_a_lost_answer_is_answered() -> None:
    client = ScriptedClient({1: (1, "second")})  # copy 0's answer is lost; copy 1 is answered at once
    answer = service_call.call(client, object(), client.waiter, time.monotonic() + 60.0)
    assert answer is not None and answer.response == "second" and answer.sent == 2 and answer.resent
    assert client.forgotten == [0]     # the lost copy's pending request is dropped


def test_a_late_first_answer_wins_over_a_copy() -> None:
    client = ScriptedClient({0: (2, "first"), 1: (2, "second"), 2: (2, "third")})
    answer = service_call.call(client, object(), client.waiter, time.monotonic() + 60.0)
    assert answer is not None and answer.response == "first" and answer.sent == 3
    assert client.forgotten == []       # the others were answered too: nothing pending


def test_an_answer_at_once_sends_one_copy() -> None:
    client = ScriptedClient({0: (0, "only")})
    answer = service_call.call(client, object(), client.waiter, time.monotonic() + 60.0)
    assert answer is not None and answer.sent == 1 and not answer.resent


def test_no_answer_by_the_deadline_is_none_and_nothing_stays_pending() -> None:
    client = ScriptedClient({})
    answer = service_call.call(client, object(), client.waiter, time.monotonic() - 1.0)
    assert answer is None and client.forgotten == list(range(len(client.futures))) == [0]


def test_alive_can_give_up_between_copies() -> None:
    client = ScriptedClient({})

    def dead() -> None:
        raise RuntimeError("server died")

    with pytest.raises(RuntimeError, match="server died"):
        service_call.call(client, object(), client.waiter, time.monotonic() + 60.0, alive=dead)
    assert len(client.futures) == 1


def test_the_threaded_waiter_returns_when_answered_or_at_the_deadline() -> None:
    answered = threading.Event()
    threading.Timer(0.0, answered.set).start()
    service_call.threaded(answered, time.monotonic() + 600.0)   # returns on the event, not after 600 s
    assert answered.is_set()
    unanswered = threading.Event()
    service_call.threaded(unanswered, time.monotonic() - 1.0)  # a past deadline: returns at once
    assert not unanswered.is_set()
