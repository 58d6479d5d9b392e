"""The ``snake`` command and signals: an exit line and the shell's code, never a traceback, imports included."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from snake_tools import cli_signals
from snake_tools.command import snake_command

_BOUND_S = 300.0  # failure bound on a process's start and exit (a loaded machine imports slowly)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_snake_imports_is_its_exit_line_and_the_shells_code(sig: signal.Signals) -> None:
    code = ("import os, sys; sys.argv[0] = '/usr/bin/snake'; import snake_tools; "
            f"os.kill(os.getpid(), {int(sig)}); import snake_tools.cli; print('imported')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=_BOUND_S, check=False)
    assert run.returncode == 128 + int(sig), run.stderr
    assert "Traceback" not in run.stderr and "imported" not in run.stdout, run.stderr
    assert run.stderr.strip() == f"snake: exiting ({sig.name} while starting)"


def test_the_early_handlers_are_for_the_snake_script_only() -> None:
    assert cli_signals.install_early("/usr/bin/pytest") is False
    assert signal.getsignal(signal.SIGTERM) is not cli_signals._stop_while_starting


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_running_command_stops_through_its_exit_path_with_one_line(sig: signal.Signals, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([*snake_command(), "view", "--port", str(_free_port())], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()             # the server is up: the command's loop runs
        assert line.startswith("snake view: serving"), line + proc.stderr.read() if proc.stderr else line
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=_BOUND_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err            # a server's normal end, as a node's
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith(f"snake view: stopped ({sig.name}); served ws://")


def test_a_signal_in_a_command_without_its_own_ending_is_one_line_and_the_shells_code() -> None:
    # No bridge runs in this domain: the command waits for one, in its own loop.
    proc = subprocess.Popen([*snake_command(), "robot", "status", "--timeout", "600"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        _wait_for_rclpy(proc.pid)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=_BOUND_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "snake robot status: stopped (SIGTERM)"


def _wait_for_rclpy(pid: int) -> None:
    """Until the process has loaded rclpy's extension (it is past its imports, waiting for a bridge)."""
    maps, deadline = Path(f"/proc/{pid}/maps"), time.monotonic() + _BOUND_S
    while "_rclpy_pybind11" not in maps.read_text():
        assert time.monotonic() < deadline, "snake robot status never loaded rclpy"
        threading.Event().wait(0.05)


def test_a_signal_that_breaks_off_a_c_extensions_import_is_the_signals_ending(monkeypatch, capsys) -> None:
    """SIGTERM while rclpy's C extension initialises surfaces as ``ImportError: initialization failed``.

    Python reports the handler's exception raised inside the extension's initialisation as an
    ImportError caused by it; the command ends as the signal ends it. An ImportError no signal
    caused (a broken installation) is not hidden.
    """
    from snake_tools.cli import main
    from snake_tools.commands import robot as robot_command

    def broken_off(*_args: object, **_kwargs: object) -> None:
        try:
            raise cli_signals.Terminated()
        except KeyboardInterrupt as stop:
            raise ImportError("initialization failed") from stop

    monkeypatch.setattr(robot_command, "call_bridge", broken_off)
    assert main(["robot", "status"]) == 143
    err = capsys.readouterr().err
    assert err.strip().endswith("stopped (SIGTERM)") and "Traceback" not in err, err

    def missing(*_args: object, **_kwargs: object) -> None:
        raise ImportError("No module named 'rclpy'")

    monkeypatch.setattr(robot_command, "call_bridge", missing)
    with pytest.raises(ImportError, match="No module named"):
        main(["robot", "status"])
