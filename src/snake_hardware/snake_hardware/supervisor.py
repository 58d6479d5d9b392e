"""The bridge's safety state machine: arming, torque, e-stop, command timeout, faults, reconnect.

ROS-free: the supervisor owns one :class:`~snake_hardware.backend.Backend` and is
driven by three kinds of calls, all from one thread: :meth:`Supervisor.step` once per
cycle (read, shape and write goals, poll health, reconnect), :meth:`Supervisor.on_command`
for every filtered ``joint_commands`` message, and the requests :meth:`Supervisor.arm`,
:meth:`Supervisor.disarm`, :meth:`Supervisor.emergency_stop`, :meth:`Supervisor.clear_estop` and
:meth:`Supervisor.reboot`, each answering with an :class:`Outcome` (accepted, or refused with a
reason). The bridge node only wires ROS to these calls.

The states follow the idea of the ros2_control hardware lifecycle (an inactive state in
which states are read but no motion is commanded, an active one, and error handling),
with the states a servo bus needs:

============  ======  =====================================================================
state         torque  meaning
============  ======  =====================================================================
DISARMED      off     limp; states read and published; commands recorded, never written
ARMING        on      goals go from the start pose to the commanded pose (arming ramp)
ARMED         on      goals follow the commands, rate-limited by the YAML velocities
HOLDING       on      command timeout (``hold``) or several commanders: the last goals are held
ESTOPPED      off     emergency stop, latched through everything until :meth:`clear_estop`
FAULT         off/on  bus lost or not ready, a servo hardware error, or a setting the bridge
                      did not write (``fault_reaction``; the servos another program wrote
                      are limp whatever it says)
============  ======  =====================================================================

Transitions (anything else is refused with a reason, or ignored for commands):

- DISARMED -> ARMING: :meth:`arm`, or ``auto_arm`` when the bus becomes ready.
- ESTOPPED -> DISARMED: :meth:`clear_estop`, the only way out of an e-stop (to FAULT
  instead when the bus is not connected or a servo reports a hardware error). Arming is a
  second, separate request: :meth:`arm` in ESTOPPED is refused.
- ARMING -> ARMED: a fresh command exists and the arming gap is closed on every joint.
- ARMING / ARMED -> HOLDING: command timeout with reaction ``hold``, or
  :meth:`refuse_commands` (several commanders; commands ignored until
  :meth:`accept_commands`).
- HOLDING -> ARMING: a new command (a new ramp from the held goals).
- ARMING / ARMED / HOLDING -> DISARMED: :meth:`disarm`, or command timeout with reaction
  ``torque_off``.
- any -> ESTOPPED: :meth:`emergency_stop`.
- any but ESTOPPED -> FAULT: bus lost (device gone, or failed cycles in a row for at least
  ``max_consecutive_failures`` cycles *and* ``bus_loss_timeout_s``), bus not ready, or a new
  servo hardware error.
- ARMING / ARMED / HOLDING -> FAULT: the health poll finds a servo's torque off, or a
  setting the backend did not write (:attr:`~snake_hardware.backend.JointHealth.foreign`: Bus Watchdog, Operating
  Mode, Goal Position, the position gains and the profile); the servos written by another
  program go limp at once whatever ``fault_reaction`` says (a goal held against another
  writer is a fight the servo loses, and the joint goes where the last write sends it);
  latched until :meth:`reboot` of those servos, through bus losses and reconnects too (the
  other program may still be there).
- FAULT -> DISARMED: the bus is ready again (reconnect; not after a foreign write), or
  :meth:`reboot` of the servos in hardware error or with foreign settings.

The failure budget is measured on the ``now`` given to :meth:`Supervisor.step`: the first
failed cycle is a WARN and the goals keep being written on the next good cycle, so a USB
latency spike shorter than ``bus_loss_timeout_s`` costs no motion; a device that is gone
(serial error, port closed) is a FAULT in the cycle that sees it.

The health poll is a round over every joint spread over cycles
(:meth:`~snake_hardware.backend.Backend.health_round`); :attr:`Supervisor.health_polls` counts complete rounds.
A continuous joint arms to the command's equivalent angle nearest where it is
(:meth:`Supervisor._start_ramp`).

A ``joint_commands`` message never enables torque. An exception raised while converting
one joint's goal (not a bus error) drops that joint's goal, holds its last written goal
and leaves the other joints running; it never counts as a bus failure.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from snake_core.robot import JointSpec
from snake_hardware.backend import (
    Backend,
    BackendError,
    BusCounters,
    DeviceLostError,
    JointHealth,
    JointReading,
    NotReadyError,
)
from snake_hardware.command import (
    Backoff,
    CommandState,
    CommandTimeout,
    GoalShaper,
    TrackingEnvelope,
)
from snake_hardware.continuous_turns import ContinuousTurns
from snake_hardware.supervisor_config import SupervisorConfig
from snake_hardware.supervisor_health import HealthRounds, describe_foreign, foreign_settings
from snake_hardware.supervisor_states import MOVING_STATES, TORQUE_STATES, BridgeState, Outcome, Transition

__all__ = ["BridgeState", "Log", "Outcome", "Supervisor", "SupervisorConfig", "Transition"]

_THROTTLE_S = 2.0       # s between repeated log lines of one kind
_HISTORY = 200          # transitions remembered for inspection
_CONVERSION_ERRORS = (ValueError, OverflowError, KeyError, TypeError, ArithmeticError)
# A joint farther than this from its goals (rad) gets its Goal Position read back before the cycle's
# write (is another program writing it?): small, so that a foreign writer is named before it has
# dragged the joint far, whatever the tracking tolerance (which must allow for a loaded servo).
_SUSPECT_RAD = 0.05
# A joint farther than this (rad) from its goal when the bridge starts HOLDING is held where it is:
# a load (the ground, a lifted body) may keep it from that goal once the motion stops, and a servo
# held away from its goal pushes at its torque limit until the tracking envelope faults it.
_HOLD_WHERE_RAD = 0.05


Log = Callable[[str, str], None]
"""Log sink: ``log(level, text)`` with level ``info``, ``warning`` or ``error``."""


def _no_log(level: str, text: str) -> None:
    """Discard a log line."""


class Supervisor:
    """Safety state machine of the bridge around one backend (see the module docstring).

    Args:
        backend: The actuators (not opened yet; :meth:`step` opens it).
        joints: The robot's joints, in the backend's order.
        config: Settings.
        log: Log sink (throttled here: one line per kind every 2 s at most).
        clock: Monotonic clock for throttling, s.

    Raises:
        ValueError: An invalid ``config``.
    """

    def __init__(self, backend: Backend, joints: Iterable[JointSpec], config: SupervisorConfig,
                 log: Log | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        """Start DISARMED and disconnected; the first :meth:`step` opens the bus."""
        config.validate()
        self._backend = backend
        self._joints = tuple(joints)
        self._names = tuple(j.name for j in self._joints)
        self.config = config
        self._log = log or _no_log
        self._clock = clock
        self._shaper = GoalShaper(self._joints, config.period_s, config.arming_speed)
        self._timeout = CommandTimeout(config.command_timeout_s, config.timeout_reaction)
        self._backoff = Backoff()
        self._envelope = TrackingEnvelope(self._names, config.tracking_tolerance_rad, config.tracking_lag_s,
                                          config.tracking_time_s)
        self._state = BridgeState.DISARMED
        self._reason = "bus not opened yet"
        self._connected = False
        self._ever_connected = False
        self._torque_on = False
        self._connect_error = ""
        self._bus_error = ""
        self._present: dict[str, float] = {}
        self._latest: dict[str, float] = {}
        self._written: dict[str, float] = {}
        self._blocked: dict[str, str] = {}
        self._ids = {j.name: j.servo_id for j in self._joints}
        self._turns = ContinuousTurns(j.name for j in self._joints if j.continuous)
        self._health: dict[str, JointHealth] = {}
        self._faulted: set[str] = set()
        self._foreign: dict[str, str] = {}       # joint -> settings another program changed
        self._limp: set[str] = set()             # joints limp because another program wrote them (until reboot)
        self._foreign_fault = ""                 # why a foreign write faulted, '' if not: latched until reboot
        self._tracking: dict[str, str] = {}      # joint -> how far it left its tracking envelope (until disarm)
        self._rounds = HealthRounds(self._names)
        self._crowd = ""                         # why commands are refused (several commanders), '' if not
        self._last_read = math.inf   # time of the last cycle's tracking check, s
        self._failed_cycles = 0
        self._failing_since = math.inf   # ``now`` of the first failed cycle in a row
        self.rejected_goals = 0
        self.transitions: collections.deque[Transition] = collections.deque(maxlen=_HISTORY)
        self._last_log: dict[str, float] = {}
        self._now = -math.inf

    # --- inspection -----------------------------------------------------------------------
    @property
    def state(self) -> BridgeState:
        """The current state."""
        return self._state

    @property
    def reason(self) -> str:
        """Why the current state was entered."""
        return self._reason

    @property
    def connected(self) -> bool:
        """True while the bus is open and initialised."""
        return self._connected

    @property
    def torque_on(self) -> bool:
        """Whether torque was last commanded on."""
        return self._torque_on

    @property
    def failed_cycles(self) -> int:
        """Cycles in a row whose read or write failed."""
        return self._failed_cycles

    @property
    def bus_error(self) -> str:
        """Why the bus is not connected ('' while connected)."""
        return " | ".join(x for x in (self._connect_error, self._bus_error) if x)

    @property
    def health(self) -> list[JointHealth]:
        """The latest health of every joint polled so far, in joint order (empty before the first poll)."""
        return [self._health[n] for n in self._names if n in self._health]

    @property
    def health_polls(self) -> int:
        """Health polls completed (a poll is one round over every joint, spread over cycles)."""
        return self._rounds.polls

    @property
    def faulted(self) -> list[str]:
        """Joints whose servo reports a hardware error."""
        return sorted(self._faulted)

    @property
    def foreign(self) -> dict[str, str]:
        """Joints whose servo settings were changed by someone else (torque, registers), with what."""
        return dict(self._foreign)

    @property
    def command_state(self) -> CommandState:
        """State of the command timeout."""
        return self._timeout.state

    @property
    def goals(self) -> dict[str, float]:
        """The last goals written, rad."""
        return dict(self._written)

    @property
    def arming_gap(self) -> float:
        """Largest remaining arming gap, rad (0 once armed)."""
        return self._shaper.largest_gap if self._state is BridgeState.ARMING else 0.0

    @property
    def counters(self) -> BusCounters:
        """The backend's communication counters."""
        return self._backend.counters

    def configure(self, config: SupervisorConfig) -> None:
        """Apply new settings (checked first; the state is kept).

        Raises:
            ValueError: An invalid ``config``.
        """
        config.validate()
        self._shaper.configure(config.period_s, config.arming_speed)
        self._timeout.timeout_s = config.command_timeout_s
        self._timeout.reaction = config.timeout_reaction
        self._envelope.tolerance_rad = config.tracking_tolerance_rad
        self._envelope.lag_s = config.tracking_lag_s
        self._envelope.time_s = config.tracking_time_s
        self.config = config

    # --- requests ---------------------------------------------------------------------------
    def arm(self, why: str = "arm requested") -> Outcome:
        """Torque on from the present positions and start the arming ramp.

        Accepted from DISARMED only (bus connected, no servo in hardware error, every servo
        holding the registers written to it: ``Backend.register_mismatches``); in ESTOPPED
        refused until :meth:`clear_estop`.
        """
        if self._state is BridgeState.ESTOPPED:
            return Outcome(False, "ESTOPPED: the emergency stop is latched; clear it first (~/clear_estop), "
                                  "then arm")
        if self._state in TORQUE_STATES:
            return Outcome(False, f"already armed ({self._state.value})")
        if not self._connected:
            return Outcome(False, f"bus not connected: {self.bus_error or self._reason}")
        if self._state is BridgeState.FAULT:
            return Outcome(False, f"FAULT ({self._reason}): call {self._clearing_action()} first")
        if self._faulted:
            return Outcome(False, f"hardware error on {sorted(self._faulted)}: call reboot first")
        if self._foreign:
            detail = describe_foreign(self._ids, self._foreign)
            return Outcome(False, f"settings not written by the bridge on {detail}: call reboot first")
        booting = [h.name for h in self._health.values() if h.rebooting]
        if booting:
            return Outcome(False, f"servos {booting} are rebooting (they come back limp): arm once they answer")
        untaken = self._backend.register_mismatches
        if untaken:
            listing = "; ".join(f"{name} ({why})" for name, why in untaken.items())
            return Outcome(False, f"servo registers did not take on {listing}: call reboot to write them again")
        try:
            reading = self._backend.read()
            self._backend.set_torque(True)
        except DeviceLostError as err:
            self._lost(str(err))
            return Outcome(False, f"arming failed, bus lost: {err}")
        except BackendError as err:
            self._try_torque_off()
            return Outcome(False, f"arming failed: {err}")
        self._present = dict(zip(reading.names, reading.position.tolist(), strict=True))
        command = self._latest if self._timeout.state is CommandState.ACTIVE else {}
        self._start_ramp(self._present, command)
        self._written = dict(self._present)
        self._blocked.clear()
        self._torque_on = True
        self._enter(BridgeState.ARMING, why)
        return Outcome(True, f"ARMING: goals move from the present pose to the commanded pose at "
                             f"{self.config.arming_speed:g} rad/s at most (largest gap "
                             f"{self._shaper.largest_gap:.3f} rad)")

    def disarm(self, why: str = "disarm requested") -> Outcome:
        """Torque off on every servo: limp until armed again.

        Refused in ESTOPPED (already limp, and the latch stays until :meth:`clear_estop`). In
        FAULT torque goes off and the state stays FAULT.
        """
        if self._state is BridgeState.ESTOPPED:
            return Outcome(False, "ESTOPPED: already limp; the emergency stop stays latched until clear_estop")
        if not self._connected:
            return Outcome(False, f"bus not connected ({self.bus_error}): the Bus Watchdog stops the servos")
        error = self._try_torque_off()
        if not error:
            self._tracking.clear()   # limp: the joints start from where they are at the next arming
        if self._state is BridgeState.FAULT:  # was FAULT, or the bus was lost just now
            return Outcome(not error, error or f"torque off; still FAULT ({self._reason})")
        self._enter(BridgeState.DISARMED, why)
        if error:
            return Outcome(False, f"DISARMED, but torque off failed: {error}")
        return Outcome(True, "DISARMED: torque off on every servo; stays limp until armed")

    def emergency_stop(self) -> Outcome:
        """Torque off on every servo and latch ESTOPPED until :meth:`clear_estop`; always entered."""
        error = self._try_torque_off() if self._connected else "bus not connected"
        self._enter(BridgeState.ESTOPPED, "emergency stop")
        if error:
            return Outcome(False, f"ESTOPPED, but torque off failed ({error}); the Bus Watchdog stops the servos")
        return Outcome(True, "ESTOPPED: torque off on every servo; latched until clear_estop")

    def clear_estop(self) -> Outcome:
        """Leave a latched emergency stop: ESTOPPED -> DISARMED, torque stays off.

        Only accepted in ESTOPPED. Torque off is written once more before the latch is
        released; the state becomes FAULT instead of DISARMED when the bus is not
        connected (it goes DISARMED on reconnect) or a servo reports a hardware error
        (:meth:`reboot` next). The clear itself never arms, whatever ``auto_arm`` says
        (``auto_arm`` applies again at the next reconnect).
        """
        if self._state is not BridgeState.ESTOPPED:
            return Outcome(False, f"no emergency stop latched ({self._state.value})")
        if not self._connected:
            self._enter(BridgeState.FAULT, f"emergency stop cleared; bus not connected: {self.bus_error}")
            return Outcome(True, f"e-stop cleared; FAULT until the bus is ready ({self.bus_error})")
        error = self._try_torque_off()
        if error:
            return Outcome(False, f"still ESTOPPED: torque off failed ({error})")
        if self._faulted:
            self._enter(BridgeState.FAULT, f"emergency stop cleared; hardware error on {sorted(self._faulted)}")
            return Outcome(True, f"e-stop cleared; FAULT: hardware error on {sorted(self._faulted)}, "
                                 "call reboot")
        if self._foreign_fault:
            self._enter(BridgeState.FAULT, f"emergency stop cleared; still {self._foreign_fault}: call reboot")
            return Outcome(True, f"e-stop cleared; FAULT: {self._foreign_fault}, call reboot")
        self._enter(BridgeState.DISARMED, "emergency stop cleared")
        return Outcome(True, "DISARMED: e-stop cleared, torque off; arm to move")

    def reboot(self) -> Outcome:
        """Reboot the servos in hardware error, with settings changed by someone else, or whose registers did not take.

        A reboot clears the error and brings the servo back torque off, re-initialised with
        the bridge's settings. From FAULT the bridge goes DISARMED (torque off on every servo).
        """
        names = sorted(self._faulted | set(self._foreign) | set(self._backend.register_mismatches))
        if not names:
            return Outcome(False, "no servo in hardware-error state, with foreign settings or with registers "
                                  "that did not take")
        if not self._connected:
            return Outcome(False, f"bus not connected: {self.bus_error}")
        try:
            self._backend.reboot(names)
        except DeviceLostError as err:
            self._lost(str(err))
            return Outcome(False, f"reboot failed, bus lost: {err}")
        except BackendError as err:
            return Outcome(False, f"reboot failed: {err}")
        self._faulted -= set(names)
        self._limp -= set(names)
        for name in names:
            self._foreign.pop(name, None)
            if name in self._health:  # what was read before the reboot no longer holds: rebooting until read again
                self._health[name] = replace(self._health[name], hardware_error=-1, pending_error=0, rebooting=True)
        if not self._foreign:
            self._foreign_fault = ""
        if self._state is BridgeState.FAULT:
            error = self._try_torque_off()
            if error:
                return Outcome(False, f"rebooted {names}; torque off failed: {error}")
            self._enter(BridgeState.DISARMED, f"rebooted {names}")
        return Outcome(True, f"rebooted {names}")

    def on_command(self, targets: Mapping[str, float], now: float) -> None:
        """A filtered command (rad by joint name) arrived at ``now``, s.

        Recorded in DISARMED (the pose an :meth:`arm` ramps to while commands stay
        fresh), followed in ARMING/ARMED, resumes HOLDING, ignored in ESTOPPED and
        FAULT. Never enables torque.
        """
        if not targets or not self._connected or self._state is BridgeState.ESTOPPED:
            return
        if self._state is BridgeState.FAULT:
            self._say("warning", "fault-commands",
                      f"joint_commands ignored: FAULT ({self._reason}); call {self._clearing_action()}")
            return
        if self._crowd:
            self._say("warning", "crowd-commands", f"joint_commands ignored: {self._crowd}")
            return
        known = {n: float(v) for n, v in targets.items() if n in self._names}
        first = self._timeout.state is not CommandState.ACTIVE
        self._latest.update(known)
        self._timeout.on_command(now)
        for name in known:
            self._blocked.pop(name, None)
        if self._state is BridgeState.ARMING and first:
            # Armed without a fresh command: the ramp starts with the first one.
            self._start_ramp(self._shaper.goals, self._latest)
        elif self._state in MOVING_STATES:
            self._shaper.set_command(self._shifted(known))
        elif self._state is BridgeState.HOLDING:
            self._start_ramp(self._shaper.goals, self._latest)
            self._enter(BridgeState.ARMING, "commands resumed after a timeout")

    def refuse_commands(self, why: str) -> None:
        """Several commanders publish: hold the last goals and ignore commands until :meth:`accept_commands`.

        ARMING / ARMED -> HOLDING (the last goals held, torque on; a HOLDING bridge gives this
        as its reason); in every state the
        commands are ignored meanwhile (one throttled warning naming ``why``). Accepting
        them again leaves HOLDING the usual way: with the next command, through a new ramp.
        """
        self._crowd = why
        if self._state in MOVING_STATES:
            self._hold()
        if self._state in TORQUE_STATES:
            self._enter(BridgeState.HOLDING, why)

    def accept_commands(self) -> None:
        """One commander again: commands are followed again (HOLDING resumes with the next one)."""
        if self._crowd:
            self._log("info", "one commander again: joint_commands accepted")
        self._crowd = ""

    # --- the cycle --------------------------------------------------------------------------
    def step(self, now: float) -> JointReading | None:
        """One cycle at ``now``, s: (re)connect, read, shape and write goals, poll health.

        Returns:
            The reading to publish, or None when nothing was read.
        """
        self._now = now
        if not self._connected:
            self._try_connect(now)
            return None
        try:
            reading = self._backend.read()
        except DeviceLostError as err:
            self._lost(str(err))
            return None
        except BackendError as err:
            self._comm_failure(str(err), now)
            if self._connected:
                self._guarded_health(now)  # tells which servo is silent
            return None
        self._present = dict(zip(reading.names, reading.position.tolist(), strict=True))
        # The command timeout before the tracking check: after a loop the computer stalled past
        # both, the commands ended first, and HOLDING holds a stranded joint where it is.
        if self._command_timeout(now):
            return reading
        self._check_tracking(reading, now)
        try:
            # The health step comes before this cycle's goal write, so a Goal Position that
            # another program wrote since the last write is still in the register when read.
            self._health_if_due(now)
            self._control(now)
            self._failed_cycles = 0
            self._failing_since = math.inf
        except NotReadyError:
            pass   # a tripped Bus Watchdog was just re-armed: goals wait for the next read
        except DeviceLostError as err:
            self._lost(str(err))
        except BackendError as err:
            self._comm_failure(str(err), now)
        return reading

    def shutdown(self, exit_reaction: str) -> str:
        """Leave the servos safe and close the bus; returns an error text or ''.

        ``torque_off``: torque off on every servo. ``hold``: the last goals are written
        once more (the Bus Watchdog then stops the servos where they are).
        """
        error = ""
        try:
            if self._connected:
                if exit_reaction == "torque_off":
                    self._backend.set_torque(False)
                elif self._torque_on and self._written:
                    self._backend.write_goals(self._written)
        except BackendError as err:
            error = str(err)
        finally:
            self._backend.close()
            self._connected = False
            self._torque_on = False
        return error

    # --- internals ----------------------------------------------------------------------------
    def _enter(self, state: BridgeState, reason: str) -> None:
        previous = self._state
        self._state, self._reason = state, reason
        self.transitions.append(Transition(previous, state, reason))
        if state not in TORQUE_STATES:
            self._timeout.reset()  # a limp bridge forgets the commands' timing
        level = "warning" if state in (BridgeState.HOLDING, BridgeState.ESTOPPED, BridgeState.FAULT) else "info"
        if previous is not state:
            self._log(level, f"{previous.value} -> {state.value}: {reason}")

    def _say(self, level: str, key: str, text: str) -> None:
        now = self._clock()
        if now - self._last_log.get(key, -math.inf) >= _THROTTLE_S:
            self._last_log[key] = now
            self._log(level, text)

    def _try_torque_off(self) -> str:
        """Torque off on every servo; returns '' or the error (the bus loss is handled)."""
        self._torque_on = False
        try:
            self._backend.set_torque(False)
        except DeviceLostError as err:
            self._lost(str(err))
            return str(err)
        except BackendError as err:
            return str(err)
        return ""

    def _try_connect(self, now: float) -> None:
        if not self._backoff.due(now):
            return
        try:
            if self._ever_connected:
                self._backend.reconnect()
            else:
                self._backend.open()
        except BackendError as err:
            delay = self._backoff.failed(now)
            self._connect_error = str(err)
            self._say("error", "connect", f"bus not ready ({err}); retrying in {delay:.2f} s")
            if self._state not in (BridgeState.FAULT, BridgeState.ESTOPPED):
                self._enter(BridgeState.FAULT, f"bus not ready: {err}")
            return
        self._backoff.reset()
        self._connected = self._ever_connected = True
        self._connect_error = self._bus_error = ""
        self._torque_on = False          # (re)initialised servos have torque off
        self._failed_cycles = 0
        self._failing_since = math.inf
        self._faulted.clear()
        self._limp.clear()              # (re)initialised servos have torque off
        if not self._foreign_fault:
            # Every servo is re-initialised with the bridge's settings. A foreign write that
            # faulted stays latched until reboot: the other program may still be writing.
            self._foreign.clear()
        self._tracking.clear()
        self._health.clear()
        self._rounds.restart()
        self._blocked.clear()
        self._written.clear()
        self._timeout.reset()            # no target survives a (re)connect
        self._latest.clear()
        self._log("info", f"bus ready: {len(self._joints)} servos")
        if self._foreign_fault and self._state is not BridgeState.ESTOPPED:
            self._enter(BridgeState.FAULT, f"bus ready; still {self._foreign_fault}: call reboot")
        elif self._state is not BridgeState.ESTOPPED:
            self._enter(BridgeState.DISARMED, "bus ready")
            if self.config.auto_arm:
                outcome = self.arm("auto_arm")
                if not outcome.accepted:
                    self._say("warning", "auto-arm", f"auto_arm refused: {outcome.message}")

    def _lost(self, why: str) -> None:
        self._connected = False
        self._torque_on = False
        self._bus_error = why
        self._rounds.drop()
        self._say("error", "lost", f"bus lost: {why}")
        self._backend.close()
        if self._state is not BridgeState.ESTOPPED:
            self._enter(BridgeState.FAULT, f"bus lost: {why}")

    def _comm_failure(self, why: str, now: float) -> None:
        self._failed_cycles += 1
        failures = self._failed_cycles
        self._failing_since = min(self._failing_since, now)
        lasted = now - self._failing_since
        self._say("warning", "comm", f"bus error ({failures} failed cycles in a row, {lasted:.3f} s): {why}")
        if failures >= self.config.max_consecutive_failures and lasted >= self.config.bus_loss_timeout_s:
            self._failed_cycles = 0
            self._failing_since = math.inf
            try:
                self._backend.set_torque(False)
            except BackendError:
                pass  # the Bus Watchdog stops the servos when we cannot reach them
            self._lost(f"{failures} consecutive failed cycles in {lasted:.3f} s: {why}")

    def _command_timeout(self, now: float) -> bool:
        """The command timeout's reaction, once; True when it turned the torque off (nothing more this cycle)."""
        self._timeout.poll(now)
        if not (self._timeout.just_timed_out and self._state in MOVING_STATES):
            return False
        if self._timeout.reaction == "hold":
            self._hold()
            self._enter(BridgeState.HOLDING, "command timeout: holding the last goals")
            return False
        error = self._try_torque_off()
        if self._connected:
            self._enter(BridgeState.DISARMED, "command timeout" + (f" (torque off failed: {error})" if error else ""))
        return True

    def _control(self, now: float) -> None:
        """Goal shaping and the goal write of one cycle (the command timeout came before it)."""
        if self._state in MOVING_STATES:
            goals = self._shaper.step(self._now)
            if (self._state is BridgeState.ARMING and not self._shaper.arming
                    and self._timeout.state is CommandState.ACTIVE):
                self._enter(BridgeState.ARMED, "commanded pose reached")
        elif self._torque_on and self._state in (BridgeState.HOLDING, BridgeState.FAULT):
            goals = self._shaper.goals
        else:
            return
        self._write(goals)

    def _hold(self) -> None:
        """Freeze the goals for HOLDING: each joint's last goal, or where it is if farther than _HOLD_WHERE_RAD.

        A joint that lagged its moving goals (a loaded servo catching up) and that its load
        now keeps from the last one would stay out of the tracking envelope with the goals
        frozen: a tracking FAULT instead of HOLDING. Held where it is, it stays put.
        """
        goals = self._shaper.goals
        stranded = {n: x for n, x in self._present.items()
                    if n in goals and n not in self._blocked and abs(x - goals[n]) > _HOLD_WHERE_RAD}
        self._shaper.revert(stranded)
        self._shaper.hold()
        self._envelope.reset()   # the held goals start afresh, as after arming

    def _write(self, goals: Mapping[str, float]) -> None:
        send = {n: g for n, g in goals.items() if n not in self._blocked and n not in self._limp}
        if not send:
            return
        try:
            self._backend.write_goals(send)
        except BackendError:
            raise
        except _CONVERSION_ERRORS:
            self._isolate(send)
            return
        rejected = self._backend.rejected_goals  # skipped by the backend itself, the others went out
        if rejected:
            detail = "; ".join(f"{n} ({why})" for n, why in rejected.items())
            self._say("warning", "goal-rejected", f"goals not sent, the other joints run: {detail}")
        self._written.update({n: g for n, g in send.items() if n not in rejected})
        self._envelope.wrote(self._written, self._now)

    def _isolate(self, send: Mapping[str, float]) -> None:
        """A goal could not be converted: write joint by joint, drop and hold the bad ones."""
        bad: dict[str, str] = {}
        for name, goal in send.items():
            try:
                self._backend.write_goals({name: goal})
            except BackendError:
                raise
            except _CONVERSION_ERRORS as err:
                bad[name] = f"{type(err).__name__}: {err}"
            else:
                self._written[name] = goal
        self._blocked.update(bad)
        self.rejected_goals += len(bad)
        self._shaper.revert({n: self._written.get(n, self._present.get(n, 0.0)) for n in bad})
        if bad:
            detail = "; ".join(f"{n} = {send[n]:.6g} ({why})" for n, why in bad.items())
            self._say("warning", "goal-conversion", f"goal dropped, last goal held, the other joints run: {detail}")

    def _health_if_due(self, now: float) -> None:
        """One step of the health poll: a round starts every ``health_period_s`` and spans cycles."""
        part = self._rounds.next_part(now, self.config.health_period_s,
                                      lambda: self._backend.health_round(self.config.period_s))
        if part is not None:
            self._poll_health(part)

    def _guarded_health(self, now: float) -> None:
        try:
            self._health_if_due(now)
        except DeviceLostError as err:
            self._lost(str(err))
        except BackendError as err:
            self._say("warning", "health", f"health poll failed: {err}")

    def _poll_health(self, part: list[JointHealth]) -> None:
        """Checks of one step's health (hardware errors, foreign writes, torque found on while limp)."""
        self._health.update({h.name: h for h in part})
        if any(h.watchdog_tripped for h in part):
            self._envelope.reset()   # stopped by their own watchdog (re-armed now): the goals start afresh
        latest = list(self._health.values())
        bad = {h.name for h in latest if h.hardware_error > 0}
        new = bad - self._faulted
        self._faulted = bad
        if new:
            detail = "; ".join(f"{h.name}: {self._backend.describe_hardware_error(h.hardware_error)}"
                               for h in latest if h.name in new)
            self._log("error", f"servo hardware error: {detail}")
            self._fault(f"hardware error ({detail})")
        self._check_foreign(part)
        if not bad and not self._foreign and not self._tracking and self._state is BridgeState.FAULT:
            error = self._try_torque_off()
            if not error:   # the reason names what was cleared: the fault's own cause
                cleared = ("tracking fault cleared by disarm" if self._reason.startswith("tracking")
                           else "no servo reports a hardware error any more")
                self._enter(BridgeState.DISARMED, cleared)
        if not self._torque_on:
            on = [h.name for h in part if h.torque_enabled]
            if on:
                self._say("warning", "limp", f"torque found on while {self._state.value} on {on}: torque off again")
                self._backend.set_torque(False)
        else:
            on = [h.name for h in part if h.torque_enabled and h.name in self._limp]
            if on:
                self._say("warning", "limp", f"torque found on on {on}, limp after a foreign write: torque off again")
                self._backend.set_torque(False, on)

    def _check_foreign(self, part: list[JointHealth]) -> None:
        """Torque off on a servo the bridge holds, or settings it did not write: FAULT while torque is on.

        While the bridge is limp the changed settings are only recorded (arming is refused
        until :meth:`reboot` restores them); torque found on while limp is turned off again
        by :meth:`_poll_health`.
        """
        holding = self._torque_on and self._state is not BridgeState.ESTOPPED
        found = foreign_settings(part, holding, self._faulted, self._limp)
        new = {n: w for n, w in found.items() if self._foreign.get(n) != w}
        self._foreign.update(found)
        if not new:
            return
        detail = describe_foreign(self._ids, new)
        if holding:
            self._log("error", f"servo settings not written by the bridge: {detail}")
            self._fault(f"not written by the bridge: {detail}", foreign=new)
        else:
            self._say("warning", "foreign", f"servo settings not written by the bridge while {self._state.value}: "
                                            f"{detail}; arming is refused until ~/reboot")

    def _check_tracking(self, reading: JointReading, now: float) -> None:
        """FAULT when a joint the bridge holds stays out of the tracking envelope (see TrackingEnvelope)."""
        if not self._torque_on or self._state not in TORQUE_STATES:
            self._envelope.reset()
            return
        if now - self._last_read > self.config.tracking_time_s:
            # The loop did not run (a busy computer): the time out of the band counts from
            # cycles that ran, not from before the stall that left the joints behind.
            self._envelope.restart_timers()
        self._last_read = now
        stale = set(reading.stale)
        present = {n: x for n, x in self._present.items() if n not in stale}
        gaps = self._envelope.gaps(present)
        drifting = [n for n, gap in gaps.items() if gap > _SUSPECT_RAD]
        # A goal the cycle's own read found moved is read back at once, before the joint drifts.
        drifting += [n for n in self._backend.goals_moved if n in present and n not in drifting]
        if drifting and self._state is not BridgeState.FAULT:
            self._check_foreign_goals(drifting)
            if self._state is BridgeState.FAULT:
                return
        beyond = {n for n, gap in gaps.items() if gap > self.config.tracking_tolerance_rad}
        velocity = {n: float(v) for n, v in zip(reading.names, reading.velocity, strict=True) if n in beyond}
        out = self._envelope.check(gaps, now, self._envelope.closing(present, velocity))
        if not out:
            return
        detail = "; ".join(f"{n} (ID {self._ids[n]}) {gap:.3f} rad from the goals written in the last "
                           f"{self.config.tracking_lag_s:g} s (present {present[n]:.3f}, "
                           f"goal {self._written.get(n, math.nan):.3f})" for n, gap in sorted(out.items()))
        self._log("error", f"joint out of its tracking envelope for {self.config.tracking_time_s:g} s: {detail}")
        self._tracking.update({n: f"{gap:.3f} rad out of its tracking envelope" for n, gap in out.items()})
        self._envelope.reset()
        self._fault(f"tracking: {detail}")

    def _check_foreign_goals(self, names: list[str]) -> None:
        """Joints drifting from their goals: is their Goal Position another program's? FAULT if so."""
        try:
            found = self._backend.foreign_goals(names)
        except DeviceLostError as err:
            self._lost(str(err))
            return
        except BackendError:
            return   # the envelope still decides; the cycle's own read and write report the bus
        found = {n: w for n, w in found.items() if n not in self._faulted}
        if not found:
            return
        self._foreign.update(found)
        detail = describe_foreign(self._ids, found)
        self._log("error", f"servo settings not written by the bridge: {detail}")
        self._fault(f"not written by the bridge: {detail}", foreign=found)

    def _start_ramp(self, start_pose: Mapping[str, float], command: Mapping[str, float]) -> None:
        """Start the arming ramp from ``start_pose`` toward ``command`` (rad).

        A continuous joint's goal is the command's equivalent angle nearest its start:
        command + 2 pi k with k = round((start - command) / 2 pi), so arming moves it at
        most half a turn whatever turns it has left from earlier runs. That k is kept
        until the next ramp, so the commands' own winding is followed, never unwound.
        """
        self._turns.start(start_pose, command)
        self._shaper.start(start_pose, self._shifted(command))

    def _shifted(self, targets: Mapping[str, float]) -> dict[str, float]:
        """Commands (rad) with each continuous joint's whole turns of the current ramp added.

        A continuous joint first commanded after the ramp started gets the turns nearest
        its current goal.
        """
        return self._turns.shifted(targets, lambda n, q: self._shaper.goals.get(n, self._present.get(n, q)))

    def _clearing_action(self) -> str:
        """What clears the present FAULT, as the fault messages name it.

        ``disarm`` for a tracking fault, ``reboot`` for a hardware error or settings another
        program wrote; a lost bus clears by itself once the bridge has reconnected.
        """
        if self._tracking:
            return "disarm"
        if self._faulted or self._foreign:
            return "reboot"
        if not self._connected:
            return "nothing: the bridge reconnects by itself once the bus answers"
        return "disarm"

    def _fault(self, why: str, foreign: Iterable[str] = ()) -> None:
        """Enter FAULT with ``fault_reaction``; the ``foreign`` joints (another program wrote them) go limp."""
        if self._state is BridgeState.ESTOPPED:
            return
        written = sorted(set(foreign))
        if written:
            self._foreign_fault = why
        if self._torque_on and self.config.fault_reaction == "hold":
            self._shaper.hold()
            if written:
                self._limp.update(written)
                try:
                    self._backend.set_torque(False, written)
                except DeviceLostError as err:
                    self._lost(str(err))
                except BackendError as err:
                    self._say("error", "limp-failed", f"torque off of {written} failed ({err}): all torque off")
                    self._try_torque_off()
        elif self._torque_on:
            self._try_torque_off()
        self._enter(BridgeState.FAULT, why)
