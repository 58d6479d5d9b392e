"""The one interface every actuator backend implements.

The bridge node talks to the robot only through :class:`Backend`: the Dynamixel
backend (real servos, or the servo emulator on a pseudo-terminal) implements it;
nothing above the bridge knows which one runs. The registry of backends by name is
:mod:`snake_hardware.backends`.

Conventions (all backends):

- Joints are addressed by name (the robot YAML's joint names); arrays returned by
  :meth:`Backend.read` are in :attr:`Backend.joint_names` order (head to tail).
- Units: positions rad, velocities rad/s, efforts N m, temperatures deg C, voltages V,
  stamps seconds of ``time.monotonic()``.
- :meth:`Backend.write_goals` refuses (:class:`NotReadyError`) until a fresh
  :meth:`Backend.read` succeeded after :meth:`Backend.open` or a reconnect, so no
  stale target is ever sent.
- Communication faults raise :class:`CommError` after the backend's own retries;
  a vanished device raises :class:`DeviceLostError`; the caller reconnects with
  :meth:`Backend.reconnect`. Nothing here blocks for longer than one transaction's
  timeout times its retries (plus, per failed attempt, a bounded drain of late answers);
  :meth:`Backend.reboot` returns without waiting for the actuators to boot.
- A goal that cannot be placed (not finite, beyond the actuator's range) is skipped for
  that joint only and listed in :attr:`Backend.rejected_goals`; it is never a
  communication failure.
- Hardware error bits are the backend's own (a vendor's status register); the backend
  names them (:meth:`Backend.describe_hardware_error`), so nothing above it decodes them.

A backend on a simulator (MuJoCo) would need: ``open`` (load the model), ``read`` (qpos/qvel/actuator
force of the named joints), ``write_goals`` (position actuators' ctrl),
``set_torque`` (gain to zero), ``health`` (no errors, nominal temperature and
voltage), ``reboot`` (no-op) and ``counters`` (zeros).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np


class BackendError(Exception):
    """Base class of every backend error."""


class ConfigError(BackendError, ValueError):
    """The backend cannot run this robot description or these settings."""


class StartupError(BackendError):
    """Start-up failed (missing IDs, wrong model numbers...); the message lists what."""


class CommError(BackendError):
    """A transaction failed after all retries (timeouts, CRC errors, garbage)."""


class DeviceLostError(BackendError):
    """The serial device disappeared (USB unplugged); reconnect to resume."""


class NotReadyError(BackendError):
    """A goal was written before fresh present positions were read."""


@dataclass(frozen=True)
class JointReading:
    """One synchronous read of every joint.

    Attributes:
        names: Joint names, head to tail.
        position: Present positions, rad.
        velocity: Present velocities, rad/s.
        effort: Present efforts, N m (estimated from motor current).
        stamp: ``time.monotonic()`` when the read completed, s.
        stale: Joints whose values were not read this time (an actuator rebooting): their
            position is the last one read, velocity and effort 0.
    """

    names: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    stamp: float
    stale: tuple[str, ...] = ()


@dataclass(frozen=True)
class JointHealth:
    """Health of one joint's actuator.

    Attributes:
        name: Joint name.
        hardware_error: Confirmed hardware error bits (the backend's own, named by
            :meth:`Backend.describe_hardware_error`), 0 when healthy; -1 if unknown.
            A backend reports bits here only once they are confirmed (e.g. by a second,
            dedicated read), so a corrupt or misattributed answer never triggers a fault
            reaction.
        temperature: Internal temperature, deg C (NaN if unknown).
        voltage: Input voltage, V (NaN if unknown).
        torque_enabled: Whether the actuator holds torque (None if unknown).
        watchdog_tripped: The actuator's Bus Watchdog stopped it.
        pending_error: Hardware error bits seen once but not (yet) confirmed; no reaction.
        goal_refused: The actuator refused the last goal written to it (an ERROR to show).
        rebooting: A reboot was sent and the actuator has not answered since.
        foreign: Settings found different from what the backend wrote (another program on
            the bus), each as ``"<register> <value> (written <value>)"``; empty when none.
    """

    name: str
    hardware_error: int
    temperature: float
    voltage: float
    torque_enabled: bool | None = None
    watchdog_tripped: bool = False
    pending_error: int = 0
    goal_refused: bool = False
    rebooting: bool = False
    foreign: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when no hardware error bit is set and the watchdog did not trip."""
        return self.hardware_error == 0 and not self.watchdog_tripped


@dataclass
class BusCounters:
    """Communication statistics since the backend was created.

    Attributes:
        transactions: Transactions attempted (each retry counts).
        timeouts: Transactions that got no (complete) answer in time.
        crc_errors: Answers with a bad CRC or garbage framing.
        retries: Transactions repeated after a failure.
        failures: Operations that failed after all retries.
        consecutive_failures: Failed operations in a row (0 after a success).
        reconnects: Successful reconnections after a device loss.
        bytes_tx: Bytes written to the bus.
        bytes_rx: Bytes of answers expected on the bus (successful reads).
        stale_packets: Answers discarded because their ID or length did not match the
            awaited answer (late answers to earlier instructions).
        drained_bytes: Bytes discarded while draining the port after a failed transaction.
        unwinds: Multi-turn counts brought back into the goal range (continuous joints).
        goals_rejected: Goals not sent because they could not be converted or placed
            (non-finite, beyond the servo's range, unknown joint); the other joints' goals
            still went out.
        goals_refused: Goals the actuators refused (seen by reading the goal back).
        unconfirmed_errors: Hardware error reports that a confirming read did not repeat.
        reboots: Reboot instructions sent.
        late_waits: Answers waited for again because this process's thread was not running
            when they were due (a loaded computer, not a silent bus): each gets one fresh
            window of its timeout before it counts as a timeout.
    """

    transactions: int = 0
    timeouts: int = 0
    crc_errors: int = 0
    retries: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    reconnects: int = 0
    bytes_tx: int = 0
    bytes_rx: int = 0
    stale_packets: int = 0
    drained_bytes: int = 0
    unwinds: int = 0
    goals_rejected: int = 0
    goals_refused: int = 0
    unconfirmed_errors: int = 0
    reboots: int = 0
    late_waits: int = 0
    extra: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, int]:
        """The counters as a flat name -> value mapping."""
        out = {k: int(getattr(self, k)) for k in (
            "transactions", "timeouts", "crc_errors", "retries", "failures",
            "consecutive_failures", "reconnects", "bytes_tx", "bytes_rx", "stale_packets",
            "drained_bytes", "unwinds", "goals_rejected", "goals_refused", "unconfirmed_errors",
            "reboots", "late_waits")}
        out.update(self.extra)
        return out


def supply_voltage(health: Iterable[JointHealth]) -> float:
    """The supply voltage of the actuators' bus: the median of their input voltages, V (NaN when none answered).

    The median, not the mean: one actuator that misreads (or sits behind a long cable)
    does not move it.
    """
    volts = [h.voltage for h in health if math.isfinite(h.voltage)]
    return float(np.median(volts)) if volts else math.nan


class Backend(abc.ABC):
    """Actuators of one robot: read state, write goal positions, torque, health.

    Subclasses implement the abstract methods; ``with backend:`` opens and closes.
    """

    @property
    @abc.abstractmethod
    def joint_names(self) -> tuple[str, ...]:
        """Joint names handled by this backend, head to tail."""

    @abc.abstractmethod
    def open(self) -> None:
        """Connect and initialise the actuators (torque stays off).

        Raises:
            StartupError: Actuators missing or misconfigured; the message lists them.
            DeviceLostError: The device cannot be opened.
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Release the device; never raises."""

    @abc.abstractmethod
    def read(self) -> JointReading:
        """Read present position, velocity and effort of every joint.

        Raises:
            CommError: After the retries failed.
            DeviceLostError: The device vanished.
        """

    @abc.abstractmethod
    def write_goals(self, goals: Mapping[str, float]) -> None:
        """Send goal positions, rad, for the named joints (others keep their goal).

        The caller has already clamped to the joint limits; backends clamp again.

        Raises:
            NotReadyError: No fresh :meth:`read` since open/reconnect.
            CommError: The write failed.
            DeviceLostError: The device vanished.
        """

    @abc.abstractmethod
    def set_torque(self, enabled: bool, names: Sequence[str] | None = None) -> None:
        """Enable or disable torque on the named joints (all joints if None)."""

    @abc.abstractmethod
    def health(self) -> list[JointHealth]:
        """Hardware error bits, temperature and voltage of every joint."""

    def health_round(self, period_s: float) -> Iterator[list[JointHealth]]:
        """One health poll spread over cycles of ``period_s``, s: one step per ``next``.

        Each step does a share of the poll's bus traffic small enough for one cycle and
        yields the health of the joints it completed; a round yields every joint once.
        The default does the whole :meth:`health` in one step.
        """
        yield self.health()

    @abc.abstractmethod
    def reboot(self, names: Sequence[str]) -> None:
        """Reboot the named actuators (clears hardware errors; torque comes back off)."""

    @abc.abstractmethod
    def reconnect(self) -> None:
        """One attempt to re-open and re-initialise after a device loss.

        After success the backend is not ready to take goals until the next
        successful :meth:`read`. Raises like :meth:`open`.
        """

    @property
    @abc.abstractmethod
    def counters(self) -> BusCounters:
        """Communication counters (a live object; copy it to keep a snapshot)."""

    def describe_hardware_error(self, bits: int) -> str:
        """Human-readable list of the hardware error bits set in ``bits`` ('' if none).

        The bits are the backend's own (:attr:`JointHealth.hardware_error`); a backend whose
        actuators name their bits overrides this. The default gives them in hex.
        """
        return f"error bits 0x{bits:02x}" if bits else ""

    @property
    def rejected_goals(self) -> Mapping[str, str]:
        """Joints whose goal the last :meth:`write_goals` did not send, with the reason."""
        return {}

    @property
    def register_mismatches(self) -> Mapping[str, str]:
        """Joints whose actuator does not hold a setting written to it at start-up (read back), described.

        The supervisor refuses to arm while any is listed. The default (nothing to write): none.
        """
        return {}

    @property
    def goals_moved(self) -> tuple[str, ...]:
        """Joints whose actuator, at the last :meth:`read`, held a goal none of this backend's recent ones explains.

        A hint only (the supervisor confirms with :meth:`foreign_goals`); the default
        (actuators nobody else can reach, or a read without the goal): none.
        """
        return ()

    def foreign_goals(self, names: Sequence[str]) -> dict[str, str]:
        """Joints among ``names`` whose actuator holds a goal this backend did not write, described.

        Read now, before the cycle's goal write, so that a goal another program wrote since
        the last write is still there. The default (actuators nobody else can reach): none.
        """
        return {}

    def __enter__(self) -> Backend:
        """Open the backend."""
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the backend."""
        self.close()
