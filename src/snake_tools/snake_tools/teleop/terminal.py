"""The terminal side of keyboard teleop: raw mode on a tty, key reads with a timeout, a status line.

Raw mode (``termios``) delivers every key at once, unechoed, with Ctrl-C and Ctrl-D as
plain characters; the saved settings are restored on every exit path of the ``with``
block, and a hung-up terminal (an SSH session that dropped) reads as end of input
rather than as an error.
"""

from __future__ import annotations

import os
import select
import termios
import tty
from types import TracebackType
from typing import Any, TextIO

from snake_tools.teleop.keymap import TeleopConfigError

_READ_CHUNK = 64  # bytes per read: a pasted or auto-repeated burst is taken in one go


class NotATerminalError(TeleopConfigError):
    """Standard input is not a terminal, so there are no key presses to read."""


class RawTerminal:
    """Raw mode on a terminal for the life of a ``with`` block.

    Args:
        fd: File descriptor the keys come from (standard input).
        out: Where the status line goes (standard output).
    """

    def __init__(self, fd: int, out: TextIO) -> None:
        self.fd = fd
        self.out = out
        self._saved: list[Any] | None = None

    def check(self) -> None:
        """Raise NotATerminalError unless ``fd`` is a terminal."""
        if not os.isatty(self.fd):
            raise NotATerminalError(
                "stdin is not a terminal: snake teleop reads key presses from a tty "
                "(run it in a terminal, or over SSH with `ssh -t`)")

    def __enter__(self) -> RawTerminal:
        self.check()
        self._saved = termios.tcgetattr(self.fd)
        # TCSANOW keeps keys typed while the node was starting.
        tty.setraw(self.fd, termios.TCSANOW)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.restore()

    def restore(self) -> None:
        """Put the saved terminal settings back (a no-op on a terminal that is gone)."""
        if self._saved is None:
            return
        try:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
        except (termios.error, OSError):
            pass  # hung up: there is no terminal left to restore
        self._saved = None

    def read_keys(self, timeout_s: float) -> str | None:
        """Keys typed within ``timeout_s`` seconds.

        Returns:
            The characters read (empty if none arrived in time), or None when the
            terminal has closed (end of input or a read error after a hang-up).
        """
        try:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout_s))
            if not ready:
                return ""
            data = os.read(self.fd, _READ_CHUNK)
        except OSError:
            return None
        if not data:
            return None
        return data.decode("latin-1")

    def show(self, line: str) -> None:
        """Overwrite the current line with ``line`` (ignored if the terminal is gone)."""
        self.write(f"\r{line}\x1b[K")

    def write(self, text: str) -> None:
        """Write raw text; in raw mode a new line needs CR LF, not LF alone."""
        try:
            self.out.write(text)
            self.out.flush()
        except OSError:
            pass
