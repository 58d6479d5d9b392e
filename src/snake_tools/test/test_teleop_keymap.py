"""Teleop's pure logic: teleop_twist_keyboard's layout, speed steps within the gait's limits, config checks."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from snake_tools.teleop.keymap import (
    BRIDGE_KEYS,
    HELP,
    MOVE_BINDINGS,
    QUIT_KEYS,
    Action,
    Keymap,
    TeleopConfigError,
    check_rate,
)

ROOT = Path(__file__).resolve().parents[3]
GAIT_YAML = ROOT / "config" / "gait_node.yaml"

# teleop_twist_keyboard's grid: rows forward / none / backward, columns left / straight / right.
_GRID = ("uio", "jkl", "m,.")


def _params() -> dict:
    return yaml.safe_load(GAIT_YAML.read_text())["/**/gait_node"]["ros__parameters"]


def test_layout_is_the_grid_of_teleop_twist_keyboard() -> None:
    # Independent statement of the layout: the row gives the sign of v; the column the
    # side of the arc, i.e. sign(omega) = side x sign(v) (a backward arc to the right
    # turns with positive yaw rate), and the middle row turns in place.
    for row, keys in enumerate(_GRID):
        lin = 1 - row
        for col, key in enumerate(keys):
            if key == "k":
                assert key not in MOVE_BINDINGS
                continue
            side = 1 - col  # +1 left, -1 right
            ang = side if lin == 0 else side * lin
            assert MOVE_BINDINGS[key] == (lin, ang), key


def test_keys_set_held_command_at_the_limits() -> None:
    km = Keymap(0.1, 0.2)
    assert km.state.command == (0.0, 0.0)
    assert km.press("i") is Action.MOVE
    assert km.state.command == (0.1, 0.0)
    assert km.press("u") is Action.MOVE
    assert km.state.command == (0.1, 0.2)
    km.press("m")
    assert km.state.command == (-0.1, -0.2)
    km.press("l")
    assert km.state.command == (0.0, -0.2)


@pytest.mark.parametrize("key", ["k", " ", "t", "I", "\x1b", "["])
def test_stop_key_and_any_other_key_stop(key: str) -> None:
    km = Keymap(0.1, 0.2)
    km.press("o")
    assert km.press(key) is Action.STOP
    assert km.state.command == (0.0, 0.0)
    assert km.state.linear_speed == 0.1  # stopping keeps the speeds


def test_bridge_keys_name_the_bridges_services_and_only_the_estop_stops() -> None:
    assert dict(BRIDGE_KEYS) == {"A": "arm", "D": "disarm", "E": "emergency_stop", "C": "clear_estop"}
    assert not set(BRIDGE_KEYS) & (set(MOVE_BINDINGS) | set(QUIT_KEYS) | {"k", " "})
    km = Keymap(0.1, 0.2)
    for key in ("A", "D", "C"):
        km.press("i")
        assert km.press(key) is Action.BRIDGE
        assert km.state.command == (0.1, 0.0)     # arming or disarming keeps the held command
    assert km.press("E") is Action.BRIDGE
    assert km.state.command == (0.0, 0.0)         # the e-stop stops it
    assert "E : EMERGENCY STOP" in HELP and "A / D : arm / disarm" in HELP
    assert km.status_line(20.0, "/cmd_vel", "ARMED").endswith(" | bridge ARMED")


@pytest.mark.parametrize("key", sorted(QUIT_KEYS))
def test_quit_keys_stop_and_quit(key: str) -> None:
    km = Keymap(0.1, 0.2)
    km.press("i")
    assert km.press(key) is Action.QUIT
    assert km.state.command == (0.0, 0.0)


def test_speed_steps_scale_by_ten_percent_and_keep_the_direction() -> None:
    km = Keymap(0.1, 0.2)
    km.press("u")
    assert km.press("z") is Action.SPEED
    assert km.state.command == pytest.approx((0.09, 0.18))
    km.press("x")
    assert km.state.command == pytest.approx((0.081, 0.18))
    km.press("c")
    assert km.state.command == pytest.approx((0.081, 0.162))
    km.press("w")
    km.press("e")
    assert km.state.command == pytest.approx((0.0891, 0.1782))
    km.press("q")
    assert km.state.command == pytest.approx((0.09801, 0.19602))


def test_speed_steps_stay_within_the_gait_limits() -> None:
    km = Keymap(0.1, 0.2)
    for _ in range(5):
        km.press("q")
    assert (km.state.linear_speed, km.state.angular_speed) == (0.1, 0.2)
    for _ in range(200):
        km.press("z")
    assert km.state.linear_speed == pytest.approx(0.001)
    assert km.state.angular_speed == pytest.approx(0.002)
    km.press("i")
    assert km.state.command[0] > 0


def test_status_line_shows_command_and_speeds() -> None:
    km = Keymap(0.1, 0.2)
    km.press("j")
    km.press("z")
    line = km.status_line(20.0, "/cmd_vel")
    assert "v +0.000 m/s" in line and "w +0.180 rad/s" in line
    assert "speed 0.090/0.1 m/s" in line and "turn 0.180/0.2 rad/s" in line
    assert "20 Hz on /cmd_vel" in line
    assert "\n" not in line


def test_gait_limits_are_the_gait_nodes_and_agree_with_its_shipped_params_file() -> None:
    from snake_tools.commands.teleop import load_gait_limits

    limits = load_gait_limits(None)  # the gait node's own defaults
    p = _params()
    assert limits.max_linear == p["max_linear"]
    assert limits.max_angular == p["max_angular"]
    assert limits.timeout == p["cmd_timeout"]
    from_file = load_gait_limits(GAIT_YAML)
    assert (from_file.max_linear, from_file.max_angular, from_file.timeout) == (
        p["max_linear"], p["max_angular"], p["cmd_timeout"])


def test_a_params_file_overrides_the_defaults(tmp_path: Path) -> None:
    from snake_tools.commands.teleop import load_gait_limits

    path = tmp_path / "gait.yaml"
    path.write_text("/**/gait_node:\n  ros__parameters:\n    max_linear: 0.05\n    cmd_timeout: 1.0\n")
    limits = load_gait_limits(path)
    assert (limits.max_linear, limits.timeout, limits.max_angular) == (0.05, 1.0, _params()["max_angular"])


@pytest.mark.parametrize(("field", "value", "match"), [
    ("max_linar", 0.1, "max_linar: not a parameter of gait_node .did you mean `max_linear`"),
    ("max_angular", "fast", "max_angular: expected double, got string 'fast'"),
    ("cmd_timeout", -1.0, "cmd_timeout: must be >= 0.01"),
])
def test_bad_gait_parameter_file_names_file_and_field(tmp_path: Path, field: str, value: object,
                                                      match: str) -> None:
    from snake_tools.commands.teleop import load_gait_limits

    data = yaml.safe_load(GAIT_YAML.read_text())
    data["/**/gait_node"]["ros__parameters"][field] = value
    bad = tmp_path / "bad_gait.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(TeleopConfigError, match=f"bad_gait.yaml: /\\*\\*/gait_node.ros__parameters.{match}"):
        load_gait_limits(bad)


def test_missing_gait_parameter_file_is_a_config_error(tmp_path: Path) -> None:
    from snake_tools.commands.teleop import load_gait_limits

    with pytest.raises(TeleopConfigError, match=r"nope\.yaml"):
        load_gait_limits(tmp_path / "nope.yaml")


def test_rate_must_beat_the_deadman() -> None:
    timeout = _params()["cmd_timeout"]
    assert check_rate(20.0, timeout) == 20.0
    lowest = 2.0 / timeout
    assert check_rate(lowest, timeout) == lowest
    with pytest.raises(TeleopConfigError, match=r"--rate: .* too slow .* deadman"):
        check_rate(0.99 * lowest, timeout)
    for bad in (0.0, -5.0, math.nan, math.inf, 5000.0):
        with pytest.raises(TeleopConfigError, match="--rate"):
            check_rate(bad, timeout)


def test_keymap_rejects_non_positive_limits() -> None:
    with pytest.raises(TeleopConfigError, match="max_angular"):
        Keymap(0.1, 0.0)
