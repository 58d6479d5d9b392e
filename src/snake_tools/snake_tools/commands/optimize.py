"""``snake optimize gait``: search a gait's parameters in the twin with Optuna.

``--gait`` picks the gait (default: the robot's ``following.gait``); each gait's search space
is a few of its ``gaits.<gait>`` coefficients of the robot YAML plus its native command,
held for ``--duration`` simulated s, with the robot's limits as hard bounds:

* ``rolling`` (T-Snake): the helix coefficients ``k_a``, ``k_b``, ``k_theta`` (003 Eq. 2) within
  [0.5, 1.5] times the YAML's values, the phase rates ``omega_h``, ``omega_t`` (003 Alg. 1)
  within ``gaits.reduction.omega_max`` (the twin's linear range);
* ``conical`` (T-Snake, Gong et al. 2013): ``amplitude_dorsal`` and ``amplitude_lateral`` in
  [0, limit / (1 + taper_max)] (the tapered wave never asks past the joint's limit),
  ``spatial_frequency`` within [0.5, 1.5] times the YAML's, ``phase_offset`` in [0, pi];
  the command ``omega_s`` within ``omega_max`` and ``taper`` within ``taper_max``;
* ``serpenoid`` (wheeled snake, 001 Sec. IV): ``amplitude`` in [0, lateral limit],
  ``spatial_frequency`` within [0.5, 1.5] times the YAML's; the command ``omega`` within
  ``omega_max`` and ``head_offset`` within ``offset_max``.

The defaults a search is compared with are the YAML's coefficients with the command at half
``omega_max`` (serpenoid: its ``temporal_frequency``), straight (no taper, no offset).

Gaits are compared at one command (:mod:`snake_tools.optimize.command`): with ``--objective
speed``, or with ``--cmd-vel V OMEGA`` for any objective, every trial runs at the same
``cmd_vel`` (default: the defaults' command, e.g. the T-Snake's rolling at
``omega_h = omega_t = 1`` rad/s, v = 0.05 m/s), turned into the native command by the gait's
twist mapping as the gait node does, and only the coefficients are searched; the study keeps
that ``cmd_vel`` (user attribute ``cmd_vel``) and refuses to resume at another one. Without
it (``turn_rate``, ``cost_of_transport``) the command is searched with the coefficients.
``--against-defaults`` (and ``--report``) split the best trial's gain over the defaults into
the gait's share (both at the compared command) and the command's share (the best
coefficients at their own command against them at the compared one; 1 when the command is
held).
Objectives, from the actuators' power and the base motion of the run
(:mod:`snake_core.analysis.energetics`):

* ``speed``: net planar speed of the centre of mass, m/s;
* ``turn_rate``: magnitude of the mean yaw rate of the body heading, rad/s;
* ``cost_of_transport``: ``E / (m g d)`` from the servos' positive mechanical power
  ``sum_i max(tau_i qdot_i, 0)`` sampled once per control period (minimised; a run that
  does not move scores ``inf``, told to Optuna as the largest finite float).

A run that goes wrong is scored as such (:mod:`snake_core.analysis.failure`): its failure
classes (``stuck``, ``self_collision``, ``joint_limit``, ``airborne``) become the trial's user
attribute ``failures`` and the trial is told to Optuna as ``PRUNED``, without an objective
value: it is never the best, and TPE ranks pruned trials below every complete one.

Trials run ``--workers`` at a time (asked from Optuna as one batch) on the experiments'
Dask executor (:mod:`snake_tools.experiment.executor`; ``--scheduler`` for a running
cluster); the batch size, not the place a trial ran, shapes the search. A trial whose
run raises (a gait that does not fit the robot, a twin that fails) is told to Optuna as
``FAIL`` with its error as a user attribute; the study goes on. With
``--study sqlite:///runs/gait.db`` the study lives in Optuna's RDB storage: the same command
again adds ``--trials`` trials to it (the folder of a SQLite file is created; a URL Optuna
cannot open is one line and exit code 2: :func:`open_study`). Ctrl-C tells the trials still
running as ``FAIL`` (user attribute ``error: interrupted``), so none is left ``RUNNING``, and
prints where the study is kept. The sampler is Optuna's TPE seeded with ``--seed``;
with the same seed and a fresh study the search is reproducible run to run.
``--against-defaults`` re-measures the best parameters and the defaults outside the study
(:func:`against_defaults`).
"""

from __future__ import annotations

import argparse
import functools
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from snake_core.analysis.energetics import mean_speed, run_cost_of_transport, turn_rate
from snake_core.analysis.failure import FAILURE_CLASSES, RunSamples, classify_run
from snake_core.gait import GAITS, Gait, make_gait
from snake_core.gait.rolling import HelixParams
from snake_core.robot import RobotModel, WheeledBody, load_robot
from snake_hardware.sim.twin import SimTwin
from snake_tools.cli import count, positive_float
from snake_tools.experiment import cache
from snake_tools.experiment.executor import TrialExecutor, TrialsFailedError, workers_arg
from snake_tools.experiment.task import Command, GaitTask, Trace, run_gait, run_task, twin_at_spawn
from snake_tools.optimize.command import COMMANDS, CommandPoint, check_study, command_point, preset_note, shares
from snake_tools.output import print_json, print_table

_OBJECTIVES = ("speed", "turn_rate", "cost_of_transport")
_WORLDS = ("flat", "uneven")
_HELIX = ("k_a", "k_b", "k_theta")  # 003 Eq. 2 helix coefficients, m and m/rad
_SCALE_RANGE = (0.5, 1.5)  # searched shape coefficients, fractions of the robot YAML's values
_GAITS = ("rolling", "conical", "serpenoid")
_COEFFICIENTS = {  # gaits.<gait> entries searched per gait
    "rolling": _HELIX,
    "conical": ("amplitude_dorsal", "amplitude_lateral", "spatial_frequency", "phase_offset"),
    "serpenoid": ("amplitude", "spatial_frequency"),
}
_COMMANDS = COMMANDS
_RAMP_S = 1.0  # s, the gait's ramp-in


class OptimizeArgumentError(ValueError):
    """A bad flag of ``snake optimize gait``."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake optimize gait``."""
    parser = subparsers.add_parser("optimize", help="search gait parameters in the twin (Optuna)")
    sub = parser.add_subparsers(dest="optimize", metavar="WHAT")
    sub.required = True
    p = sub.add_parser("gait", help="search a gait's coefficients and command in the twin")
    p.add_argument("--robot", choices=["tsnake", "wheeled_snake"], default="tsnake",
                   help="robot (its YAML gives defaults and bounds)")
    p.add_argument("--gait", choices=_GAITS, default=None,
                   help="gait searched (default: the robot's following.gait; rolling and conical: tsnake, "
                        "serpenoid: wheeled_snake)")
    p.add_argument("--world", choices=_WORLDS, default="flat", help="twin world")
    p.add_argument("--objective", choices=_OBJECTIVES, default="speed", help="quantity to maximise")
    p.add_argument("--cmd-vel", nargs=2, type=float, metavar=("V", "OMEGA"), default=None,
                   help="compare gaits at this cmd_vel (m/s, rad/s): every trial runs at it, only the coefficients "
                        "are searched (--objective speed: always, at the defaults' command unless given)")
    p.add_argument("--trials", type=count, default=20, help="trials added to the study")
    p.add_argument("--duration", type=positive_float, default=10.0, help="simulated seconds per trial")
    p.add_argument("--seed", type=int, default=0, help="seed of the TPE sampler")
    p.add_argument("--study", default=None, metavar="URL",
                   help="Optuna RDB storage (e.g. sqlite:///runs/gait.db); the same study is resumed")
    p.add_argument("--study-name", default=None,
                   help="study name in the storage (default: robot-world-objective, robot-gait-world-objective "
                        "for a gait other than rolling)")
    p.add_argument("--write-preset", nargs=2, metavar=("NAME", "OUT_YAML"), default=None,
                   help="write a copy of the robot YAML with the best coefficients in gaits.<gait>, "
                        "labelled NAME (letters, digits and _), its command in the header")
    p.add_argument("--workers", type=workers_arg, default=1,
                   help="trials run at once, on a local Dask cluster of this many processes (1 = this process)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="address of a running Dask scheduler; --workers trials are then sent at once")
    p.add_argument("--report", type=Path, default=None, metavar="OUT_HTML",
                   help="write a self-contained HTML report (history, importances, the best run's path)")
    p.add_argument("--against-defaults", action="store_true",
                   help="re-measure the best parameters and the robot YAML's defaults outside the study "
                        "(one fresh twin run each, in this process) and print both")
    p.add_argument("--json", action="store_true", help="print JSON (no progress bar)")
    p.set_defaults(func=run)
    from snake_tools.twin.target import add_target_flag

    add_target_flag(p)  # the twins of every trial: that target's physics and gait coefficients


@dataclass
class PoweredTrace(Trace):
    """A trace with what the objectives and the failure classes read, one entry per row.

    Attributes:
        effort: Servo torques, N m.
        velocity: Servo velocities, rad/s.
        position: Joint positions, rad.
        ground: Ground height beneath each body link origin, m (filled at the end of the run).
        mass_kg: The robot's mass, kg.
    """

    effort: list[np.ndarray] = field(default_factory=list)
    velocity: list[np.ndarray] = field(default_factory=list)
    position: list[np.ndarray] = field(default_factory=list)
    ground: list[np.ndarray] = field(default_factory=list)
    mass_kg: float = 0.0


@dataclass
class GaitTrial(GaitTask[dict[str, Any]]):
    """Hold a gait with the given parameters; score: the objectives and the run's failure classes.

    Attributes:
        robot: Robot name or robot YAML path.
        world: Twin world.
        params: The gait's searched coefficients and command (module docstring; rolling:
            ``k_a``, ``k_b``, ``k_theta`` in m, m, m/rad, ``omega_h``, ``omega_t`` in rad/s).
        duration: Simulated s.
        gait: Gait name.
    """

    robot: str
    world: str
    params: dict[str, float]
    duration: float
    gait: str = "rolling"

    @property
    def time_limit(self) -> float:
        """The run's length, s."""
        return self.duration

    def build_twin(self) -> SimTwin:
        """The robot at its spawn pose in the world."""
        return twin_at_spawn(cache.robot(self.robot), self.world)

    def build_gait(self, robot: RobotModel) -> Gait:
        """The gait with the trial's coefficients (the rolling gait with its 1 s ramp-in)."""
        coeffs = {k: float(self.params[k]) for k in _COEFFICIENTS[self.gait]}
        if self.gait == "rolling":
            return make_gait("rolling", robot, ramp_time=_RAMP_S, helix=HelixParams(**coeffs))
        return make_gait(self.gait, robot, **coeffs)

    def command(self, trace: Trace) -> Command:
        """The trial's command (rolling: its phase rates with the robot's omega_c ratio, 003 Eq. 10)."""
        if self.gait != "rolling":
            return tuple(float(self.params[k]) for k in _COMMANDS[self.gait])
        oh, ot = self.params["omega_h"], self.params["omega_t"]
        return (oh, ot, _omega_c_ratio(self.robot) * 0.5 * (oh + ot))

    def run_episode(self, twin: SimTwin, gait: Gait) -> PoweredTrace:
        """:func:`run_gait`, sampling the servos' torques, velocities and positions with every row."""
        trace = PoweredTrace(mass_kg=twin.total_mass())

        def sample() -> None:
            trace.effort.append(twin.joint_efforts().copy())
            trace.velocity.append(twin.joint_velocities().copy())
            trace.position.append(twin.joint_positions().copy())

        def command(tr: Trace) -> Command | None:
            sample()
            return self.command(tr)

        run_gait(twin, gait, command, self.time_limit, trace)
        sample()  # the last row's sample
        if twin.world is not None and trace.body:
            body = np.asarray(trace.body)
            trace.ground = list(np.asarray(twin.world.ground_height(body[..., 0], body[..., 1]), dtype=float))
        return trace

    def score(self, outcome: Trace) -> dict[str, Any]:
        """``speed`` (m/s), ``turn_rate`` (|rad/s|), ``cost_of_transport`` and ``failures`` of the run.

        ``failures`` lists the run's failure classes (:func:`snake_core.analysis.failure.classify_run`);
        a trace without the servo samples scores the first two only.
        """
        tr = outcome.arrays()
        scores: dict[str, Any] = {"speed": mean_speed(tr["t"], tr["com"]),
                                  "turn_rate": abs(turn_rate(tr["t"], tr["heading"]))}
        if isinstance(outcome, PoweredTrace):
            scores["cost_of_transport"] = run_cost_of_transport(tr["t"], np.asarray(outcome.effort),
                                                                np.asarray(outcome.velocity), tr["com"],
                                                                outcome.mass_kg)
            scores["failures"] = failures(cache.robot(self.robot), outcome)
        return scores


@functools.lru_cache(maxsize=8)
def _omega_c_ratio(robot: str) -> float:
    """The robot YAML's ``gaits.reduction.omega_c_ratio`` (default 0.5), read once per process, not per period."""
    return float(load_robot(robot).gait("reduction").get("omega_c_ratio", 0.5))


def body_radius(robot: RobotModel) -> float:
    """Radius of the body's cross-section, m: the T-Snake's module radius, a wheeled snake's half width."""
    body = robot.body
    return float(body.width / 2.0 if isinstance(body, WheeledBody) else body.radius)


def backbone_arc(robot: RobotModel) -> np.ndarray:
    """Arc positions of the link origins along the body, m: the head end (0), then each joint."""
    if isinstance(robot.body, WheeledBody):
        return np.concatenate([[0.0], np.cumsum(robot.link_lengths)[:-1]])
    return np.concatenate([[0.0], robot.joint_arc_positions()])


def failures(robot: RobotModel, trace: PoweredTrace) -> list[str]:
    """The failure classes of a run of ``robot`` (:func:`snake_core.analysis.failure.classify_run`).

    The backbone is the polyline of the link origins (head end, then each joint), at
    the arc positions of :func:`backbone_arc`.
    """
    body = np.asarray(trace.body)
    ground = np.asarray(trace.ground) if trace.ground else np.zeros(body.shape[:2])
    return classify_run(RunSamples(
        com=np.asarray(trace.com), heading=np.asarray(trace.heading), body=body,
        arc=backbone_arc(robot), ground=ground,
        q=np.asarray(trace.position), lower=np.array([j.lower for j in robot.joints]),
        upper=np.array([j.upper for j in robot.joints]), radius=body_radius(robot)))


def default_gait(robot: RobotModel) -> str:
    """The gait searched without ``--gait``: the robot's ``following.gait``."""
    return robot.following_presets.gait


def defaults(robot: RobotModel, gait: str = "rolling") -> dict[str, float]:
    """The robot YAML's coefficients of ``gait`` with a straight command at half ``omega_max`` (module docstring)."""
    cfg = robot.gait(gait)
    coeffs = {k: float(cfg[k]) for k in _COEFFICIENTS[gait]}
    if gait == "rolling":
        omega = 0.5 * float(robot.gait("reduction")["omega_max"])
        return {**coeffs, "omega_h": omega, "omega_t": omega}
    if gait == "conical":
        return {**coeffs, "omega_s": 0.5 * float(cfg["omega_max"]), "taper": 0.0}
    return {**coeffs, "omega": float(cfg["temporal_frequency"]), "head_offset": 0.0}


def bounds(robot: RobotModel, gait: str = "rolling") -> dict[str, tuple[float, float]]:
    """The search space of ``gait`` on ``robot``: (low, high) per parameter (module docstring)."""
    base = defaults(robot, gait)
    cfg = robot.gait(gait)
    out: dict[str, tuple[float, float]] = {k: (_SCALE_RANGE[0] * base[k], _SCALE_RANGE[1] * base[k])
                                           for k in ("k_a", "k_b", "k_theta", "spatial_frequency") if k in base}
    limits = {j.type: min(abs(j.lower), abs(j.upper)) for j in robot.joints if not j.continuous}
    if gait == "rolling":
        omega_max = float(robot.gait("reduction")["omega_max"])
        out.update({"omega_h": (-omega_max, omega_max), "omega_t": (-omega_max, omega_max)})
    elif gait == "conical":
        taper_max = float(cfg["taper_max"])
        out.update({"amplitude_dorsal": (0.0, limits["dorsal"] / (1.0 + taper_max)),
                    "amplitude_lateral": (0.0, limits["lateral"] / (1.0 + taper_max)),
                    "phase_offset": (0.0, float(np.pi)),
                    "omega_s": (-float(cfg["omega_max"]), float(cfg["omega_max"])),
                    "taper": (-taper_max, taper_max)})
    else:
        offset_max = float(cfg.get("offset_max", 0.8))
        out.update({"amplitude": (0.0, limits["lateral"]),
                    "omega": (-float(cfg["omega_max"]), float(cfg["omega_max"])),
                    "head_offset": (-offset_max, offset_max)})
    return {k: out[k] for k in base}


def suggest(trial: Any, robot: RobotModel, gait: str = "rolling", point: CommandPoint | None = None) -> \
        dict[str, float]:
    """The trial's parameters within :func:`bounds`; with ``point`` its command is that one, not searched."""
    space = bounds(robot, gait)
    if point is None:
        return {k: trial.suggest_float(k, lo, hi) for k, (lo, hi) in space.items()}
    return {**{k: trial.suggest_float(k, lo, hi) for k, (lo, hi) in space.items() if k not in _COMMANDS[gait]},
            **point.native}


def study_command(robot: RobotModel, gait: str, objective: str, cmd_vel: tuple[float, float] | None) -> \
        CommandPoint | None:
    """The command every trial runs at (module docstring), or None when the study searches it."""
    if cmd_vel is None and objective != "speed":
        return None
    return command_point(robot, gait, defaults(robot, gait), cmd_vel)


def write_preset(robot: RobotModel, gait: str, name: str, params: dict[str, float], value: float,
                 out: Path, objective: str = "speed", point: CommandPoint | None = None) -> Path:
    """A copy of the robot YAML with the best coefficients in ``gaits.<gait>``, labelled ``name``.

    The robot file's schema has a fixed set of gait blocks, so the preset replaces the
    searched coefficients of ``gaits.<gait>`` in the copy (which loads with
    :func:`snake_core.robot.load_robot` like the original, the same calibration overlay
    included). The command it was found at is in the file's data: its ``description`` ends
    with :func:`snake_tools.optimize.command.preset_note` (the ``cmd_vel`` and the native
    command; :func:`snake_tools.optimize.command.preset_command` reads it back), and a
    header comment repeats it.
    """
    from snake_core import config_files

    source = config_files.resolve("robot", robot.name, OptimizeArgumentError)
    data = yaml.safe_load(Path(source).read_text())
    data["gaits"][gait] = {**data["gaits"][gait], **{k: float(params[k]) for k in _COEFFICIENTS[gait]}}
    if point is None:  # a searched command: the best trial's own
        native = {k: float(params[k]) for k in _COMMANDS[gait]}
        twist = command_point(robot, gait, native)
        note = preset_note(name, gait, objective, value, None) + f"; its command: {twist.text()}"
    else:
        note = preset_note(name, gait, objective, value, point)
    data["description"] = f"{str(data.get('description', '')).strip()}; {note}".lstrip("; ")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"# Gait preset {name}: {note}.\n" + yaml.safe_dump(data, sort_keys=False, width=1 << 16))
    return out


def report(study: Any, best: GaitTrial, out: Path, comparison: dict[str, Any] | None = None) -> Path:
    """The study's HTML report (:func:`snake_tools.optimize.report.write_report`).

    The best run is re-run in this process from its parameters (the twin is deterministic)
    for its path and animation; ``comparison`` (:func:`against_defaults`) adds the gait's and
    the command's shares of its gain.
    """
    from snake_tools.optimize.report import write_report

    twin = best.build_twin()
    trace = best.run_episode(twin, best.build_gait(twin.robot))
    arrays = {**trace.arrays(), "body": np.asarray(trace.body)}
    return write_report(study, best.params, arrays, out, failure_counts(study), comparison)


def tell(study: Any, trial: Any, scores: dict[str, Any], objective: str) -> None:
    """Record a run's scores as the trial's user attributes and tell Optuna its outcome.

    A run with failure classes is told as ``PRUNED`` with no objective value (attribute
    ``failures``): never the best trial, and TPE ranks it below every complete trial. A run
    without is told its objective value (an infinite one as the largest finite float).
    """
    import optuna

    found = list(scores.get("failures", []))
    trial.set_user_attr("failures", found)
    for k, v in scores.items():
        if k != "failures":
            trial.set_user_attr(k, float(v))
    if found:
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        return
    value = float(scores[objective])
    study.tell(trial, value if np.isfinite(value) else float(np.finfo(float).max))


def failure_counts(study: Any) -> dict[str, int]:
    """How many trials of the study ran into each failure class."""
    found = [t.user_attrs.get("failures", []) for t in study.trials]
    return {name: sum(name in f for f in found) for name in FAILURE_CLASSES}


def against_defaults(robot: str, world: str, gait: str, params: dict[str, float], duration: float,
                     objective: str, point: CommandPoint | None = None) -> dict[str, Any]:
    """The best parameters and the robot YAML's defaults (:func:`defaults`), each re-measured in a fresh run.

    All run here, outside the study, from their parameters alone (:func:`run_task` of a
    :class:`GaitTrial`): the defaults at the compared command (``point``, else the defaults'
    own), the best coefficients at that command, and (when their own command differs) at
    their own; ``beats_defaults`` compares the objective at the compared command in its
    direction (lower cost of transport, else higher). A run with failure classes lists them.

    Returns:
        ``defaults`` (``params``, ``value``, ``failures``), ``best_remeasured`` (``value``,
        ``failures``: the best at its own command), ``equal_command`` (the command, the
        defaults' and the best coefficients' values at it), ``shares``
        (:func:`snake_tools.optimize.command.shares`) and ``beats_defaults``.
    """
    rob = cache.robot(robot)
    base = defaults(rob, gait)
    at = point if point is not None else command_point(rob, gait, base)
    base_at = {**base, **at.native}
    best_at = {**params, **at.native}
    runs = {"defaults": base_at, "best_at_command": best_at}
    if any(float(params[k]) != float(v) for k, v in at.native.items()):
        runs["best"] = dict(params)
    measured = {name: run_task(GaitTrial(robot, world, p, duration, gait)) for name, p in runs.items()}
    measured.setdefault("best", measured["best_at_command"])
    d, c, b = (float(measured[k][objective]) for k in ("defaults", "best_at_command", "best"))
    return {"defaults": {"params": base_at, "value": d, "failures": measured["defaults"].get("failures", [])},
            "best_remeasured": {"value": b, "failures": measured["best"].get("failures", [])},
            "equal_command": {**at.as_dict(), "objective": objective, "defaults_value": d, "best_value": c,
                              "failures": measured["best_at_command"].get("failures", [])},
            "shares": shares(d, c, b),
            "beats_defaults": bool(c < d if objective == "cost_of_transport" else c > d)}


def _target_of(robot: RobotModel) -> tuple[str, str | None]:
    """The calibration target the trials' twins use and its file (None: the defaults)."""
    from snake_core.robot import calibration_path, calibration_target

    name = calibration_target()
    path = calibration_path(robot.name, name)
    return name, str(path) if path.is_file() else None


def open_study(url: str | None, name: str, direction: Any, seed: int | None) -> Any:
    """Create or load the study ``name`` in the storage ``url`` (None: in memory).

    A ``sqlite:///`` file's folder is created first, as a fresh clone has no ``runs/``.

    Raises:
        OptimizeArgumentError: Optuna cannot open ``url`` (one line naming it).
    """
    import optuna
    import sqlalchemy.exc
    from sqlalchemy.engine import make_url

    try:
        if url is not None:
            parsed = make_url(url)
            if parsed.get_backend_name() == "sqlite" and parsed.database and parsed.database != ":memory:":
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        return optuna.create_study(study_name=name, storage=url, direction=direction, load_if_exists=True,
                                   sampler=optuna.samplers.TPESampler(seed=seed))
    except (sqlalchemy.exc.SQLAlchemyError, ImportError, OSError, ValueError) as err:
        first = next((line for line in str(err).splitlines() if line.strip()), type(err).__name__)
        raise OptimizeArgumentError(f"--study {url}: cannot open the study storage: {first.strip()}") from err


def _interrupted(study: Any, running: list[Any], url: str | None) -> None:
    """Tell the trials still running as FAIL (Ctrl-C) and say where the study is."""
    import optuna

    for trial in running:
        trial.set_user_attr("error", "interrupted")
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    where = (f"kept in {url}: the same command adds trials to it" if url is not None
             else "in memory only: it is lost (--study sqlite:///PATH keeps one)")
    print(f"snake optimize gait: interrupted: {len(running)} running trials told FAIL; study "
          f"{study.study_name!r} {where}", file=sys.stderr)


@contextmanager
def _interrupt_after() -> Iterator[None]:
    """Ctrl-C inside the block takes effect as it ends (only the main thread has signals).

    ``study.ask()`` stores the new trial as RUNNING before it returns: a Ctrl-C in between
    would leave a trial that no one knows to tell FAIL; each ``suggest_*`` writes a parameter to
    the study's storage, and a Ctrl-C inside that write left the storage's session unusable for
    telling the trial FAIL (the command ended with a traceback, not 130).
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pending:
            raise KeyboardInterrupt


def _told(study: Any) -> set[int]:
    """Numbers of the study's trials that are finished (not RUNNING or WAITING)."""
    return {t.number for t in study.trials if t.state.is_finished()}


def run(args: argparse.Namespace) -> int:
    """Run the study and print the best parameters."""
    import optuna
    from tqdm import tqdm

    from snake_core.names import check_name
    from snake_core.robot import DEFAULT_CALIBRATION_TARGET

    if args.write_preset:   # refused before any trial runs: the name labels the preset file
        check_name("--write-preset NAME", args.write_preset[0], OptimizeArgumentError)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    robot = load_robot(args.robot)
    gait = args.gait or default_gait(robot)
    if gait not in robot.gaits or (GAITS[gait].robot_kinds and robot.kind not in GAITS[gait].robot_kinds):
        fits = [g for g in _GAITS if g in robot.gaits]
        raise OptimizeArgumentError(f"--gait: {gait} does not run on {args.robot}; choose {' or '.join(fits)}")
    label = args.robot if gait == "rolling" else f"{args.robot}-{gait}"
    name = args.study_name or f"{label}-{args.world}-{args.objective}"
    target, twin_file = _target_of(robot)
    if args.study_name is None and target != DEFAULT_CALIBRATION_TARGET:
        name += f"-{target}"  # another target's twin is another objective: never resume its study
    minimise = args.objective == "cost_of_transport"
    direction = optuna.study.StudyDirection.MINIMIZE if minimise else optuna.study.StudyDirection.MAXIMIZE
    study = open_study(args.study, name, direction, args.seed)
    point = study_command(robot, gait, args.objective, tuple(args.cmd_vel) if args.cmd_vel else None)
    check_study(study, point)
    bar = tqdm(total=args.trials, desc=f"optimize {args.objective}", unit="trial", file=sys.stderr,
               disable=args.json, leave=False)
    trials: list[Any] = []  # asked and not yet told
    try:
        # one cluster for the whole study: its start is paid once, its workers keep their caches
        with TrialExecutor(min(args.workers, args.trials), args.scheduler) as executor:
            done = 0
            while done < args.trials:
                batch = min(args.workers, args.trials - done)
                trials = []
                params = []
                for _ in range(batch):  # one by one: Ctrl-C between two asks loses none
                    with _interrupt_after():  # nor one inside an ask or its suggestions (each a write to the study)
                        trials.append(study.ask())
                        params.append(suggest(trials[-1], robot, gait, point))
                tasks = [(GaitTrial(args.robot, args.world, p, args.duration, gait),) for p in params]
                try:
                    results: list[Any] = executor.map(run_task, tasks, progress=False)
                    errors: dict[int, str] = {}
                except TrialsFailedError as err:  # failing trials are told as FAIL, the study goes on
                    results, errors = err.results, {f.index: f.error for f in err.failures}
                for i, (trial, scores) in enumerate(zip(trials, results, strict=True)):
                    if i in errors:
                        trial.set_user_attr("error", errors[i])
                        study.tell(trial, state=optuna.trial.TrialState.FAIL)
                        continue
                    tell(study, trial, scores, args.objective)
                trials = []
                done += batch
                bar.update(batch)
    except KeyboardInterrupt:
        bar.close()
        _interrupted(study, [t for t in trials if t.number not in _told(study)], args.study)
        raise
    finally:
        bar.close()
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    out: dict[str, Any] = {"study": name, "storage": args.study, "gait": gait, "objective": args.objective,
                           "world": args.world, "calibration_target": target, "twin_params_file": twin_file,
                           "trials_in_study": len(study.trials), "complete": len(complete),
                           "failed": sum(t.state == optuna.trial.TrialState.FAIL for t in study.trials),
                           "pruned": sum(t.state == optuna.trial.TrialState.PRUNED for t in study.trials),
                           "failure_classes": failure_counts(study),
                           "command": point.as_dict() if point is not None else "searched"}
    if complete:
        best = study.best_trial
        best_params = {**best.params, **(point.native if point is not None else {})}
        out.update({"best_value": float(np.nan if best.value is None else best.value), "best_params": best_params,
                    "best_trial": best.number})
        comparison = None
        if args.against_defaults or args.report is not None:
            comparison = against_defaults(args.robot, args.world, gait, best_params, args.duration,
                                          args.objective, point)
        if args.against_defaults and comparison is not None:
            out.update(comparison)
        if args.report is not None:
            out["report"] = str(report(study, GaitTrial(args.robot, args.world, best_params, args.duration, gait),
                                       args.report, comparison))
        if args.write_preset:
            preset, path = args.write_preset
            out["preset_written"] = str(write_preset(robot, gait, preset, best_params, float(out["best_value"]),
                                                     Path(path), args.objective, point))
    if args.json:
        print_json(out)
    else:
        print_table([(k, v) for k, v in out.items()], title="snake optimize gait")
    return 0
