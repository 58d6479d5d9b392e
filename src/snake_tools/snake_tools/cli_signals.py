"""Signals of the ``snake`` command: an exit line and no traceback, from the first import on.

The console script imports :mod:`snake_tools.cli` (and, while it parses, the command's module:
numpy, rclpy, MuJoCo) before :func:`snake_tools.cli.main` can catch anything; on a loaded
machine that takes seconds. The package's ``__init__`` calls :func:`install_early` first
thing in the ``snake`` process only: until ``main`` takes over, SIGINT or SIGTERM print
``snake: exiting (SIGINT while starting)`` and end the process (130 or 143, 128 + the signal).
``main`` then calls :func:`install`: SIGINT raises KeyboardInterrupt and SIGTERM raises
:class:`Terminated` (a KeyboardInterrupt), so every command's own Ctrl-C path (closing a bag,
stopping a server, a zero twist) runs for either; commands that need more install their own
handlers for the life of their loop. Standard library and :mod:`snake_core.early_signals` only:
the ``snake`` command runs without any ROS package.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType

from snake_core.early_signals import install_while_starting

SCRIPT = "snake"
"""The console script's name."""


class Terminated(KeyboardInterrupt):
    """Raised by SIGTERM in a running command: the Ctrl-C path runs, the exit code is 143."""


def exit_code(signum: int) -> int:
    """The shell's code for a process ended by signal ``signum`` (128 + its number)."""
    return 128 + int(signum)


def _stop_while_starting(signum: int, frame: FrameType | None) -> None:
    print(f"{SCRIPT}: exiting ({signal.Signals(signum).name} while starting)", file=sys.stderr, flush=True)
    raise SystemExit(exit_code(signum))


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated()


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def install_early(argv0: str | None = None) -> bool:
    """In the ``snake`` process, stop on SIGINT / SIGTERM with the exit line until :func:`install`.

    Returns:
        True when installed (the ``snake`` script, the main thread, and neither signal
        already handled by someone else: :func:`snake_core.early_signals.install_while_starting`).
    """
    return install_while_starting(frozenset({SCRIPT}), _stop_while_starting, argv0)


def install() -> dict[int, object]:
    """SIGINT raises KeyboardInterrupt, SIGTERM :class:`Terminated` (main thread only; others' handlers kept).

    A SIGINT ignored by the shell (``cmd &``) is taken again, as ROS 2's tools do; a handler
    someone else set (an embedding program) is left alone.

    Returns:
        The handlers replaced, by signal number, for :func:`restore`.
    """
    replaced: dict[int, object] = {}
    if not _main_thread():
        return replaced
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, _stop_while_starting):
        replaced[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, _stop_while_starting):
        replaced[signal.SIGTERM] = signal.signal(signal.SIGTERM, _terminate)
    return replaced


def restore(replaced: dict[int, object]) -> None:
    """Put back what :func:`install` replaced (``main`` called from a program that goes on)."""
    for signum, handler in replaced.items():
        if handler is not _stop_while_starting:
            signal.signal(signum, handler)  # type: ignore[arg-type]
