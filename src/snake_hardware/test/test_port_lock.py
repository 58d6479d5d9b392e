"""Exclusive servo port: a second opener is refused and the first keeps its servos.

Against the Protocol 2.0 emulator over a real pty; the lock is taken on the pty
slave a client opens, the emulator owns the master.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from snake_core.robot import RobotModel, load_robot
from snake_hardware.dynamixel import control_table as ct
from snake_hardware.dynamixel.backend import DynamixelBackend, DynamixelSettings
from snake_hardware.dynamixel.port_lock import PortBusyError, holder
from snake_hardware.emulator import ServoBusEmulator
from snake_tools.command import snake_command

_LATENCY_MS = 30.0  # generous read timeouts: the emulator thread shares this process
# The first opener's Return Delay Time, which a second opener's start-up would rewrite to 0.
_RETURN_DELAY_US = 100
_RETURN_DELAY_UNITS = 50  # independent: 100 us in the register's 2 us units
_SUBPROCESS_GUARD_S = 300.0  # s, only against a hang; the refusal itself comes before any bus traffic


@pytest.fixture
def robot() -> RobotModel:
    return load_robot("tsnake")


@pytest.fixture
def emu(robot: RobotModel) -> Iterator[ServoBusEmulator]:
    with ServoBusEmulator([j.servo_id for j in robot.joints]) as e:
        yield e


@pytest.fixture
def armed(robot: RobotModel, emu: ServoBusEmulator) -> Iterator[DynamixelBackend]:
    """A backend holding the port with torque on and goals written (an armed bridge's bus).

    Its Bus Watchdog is off: the test's subprocess may take seconds to start on a loaded
    machine, while nothing keeps this bus busy.
    """
    b = DynamixelBackend(robot, DynamixelSettings(port=emu.port, latency_ms=_LATENCY_MS,
                                                   return_delay_us=_RETURN_DELAY_US, watchdog_s=0.0))
    b.open()
    try:
        reading = b.read()
        b.set_torque(True)
        b.write_goals(dict(zip(reading.names, reading.position.tolist(), strict=True)))
        yield b
    finally:
        b.close()



def _all_torque_on(robot: RobotModel, emu: ServoBusEmulator) -> bool:
    return all(emu.torque_enabled(j.servo_id) for j in robot.joints)


def test_second_backend_is_refused_and_the_first_keeps_torque(robot: RobotModel, emu: ServoBusEmulator,
                                                              armed: DynamixelBackend) -> None:
    second = DynamixelBackend(robot, DynamixelSettings(port=emu.port, latency_ms=_LATENCY_MS))
    with pytest.raises(PortBusyError) as info:
        second.open()
    message = str(info.value)
    assert "\n" not in message and emu.port in message and f"PID {os.getpid()}" in message
    # Nothing reached the bus: torque stays on, the first opener's settings stay.
    assert _all_torque_on(robot, emu)
    assert {emu.register(j.servo_id, ct.RETURN_DELAY_TIME, 1) for j in robot.joints} == {_RETURN_DELAY_UNITS}
    reading = armed.read()
    armed.write_goals(dict(zip(reading.names, reading.position.tolist(), strict=True)))
    assert _all_torque_on(robot, emu)
    # Released on close: the next opener gets the port.
    armed.close()
    second.open()
    second.close()


def test_snake_servo_is_refused_with_one_line_naming_the_port(robot: RobotModel, emu: ServoBusEmulator,
                                                             armed: DynamixelBackend) -> None:
    run = subprocess.run([*snake_command(), "servo", "--robot", "tsnake", "--port", emu.port],
                         check=False, capture_output=True, text=True, timeout=_SUBPROCESS_GUARD_S,
                         env=os.environ.copy())
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert emu.port in lines[0] and "in use by another program" in lines[0] and f"PID {os.getpid()}" in lines[0]
    assert _all_torque_on(robot, emu)
    assert {emu.register(j.servo_id, ct.RETURN_DELAY_TIME, 1) for j in robot.joints} == {_RETURN_DELAY_UNITS}
    armed.read()


def test_holder_names_the_pid_or_says_it_is_unknown(tmp_path: Path) -> None:
    path = tmp_path / "device"
    path.write_bytes(b"")
    assert "not known" in holder(str(path))
    with path.open("rb") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        assert holder(str(path)).startswith(f"PID {os.getpid()} (")


def test_an_open_refused_by_tiocexcl_names_the_port(robot: RobotModel, emu: ServoBusEmulator,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Without CAP_SYS_ADMIN the kernel refuses the open itself (EBUSY) once the holder set TIOCEXCL."""
    import errno

    import serial

    def refuse(self: serial.Serial) -> None:
        raise serial.SerialException(errno.EBUSY, f"could not open port {self.port}: [Errno 16] busy")

    monkeypatch.setattr(serial.Serial, "open", refuse)
    with pytest.raises(PortBusyError, match="in use by another program") as info:
        DynamixelBackend(robot, DynamixelSettings(port=emu.port, latency_ms=_LATENCY_MS)).open()
    assert emu.port in str(info.value) and "\n" not in str(info.value)


def _tty_state(fd: int) -> tuple[list, int]:
    """The port's termios attributes and the count of input bytes waiting on it (TIOCINQ)."""
    import array
    import termios

    waiting = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, waiting, True)
    return termios.tcgetattr(fd), int(waiting[0])


def _pending(fd: int, count: int) -> tuple[list, int]:
    """``_tty_state`` once ``count`` input bytes wait on ``fd``.

    A pty hands bytes written on its master to the slave's line discipline from a kernel
    work queue, so they may arrive after ``write`` returns; ``select`` wakes on their arrival.
    """
    import select

    state = _tty_state(fd)
    guard = time.monotonic() + _SUBPROCESS_GUARD_S  # only against a hang
    while state[1] < count and time.monotonic() < guard:
        select.select([fd], [], [], _SUBPROCESS_GUARD_S)
        state = _tty_state(fd)
    return state


@pytest.mark.skipif(os.geteuid() != 0, reason="TIOCEXCL stops a non-root opener at open(); root passes it")
def test_a_refused_root_opener_changes_nothing_of_the_port(robot: RobotModel, emu: ServoBusEmulator,
                                                           armed: DynamixelBackend) -> None:
    """``snake servo --baud-rate 57600`` as root: refused before any termios change, flush, baud or DTR."""
    fd = armed._bus.port.ser.fd  # type: ignore[union-attr]
    master = emu._master  # the pty's other end: bytes written there wait unread on the holder's side
    assert master is not None
    os.write(master, b"\x55" * 7)
    before = _pending(fd, 7)
    assert before[1] == 7
    run = subprocess.run([*snake_command(), "servo", "--robot", "tsnake", "--port", emu.port, "--baud-rate", "57600"],
                         check=False, capture_output=True, text=True, timeout=_SUBPROCESS_GUARD_S,
                         env=os.environ.copy())
    assert run.returncode != 0 and "in use by another program" in run.stderr, run.stderr
    after = _tty_state(fd)
    assert after == before   # same speeds, flags and control characters; the pending input not flushed
    armed._bus.port.clearPort()  # type: ignore[union-attr]  # the test's own bytes, not an answer
    armed.read()
