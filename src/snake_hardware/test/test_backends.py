"""The backend registry: names, settings from the robot YAML and the node, the emulated bus end to end."""

from __future__ import annotations

import numpy as np
import pytest

from snake_core.robot import load_robot
from snake_hardware.backend import Backend, ConfigError
from snake_hardware.backends import BACKEND_NAMES, BACKENDS, BusOptions, make_backend
from snake_hardware.dynamixel.backend import DynamixelBackend

_ROBOT = load_robot("tsnake")


def test_registry_offers_dynamixel_and_emulated_and_only_the_emulator_arms_unattended() -> None:
    assert BACKEND_NAMES == ("dynamixel", "emulated")
    assert {name: kind.auto_arm for name, kind in BACKENDS.items()} == {"dynamixel": False, "emulated": True}


def test_unknown_backend_is_a_config_error_naming_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"backend: unknown backend 'mujoco'; choose dynamixel or emulated"):
        make_backend("mujoco", _ROBOT)


def test_dynamixel_settings_come_from_the_yaml_bus_unless_the_node_sets_them() -> None:
    built = make_backend("dynamixel", _ROBOT)  # nothing opened: no device needed
    assert built.emulator is None and isinstance(built.backend, DynamixelBackend)
    settings = built.backend.settings
    assert (settings.port, settings.baud_rate) == (_ROBOT.bus["port"], _ROBOT.bus["baud_rate"])
    options = BusOptions(port="/dev/ttyACM7", baud_rate=57600, retries=4, latency_ms=3.0, return_delay_us=20,
                         profile_velocity=1.5, watchdog_s=0.5)
    settings = make_backend("dynamixel", _ROBOT, options).backend.settings  # type: ignore[attr-defined]
    assert (settings.port, settings.baud_rate, settings.retries, settings.latency_ms) == ("/dev/ttyACM7", 57600, 4, 3.0)
    assert (settings.return_delay_us, settings.profile_velocity, settings.watchdog_s) == (20, 1.5, 0.5)


def test_emulated_backend_talks_to_its_own_emulator_over_a_pty() -> None:
    built = make_backend("emulated", _ROBOT, BusOptions(port="/dev/ttyUSB9", latency_ms=1.0))
    assert built.emulator is not None
    backend: Backend = built.backend
    try:
        settings = built.backend.settings  # type: ignore[attr-defined]
        assert settings.port == built.emulator.port != "/dev/ttyUSB9"
        assert settings.latency_ms >= 20.0  # the emulator shares this process: longer read timeouts
        with backend:
            reading = backend.read()
        assert reading.names == tuple(_ROBOT.joint_names)
        np.testing.assert_allclose(reading.position, 0.0, atol=0.01)  # centre tick: joint zero
    finally:
        built.emulator.stop()
