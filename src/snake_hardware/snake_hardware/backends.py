"""Backends by name: the registry the bridge node builds its actuators from.

:data:`BACKENDS` maps a name to a :class:`BackendKind`: how to build that
:class:`~snake_hardware.backend.Backend` for a robot from the bus settings a node was given
(:class:`BusOptions`), and whether it arms unattended by default. The bridge node's
``backend`` parameter offers exactly these names.

- ``dynamixel``: Dynamixel servos on a serial port (:mod:`snake_hardware.dynamixel.backend`).
- ``emulated``: the same Dynamixel code path against the Protocol 2.0 servo emulator
  (:mod:`snake_hardware.emulator`), started in-process on a pseudo-terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from snake_core.robot import RobotModel
from snake_hardware.backend import Backend, ConfigError
from snake_hardware.dynamixel.backend import DynamixelBackend, DynamixelSettings
from snake_hardware.emulator import ServoBusEmulator

_DEFAULT_PORT = "/dev/ttyUSB0"        # serial device when neither the node nor the YAML names one
_DEFAULT_BAUD = 1_000_000             # bps when neither the node nor the YAML sets one
_EMULATED_MIN_LATENCY_MS = 20.0       # ms, read timeout margin when the emulator shares our GIL


@dataclass(frozen=True)
class BusOptions:
    """Bus settings a node hands to a backend builder (the bridge node's parameters).

    Attributes:
        port: Serial device; empty: the robot YAML's ``bus.port``.
        baud_rate: bps; 0: the robot YAML's ``bus.baud_rate``.
        retries: Extra attempts per bus transaction.
        latency_ms: USB adapter latency timer, ms.
        return_delay_us: Return Delay Time written to every servo, us.
        profile_velocity: Cap on the servos' Profile Velocity, rad/s (0: none).
        watchdog_s: Bus Watchdog timeout, s (0 disables).
    """

    port: str = ""
    baud_rate: int = 0
    retries: int = 2
    latency_ms: float = 1.0
    return_delay_us: int = 0
    profile_velocity: float = 0.0
    watchdog_s: float = 0.1

    def dynamixel_settings(self, robot: RobotModel, port: str | None = None,
                           min_latency_ms: float = 0.0) -> DynamixelSettings:
        """The Dynamixel backend's settings: these options, the robot YAML's bus where they are unset.

        Args:
            robot: Robot whose ``bus`` block fills an empty port and a zero baud rate.
            port: Serial device that replaces both (an emulator's pty).
            min_latency_ms: Lower bound on the latency timer, ms.
        """
        return DynamixelSettings(
            port=port or self.port or str(robot.bus.get("port", _DEFAULT_PORT)),
            baud_rate=int(self.baud_rate or robot.bus.get("baud_rate", _DEFAULT_BAUD)),
            retries=self.retries, latency_ms=max(self.latency_ms, min_latency_ms),
            return_delay_us=self.return_delay_us, profile_velocity=self.profile_velocity,
            watchdog_s=self.watchdog_s)


@dataclass(frozen=True)
class BuiltBackend:
    """A backend (not opened yet) and the in-process emulator it talks to, if any.

    Attributes:
        backend: The actuators' interface.
        emulator: The servo emulator the backend owns (stop it after closing the backend), or None.
    """

    backend: Backend
    emulator: ServoBusEmulator | None = None


@dataclass(frozen=True)
class BackendKind:
    """One entry of :data:`BACKENDS`.

    Attributes:
        summary: What the backend drives, a few words (the node parameter's description).
        build: ``build(robot, options)`` -> :class:`BuiltBackend`.
        auto_arm: Default of the bridge's ``auto_arm``: False for real actuators (they move
            only once someone arms them), True for unattended emulated runs.
    """

    summary: str
    build: Callable[[RobotModel, BusOptions], BuiltBackend]
    auto_arm: bool


def _dynamixel(robot: RobotModel, options: BusOptions) -> BuiltBackend:
    """Dynamixel servos on ``options.port`` (or the robot YAML's ``bus.port``)."""
    return BuiltBackend(DynamixelBackend(robot, options.dynamixel_settings(robot)))


def _emulated(robot: RobotModel, options: BusOptions) -> BuiltBackend:
    """The robot's servos emulated on a pty, driven by the Dynamixel backend."""
    emulator = ServoBusEmulator([j.servo_id for j in robot.joints],
                                models={j.servo_id: j.model for j in robot.joints}).start()
    settings = options.dynamixel_settings(robot, port=emulator.port, min_latency_ms=_EMULATED_MIN_LATENCY_MS)
    return BuiltBackend(DynamixelBackend(robot, settings), emulator)


BACKENDS: Mapping[str, BackendKind] = {
    "dynamixel": BackendKind("servos on port", _dynamixel, auto_arm=False),
    "emulated": BackendKind("in-process servo emulator", _emulated, auto_arm=True),
}
"""Backend name -> how to build it, in the order the names are offered."""

BACKEND_NAMES = tuple(BACKENDS)
"""Names :func:`make_backend` builds."""


def make_backend(name: str, robot: RobotModel, options: BusOptions | None = None) -> BuiltBackend:
    """Build the backend called ``name`` for ``robot`` (not opened yet).

    Args:
        name: A key of :data:`BACKENDS`.
        robot: Robot description (joints, servo IDs and models, bus).
        options: Bus settings; defaults: :class:`BusOptions`.

    Raises:
        ConfigError: Unknown backend name.
    """
    kind = BACKENDS.get(name)
    if kind is None:
        raise ConfigError(f"backend: unknown backend {name!r}; choose {' or '.join(BACKEND_NAMES)}")
    return kind.build(robot, options or BusOptions())
