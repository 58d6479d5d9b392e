"""``snake teleop`` driven through a pseudo-terminal as a user types, checked over real DDS.

The teleop runs as its own process on the slave side of a pty (``pty.fork``), exactly
as in a terminal or an SSH session; the test types keys into the master side and the
``ros`` fixture's probe collects what it publishes.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import termios
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from geometry_msgs.msg import Twist, TwistStamped

from snake_ros.qos import COMMAND_QOS
from snake_tools.command import snake_command

pytestmark = pytest.mark.graph

ROOT = Path(__file__).resolve().parents[3]
_FAIL_AFTER_S = 30.0  # failure bound for waits on the child, never a speed requirement


def _limits() -> tuple[float, float]:
    p = yaml.safe_load((ROOT / "config" / "gait_node.yaml").read_text())["/**/gait_node"]["ros__parameters"]
    return float(p["max_linear"]), float(p["max_angular"])



class TeleopTty:
    """``snake teleop`` on the slave side of a pseudo-terminal."""

    def __init__(self, *args: str) -> None:
        argv = snake_command("teleop", *args)
        pid, fd = pty.fork()
        if pid == 0:  # child: becomes `snake teleop` with the pty as its controlling terminal
            try:
                os.execv(argv[0], argv)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.output = ""
        self.status: int | None = None

    def drain(self) -> str:
        """Everything the child has printed so far (reads what is pending, never blocks)."""
        while self.fd >= 0 and select.select([self.fd], [], [], 0)[0]:
            try:
                data = os.read(self.fd, 4096)
            except OSError:  # EIO: the child closed its side
                break
            if not data:
                break
            self.output += data.decode(errors="replace")
        return self.output

    def expect(self, text: str, since: int = 0) -> None:
        """Wait until ``text`` is printed (at or after offset ``since`` of the output)."""
        deadline = time.monotonic() + _FAIL_AFTER_S
        while text not in self.drain()[since:]:
            assert time.monotonic() < deadline, f"no {text!r} in the teleop output:\n{self.output}"
            select.select([self.fd], [], [], 0.1)

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def exited(self) -> bool:
        self.drain()
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status is not None

    def hang_up(self) -> None:
        """Close the master side, as sshd does when the connection drops (the child gets SIGHUP)."""
        self.drain()
        os.close(self.fd)
        self.fd = -1

    def close(self) -> None:
        if not self.exited():
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@pytest.fixture
def teleop_tty():
    made: list[TeleopTty] = []

    def start(*args: str) -> TeleopTty:
        made.append(TeleopTty(*args))
        return made[-1]

    yield start
    for t in made:
        t.close()


def _cmd(msg) -> tuple[float, float]:
    twist = msg.twist if isinstance(msg, TwistStamped) else msg
    return twist.linear.x, twist.angular.z


def _stamp(msg: TwistStamped) -> float:
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


def _wait_for_command(ros, tty: TeleopTty, msgs: list, expected: tuple[float, float]) -> None:
    def seen() -> bool:
        tty.drain()
        return bool(msgs) and _cmd(msgs[-1]) == pytest.approx(expected, abs=1e-12)

    assert ros.spin_until(seen, timeout=_FAIL_AFTER_S), (
        f"last command {_cmd(msgs[-1]) if msgs else None}, expected {expected}; output:\n{tty.output}")


def _wait_for_exit_zero(ros, msgs: list) -> None:
    """Wait until the zero twist the tool sends on its way out is the last message taken.

    Every test sends a non-zero command before the exit, and one publisher's messages arrive in
    order, so a zero last message is the exit's own (it may still be in flight when the child is gone).
    """
    ros.spin_until(lambda: bool(msgs) and _cmd(msgs[-1]) == (0.0, 0.0), timeout=_FAIL_AFTER_S)


def _measured_rate(msgs: list[TwistStamped]) -> float:
    """Messages per second of header-stamp time: (n - 1) / (last stamp - first stamp)."""
    t = np.array([_stamp(m) for m in msgs])
    assert np.all(np.diff(t) > 0), "stamps must increase"
    return (len(t) - 1) / (t[-1] - t[0])


def _lflag(fd: int) -> int:
    return termios.tcgetattr(fd)[3]


def test_keys_drive_the_stamped_stream_at_the_rate_then_quit_publishes_zero(ros, teleop_tty):
    v_max, w_max = _limits()
    msgs = ros.collect(TwistStamped, "cmd_vel", COMMAND_QOS)
    tty = teleop_tty("--frame-id", "head")
    tty.expect("Hz on /cmd_vel")  # the status line: raw mode is on
    assert not _lflag(tty.fd) & (termios.ICANON | termios.ECHO)
    assert ros.spin_until(lambda: len(msgs) > 2, timeout=_FAIL_AFTER_S), tty.drain()
    assert _cmd(msgs[-1]) == (0.0, 0.0)  # idle: zero, still at the repeat rate
    assert msgs[-1].header.frame_id == "head"

    tty.type("i")  # forward at the gait's max_linear
    _wait_for_command(ros, tty, msgs, (v_max, 0.0))
    tty.expect(f"v +{v_max:.3f} m/s")
    # The held command repeats at the configured 20 Hz, measured from the header stamps.
    start = len(msgs)
    assert ros.spin_until(lambda: len(msgs) - start >= 41, timeout=_FAIL_AFTER_S)
    held = msgs[start:]
    assert all(_cmd(m) == (v_max, 0.0) for m in held)
    assert _measured_rate(held) == pytest.approx(20.0, rel=0.25)

    tty.type("z")  # both speeds x0.9, direction kept
    _wait_for_command(ros, tty, msgs, (0.9 * v_max, 0.0))
    tty.type("u")  # forward-left at the stepped speeds
    _wait_for_command(ros, tty, msgs, (0.9 * v_max, 0.9 * w_max))
    tty.type("ee")  # angular 0.9 x 1.1 x 1.1 = 1.089 of the limit is capped at the gait's max_angular
    _wait_for_command(ros, tty, msgs, (0.9 * v_max, w_max))
    tty.type("x")  # linear only x0.9
    _wait_for_command(ros, tty, msgs, (0.81 * v_max, w_max))
    tty.type("k")  # the stop key
    _wait_for_command(ros, tty, msgs, (0.0, 0.0))
    tty.type(".")  # back-right keeps the stepped speeds
    _wait_for_command(ros, tty, msgs, (-0.81 * v_max, w_max))
    tty.type(" ")  # space stops too
    _wait_for_command(ros, tty, msgs, (0.0, 0.0))
    tty.type("l")
    _wait_for_command(ros, tty, msgs, (0.0, -w_max))

    tty.type("Q")
    assert ros.spin_until(tty.exited, timeout=_FAIL_AFTER_S), tty.output
    assert tty.status == 0
    _wait_for_exit_zero(ros, msgs)
    assert _cmd(msgs[-1]) == (0.0, 0.0)
    assert "quit: published a zero twist on /cmd_vel" in tty.output
    assert _lflag(tty.fd) & termios.ICANON and _lflag(tty.fd) & termios.ECHO  # terminal restored


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "sighup"])
def test_every_exit_publishes_a_zero_twist(ros, teleop_tty, how):
    v_max, _ = _limits()
    msgs = ros.collect(TwistStamped, "cmd_vel", COMMAND_QOS)
    tty = teleop_tty()
    tty.expect("Hz on /cmd_vel")
    assert ros.spin_until(lambda: len(msgs) > 0, timeout=_FAIL_AFTER_S), tty.drain()
    tty.type("i")
    _wait_for_command(ros, tty, msgs, (v_max, 0.0))
    if how == "ctrl-c":
        tty.type("\x03")  # raw mode: Ctrl-C is a key, not SIGINT
        expected_status = 0
    elif how == "sigterm":
        os.kill(tty.pid, signal.SIGTERM)
        expected_status = 128 + signal.SIGTERM
    else:
        tty.hang_up()  # the SSH session drops
        expected_status = 128 + signal.SIGHUP
    assert ros.spin_until(tty.exited, timeout=_FAIL_AFTER_S), tty.output
    assert tty.status == expected_status, tty.output
    _wait_for_exit_zero(ros, msgs)
    assert _cmd(msgs[-1]) == (0.0, 0.0)
    if how != "sighup":
        assert _lflag(tty.fd) & termios.ICANON and _lflag(tty.fd) & termios.ECHO


def test_unstamped_publishes_twist_on_the_given_topic_at_the_given_rate(ros, teleop_tty):
    _, w_max = _limits()
    msgs = ros.collect(Twist, "teleop_cmd", COMMAND_QOS)
    stamped = ros.collect(TwistStamped, "teleop_cmd_stamped", COMMAND_QOS)
    stamped_tty = teleop_tty("--topic", "teleop_cmd_stamped", "--rate", "40")
    tty = teleop_tty("--unstamped", "--topic", "teleop_cmd")
    tty.expect("Hz on /teleop_cmd")
    tty.type("j")
    _wait_for_command(ros, tty, msgs, (0.0, w_max))
    # The same tool at --rate 40: twice the messages per second of stamp time.
    stamped_tty.expect("40 Hz on /teleop_cmd_stamped")
    start = len(stamped)
    assert ros.spin_until(lambda: len(stamped) - start >= 81, timeout=_FAIL_AFTER_S)
    assert _measured_rate(stamped[start:]) == pytest.approx(40.0, rel=0.25)
    tty.type("Q")
    assert ros.spin_until(tty.exited, timeout=_FAIL_AFTER_S), tty.output
    assert tty.status == 0
    _wait_for_exit_zero(ros, msgs)
    assert _cmd(msgs[-1]) == (0.0, 0.0)


def test_no_terminal_exits_2_with_one_line() -> None:
    proc = subprocess.run([*snake_command(), "teleop"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "stdin is not a terminal" in lines[0], proc.stderr


@pytest.mark.parametrize(("args", "words"), [
    (["--rate", "1"], ["--rate", "deadman"]),
    (["--topic", "bad topic"], ["--topic", "'bad topic'"]),
])
def test_bad_flags_exit_2_naming_the_flag(args: list[str], words: list[str]) -> None:
    proc = subprocess.run([*snake_command(), "teleop", *args], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), proc.stderr


def test_capital_keys_arm_and_estop_the_real_bridge_and_show_its_state(ros, teleop_tty, tmp_path):
    """A arms, E e-stops (and stops the held command), C clears: the servos' registers and the screen agree."""
    from snake_core.robot import load_robot
    from snake_hardware.emulator import ServoBusEmulator

    robot = load_robot("tsnake")
    emu = ServoBusEmulator([j.servo_id for j in robot.joints], link=tmp_path / "ttyDXL").start()
    try:
        ros.start("bridge_node", {"backend": "dynamixel", "port": emu.port, "baud_rate": 4000000, "rate_hz": 50.0,
                                  "latency_ms": 30.0, "command_timeout_s": 30.0})
        msgs = ros.collect(TwistStamped, "cmd_vel", COMMAND_QOS)
        tty = teleop_tty()
        tty.expect("bridge DISARMED")          # the bridge's diagnostics reached the status line
        assert not any(emu.torque_enabled(i) for i in emu.servos)
        mark = len(tty.drain())
        tty.type("A")
        tty.expect("arm: done", mark)
        emu.settle()
        assert all(emu.torque_enabled(i) for i in emu.servos)
        tty.type("i")
        _wait_for_command(ros, tty, msgs, (_limits()[0], 0.0))
        mark = len(tty.drain())
        tty.type("E")
        tty.expect("emergency_stop: done", mark)
        tty.expect("bridge ESTOPPED", mark)
        emu.settle()
        assert not any(emu.torque_enabled(i) for i in emu.servos)
        _wait_for_command(ros, tty, msgs, (0.0, 0.0))    # the e-stop key also stops the held command
        mark = len(tty.drain())
        tty.type("A")
        tty.expect("arm: refused: ESTOPPED", mark)
        mark = len(tty.drain())
        tty.type("C")
        tty.expect("clear_estop: done", mark)
        tty.expect("bridge DISARMED", mark)
        tty.type("Q")
        _wait_for_exit_zero(ros, msgs)
    finally:
        emu.stop()


def test_bridge_keys_report_a_missing_bridge_on_the_status_line(ros, teleop_tty):
    tty = teleop_tty("--bridge", "/no_such_bridge")
    tty.expect("bridge not seen")
    tty.type("A")
    tty.expect("arm: no bridge answers on /no_such_bridge/arm")
    tty.type("Q")


def test_an_exit_signal_in_the_exit_path_is_recorded_not_raised() -> None:
    # A hang-up closes the terminal and sends SIGHUP: the loop can end on the closed terminal
    # first, and the signal then lands while the zero twist goes out. Raised there, it cut that
    # short (exit status 1 on a loaded machine, the zero twist not always sent).
    from snake_tools.commands.teleop import _exit_on_signals, _Signalled

    before = signal.getsignal(signal.SIGHUP)
    with pytest.raises(_Signalled), _exit_on_signals():   # while the loop runs: raised
        os.kill(os.getpid(), signal.SIGHUP)
        signal.sigtimedwait([], 0)   # lets the handler run here (no sleep: the signal is already pending)
    with _exit_on_signals() as exits:
        exits.running = False
        os.kill(os.getpid(), signal.SIGHUP)
        signal.sigtimedwait([], 0)
        os.kill(os.getpid(), signal.SIGTERM)   # a second one is ignored
        signal.sigtimedwait([], 0)
    assert exits.signum == signal.SIGHUP
    assert signal.getsignal(signal.SIGHUP) == before   # handlers restored
