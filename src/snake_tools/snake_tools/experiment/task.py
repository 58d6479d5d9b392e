"""The task side of the twin experiments: setup, reset, command, score; one runner for all.

The split is dm_control's (``suite/base.py``): the MuJoCo twin
(:class:`snake_hardware.sim.twin.SimTwin`) is the *physics* and knows nothing of any
experiment; an experiment is a :class:`Task` that

1. sets the twin up (:meth:`Task.build_twin`: robot, world, seed) and builds the gait
   (:meth:`Task.build_gait`),
2. puts both into the episode's start state (:meth:`Task.reset`: spawn pose, gait phases),
3. runs the episode (:meth:`Task.run_episode`): a :class:`GaitTask` returns the gait
   command each control period from the observation (:meth:`GaitTask.command`, ``None``
   when done) and :func:`run_gait` steps it; a task whose controller is a closed loop of the
   core (path following) hands the twin to that loop instead,
4. turns what the episode recorded into the numbers the command reports (:meth:`Task.score`).

:func:`run_task` does these four steps for any task; the ``snake experiment ...`` commands
and the tests build the same task objects and call it (in worker processes through
:func:`snake_tools.experiment.executor.map_trials`, so a task holds plain, picklable
settings). A task object runs one episode at a time: :meth:`Task.build_twin` and
:meth:`Task.reset` start a new one and clear what the last one left.

The observation a :class:`GaitTask` sees is the :class:`Trace` recorded so far, its last row
being the present control period: the task reads positions and headings as a
motion-capture system would, never the physics' internals.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np

from snake_core.analysis import body_heading
from snake_core.control import CONTROL_PERIOD_S
from snake_core.errors import WorldConfigError
from snake_core.gait import Gait
from snake_core.robot import RobotModel
from snake_core.schema import load_yaml
from snake_core.urdf import link_names
from snake_hardware.sim.worlds import World, load_world, resolve_world_path, world_from_dict
from snake_tools.experiment import cache

if TYPE_CHECKING:
    from snake_hardware.sim.twin import SimTwin

# MuJoCo and the twin are imported where an episode runs, not by this module: a command
# builds its task objects without them (worker processes import them once, as they start).

CONTROL_DT = CONTROL_PERIOD_S  # s, one control period: a gait step, then the twin's substeps
_TIME_EPS = 1e-9  # s, a time limit counts as reached this close to it

Command = tuple[float, ...]
"""A gait's native command (rolling: omega_h, omega_t, omega_c in rad/s; conical: omega_s, taper)."""

OutcomeT = TypeVar("OutcomeT")
ScoreT = TypeVar("ScoreT")


@dataclass
class Trace:
    """What one episode recorded, one row per control period (the observation of a :class:`GaitTask`).

    Attributes:
        t: Simulated time, s.
        head: Planar head position, m, ``(2,)`` per row.
        com: Planar centre of mass, m, ``(2,)`` per row.
        heading: Body heading (:func:`snake_core.analysis.body_heading`), rad, wrapped.
        body: World positions of the body links, head to tail, m, ``(n_links, 3)`` per row.
        command: The gait command sent after each row but the last.
    """

    t: list[float] = field(default_factory=list)
    head: list[np.ndarray] = field(default_factory=list)
    com: list[np.ndarray] = field(default_factory=list)
    heading: list[float] = field(default_factory=list)
    body: list[np.ndarray] = field(default_factory=list)
    command: list[Command] = field(default_factory=list)

    def arrays(self) -> dict[str, np.ndarray]:
        """The trace as arrays (``t``, ``head``, ``com``, ``heading``); ``heading`` unwrapped."""
        return {
            "t": np.asarray(self.t),
            "head": np.asarray(self.head),
            "com": np.asarray(self.com),
            "heading": np.unwrap(np.asarray(self.heading)),
        }

    @property
    def now(self) -> int:
        """Index of the latest row."""
        return len(self.t) - 1

    def heading_change(self, since: int = 0) -> float:
        """Unwrapped body heading change from row ``since`` to the latest row, rad."""
        h = np.unwrap(np.asarray(self.heading[since:]))
        return float(h[-1] - h[0])

    def com_displacement(self, since: int = 0) -> float:
        """Planar distance of the centre of mass at the latest row from where it was at row ``since``, m."""
        return float(np.linalg.norm(self.com[-1] - self.com[since]))


class Task(abc.ABC, Generic[OutcomeT, ScoreT]):
    """One experiment's task: how to set the twin up, run an episode and score it.

    ``OutcomeT`` is what :meth:`run_episode` returns (a :class:`Trace` for a
    :class:`GaitTask`), ``ScoreT`` what :meth:`score` makes of it.
    """

    @abc.abstractmethod
    def build_twin(self) -> SimTwin:
        """The twin of this episode: robot and world loaded, reset with the task's seed (see :func:`twin_at_spawn`)."""

    @abc.abstractmethod
    def build_gait(self, robot: RobotModel) -> Gait:
        """The gait that drives ``robot``'s joints in this episode."""

    def reset(self, twin: SimTwin, gait: Gait) -> None:
        """Put the twin and the gait into the episode's start state (spawn pose, gait phases).

        The default leaves both as built.
        """

    @abc.abstractmethod
    def run_episode(self, twin: SimTwin, gait: Gait) -> OutcomeT:
        """Run one episode on the twin and return what it recorded."""

    @abc.abstractmethod
    def score(self, outcome: OutcomeT) -> ScoreT:
        """The numbers the experiment reports for one episode."""


class GaitTask(Task[Trace, ScoreT]):
    """A task that chooses the gait command each control period from the trace so far."""

    @property
    @abc.abstractmethod
    def time_limit(self) -> float:
        """Longest episode, simulated s (:meth:`command` may end it earlier)."""

    @abc.abstractmethod
    def command(self, trace: Trace) -> Command | None:
        """The gait command for the control period that starts at ``trace``'s latest row; None when done."""

    def run_episode(self, twin: SimTwin, gait: Gait) -> Trace:
        """The episode stepped by :func:`run_gait` under :meth:`command`."""
        return run_gait(twin, gait, self.command, self.time_limit)


def run_task(task: Task[OutcomeT, ScoreT]) -> ScoreT:
    """Set up, reset, run and score one episode of ``task`` (module level, so worker processes can call it)."""
    twin = task.build_twin()
    gait = task.build_gait(twin.robot)
    task.reset(twin, gait)
    return task.score(task.run_episode(twin, gait))


def run_gait(twin: SimTwin, gait: Gait, command: Callable[[Trace], Command | None], time_limit: float,
             trace: Trace | None = None) -> Trace:
    """Step ``gait`` on ``twin`` one control period at a time and record the trace.

    Each period: record a row, ask ``command`` for the gait command, step the gait by
    :data:`CONTROL_DT` and the twin by its substeps. Ends when ``command`` returns None
    (that row is the last) or when ``time_limit`` s have passed (a last row is recorded).

    Args:
        twin: The physics.
        gait: A gait for the twin's robot.
        command: ``command(trace) -> command or None``.
        time_limit: Simulated s.
        trace: Append to this trace (default: a new one).

    Returns:
        The trace.
    """
    import mujoco

    trace = trace if trace is not None else Trace()
    m = twin.model
    bodies = np.array([mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n) for n in link_names(twin.robot)])
    t_end = twin.time + time_limit
    while twin.time < t_end - _TIME_EPS:
        _record(twin, bodies, trace)
        cmd = command(trace)
        if cmd is None:
            return trace
        trace.command.append(tuple(cmd))
        twin.set_targets(gait.step(CONTROL_DT, cmd))
        twin.step(twin.substeps)
    _record(twin, bodies, trace)
    return trace


def _record(twin: SimTwin, bodies: np.ndarray, trace: Trace) -> None:
    """Append one row; the link positions are read after the twin's accessors have brought its kinematics up to date."""
    trace.t.append(twin.time)
    trace.head.append(twin.head_pose()[0][:2])
    trace.com.append(twin.centre_of_mass()[:2])
    body = twin.data.xpos[bodies].copy()
    trace.heading.append(body_heading(body))
    trace.body.append(body)


def reached(t: float, t_end: float) -> bool:
    """Whether time ``t`` has reached ``t_end`` (both s), as :func:`run_gait` decides it."""
    return not t < t_end - _TIME_EPS


def twin_at_spawn(robot: RobotModel, world: World | str | None, seed: int = 0) -> SimTwin:
    """A twin of ``robot`` in ``world`` at the world's spawn pose, 003's control period, reset with ``seed``.

    Its physics are the ``twin:`` block of the calibration target (``$SNAKE_CALIBRATION_TARGET``,
    else ``twin``: :func:`snake_core.robot.load_twin_params`). A world given by name and the
    physics are loaded once per process (:mod:`snake_tools.experiment.cache`).
    """
    from snake_hardware.sim.twin import SimTwin

    if isinstance(world, (str, Path)):
        world = cache.world(world)
    twin = SimTwin(robot, world, control_dt=CONTROL_DT, twin_params=cache.twin_params(robot.name))
    twin.reset(seed=seed)
    return twin


def world_with_seed(name: str, seed: int, feature_length: float | None = None) -> World:
    """A world file with its terrain seed (and bump size, m) replaced; flat worlds unchanged."""
    path = resolve_world_path(name)
    data = load_yaml(Path(path), WorldConfigError, "world description")
    ground = data.get("ground") if isinstance(data, dict) else None
    if isinstance(ground, dict) and ground.get("type") == "heightfield":
        data["ground"]["seed"] = int(seed)
        if feature_length is not None:
            data["ground"]["feature_length"] = float(feature_length)
        return world_from_dict(data, source=Path(path))
    return load_world(path)

