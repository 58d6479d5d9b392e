"""``snake experiment follow``: 001's path following over a Voronoi plan, closed loop in the MuJoCo twin.

Per trial (a :class:`FollowTask`, run by :func:`snake_tools.experiment.task.run_task`):

1. a seeded random peg field (:func:`snake_core.following.planning.fields.peg_field`) between a start
   and a goal 4 m apart, built into a twin world with ``world_from_dict`` (the pegs are real
   MuJoCo cylinders);
2. a plan on the generalized Voronoi graph: clearance-aware A* (``--planner shortest``) or
   the paper's depth-first search with branches tested in the viscous model (``dfs``);
3. the closed loop of :func:`snake_core.following.loop.run_follow_loop`: twin -> head markers ->
   synthetic motion capture (:class:`~snake_core.following.synthetic_mocap.MocapModel`, the
   twin node's model) -> rigid fit and filter ->
   line-of-sight PD follower (Eq. 11) -> the robot's gait -> twin; when the follower reports
   stuck or stalled, the branch is left out and a new plan is made from the measured position
   (:func:`snake_core.following.loop.run_with_replanning`, 001's flow chart).

Trial k has the seed ``--seed + k``: its peg field draws from ``default_rng(seed)`` and its
motion-capture noise from ``SeedSequence([seed, 1])``, so every trial owns independent
streams fixed by its seed alone and the trials run in ``--workers`` processes
(:mod:`snake_tools.experiment.executor`) with the same results for any number of workers.

A trial succeeds when the tracked point comes within the goal tolerance before the time
limit. Reported: success rate, time to goal (successful trials), mean cross-track error
(true distance to the plan, every trial). Field, planner, mocap and per-robot follower
settings are in ``config/experiments/follow_experiment.yaml``; how each robot follows a path (gait, drive,
tracked point, footprint, follower gains) comes from the ``following:`` block of its robot YAML.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from snake_core import config_files
from snake_core.errors import ConfigError, PlanningError
from snake_core.following.follower import FollowerConfig, FollowerStatus
from snake_core.following.loop import ReplanResult, run_with_replanning
from snake_core.following.synthetic_mocap import MocapConfig, MocapConfigError, MocapModel
from snake_core.gait import Gait, make_gait
from snake_core.robot import RobotModel, load_robot
from snake_core.schema import Fail, check_keys, load_yaml, mapping, number, require, suggest
from snake_hardware.sim.worlds import world_from_dict
from snake_tools.cli import count, non_negative_int
from snake_tools.experiment import cache
from snake_tools.experiment._plot import savefig
from snake_tools.experiment.executor import add_workers_argument, map_trials
from snake_tools.experiment.task import CONTROL_DT, Task, run_task
from snake_tools.output import print_json, print_table

if TYPE_CHECKING:
    from snake_core.following.planning.planner import Plan
    from snake_hardware.sim.twin import SimTwin

# The planners (scipy.spatial, scipy.ndimage, networkx) and the twin (MuJoCo) are imported
# where a trial runs, not by this module: building the trials of a run imports neither, so a
# command that hands them to a cluster starts it sooner (the workers import them once,
# snake_tools.experiment.worker_preload).
_LOOP_DT = 0.05  # s, follower / gait period (the node's 20 Hz)
_ROBOTS = ("wheeled_snake", "tsnake")
_SETTINGS_NAME = "follow_experiment"  # config/experiments/<name>.yaml
_MAX_REPLANS = 3  # replans after getting stuck (001 Fig. 1.5), unless the robot's settings say otherwise
# Schema of config/follow_experiment.yaml: key -> rule (see _check_rules).
_SETTINGS_KEYS = ("field", "planner", "mocap", "robots")
_FIELD_RULES = {"arena": "box", "ground_size": "size", "pegs_x": "range", "pegs_y": "range",
                "density": "non_negative", "diameter": "positive", "height": "positive", "peg_friction": "positive",
                "ground_friction": "positive", "gap": "non_negative", "keep_out": "non_negative", "start": "xy",
                "goal": "xy"}
_PLANNER_RULES = {"margin": "non_negative", "clearance_weight": "non_negative", "dfs_links": "count",
                  "dfs_min_speed": "positive"}
# The motion capture's fields, ranges checked by MocapConfig; not the capture rate (the loop's, 1 / period)
# nor the orientation noise (the loop fits the markers, never the rigid body's orientation).
_MOCAP_RULES = {f.name: "number" for f in dataclasses.fields(MocapConfig)
                if f.name not in ("rate_hz", "orientation_noise_rad")}
_ROBOT_RULES = {"time_limit": "positive", "max_replans": "index"}
_ROBOT_REQUIRED = ("time_limit",)
_CHOICES = {"gait": ("rolling", "conical", "serpenoid"), "drive": ("offset", "cmd_vel")}
_PAIRS = ("xy", "range", "size", "box")
PAPER = "001 Sec. VI: the real robot reached the goal in 20 of 25 trials (0.8)"


def load_settings(path: Path | None = None) -> dict[str, Any]:
    """The experiment's settings (``config/experiments/follow_experiment.yaml`` by default), validated.

    The file is checked strictly (hand-written checks of :mod:`snake_core.schema`, as for
    every configuration file): unknown keys are errors with the closest valid name,
    numbers must be finite and in range, ranges ordered. Each robot's entry gets its
    path-following presets from the robot YAML (``gait``, ``drive``, ``yaw_offset``,
    ``reference_offset``, ``half_width``, ``follower``; :class:`~snake_core.robot.FollowingPresets`).

    Raises:
        ConfigError: Missing or unreadable file, YAML error, unknown key or bad value;
            one line, ``<file>: <field path>: <problem>`` (a bad robot YAML:
            :class:`~snake_core.errors.RobotConfigError`, also one line).
    """
    p = config_files.resolve("experiment", path or _SETTINGS_NAME, ConfigError)
    data = load_yaml(p, ConfigError, "follow experiment settings")

    def fail(field_name: str, msg: str) -> ConfigError:
        return ConfigError(f"{p}: {field_name}: {msg}")

    data = mapping(data, "", fail)
    check_keys(data, _SETTINGS_KEYS, "", fail)
    require(data, _SETTINGS_KEYS, "", fail)
    field = mapping(data["field"], "field", fail)
    _check_rules(field, _FIELD_RULES, "field", fail)
    require(field, _FIELD_RULES, "field", fail)
    _check_rules(mapping(data["planner"], "planner", fail), _PLANNER_RULES, "planner", fail)
    require(data["planner"], _PLANNER_RULES, "planner", fail)
    _check_rules(mapping(data["mocap"], "mocap", fail), _MOCAP_RULES, "mocap", fail)
    require(data["mocap"], _MOCAP_RULES, "mocap", fail)
    try:
        MocapConfig(**data["mocap"])
    except MocapConfigError as err:
        raise ConfigError(f"{p}: mocap.{err}") from err
    robots = mapping(data["robots"], "robots", fail)
    check_keys(robots, _ROBOTS, "robots", fail, " (robots of the experiment)")
    for name, entry in robots.items():
        where = f"robots.{name}"
        r = mapping(entry, where, fail)
        check_keys(r, (*_ROBOT_RULES, "field"), where, fail,
                   f" of robot {name} (its following presets are in config/robots/{name}.yaml)")
        require(r, _ROBOT_REQUIRED, where, fail)
        _check_rules({k: v for k, v in r.items() if k in _ROBOT_RULES}, _ROBOT_RULES, where, fail)
        _check_rules(mapping(r.get("field"), f"{where}.field", fail, required=False), _FIELD_RULES,
                     f"{where}.field", fail)
    out = dict(data)
    out["robots"] = {name: {**_presets(name), **entry} for name, entry in robots.items()}
    return out


def _presets(robot_name: str) -> dict[str, Any]:
    """The robot's path-following presets (the ``following:`` block of its YAML) as settings entries.

    Keys ``gait``, ``drive``, ``yaw_offset``, ``reference_offset``, ``half_width``, ``follower``:
    the experiment steers each robot exactly as its nodes do.
    """
    p = load_robot(robot_name).following_presets
    return {"gait": p.gait, "drive": p.drive, "yaw_offset": p.yaw_offset, "reference_offset": p.reference_offset,
            "half_width": p.half_width, "follower": dict(p.follower)}


def _check_rules(block: Mapping[str, Any], rules: Mapping[str, str], path: str, fail: Fail) -> None:
    """Check ``block`` against per-key rules.

    Rules: ``positive``, ``non_negative``, ``number``, ``probability``, ``count`` (int >= 1),
    ``index`` (int >= 0), ``xy`` (two numbers), ``range`` (two increasing numbers), ``size``
    (two positive numbers), ``box`` ([xmin, xmax, ymin, ymax]), ``gait``, ``drive``.
    """
    check_keys(block, rules, path, fail)
    for key, value in block.items():
        rule, where = rules[key], f"{path}.{key}"
        if rule in _CHOICES:
            if value not in _CHOICES[rule]:
                raise fail(where, f"{value!r} is not one of {_CHOICES[rule]}{suggest(value, _CHOICES[rule], 'values')}")
        elif rule in _PAIRS:
            n = 4 if rule == "box" else 2
            if not isinstance(value, list) or len(value) != n:
                raise fail(where, f"must be a list of {n} numbers, got {value!r}")
            for i, v in enumerate(value):
                number(v, f"{where}[{i}]", fail, low=0.0 if rule == "size" else None, low_open=True)
            if rule in ("range", "box") and not (value[0] < value[1] and value[-2] < value[-1]):
                raise fail(where, f"must be increasing (min < max), got {value!r}")
        else:
            number(value, where, fail, low=None if rule == "number" else (1 if rule == "count" else 0),
                   low_open=rule == "positive", high=1.0 if rule == "probability" else None,
                   integer=rule in ("count", "index"))


def field_for(settings: dict[str, Any], robot_name: str) -> dict[str, Any]:
    """The field settings of a robot: the common ``field`` with the robot's ``field`` entries over it."""
    return {**settings["field"], **settings["robots"][robot_name].get("field", {})}


def make_field(settings: dict[str, Any], robot_name: str, seed: int) -> np.ndarray:
    """Peg centres of trial ``seed``, m."""
    from snake_core.following.planning.fields import PegFieldSpec, peg_field

    f = field_for(settings, robot_name)
    spec = PegFieldSpec(xlim=tuple(f["pegs_x"]), ylim=tuple(f["pegs_y"]), density=float(f["density"]),
                        diameter=float(f["diameter"]), gap=float(f["gap"]))
    keep = [(f["start"], float(f["keep_out"])), (f["goal"], float(f["keep_out"]))]
    return peg_field(spec, np.random.default_rng(seed), keep)


def make_world(f: dict[str, Any], pegs: np.ndarray, name: str) -> Any:
    """A twin world: flat ground and the pegs as MuJoCo cylinders (``f``: field settings)."""
    data: dict[str, Any] = {"name": name, "description": "seeded peg field (snake experiment follow)",
                            "ground": {"type": "plane", "friction": float(f["ground_friction"]),
                                       "size": [float(v) for v in f["ground_size"]]}}
    if len(pegs):
        data["obstacles"] = {"pegs": {"diameter": float(f["diameter"]), "height": float(f["height"]),
                                      "friction": float(f["peg_friction"]), "centres": pegs.tolist()}}
    return world_from_dict(data)


def make_plan(settings: dict[str, Any], robot_name: str, pegs: np.ndarray, planner: str,
              start: np.ndarray | None = None, blocked: list[tuple[np.ndarray, np.ndarray]] | None = None) -> Plan:
    """The plan to the goal from ``start`` (default: the field's start), without the ``blocked`` branches.

    Raises:
        PlanningError: No plan (the trial then fails).
    """
    from snake_core.following.planning.gvg import Arena, pegs_to_discs
    from snake_core.following.planning.planner import PlannerConfig, plan_shortest

    f, p, r = field_for(settings, robot_name), settings["planner"], settings["robots"][robot_name]
    discs = pegs_to_discs(pegs, float(f["diameter"]))
    arena = Arena(*(float(v) for v in f["arena"]))
    config = PlannerConfig(half_width=float(r["half_width"]), margin=float(p["margin"]),
                           clearance_weight=float(p["clearance_weight"]))
    start = np.asarray(f["start"] if start is None else start, dtype=float)
    goal = np.asarray(f["goal"], dtype=float)
    blocked = blocked or []
    if planner == "dfs":
        from snake_core.following.planning.dfs import plan_dfs
        from snake_core.following.viscous.closed_loop import ViscousBranchTester, ViscousClosedLoop

        tester = ViscousBranchTester(ViscousClosedLoop(int(p["dfs_links"]), pegs), float(p["dfs_min_speed"]))
        return plan_dfs(discs, arena, start, goal, tester, config, blocked)
    return plan_shortest(discs, arena, start, goal, config, blocked)


def head_template(twin: SimTwin) -> np.ndarray:
    """The head markers in the head frame, m, ``(3, 3)`` (read off the twin at its current pose)."""
    from scipy.spatial.transform import Rotation

    pos, quat = twin.head_pose()
    rot = Rotation.from_quat([quat[1], quat[2], quat[3], quat[0]])
    return rot.inv().apply(twin.head_markers() - pos)


def loop_period(twin: SimTwin) -> float:
    """The follower / gait period as a whole number of physics steps, s (at most ``_LOOP_DT``).

    The twin advances whole physics steps: with a 4 ms step, ``advance(0.05)`` moves
    12 steps (0.048 s), so a gait stepped with dt = 0.05 s would run 4 % ahead of the
    simulated time. The loop uses the period the twin really advances.
    """
    step = float(twin.model.opt.timestep)
    return max(1, math.floor(_LOOP_DT / step + 1e-9)) * step


@dataclass
class FollowTask(Task[ReplanResult | None, dict[str, Any]]):
    """One trial: a seeded peg field, a plan over it, the closed loop of the core, the scores.

    Setup (:meth:`build_twin`): the peg field of ``seed``, the first plan (timed; when there is
    none the trial is a ``no_plan`` failure and no episode runs), the twin world with the pegs,
    the robot at the start facing the goal. The episode is the core's closed loop
    (:func:`snake_core.following.loop.run_with_replanning`) with the robot's gait and drive.
    Score: a dict whose keys starting with ``_`` hold arrays for the plot.

    Attributes:
        robot: Robot name (a key of the settings' ``robots``).
        seed: The trial's seed: peg field ``default_rng(seed)``, motion-capture noise
            ``SeedSequence([seed, 1])``.
        planner: ``shortest`` or ``dfs``.
        settings: The experiment's settings (:func:`load_settings`).
    """

    robot: str
    seed: int
    planner: str
    settings: dict[str, Any]
    _pegs: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)), init=False, repr=False)  # m
    _plan: Plan | None = field(default=None, init=False, repr=False)
    _plan_error: str = field(default="", init=False, repr=False)
    _plan_s: float = field(default=0.0, init=False, repr=False)  # wall-clock s
    _template: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)), init=False, repr=False)  # m
    _wall_s: float = field(default=0.0, init=False, repr=False)  # wall-clock s

    def build_twin(self) -> SimTwin:
        """Peg field, first plan, and the twin among the pegs with the robot at the start, facing the goal."""
        from snake_hardware.sim.twin import SimTwin

        settings, robot_name = self.settings, self.robot
        r, f = settings["robots"][robot_name], field_for(settings, robot_name)
        pegs = self._pegs = make_field(settings, robot_name, self.seed)
        t0 = time.perf_counter()
        self._plan, self._plan_error = None, ""
        try:
            self._plan = make_plan(settings, robot_name, pegs, self.planner)
        except PlanningError as err:
            self._plan_error = str(err)
        self._plan_s = time.perf_counter() - t0
        robot = cache.robot(robot_name)
        twin = SimTwin(robot, make_world(f, pegs, f"follow_{self.seed}"), control_dt=CONTROL_DT,
                       twin_params=cache.twin_params(robot.name))
        yaw_offset, ref = float(r["yaw_offset"]), float(r["reference_offset"])
        heading = math.atan2(f["goal"][1] - f["start"][1], f["goal"][0] - f["start"][0])
        yaw = heading - yaw_offset  # head frame x axis at the spawn
        sx, sy = (float(v) for v in f["start"])
        twin.reset(pose=(sx - ref * math.cos(yaw), sy - ref * math.sin(yaw), yaw))
        return twin

    def build_gait(self, robot: RobotModel) -> Gait:
        """The robot's path-following gait (its ``following:`` presets)."""
        return make_gait(self.settings["robots"][self.robot]["gait"], robot)

    def reset(self, twin: SimTwin, gait: Gait) -> None:
        """Set the head-marker template: the robot YAML's ``following.marker_template``, else the twin's.

        The YAML's template is what the follower node fits; without one it is read off the twin
        at the spawn pose.
        """
        markers = twin.robot.following_presets.marker_template
        self._template = np.array(markers, dtype=float) if markers is not None else head_template(twin)

    def run_episode(self, twin: SimTwin, gait: Gait) -> ReplanResult | None:
        """The core's closed loop with replanning; None when there was no first plan."""
        if self._plan is None:
            return None
        settings, robot_name, pegs, plan, seed = self.settings, self.robot, self._pegs, self._plan, self.seed
        r, f, planner = settings["robots"][robot_name], field_for(settings, robot_name), self.planner
        yaw_offset, ref = float(r["yaw_offset"]), float(r["reference_offset"])
        dt = loop_period(twin)
        mocap = MocapModel(MocapConfig(**settings["mocap"], rate_hz=1.0 / dt),
                           np.random.default_rng(np.random.SeedSequence([seed, 1])))
        omega = float(twin.robot.gait("serpenoid")["temporal_frequency"]) if r["drive"] == "offset" else 0.0
        t1 = time.perf_counter()
        plans = iter([plan.points])  # the first plan is made in build_twin (timed; none: a 'no_plan' trial)

        def replan(p0: np.ndarray, blocked: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
            first = next(plans, None)
            return first if first is not None else make_plan(settings, robot_name, pegs, planner, p0, blocked).points

        res = run_with_replanning(twin, gait, replan, np.asarray(f["start"], dtype=float), self._template,
                                  max_replans=int(r.get("max_replans", _MAX_REPLANS)),
                                  time_limit=float(r["time_limit"]), drive=r["drive"], omega=omega,
                                  yaw_offset=yaw_offset, reference_offset=ref, dt=dt,
                                  follower=FollowerConfig(**r.get("follower", {})), mocap=mocap)
        self._wall_s = time.perf_counter() - t1
        return res

    def score(self, outcome: ReplanResult | None) -> dict[str, Any]:
        """Success, times, cross-track error (true distance to the plan), replans; arrays under ``_`` keys."""
        out: dict[str, Any] = {"seed": self.seed, "pegs": len(self._pegs), "_pegs": self._pegs}
        if self._plan is None or outcome is None:
            out.update(success=False, status="no_plan", reason=self._plan_error, time_to_goal_s=None,
                       cross_track_m=None)
            return out
        plan, res, f = self._plan, outcome, field_for(self.settings, self.robot)
        out.update(plan_s=self._plan_s, plan_length_m=plan.length, plan_clearance_m=plan.min_clearance,
                   _plan=plan.points)
        success = res.status is FollowerStatus.GOAL_REACHED
        last = res.legs[-1].reason if res.legs else ""
        reason = {FollowerStatus.GOAL_REACHED: ""}.get(res.status, "time limit")
        if res.status in (FollowerStatus.STUCK, FollowerStatus.STALLED):
            reason = f"{res.status}, no replans left: {last}" if not res.error else \
                f"{res.status}, no new plan: {res.error}"
        out.update(success=success, status=str(res.status), reason=reason, sim_s=res.time, replans=len(res.legs) - 1,
                   wall_s=self._wall_s, time_to_goal_s=res.time if success else None,
                   cross_track_m=float(np.mean(res.cross_track)), cross_track_max_m=float(np.max(res.cross_track)),
                   final_distance_m=float(np.linalg.norm(res.head[-1, :2] - np.asarray(f["goal"]))),
                   _track=res.head[:, :2], _replans=res.paths[1:])
        return out


def summarise(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """Success rate, time to goal (successes) and cross-track error (all trials that ran)."""
    times = [t["time_to_goal_s"] for t in trials if t["success"]]
    cross = [t["cross_track_m"] for t in trials if t.get("cross_track_m") is not None]

    def mean(xs: list[float]) -> float | None:
        return float(np.mean(xs)) if xs else None

    def std(xs: list[float]) -> float | None:
        return float(np.std(xs)) if xs else None

    return {"trials": len(trials), "successes": len(times), "success_rate": len(times) / max(len(trials), 1),
            "time_to_goal_s_mean": mean(times), "time_to_goal_s_std": std(times),
            "cross_track_m_mean": mean(cross), "cross_track_m_std": std(cross),
            "failures": {str(t["seed"]): t["reason"] for t in trials if not t["success"]}}


def plot_trial(t: dict[str, Any], settings: dict[str, Any], robot_name: str, out: Path) -> str:
    """PNG of pegs, GVG, plan and the tracked point's trajectory."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from snake_core.following.planning.gvg import Arena, build_gvg, pegs_to_discs

    f = field_for(settings, robot_name)
    arena = Arena(*(float(v) for v in f["arena"]))
    pegs = t["_pegs"]
    fig, ax = plt.subplots(figsize=(8, 5))
    if len(pegs):
        req = float(settings["robots"][robot_name]["half_width"]) + float(settings["planner"]["margin"])
        g = build_gvg(pegs_to_discs(pegs, float(f["diameter"])), arena, req)
        for u, v in g.edges:
            a, b = g.nodes[u]["pos"], g.nodes[v]["pos"]
            ax.plot([a[0], b[0]], [a[1], b[1]], color="0.8", lw=0.7)
        for c in pegs:
            ax.add_patch(plt.Circle(c, float(f["diameter"]) / 2, color="k"))
    if "_plan" in t:
        ax.plot(t["_plan"][:, 0], t["_plan"][:, 1], "b.-", lw=1.5, label="plan")
    for k, path in enumerate(t.get("_replans", [])):
        ax.plot(path[:, 0], path[:, 1], "c.--", lw=1.0, label="replan after stuck / stalled" if k == 0 else None)
    if "_track" in t:
        ax.plot(t["_track"][:, 0], t["_track"][:, 1], "r-", lw=1.0, label="trajectory (true)")
    tol = FollowerConfig(**settings["robots"][robot_name].get("follower", {})).goal_tolerance
    ax.add_patch(plt.Circle(f["goal"], tol, fill=False, color="g"))
    ax.plot(*f["start"], "go")
    ax.set_xlim(arena.xmin, arena.xmax)
    ax.set_ylim(arena.ymin, arena.ymax)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    short = (t["reason"] or t["status"]).split(":")[0]
    verdict = f"goal in {t['time_to_goal_s']:.1f} s" if t["success"] else f"failed: {short}"
    replans = f", {t['replans']} replans" if t.get("replans") else ""
    ax.set_title(f"{robot_name}, seed {t['seed']}: {verdict}{replans}")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path = savefig(fig, out, f"trial_{t['seed']:03d}.png")
    plt.close(fig)
    return path


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake experiment follow``."""
    p = subparsers.add_parser("follow", help="001: path following over a Voronoi plan among pegs, in the twin")
    p.add_argument("--robot", choices=_ROBOTS, default="wheeled_snake", help="robot (its settings in --config)")
    p.add_argument("--trials", type=count, default=20, help="trials, one seeded peg field each")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of the first trial (trial k uses seed + k)")
    p.add_argument("--planner", choices=["shortest", "dfs"], default="shortest",
                   help="clearance-aware A* or the paper's depth-first search")
    p.add_argument("--config", type=Path, default=None,
                   help="settings YAML (default config/experiments/follow_experiment.yaml)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG per trial")
    p.add_argument("--out", type=Path, default=Path("out/experiments/follow"), help="output directory")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_workers_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """All trials; table, JSON and a PNG per trial."""
    if args.trials < 1:
        raise ValueError(f"--trials must be >= 1, got {args.trials}")
    settings = load_settings(args.config)
    if args.robot not in settings["robots"]:
        where = config_files.resolve("experiment", args.config or _SETTINGS_NAME, ConfigError)
        raise ConfigError(f"{where}: robots.{args.robot}: missing (--robot {args.robot} needs its settings)")
    out = args.out / args.robot
    t0 = time.perf_counter()
    tasks = [(FollowTask(args.robot, args.seed + k, args.planner, settings),) for k in range(args.trials)]
    trials = map_trials(run_task, tasks, args.workers, desc=f"follow {args.robot}", progress=not args.json,
                        scheduler=args.scheduler)
    wall_s = time.perf_counter() - t0
    if not args.no_plots:
        for t in trials:
            t["plot"] = plot_trial(t, settings, args.robot, out)
    result: dict[str, Any] = {"robot": args.robot, "planner": args.planner, "seed": args.seed,
                              **summarise(trials), "paper": PAPER, "workers": args.workers, "wall_s": wall_s,
                              "runs": [{k: v for k, v in t.items() if not k.startswith("_")} for t in trials]}
    out.mkdir(parents=True, exist_ok=True)
    (out / "follow.json").write_text(json.dumps(result, indent=2, default=float))
    if args.json:
        print_json(result)
        return 0
    fmt = lambda v, d=2: "-" if v is None else f"{v:.{d}f}"  # noqa: E731
    rows: list[tuple[str, Any]] = [
        (f"seed {t['seed']}", f"{'ok ' if t['success'] else 'FAIL'} pegs {t['pegs']:2d}, "
                              f"time {fmt(t['time_to_goal_s'], 1)} s, cross-track {fmt(t['cross_track_m'], 3)} m, "
                              f"replans {t.get('replans', 0)}"
                              + (f" ({t['reason']})" if t["reason"] else ""))
        for t in trials]
    rows += [("success rate", f"{result['successes']} / {result['trials']} = {result['success_rate']:.2f}"),
             ("time to goal, s", f"{fmt(result['time_to_goal_s_mean'], 1)} +- {fmt(result['time_to_goal_s_std'], 1)}"),
             ("cross-track, m", f"{fmt(result['cross_track_m_mean'], 3)} +- {fmt(result['cross_track_m_std'], 3)}"),
             ("paper", PAPER), ("written", str(out))]
    print_table(rows, title=f"snake experiment follow --robot {args.robot} --planner {args.planner}")
    return 0
