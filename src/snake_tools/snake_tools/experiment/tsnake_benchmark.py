"""``snake experiment tsnake-benchmark``: 003 Sec. IV-A.3 in the MuJoCo twin.

Task: a 180 deg in-place turn, then a 3 m translation, on flat ground and on uneven
terrain, 5 repeats each, rolling-vector gait vs the conical-sidewinding baseline.

Protocol (the paper gives no more detail; these choices are ours and stated):
- Rolling vector: turn with (omega_h, omega_t, omega_c) = (2, -2, 0), translate with
  (2, 2, 1) rad/s (003 Sec. IV-A.2's values).
- Conical baseline: the same backbone wave (``gaits.conical`` in tsnake.yaml), wave speed
  omega_s = 2 rad/s; turn with full taper (the tightest arc: it cannot turn on the spot),
  translate with no taper.
- The turn ends when the body axis has turned 180 deg; the translation when the centre
  of mass is 3 m from where it started. A phase is *stuck* when it has not finished
  after ``--timeout`` s or has progressed less than 5 % of its goal in the last 20 s.
- Repeats: flat ground differs by a seeded initial gait phase and heading; uneven
  terrain by the terrain seed (``config/worlds/uneven.yaml`` with seeds 1..5).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

import numpy as np

from snake_core.gait import Gait, make_gait
from snake_core.gait.conical import ConicalSidewindingGait
from snake_core.gait.rolling import RollingVectorGait
from snake_core.robot import RobotModel
from snake_hardware.sim.twin import SimTwin
from snake_tools.cli import count, positive_float
from snake_tools.experiment import cache
from snake_tools.experiment.executor import add_workers_argument, map_trials
from snake_tools.experiment.task import Command, GaitTask, Trace, reached, run_task, twin_at_spawn, world_with_seed
from snake_tools.output import print_json, print_table

_RAMP_S = 2.0  # s of turning while the shape ramps in, before the timed turn
_TURN_RAD = np.pi
_TRANSLATE_M = 3.0
_STALL_WINDOW_S = 20.0  # s
_STALL_FRACTION = 0.05  # of the phase's goal within the window
PAPER = {  # 003 Sec. IV-A.3 (Fig. 8 and text)
    "flat": "rolling turns 42.3 % and translates 66.5 % faster than the baseline",
    "uneven": {"rolling_vector": {"turn_s": "20.86 +- 1.66", "translate_s": "37.90 +- 11.0"},
               "conical_sidewinding": {"turn_s": "58.78 +- 7.87", "translate_s": "stuck"}},
}
_COMMANDS: dict[str, dict[str, Command]] = {
    "rolling_vector": {"turn": (2.0, -2.0, 0.0), "translate": (2.0, 2.0, 1.0)},
    "conical_sidewinding": {"turn": (2.0, 1.0), "translate": (2.0, 0.0)},  # taper in units of taper_max
}


class Trial(TypedDict):
    """One turn + translate run: phase durations in s (None when stuck)."""

    turn_s: float | None
    translate_s: float | None
    stuck: bool


class Summary(TypedDict):
    """One gait on one terrain: mean and std of the finished phases, s, and the stuck count."""

    turn_s_mean: float | None
    turn_s_std: float | None
    translate_s_mean: float | None
    translate_s_std: float | None
    stuck_count: int
    trials: list[Trial]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake experiment tsnake-benchmark``."""
    p = subparsers.add_parser("tsnake-benchmark", help="003 IV-A.3: 180 deg turn + 3 m, rolling vs conical")
    p.add_argument("--repeats", type=count, default=5, help="runs per terrain and gait")
    p.add_argument("--timeout", type=positive_float, default=150.0, help="s per phase before it counts as stuck")
    p.add_argument("--terrains", nargs="+", default=["flat", "uneven"], choices=["flat", "uneven"],
                   help="worlds to run")
    p.add_argument("--feature-length", type=positive_float, default=None,
                   help="uneven terrain bump size, m (default: the world file's; 003 does not give it)")
    p.add_argument("--out", type=Path, default=Path("out/experiments/tsnake_benchmark"), help="output directory")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_workers_argument(p)
    p.set_defaults(func=run)


@dataclass
class BenchmarkTask(GaitTask[Trial]):
    """One trial: the shape ramps in (not timed), then the timed 180 deg turn, then the timed 3 m.

    A phase ends when its goal is reached (the next one starts in the same control period),
    when it is stuck (less than ``_STALL_FRACTION`` of its goal in the last ``_STALL_WINDOW_S``)
    or at ``timeout``; a stuck or timed-out phase ends the trial.

    Attributes:
        gait: ``rolling_vector`` or ``conical_sidewinding``.
        terrain: ``flat`` (repeats differ by a seeded heading and gait phase) or ``uneven``
            (by the terrain seed, ``repeat + 1``).
        repeat: Index of the repeat; seeds ``default_rng(1000 + repeat)``.
        timeout: Longest phase, s.
        feature_length: Uneven terrain's bump size, m (None: the world file's).
    """

    gait: str
    terrain: str
    repeat: int
    timeout: float
    feature_length: float | None = None
    _commands: dict[str, Command] = field(default_factory=dict, init=False, repr=False)
    _phase: str = field(default="", init=False, repr=False)  # ramp, turn, translate
    _phase_row: int = field(default=0, init=False, repr=False)  # trace row where the phase started
    _phase_t0: float = field(default=0.0, init=False, repr=False)  # s
    _history: list[tuple[float, float]] = field(default_factory=list, init=False, repr=False)  # (s, progress)
    _durations: dict[str, float | None] = field(default_factory=dict, init=False, repr=False)  # s

    @property
    def time_limit(self) -> float:
        """A bound the trial never reaches (each phase ends itself by ``timeout``), s."""
        return _RAMP_S + 2 * self.timeout + 1.0

    def build_twin(self) -> SimTwin:
        """The T-Snake on flat ground or on the seeded uneven terrain, at the spawn pose."""
        world = world_with_seed("uneven", self.repeat + 1, self.feature_length) if self.terrain == "uneven" else "flat"
        return twin_at_spawn(cache.robot("tsnake"), world)

    def build_gait(self, robot: RobotModel) -> Gait:
        """The rolling-vector gait or the conical baseline."""
        return make_gait("rolling" if self.gait == "rolling_vector" else "conical", robot)

    def reset(self, twin: SimTwin, gait: Gait) -> None:
        """Seeded heading (flat ground) and initial gait phase; the phases' commands."""
        rng = np.random.default_rng(1000 + self.repeat)
        if self.terrain == "flat":
            twin.reset(pose=(0.0, 0.0, float(rng.uniform(-np.pi, np.pi))))
        phase0 = float(rng.uniform(0, 2 * np.pi))
        if isinstance(gait, RollingVectorGait):
            gait.state.phi_h = gait.state.phi_t = phase0
        elif isinstance(gait, ConicalSidewindingGait):
            gait.psi = phase0
        cmds = dict(_COMMANDS[self.gait])
        if isinstance(gait, ConicalSidewindingGait):
            cmds = {k: (v[0], v[1] * gait.taper_max) for k, v in cmds.items()}
        self._commands, self._phase, self._durations = cmds, "ramp", {}

    def command(self, trace: Trace) -> Command | None:
        """The turn command while the shape ramps in (``_RAMP_S``), then each phase's command until it ends."""
        t = trace.t[-1]
        if self._phase == "ramp":
            if t < _RAMP_S:
                return self._commands["turn"]
            self._start("turn", trace)
        while True:
            goal = _TURN_RAD if self._phase == "turn" else _TRANSLATE_M
            if reached(t, self._phase_t0 + self.timeout):
                self._durations[self._phase] = None
                return None
            done = (abs(trace.heading_change(self._phase_row)) if self._phase == "turn"
                    else trace.com_displacement(self._phase_row))
            self._history.append((t, done))
            if done >= goal:
                self._durations[self._phase] = t - self._phase_t0
                if self._phase == "translate":
                    return None
                self._start("translate", trace)
                continue
            old = [d for s, d in self._history if s <= t - _STALL_WINDOW_S]
            if old and done - old[-1] < _STALL_FRACTION * goal:
                self._durations[self._phase] = None
                return None
            return self._commands[self._phase]

    def _start(self, phase: str, trace: Trace) -> None:
        """Start timing ``phase`` at ``trace``'s latest row."""
        self._phase, self._phase_row, self._phase_t0, self._history = phase, trace.now, trace.t[-1], []

    def score(self, outcome: Trace) -> Trial:
        """The phase durations, s (None when stuck)."""
        turn_s, translate_s = self._durations.get("turn"), self._durations.get("translate")
        return Trial(turn_s=turn_s, translate_s=translate_s, stuck=turn_s is None or translate_s is None)


def summarise(trials: list[Trial]) -> Summary:
    """Mean and std of the finished phases, and the stuck count."""
    def stats(durations: list[float | None]) -> tuple[float | None, float | None]:
        xs = [float(d) for d in durations if d is not None]
        return (float(np.mean(xs)), float(np.std(xs))) if xs else (None, None)

    turn_m, turn_sd = stats([t["turn_s"] for t in trials])
    tr_m, tr_sd = stats([t["translate_s"] for t in trials])
    return Summary(turn_s_mean=turn_m, turn_s_std=turn_sd, translate_s_mean=tr_m, translate_s_std=tr_sd,
                   stuck_count=sum(bool(t["stuck"]) for t in trials), trials=trials)


def run(args: argparse.Namespace) -> int:
    """All trials; table and JSON."""
    if args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
    jobs = [(BenchmarkTask(g, terrain, k, args.timeout, args.feature_length),)
            for g in _COMMANDS for terrain in args.terrains for k in range(args.repeats)]
    raw: dict[str, dict[str, list[Trial]]] = {g: {t: [] for t in args.terrains} for g in _COMMANDS}
    trials = map_trials(run_task, jobs, args.workers, progress=not args.json, scheduler=args.scheduler)
    for (task,), res in zip(jobs, trials, strict=True):
        raw[task.gait][task.terrain].append(res)
    summaries = {g: {t: summarise(raw[g][t]) for t in args.terrains} for g in _COMMANDS}
    improvement: dict[str, dict[str, float | None]] = {}
    for t in args.terrains:
        r, c = summaries["rolling_vector"][t], summaries["conical_sidewinding"][t]
        improvement[t] = {}
        for key in ("turn_s_mean", "translate_s_mean"):
            rk, ck = r[key], c[key]
            improvement[t][key] = 100.0 * (1 - rk / ck) if rk and ck else None
    result: dict[str, object] = {**summaries, "improvement_percent": improvement, "paper": PAPER}
    result["feature_length_m"] = args.feature_length
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tsnake_benchmark.json").write_text(json.dumps(result, indent=2))
    if args.json:
        print_json(result)
        return 0
    fmt = lambda m, s: "-" if m is None else f"{m:.2f} +- {s:.2f}"  # noqa: E731
    rows: list[tuple[str, object]] = []
    for g in _COMMANDS:
        for t in args.terrains:
            s = summaries[g][t]
            rows.append((f"{g} / {t}", f"turn {fmt(s['turn_s_mean'], s['turn_s_std'])} s, "
                         f"translate {fmt(s['translate_s_mean'], s['translate_s_std'])} s, stuck {s['stuck_count']}"))
    for t, imp in improvement.items():
        rows.append((f"rolling faster on {t} (%)", imp))
    rows.append(("paper, flat", PAPER["flat"]))
    rows.append(("paper, uneven", json.dumps(PAPER["uneven"])))
    print_table(rows, title="snake experiment tsnake-benchmark (003 Sec. IV-A.3)")
    return 0
