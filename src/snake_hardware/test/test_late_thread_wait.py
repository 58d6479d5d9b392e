"""A thread that was not running when an answer was due is not a silent bus (``late_waits``).

The port's wait is driven directly on a real pty pair: the test plays the bus on the master
side and moves the packet's start back in time, as a thread descheduled by a loaded computer
finds it when it runs again. No sleeps: what the port did is read from its counters and from
the bytes it returned.
"""

from __future__ import annotations

import os
import pty
import tty
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from snake_hardware.backend import BusCounters
from snake_hardware.dynamixel.port import _CountingPort

_LATENCY_MS = 1.0


@pytest.fixture
def line() -> Iterator[tuple[_CountingPort, int, BusCounters]]:
    master, slave = pty.openpty()
    tty.setraw(slave)
    os.set_blocking(slave, False)
    counters = BusCounters()
    port = _CountingPort("/dev/null", _LATENCY_MS, counters)
    port.ser = SimpleNamespace(fd=slave, is_open=True)
    port.tx_time_per_byte = 0.0025   # ms per byte at 4 Mbps
    try:
        yield port, master, counters
    finally:
        os.close(master)
        os.close(slave)


def test_an_answer_waiting_when_the_late_thread_runs_again_is_read_without_a_grant(line) -> None:
    port, master, counters = line
    port.setPacketTimeout(14)
    os.write(master, b"\xff\xff\xfd\x00")
    port.packet_start_time -= 10 * port.packet_timeout     # the thread ran again long after the timeout
    assert port.readPort(4) == b"\xff\xff\xfd\x00"
    assert counters.late_waits == 0


def test_a_late_thread_gives_the_bus_one_fresh_window_then_the_silence_counts(line) -> None:
    port, _, counters = line
    port.setPacketTimeout(14)
    port.packet_start_time -= 10 * port.packet_timeout     # nothing there, the timeout long past
    waited = port.wait_s
    assert port.readPort(4) == b""
    assert counters.late_waits == 1
    # The fresh window was waited for in select (a whole timeout), and the SDK now sees the timeout.
    assert port.wait_s - waited >= 0.9 * port.packet_timeout / 1000.0
    assert port.isPacketTimeout()
    # One grant per packet: late again on the same packet, the silence is the bus's.
    port.packet_timeout = 14 * port.tx_time_per_byte + 2 * _LATENCY_MS + 2.0
    port.packet_start_time -= 10 * port.packet_timeout
    assert port.readPort(4) == b"" and counters.late_waits == 1


def test_the_late_waits_reach_the_published_counters(line) -> None:
    """The bridge's diagnostics publish ``BusCounters.as_dict()``: the grants must be among them."""
    port, _, counters = line
    port.setPacketTimeout(14)
    port.packet_start_time -= 10 * port.packet_timeout
    assert port.readPort(4) == b""
    assert counters.as_dict()["late_waits"] == 1
