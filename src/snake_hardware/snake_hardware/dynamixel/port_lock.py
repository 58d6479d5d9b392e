"""Exclusive use of a serial port: the serial convention, checked before any byte is sent.

Two programs on one servo bus corrupt each other's transactions, and a second
program's start-up (torque off, Bus Watchdog rewritten) disarms a robot another
program is driving. Every opener of a servo port in this workspace (the Dynamixel
backend, and through it ``snake servo`` and ``snake bench bridge``) opens it with
pyserial's ``exclusive=True``, which takes the ``flock`` below on the new descriptor before
any termios setting, flush, baud rate or DTR/RTS change (a refused opener changes nothing
of the port), then calls :func:`lock_port` on it, before its first write:

- ``fcntl.flock(LOCK_EX | LOCK_NB)`` on the device, the advisory lock that pyserial's
  ``exclusive=True`` and other serial tools take; the kernel drops it when the
  holder's last descriptor closes, so a killed holder never leaves a stale lock;
- the ``TIOCEXCL`` ioctl, after which the kernel refuses any further ``open`` of the
  tty (``EBUSY``) to processes without ``CAP_SYS_ADMIN``; :func:`unlock_port` clears
  it (``TIOCNXCL``) before closing.

A refused opener gets :class:`PortBusyError`, one line naming the port and the holder
read from ``/proc/locks`` (PID and command), or saying that the holder cannot be known.
"""

from __future__ import annotations

import errno
import fcntl
import os
import termios
from pathlib import Path

from snake_hardware.backend import StartupError

_PROC_LOCKS = Path("/proc/locks")
_PROC = Path("/proc")


class PortBusyError(StartupError):
    """Another program holds the servo port; the message names the port and the holder."""


def holder(path: str) -> str:
    """Who holds the ``flock`` of ``path``: ``"PID 123 (python3 ...)"``, or a sentence saying it is unknown.

    Reads ``/proc/locks`` (``FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode>``) and
    matches the device's file system and inode.
    """
    try:
        st = os.stat(path)
        lines = _PROC_LOCKS.read_text().splitlines()
    except OSError:
        return "the holder is not known (no /proc/locks)"
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = []
    for line in lines:
        fields = line.split()
        if "->" in fields:   # a waiter, not a holder
            continue
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == dev and fields[4].isdigit():
            pids.append(int(fields[4]))
    if not pids:
        return "the holder is not known (no flock on the device; it set TIOCEXCL or runs as another user)"
    return ", ".join(f"PID {pid} ({_command(pid)})" for pid in sorted(set(pids)))


def _command(pid: int) -> str:
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "command not readable"
    words = raw.rstrip(b"\0").split(b"\0")
    return " ".join(w.decode(errors="replace") for w in words)[:120] or "no command line"


def busy_error(path: str) -> PortBusyError:
    """The one-line refusal for ``path``."""
    return PortBusyError(f"{path} is in use by another program: {holder(path)}")


def lock_port(fd: int, path: str) -> None:
    """Take the exclusive lock on an open serial port, or raise :class:`PortBusyError`.

    Args:
        fd: Descriptor of the just-opened device (pyserial's ``Serial.fd``).
        path: The path it was opened by (named in the message).
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise busy_error(path) from None
        raise
    try:
        fcntl.ioctl(fd, termios.TIOCEXCL)
    except OSError as err:
        if err.errno != errno.ENOTTY:   # not a tty (a plain file in a test): the flock alone
            raise


def unlock_port(fd: int | None) -> None:
    """Clear ``TIOCEXCL`` so that the next opener is not refused; never raises.

    The ``flock`` goes with the descriptor's close. ``None`` (already closed) is a no-op.
    """
    if fd is None:
        return
    try:
        fcntl.ioctl(fd, termios.TIOCNXCL)
    except OSError:
        pass
