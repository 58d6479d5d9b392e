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
from collections.abc import Iterator
from pathlib import Path

import pytest
from dynamixel_sdk import COMM_RX_CORRUPT, COMM_RX_TIMEOUT, COMM_SUCCESS, PacketHandler, PortHandler

from snake_hardware.dynamixel import control_table as ct
from snake_tools.cli import main
from snake_tools.command import snake_command

_READ_TIMEOUT_MS = 1000.0  # generous: an answer late by this much under load is not a fault under test
_PRESENT_POSITION = 132    # control table address (X-series), 4 bytes


class _Port(PortHandler):  # type: ignore[misc]
    """dynamixel-sdk's port with a fixed, generous read timeout."""

    def setPacketTimeout(self, packet_length: int) -> None:
        self.setPacketTimeoutMillis(_READ_TIMEOUT_MS)


class _Emulator:
    """A running ``snake servo-emulator`` and an SDK client on its pty."""

    def __init__(self, *args: str, sigint_ignored: bool = False) -> None:
        cmd = snake_command()
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
        if not (self.path.startswith("/dev/") or Path(self.path).is_symlink()):   # a pty, or its --link
            self.proc.kill()
            raise AssertionError(self.path + self.proc.communicate()[1])
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


@pytest.mark.parametrize(("argv", "register"), [
    ([], 120), (["--voltage", "11.1"], 111), (["--model", "XL330-M288"], 50)])
def test_present_input_voltage_is_the_models_supply_or_the_flags(argv: list[str], register: int,
                                                                 emulators: list[_Emulator]) -> None:
    """Present Input Voltage (144, 0.1 V units): 12 V for the XM430, 5 V for the XL330 (e-Manual), or --voltage."""
    e = _start(emulators, "--ids", "1-2", *argv)
    for sid in (1, 2):
        value, result, _ = e.packets.read2ByteTxRx(e.port, sid, ct.PRESENT_INPUT_VOLTAGE)
        assert (int(value), int(result)) == (register, COMM_SUCCESS)
    e.stop()


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
    (["--voltage", "0"], "--voltage"),
    (["--voltage", "12", "--body", "tsnake"], "--voltage"),
])
def test_bad_fault_values_are_one_line_and_exit_2(argv: list[str], fragment: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["servo-emulator", "--ids", "1-18", "--duration", "0.1", *argv]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and fragment in lines[0], lines


@pytest.mark.parametrize(("sig", "extra"), [
    (signal.SIGINT, ()), (signal.SIGTERM, ()), (signal.SIGHUP, ()),
    (signal.SIGTERM, ("--body", "tsnake")), (signal.SIGHUP, ("--body", "tsnake")),
    (signal.SIGTERM, ("--body", "tsnake", "--mocap-topic", "/vrpn_mocap/snake_head/pose")),
])
def test_a_stop_signal_removes_the_link_and_prints_the_exit_line(tmp_path: Path, sig: signal.Signals,
                                                                  extra: tuple[str, ...]) -> None:
    """A link left behind would later lead a bridge to whatever program gets the pty number next."""
    link = tmp_path / "ttyDXL"
    cmd = snake_command()
    env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
           "ROS_DOMAIN_ID": str(os.environ.get("ROS_DOMAIN_ID") or 150 + os.getpid() % 80)}
    proc = subprocess.Popen([*cmd, "servo-emulator", "--link", str(link), *(extra or ("--ids", "1"))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()    # the port line comes once the pty and its link are up
        assert first == str(link) and link.is_symlink(), first
        target = os.readlink(link)
        port = _Port(str(link))
        assert port.openPort() and port.setBaudRate(57600)
        assert PacketHandler(2.0).ping(port, 1)[1] == COMM_SUCCESS
        port.closePort()
        proc.send_signal(sig)
        rest, err = proc.communicate(timeout=120)
        out = first + "\n" + rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert re.search(r"answers dropped \d+, corrupted \d+", out), (out, err)   # the exit line
    assert "Traceback" not in err, err
    assert not link.is_symlink() and not link.exists(), target


def test_a_link_to_a_live_device_is_refused_and_a_dangling_one_replaced(emulators: list[_Emulator],
                                                                         tmp_path: Path) -> None:
    link = tmp_path / "ttyDXL"
    first = _start(emulators, "--ids", "1", "--link", str(link))
    cmd = snake_command()
    second = subprocess.run([*cmd, "servo-emulator", "--ids", "2", "--link", str(link), "--duration", "30"],
                            capture_output=True, text=True, timeout=120, check=False)
    lines = second.stderr.strip().splitlines()
    assert second.returncode == 2 and len(lines) == 1 and "live device" in lines[0], second.stderr
    assert os.readlink(link) == os.readlink(first.path) and first.ping(1) == COMM_SUCCESS   # untouched
    _counts(first.stop())
    assert not link.exists() and not link.is_symlink()
    link.symlink_to(tmp_path / "gone")                  # left dangling by a killed emulator: replaced
    again = _start(emulators, "--ids", "1", "--link", str(link))
    assert again.ping(1) == COMM_SUCCESS and os.readlink(link).startswith("/dev/")
    _counts(again.stop())
    plain = tmp_path / "file"
    plain.write_text("")
    assert main(["servo-emulator", "--ids", "1", "--link", str(plain), "--duration", "0.1"]) == 2
