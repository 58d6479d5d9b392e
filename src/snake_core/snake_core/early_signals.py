"""Signals that arrive while a process is still importing: one installer for the nodes and the ``snake`` command.

A console script imports its modules (rclpy, numpy, MuJoCo) before its own signal handling
starts; on a loaded machine that takes seconds, and a SIGINT then prints a KeyboardInterrupt
traceback, a SIGTERM ends the process without a word. The nodes
(:mod:`snake_ros.start_signals`) and the ``snake`` command (:mod:`snake_tools.cli_signals`)
install their exit line with :func:`install_while_starting` as their packages are imported.
Standard library only: the ``snake`` command runs without any ROS package.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType


def install_while_starting(scripts: frozenset[str], handler: Callable[[int, FrameType | None], None],
                           argv0: str | None = None) -> bool:
    """``handler`` for SIGINT and SIGTERM in a process whose script is one of ``scripts``, if nobody has one.

    Only in the main thread, and only where SIGINT is Python's default or ignored (what a
    non-interactive shell gives ``cmd &``: rclpy stops on it there too) and SIGTERM the
    system's default.

    Args:
        scripts: Console script names (``sys.argv[0]``'s file name) to install in.
        handler: The signal handler.
        argv0: The script's path (default ``sys.argv[0]``).

    Returns:
        True when installed.
    """
    name = Path(argv0 if argv0 is not None else (sys.argv[0] if sys.argv else "")).name
    if name not in scripts or threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGINT) not in (signal.default_int_handler, signal.SIG_IGN) \
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    return True
