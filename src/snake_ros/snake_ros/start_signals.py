"""SIGINT and SIGTERM while a node process is still importing: its exit line, no traceback.

A node's console script imports its module (rclpy, numpy, the robot's libraries) before
:func:`snake_ros.runtime.run_node` installs the handlers that stop the node through its
exit path; on a loaded machine that takes seconds. A signal in that time would print a
KeyboardInterrupt traceback (SIGINT) or end the process without a word (SIGTERM). The
package's ``__init__`` calls :func:`install` first thing, in node processes only (the
script's name is one of :data:`NODE_SCRIPTS`): until ``run_node`` takes over, either signal
prints the node's exit line and ends the process with code 0. Nothing has started yet
(no ROS context, no bus opened), so there is nothing to make safe. No rclpy import.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import FrameType

from snake_core.early_signals import install_while_starting

NODE_SCRIPTS = frozenset({"gait_node", "bridge_node", "singularity_monitor", "slippage_monitor", "planner_node",
                          "path_follower", "twin_node", "bench_robot", "robot_stack"})
"""The console scripts of ``setup.py`` that run nodes (a test keeps the two lists equal)."""


def _stop_while_starting(signum: int, frame: FrameType | None) -> None:
    name = signal.Signals(signum).name
    print(f"[INFO] [{Path(sys.argv[0]).name}]: exiting ({name} while starting: no node yet, nothing to make safe)",
          file=sys.stderr, flush=True)
    raise SystemExit(0)


def install(argv0: str | None = None) -> bool:
    """In a node process, stop on SIGINT / SIGTERM with the exit line until ``run_node`` takes over.

    Args:
        argv0: The script's path (default ``sys.argv[0]``).

    Returns:
        True when the handlers were installed (a node process, main thread, and neither
        signal already handled by someone else; SIGINT ignored counts as not handled).
    """
    return install_while_starting(NODE_SCRIPTS, _stop_while_starting, argv0)
