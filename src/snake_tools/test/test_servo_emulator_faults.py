"""``snake servo-emulator`` fault injection from its CLI, seen through the real dynamixel-sdk.

Each test starts the command as its own process, reads the pty path it prints, pings and
reads servos with dynamixel-sdk's PortHandler/PacketHandler (a generous, fixed read timeout,
never asserted on) and checks what the faults did; on SIGINT the emulator prints what it
dropped, corrupted and delayed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from dynamixel_sdk import COMM_RX_CORRUPT, COMM_RX_TIMEOUT, COMM_SUCCESS, PacketHandler, PortHandler

from snake_hardware.dynamixel import control_table as ct
from snake_tools.cli import main

_READ_TIMEOUT_MS = 1000.0  # generous: an answer late by this much under load is not a fault under test
_PRESENT_POSITION = 132    # control table address (X-series), 4 bytes


class _Port(PortHandler):  # type: ignore[misc]
    """dynamixel-sdk's port with a fixed, generous read timeout."""

    def setPacketTimeout(self, packet_length: int) -> None:
        self.setPacketTimeoutMillis(_READ_TIMEOUT_MS)


class _Emulator:
    """A running ``snake servo-emulator`` and an SDK client on its pty."""

    def __init__(self, *args: str, sigint_ignored: bool = False) -> None:
        exe = Path(sys.executable).with_name("snake")
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "snake_tools.cli"]
        # sigint_ignored: started as a non-interactive shell starts ``cmd &`` (the child
        # inherits an ignored SIGINT; Popen restores only SIGPIPE, SIGXFZ and SIGXFSZ).
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if sigint_ignored else None
        try:
            self.proc = subprocess.Popen([*cmd, "servo-emulator", *args], stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, env=os.environ.copy())
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        assert self.proc.stdout is not None
        self.path = self.proc.stdout.readline().strip()
        assert self.path.startswith("/dev/"), self.path + self.proc.stderr.read()  # type: ignore[union-attr]
        self.header = [self.proc.stdout.readline().strip() for _ in range(2)]
        self.port = _Port(self.path)
        assert self.port.openPort() and self.port.setBaudRate(57600)
        self.packets = PacketHandler(2.0)

    def ping(self, sid: int) -> int:
        _, result, _ = self.packets.ping(self.port, sid)
        return int(result)

    def read_position(self, sid: int) -> tuple[int, int]:
        value, result, _ = self.packets.read4ByteTxRx(self.port, sid, _PRESENT_POSITION)
        return int(value), int(result)

    def stop(self) -> str:
        """SIGINT, then everything the emulator printed after its header."""
        self.port.closePort()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err
        return out


@pytest.fixture
def emulators() -> Iterator[list[_Emulator]]:
    started: list[_Emulator] = []
    yield started
    for e in started:
        if e.proc.poll() is None:
            e.proc.kill()
            e.proc.wait()


def _start(emulators: list[_Emulator], *args: str, sigint_ignored: bool = False) -> _Emulator:
    e = _Emulator(*args, sigint_ignored=sigint_ignored)
    emulators.append(e)
    return e


def _counts(out: str) -> dict[str, int]:
    m = re.search(r"answers dropped (\d+), corrupted (\d+), delayed (\d+)", out)
    assert m, out
    return dict(zip(("dropped", "corrupted", "delayed"), map(int, m.groups()), strict=True))


def test_vanished_ids_stay_silent_while_the_others_answer(emulators: list[_Emulator]) -> None:
    e = _start(emulators, "--ids", "1-5", "--vanish", "2,4")
    assert "vanished 2,4" in e.header[1], e.header
    assert {sid: e.ping(sid) for sid in range(1, 6)} == {
        1: COMM_SUCCESS, 2: COMM_RX_TIMEOUT, 3: COMM_SUCCESS, 4: COMM_RX_TIMEOUT, 5: COMM_SUCCESS}
    assert e.read_position(3) == (ct.TICKS_CENTER, COMM_SUCCESS)
    assert e.read_position(4)[1] == COMM_RX_TIMEOUT
    assert _counts(e.stop()) == {"dropped": 0, "corrupted": 0, "delayed": 0}


def test_drop_one_loses_every_answer(emulators: list[_Emulator]) -> None:
    e = _start(emulators, "--ids", "1-3", "--drop", "1")
    assert [e.ping(sid) for sid in (1, 2, 3)] == [COMM_RX_TIMEOUT] * 3
    assert e.read_position(1)[1] == COMM_RX_TIMEOUT
    assert _counts(e.stop())["dropped"] == 4


def test_corrupt_one_gives_crc_errors_on_every_answer(emulators: list[_Emulator]) -> None:
    e = _start(emulators, "--ids", "1-3", "--corrupt", "1")
    assert [e.ping(sid) for sid in (1, 2, 3)] == [COMM_RX_CORRUPT] * 3
    assert e.read_position(2)[1] == COMM_RX_CORRUPT
    assert _counts(e.stop()) == {"dropped": 0, "corrupted": 4, "delayed": 0}


def test_delayed_answers_still_arrive_and_are_counted(emulators: list[_Emulator]) -> None:
    e = _start(emulators, "--ids", "1-3", "--delay", "0.05")
    assert "delay 0.05 s" in e.header[1], e.header
    assert [e.ping(sid) for sid in (1, 2, 3)] == [COMM_SUCCESS] * 3
    assert e.read_position(3) == (ct.TICKS_CENTER, COMM_SUCCESS)
    assert _counts(e.stop())["delayed"] == 4


def test_drop_probability_is_seeded(emulators: list[_Emulator]) -> None:
    """Same seed, same pattern of lost answers; some lost, some not."""
    patterns = []
    for _ in range(2):
        e = _start(emulators, "--ids", "1", "--drop", "0.5", "--seed", "7")
        patterns.append([e.ping(1) for _ in range(8)])
        assert _counts(e.stop())["dropped"] == patterns[-1].count(COMM_RX_TIMEOUT)
    assert patterns[0] == patterns[1]
    assert set(patterns[0]) == {COMM_SUCCESS, COMM_RX_TIMEOUT}, patterns[0]


def test_sigint_stops_it_when_started_with_sigint_ignored(emulators: list[_Emulator]) -> None:
    """A script's ``snake servo-emulator &`` inherits SIGINT ignored; ``kill -INT`` still stops it."""
    e = _start(emulators, "--ids", "1", sigint_ignored=True)
    assert e.ping(1) == COMM_SUCCESS
    assert _counts(e.stop()) == {"dropped": 0, "corrupted": 0, "delayed": 0}


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--delay", "-0.1"], "--delay"),
    (["--drop", "1.5"], "--drop"),
    (["--corrupt", "-0.2"], "--corrupt"),
    (["--drop", "nan"], "--drop"),
    (["--vanish", "19"], "--vanish"),
    (["--vanish", "x"], "--vanish"),
])
def test_bad_fault_values_are_one_line_and_exit_2(argv: list[str], fragment: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["servo-emulator", "--ids", "1-18", "--duration", "0.1", *argv]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and fragment in lines[0], lines
