"""Keyboard teleop logic: key bindings, speed steps and the status line (pure, no ROS, no terminal).

The layout and habits are teleop_twist_keyboard's, restricted to what a
differential-drive gait uses (``linear.x`` and ``angular.z``)::

    u    i    o        forward-left   forward    forward-right
    j    k    l        turn left      stop       turn right
    m    ,    .        back-left      back       back-right

``k`` or space stops; any other unbound key stops too (teleop_twist_keyboard's "anything
else: stop"). ``q``/``z`` scale both speeds by 1.1 / 0.9, ``w``/``x`` only the linear
speed, ``e``/``c`` only the angular speed. A move key sets a direction that is held
(and republished at the repeat rate) until another key changes it. ``Q``, Ctrl-C and
Ctrl-D quit (``q`` keeps its teleop_twist_keyboard meaning, a speed step).

The bridge's services have capital keys (:data:`BRIDGE_KEYS`): ``A`` arm, ``D`` disarm,
``E`` emergency stop (which also stops the held command), ``C`` clear the e-stop; the status
line shows the bridge's state as its diagnostics report it.

The speeds start at the gait's limits (``max_linear``, ``max_angular`` of
``config/gait_node.yaml``) and the steps keep them within
``[_MIN_SPEED_FRACTION x limit, limit]``: the gait clamps anything faster anyway, so a
step beyond the limit would show a speed the robot never reaches.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from snake_core.errors import GaitError
from snake_core.gait.command import TwistLimits


class TeleopConfigError(ValueError):
    """Bad teleop input (a flag or a field of the gait configuration); the message names it."""


"""The gait node's parameter file in ``config/``, source of the default speeds."""

_GAIT_NODE = "gait_node"
_MIN_SPEED_FRACTION = 0.01  # lowest speed a step can reach, fraction of the limit
_MAX_RATE_HZ = 1000.0  # Hz, upper bound of --rate
_MESSAGES_PER_DEADMAN = 2.0  # at least this many messages per gait deadman window (cmd_timeout)

MOVE_BINDINGS: Mapping[str, tuple[int, int]] = MappingProxyType({
    "i": (1, 0),
    "o": (1, -1),
    "j": (0, 1),
    "l": (0, -1),
    "u": (1, 1),
    ",": (-1, 0),
    ".": (-1, 1),
    "m": (-1, -1),
})
"""Key -> (sign of linear.x, sign of angular.z), teleop_twist_keyboard's layout.

As in teleop_twist_keyboard, the backward keys keep the arc's geometry: ``.`` (back
right) turns with positive yaw rate and ``m`` (back left) with negative.
"""

SPEED_BINDINGS: Mapping[str, tuple[float, float]] = MappingProxyType({
    "q": (1.1, 1.1),
    "z": (0.9, 0.9),
    "w": (1.1, 1.0),
    "x": (0.9, 1.0),
    "e": (1.0, 1.1),
    "c": (1.0, 0.9),
})
"""Key -> (factor on the linear speed, factor on the angular speed)."""

STOP_KEYS: frozenset[str] = frozenset({"k", " "})
"""Keys that stop explicitly (any unbound key stops as well)."""

BRIDGE_KEYS: Mapping[str, str] = MappingProxyType({
    "A": "arm",
    "D": "disarm",
    "E": "emergency_stop",
    "C": "clear_estop",
})
"""Key -> the bridge node's std_srvs/Trigger service it calls (``~/<name>``)."""

QUIT_KEYS: frozenset[str] = frozenset({"Q", "\x03", "\x04"})
"""``Q``, Ctrl-C and Ctrl-D (as read from a terminal in raw mode)."""

HELP = """\
snake teleop: drive with the keyboard (teleop_twist_keyboard layout)
---------------------------
   u    i    o
   j    k    l
   m    ,    .
k / space : stop (any other key stops too)
q/z : all speeds x1.1 / x0.9
w/x : linear speed x1.1 / x0.9
e/c : angular speed x1.1 / x0.9
A / D : arm / disarm the bridge (torque on / limp)
E : EMERGENCY STOP (latched, also stops) ; C : clear the e-stop (stays limp, then A)
Q, Ctrl-C, Ctrl-D : publish a zero twist and quit
"""


class Action(enum.Enum):
    """What a key press did."""

    MOVE = "move"
    SPEED = "speed"
    STOP = "stop"
    QUIT = "quit"
    BRIDGE = "bridge"


@dataclass(frozen=True)
class TeleopState:
    """The held command.

    Attributes:
        linear_sign: -1, 0 or 1, direction of ``linear.x``.
        angular_sign: -1, 0 or 1, direction of ``angular.z``.
        linear_speed: Magnitude of ``linear.x`` while moving, m/s.
        angular_speed: Magnitude of ``angular.z`` while turning, rad/s.
    """

    linear_sign: int
    angular_sign: int
    linear_speed: float
    angular_speed: float

    @property
    def command(self) -> tuple[float, float]:
        """The twist to publish: (linear.x m/s, angular.z rad/s)."""
        return (self.linear_sign * self.linear_speed + 0.0, self.angular_sign * self.angular_speed + 0.0)


class Keymap:
    """Turns key presses into the held command, within the gait's speed limits.

    Args:
        max_linear: Upper bound and initial value of the linear speed, m/s.
        max_angular: Upper bound and initial value of the angular speed, rad/s.
    """

    def __init__(self, max_linear: float, max_angular: float) -> None:
        for name, value in (("max_linear", max_linear), ("max_angular", max_angular)):
            if not math.isfinite(value) or value <= 0:
                raise TeleopConfigError(f"{name} must be a positive number, got {value!r}")
        self.max_linear = max_linear
        self.max_angular = max_angular
        self.state = TeleopState(0, 0, max_linear, max_angular)

    def press(self, key: str) -> Action:
        """Apply one key (a single character) and return what it did."""
        if key in QUIT_KEYS:
            self.state = replace(self.state, linear_sign=0, angular_sign=0)
            return Action.QUIT
        if key in BRIDGE_KEYS:
            if BRIDGE_KEYS[key] == "emergency_stop":  # an e-stop stops the held command as well
                self.state = replace(self.state, linear_sign=0, angular_sign=0)
            return Action.BRIDGE
        if key in MOVE_BINDINGS:
            lin, ang = MOVE_BINDINGS[key]
            self.state = replace(self.state, linear_sign=lin, angular_sign=ang)
            return Action.MOVE
        if key in SPEED_BINDINGS:
            f_lin, f_ang = SPEED_BINDINGS[key]
            self.state = replace(
                self.state,
                linear_speed=_step(self.state.linear_speed, f_lin, self.max_linear),
                angular_speed=_step(self.state.angular_speed, f_ang, self.max_angular),
            )
            return Action.SPEED
        self.state = replace(self.state, linear_sign=0, angular_sign=0)
        return Action.STOP

    def status_line(self, rate_hz: float, topic: str, bridge: str = "") -> str:
        """One line with the current command and speeds, and ``bridge`` (its state) if given (ASCII, no newline)."""
        s = self.state
        v, omega = s.command
        return (f"v {v:+.3f} m/s  w {omega:+.3f} rad/s | speed {s.linear_speed:.3f}/{self.max_linear:g} m/s  "
                f"turn {s.angular_speed:.3f}/{self.max_angular:g} rad/s | {rate_hz:g} Hz on {topic}"
                + (f" | bridge {bridge}" if bridge else ""))


def _step(speed: float, factor: float, limit: float) -> float:
    """``speed x factor`` kept within ``[_MIN_SPEED_FRACTION x limit, limit]``."""
    return min(limit, max(_MIN_SPEED_FRACTION * limit, speed * factor))


def gait_limits(values: Mapping[str, Any], source: str) -> TwistLimits:
    """The gait's twist limits from its parameter values.

    Args:
        values: The gait node's parameters by name (its defaults, overridden by a params
            file): ``max_linear`` m/s, ``max_angular`` rad/s, accelerations, ``cmd_timeout`` s.
        source: Where the values come from, for messages.

    Raises:
        TeleopConfigError: A field is absent or invalid; the message names the source and the field.
    """
    def number(name: str) -> float:
        if name not in values:
            raise TeleopConfigError(f"{source}: {name}: missing")
        value = values[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TeleopConfigError(f"{source}: {name}: expected a number, got {value!r}")
        if not math.isfinite(value) or value <= 0:
            raise TeleopConfigError(f"{source}: {name}: must be a positive number, got {value!r}")
        return float(value)

    fields = ("max_linear", "max_angular", "max_linear_accel", "max_angular_accel", "cmd_timeout")
    numbers = {name: number(name) for name in fields}
    try:
        return TwistLimits(numbers["max_linear"], numbers["max_angular"], numbers["max_linear_accel"],
                           numbers["max_angular_accel"], numbers["cmd_timeout"])
    except GaitError as err:
        raise TeleopConfigError(f"{source}: {err}") from err


def check_rate(rate_hz: float, cmd_timeout: float) -> float:
    """Validate the repeat rate against the gait's deadman.

    Args:
        rate_hz: Requested repeat rate, Hz.
        cmd_timeout: The gait's deadman time, s.

    Returns:
        ``rate_hz``.

    Raises:
        TeleopConfigError: Not finite, not in ``(0, 1000]`` Hz, or slower than
            ``_MESSAGES_PER_DEADMAN`` messages per ``cmd_timeout`` (the gait would stop
            between two messages of a held command).
    """
    if not math.isfinite(rate_hz) or not 0 < rate_hz <= _MAX_RATE_HZ:
        raise TeleopConfigError(f"--rate: must be in (0, {_MAX_RATE_HZ:g}] Hz, got {rate_hz!r}")
    lowest = _MESSAGES_PER_DEADMAN / cmd_timeout
    if rate_hz < lowest:
        raise TeleopConfigError(
            f"--rate: {rate_hz:g} Hz is too slow for the gait's {cmd_timeout:g} s deadman "
            f"(the gait's cmd_timeout); use at least {lowest:g} Hz")
    return rate_hz
