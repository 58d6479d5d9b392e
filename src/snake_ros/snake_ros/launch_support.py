"""Argument checks shared by the launch files (plain Python; no ``launch`` import).

The launch files resolve every argument inside their ``OpaqueFunction`` before any node is
built, so a bad value stops the launch with one line and nothing started. These are the
checks they have in common.
"""

from __future__ import annotations

import os
import re
import signal
import tempfile
from collections.abc import Mapping
from typing import Any

import yaml
from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

from snake_core.config_files import looks_like_path

# Seconds ``ros2 launch`` waits after SIGINT before it sends SIGTERM (launch's own default is 5 s;
# SIGKILL follows ``sigkill_timeout``, 5 s, later). A node's safe exit is: the next signal check
# (0.1 s), the bridge's torque off read back and repeated on a failing bus (up to
# (retries + 1)^2 read timeouts and 50 ms drains, about 0.5 s), at most 1 s for subscribers to
# acknowledge the last messages, then rclpy's and the interpreter's teardown. That took 0.6 to
# 2.8 s per node on a loaded 2-core machine and up to 7 s under heavier load, past 5 s: the
# launch files raise it so that an exit that is only slow is never cut.
SIGTERM_TIMEOUT_S = "15"

# An SROS2 enclave is a fully qualified ROS name: '/' then tokens of letters, digits and '_',
# none starting with a digit.
_ENCLAVE = re.compile(r"/([A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*)?")


def package_installed(name: str) -> bool:
    """Whether the ROS package ``name`` is on the ament index (an optional package may be absent)."""
    try:
        get_package_share_directory(name)
    except PackageNotFoundError:
        return False
    return True


def choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``.

    Raises:
        ValueError: ``name:='value': must be one of ...`` (the launch argument named as typed).
    """
    if value not in choices:
        raise ValueError(f"{name}:={value!r}: must be one of {', '.join(choices)}")
    return value


def absolute_if_path(value: str) -> str:
    """A YAML path made absolute (the nodes may not share the launch's working directory); names as given."""
    return os.path.abspath(value) if looks_like_path(value) else value


def enclave_arguments(value: str) -> list[str] | None:
    """The ``ros_arguments`` that put a node in the SROS2 enclave ``value``; None for ''.

    Args:
        value: The ``enclave`` launch argument: '' (no enclave, security off unless the
            environment enables it) or an enclave name such as ``/snake`` (created with
            ``ros2 security create_enclave <keystore> /snake``).

    Returns:
        ``["--enclave", value]``, or None (no ``--ros-args`` at all) for ''.

    Raises:
        ValueError: ``enclave:='value': ...`` when it is not a fully qualified name.
    """
    if not value:
        return None
    if not _ENCLAVE.fullmatch(value):
        raise ValueError(f"enclave:={value!r}: must be a fully qualified enclave name such as /snake "
                         "('/' then letters, digits and '_', no token starting with a digit)")
    return ["--enclave", value]


_SEED_MAX = 2**31 - 1  # the bench robot's seed parameter's upper bound

BENCH_STOP_SIGNAL = signal.SIGINT
"""What the launch files send the bench robot once the bridge has exited (its safe exit, as on Ctrl-C; a
``signal.Signals``: launch's ``SignalProcess`` sends a string only for 'SIGKILL')."""
BENCH_ROBOT_PREFIX = "setsid"
"""Command prefix of the bench robot in the launch files: its own session, so that Ctrl-C in the launch's
terminal (SIGINT to the terminal's process group) does not reach it. ``ros2 launch`` sends no SIGINT of its
own on an interactive Ctrl-C, so the bench robot keeps serving the bus until the bridge has made the servos
safe and exited; the launch then sends it :data:`BENCH_STOP_SIGNAL` (``OnProcessExit`` of the bridge's
process). ``sigterm_timeout`` still bounds it, as every process of the launch. A non-interactive
shutdown (launch sends SIGINT to every process itself) still reaches the bench robot at once."""


def bench_seed(value: str) -> int:
    """The ``bench_seed`` launch argument as the bench robot's seed.

    Raises:
        ValueError: ``bench_seed:='x': must be an integer in [0, 2147483647]``.
    """
    try:
        seed = int(value)
    except ValueError:
        seed = -1
    if not 0 <= seed <= _SEED_MAX or str(seed) != value.strip().lstrip("+"):
        raise ValueError(f"bench_seed:={value!r}: must be an integer in [0, {_SEED_MAX}]")
    return seed


def node_overrides_file(overrides: Mapping[str, Mapping[str, Any]]) -> str:
    """A params file giving each node of one process its own overrides; its path.

    A launch ``Node`` of several rclpy nodes (``robot_stack``) cannot take per-node
    overrides as a dict (launch_ros gives a dict to every node of the process), so they go
    into a file with one ``/**/<node>`` block per node, written to the temporary directory
    (``snake_stack_*.yaml``; left there, like launch_ros' own parameter files).

    Args:
        overrides: parameter values by node name, then parameter name.

    Returns:
        The file's path, for the Node's ``parameters`` after the nodes' own params files.
    """
    blocks = {f"/**/{node}": {"ros__parameters": dict(values)} for node, values in overrides.items()}
    fd, path = tempfile.mkstemp(prefix="snake_stack_", suffix=".yaml")
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(blocks, fh, sort_keys=False)
    return path
