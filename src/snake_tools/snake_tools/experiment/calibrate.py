"""``snake experiment calibrate``: estimate the reduction's k and d' (003 Eq. 9-10) in the twin.

Runs the rolling-vector gait at several (omega_h, omega_t) on flat ground, measures the
speed along the differential-drive's forward direction and the yaw rate, and fits
Eq. 10 (:func:`snake_core.analysis.fit_reduction`). Does the same for the conical
baseline's k and curvature_max. With ``--write`` the coefficients go to the twin's
calibration target, ``config/calibration/tsnake/twin.yaml``, which ``load_robot``
overlays on the robot YAML (target ``twin`` is the default), so that ``cmd_vel`` means
m/s and rad/s for the gait node in the twin. A real robot's coefficients are kept apart,
under its own target, by ``snake bag calibrate`` from a recorded session. Then commanded
vs achieved twists are checked through the calibrated mapping.

Forward direction: the head segment is the left wheel (v_l = k omega_h, Eq. 9), so with
a the body axis from head to tail, forward is a rotated by +90 deg.
"""

from __future__ import annotations

import argparse
import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from snake_core.analysis import drive_twist, fit_reduction
from snake_core.gait import Gait, make_gait
from snake_core.gait.reduction import ReductionParams
from snake_core.robot import DEFAULT_CALIBRATION_TARGET, RobotModel, calibration_path, load_robot
from snake_hardware.sim.twin import SimTwin
from snake_tools.cli import positive_float
from snake_tools.experiment.executor import add_workers_argument, map_trials
from snake_tools.experiment.task import Command, GaitTask, Trace, run_task, twin_at_spawn
from snake_tools.output import print_json, print_table

# |omega| <= 2 rad/s: at 3 rad/s in-place turning saturates in the twin (the joints hit
# their velocity limits), outside the linear range Eq. 10 describes.
_ROLLING_RUNS = ((1.0, 1.0), (2.0, 2.0), (1.0, -1.0), (2.0, -2.0), (1.0, 3.0), (0.0, 2.0), (2.0, 0.0))
_SETTLE_S = 5.0  # s, ignored at the start of a run (ramp-in, transient)
_CHECK_TWISTS = ((0.08, 0.0), (0.0, 0.25), (0.05, 0.12))  # (m/s, rad/s) commanded through the mapping
_CONICAL_OMEGA_S = 2.0  # rad/s, the baseline's wave speed in the calibration runs
_TARGET = DEFAULT_CALIBRATION_TARGET  # these coefficients are the twin's


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake experiment calibrate``."""
    p = subparsers.add_parser("calibrate", help="estimate k and d' of 003 Eq. 10 (and the baseline's) in the twin")
    p.add_argument("--duration", type=positive_float, default=20.0, help="simulated seconds per run")
    p.add_argument("--robot", default="tsnake", help="robot name in config/robots or a YAML path (a tsnake kind)")
    p.add_argument("--write", action="store_true", help="write config/calibration/<robot>/twin.yaml")
    p.add_argument("--out", type=Path, default=Path("out/experiments/calibrate"), help="output directory")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_workers_argument(p)
    p.set_defaults(func=run)


def measured_twist(trace: Trace) -> tuple[float, float]:
    """(v along the drive's forward direction m/s, yaw rate rad/s) after the settling time."""
    tr = trace.arrays()
    keep = tr["t"] >= _SETTLE_S
    return drive_twist(tr["t"][keep], tr["com"][keep], tr["heading"][keep])


@dataclass
class HoldTask(GaitTask[tuple[float, float]]):
    """Hold one command on flat ground; score: the twist the drive achieved (:func:`measured_twist`).

    The command is either a gait's ``native`` command or a twist ``(v m/s, omega rad/s)``
    sent through the rolling gait's differential-drive mapping (``twist``; 003 Eq. 10).

    Attributes:
        gait: ``rolling`` (1 s ramp-in) or ``conical``.
        duration: Simulated s.
        native: Native command (rolling: omega_h, omega_t, omega_c in rad/s; conical: omega_s rad/s, taper),
            when ``twist`` is None.
        twist: ``(v, omega)`` to send through ``gait.mapping`` instead.
        calibrated: Whether the robot's calibration file overlays its YAML.
        target: Calibration target (None: the default).
    """

    gait: str
    duration: float
    native: Command | None = None
    twist: tuple[float, float] | None = None
    calibrated: bool = True
    target: str | None = None
    robot: str = "tsnake"
    _command: Command = field(default=(), init=False, repr=False)

    @property
    def time_limit(self) -> float:
        """The run's length, s."""
        return self.duration

    def build_twin(self) -> SimTwin:
        """The robot (a T-Snake) on flat ground at its spawn pose."""
        return twin_at_spawn(load_robot(self.robot, calibrated=self.calibrated, target=self.target), "flat")

    def build_gait(self, robot: RobotModel) -> Gait:
        """The rolling gait with a 1 s ramp-in, or the conical baseline."""
        return make_gait("rolling", robot, ramp_time=1.0) if self.gait == "rolling" else make_gait(self.gait, robot)

    def reset(self, twin: SimTwin, gait: Gait) -> None:
        """The command to hold: ``native``, or ``twist`` through the gait's mapping."""
        if self.twist is not None:
            self._command = tuple(gait.mapping.to_command(*self.twist))
        elif self.native is not None:
            self._command = self.native
        else:
            raise ValueError("HoldTask needs a native command or a twist")

    def command(self, trace: Trace) -> Command:
        """The held command."""
        return self._command

    def score(self, outcome: Trace) -> tuple[float, float]:
        """The achieved twist (v m/s, omega rad/s)."""
        return measured_twist(outcome)


def _hold_runs(tasks: list[HoldTask], workers: int, scheduler: str | None) -> list[tuple[float, float]]:
    return map_trials(run_task, [(t,) for t in tasks], workers, desc="calibrate", progress=False,
                      scheduler=scheduler)


def _tsnake(robot_path: str) -> RobotModel:
    """The uncalibrated robot; one line when it is not a T-Snake (the runs use its rolling and conical gaits)."""
    robot = load_robot(robot_path, calibrated=False)
    if robot.kind != "tsnake":
        raise ValueError(f"--robot {robot_path}: kind {robot.kind!r}: calibrate runs the rolling and conical gaits "
                         "of a tsnake robot")
    return robot


def calibrate(duration: float, workers: int = 1, scheduler: str | None = None,
              robot_path: str = "tsnake") -> dict[str, object]:
    """All calibration runs (independent trials on the experiments' executor) and fits."""
    robot = _tsnake(robot_path)
    ratio = float(robot.gait("reduction").get("omega_c_ratio", 0.5))
    taper = float(robot.gait("conical")["taper_max"])
    tasks = [HoldTask("rolling", duration, (oh, ot, ratio * 0.5 * (oh + ot)), calibrated=False, robot=robot_path)
             for oh, ot in _ROLLING_RUNS]
    tasks += [HoldTask("conical", duration, (_CONICAL_OMEGA_S, c), calibrated=False, robot=robot_path)
              for c in (0.0, taper, -taper)]
    *rolling, (v_c, w_c), (v_pos, w_pos), (v_neg, w_neg) = _hold_runs(tasks, workers, scheduler)
    rows = [{"omega_h": oh, "omega_t": ot, "v": v, "omega": w}
            for (oh, ot), (v, w) in zip(_ROLLING_RUNS, rolling, strict=True)]
    arr = {k: np.array([r[k] for r in rows]) for k in ("omega_h", "omega_t", "v", "omega")}
    fit = fit_reduction(arr["omega_h"], arr["omega_t"], arr["v"], arr["omega"])
    return {
        "rolling_runs": rows,
        "reduction": {"k": fit.k, "d_prime": fit.d_prime, "v_rms_error": fit.v_rms_error,
                      "omega_rms_error": fit.omega_rms_error,
                      "nominal_d_prime": float(ReductionParams.from_robot(robot).d_prime)},
        # The taper steers both ways but not symmetrically (the untapered gait drifts too):
        # curvature_max is the mean magnitude of the two full-taper path curvatures.
        "conical": {
            "k": abs(v_c) / _CONICAL_OMEGA_S,
            "curvature_max": 0.5 * (abs(w_pos / v_pos) + abs(w_neg / v_neg)),
            "curvature_zero_taper": w_c / v_c,
            "curvature_plus_taper": w_pos / v_pos,
            "curvature_minus_taper": w_neg / v_neg,
            "speed_m_s": abs(v_c),
        },
    }


def check(duration: float, workers: int = 1, scheduler: str | None = None,
          robot_path: str = "tsnake") -> list[dict[str, float]]:
    """Commanded vs achieved twist through the (calibrated) rolling mapping."""
    runs = _hold_runs([HoldTask("rolling", duration, twist=tw, target=_TARGET, robot=robot_path)
                       for tw in _CHECK_TWISTS],
                      workers, scheduler)
    return [{"v_cmd": v_cmd, "omega_cmd": w_cmd, "v": v, "omega": w}
            for (v_cmd, w_cmd), (v, w) in zip(_CHECK_TWISTS, runs, strict=True)]


def write(result: dict[str, object], duration: float, robot_path: str = "tsnake") -> Path:
    """Write the coefficients where load_robot overlays them (a ``twin:`` block in the file is kept)."""
    red, con = result["reduction"], result["conical"]
    assert isinstance(red, dict) and isinstance(con, dict)
    name = load_robot(robot_path, calibrated=False).name
    path = calibration_path(name, _TARGET)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "gaits": {
            "reduction": {"k": round(red["k"], 5), "d_prime": round(red["d_prime"], 4)},
            "conical": {"k": round(con["k"], 5), "curvature_max": round(con["curvature_max"], 4)},
        },
        "provenance": {
            "command": "snake experiment calibrate --write"
                       + ("" if robot_path == "tsnake" else f" --robot {robot_path}"),
            "target": _TARGET,
            "date": datetime.date.today().isoformat(),
            "world": "flat",
            "seconds_per_run": duration,
            "rolling_runs_omega_h_omega_t": [list(r) for r in _ROLLING_RUNS],
            "fit_rms_v_m_s": round(red["v_rms_error"], 5),
            "fit_rms_omega_rad_s": round(red["omega_rms_error"], 5),
        },
    }
    old = yaml.safe_load(path.read_text()) if path.is_file() else None
    if isinstance(old, dict) and "twin" in old:  # the twin's physics are not this experiment's to change
        data["twin"] = old["twin"]
    header = (f"# Measured gait coefficients of {name} (MuJoCo twin); overlays gaits.* of\n"
              f"# config/robots/{name}.yaml (snake_core.robot.load_robot). Regenerate with\n"
              "# `snake experiment calibrate --write`. Units: k m/rad, d_prime m, curvature_max 1/m.\n")
    path.write_text(header + yaml.safe_dump(data, sort_keys=False))
    return path


def run(args: argparse.Namespace) -> int:
    """Calibrate, optionally write, then check commanded vs achieved."""
    result = calibrate(args.duration, args.workers, args.scheduler, args.robot)
    if args.write:
        result["written"] = str(write(result, args.duration, args.robot))
    checks = check(args.duration, args.workers, args.scheduler, args.robot)
    result["check"] = checks
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "calibrate.json").write_text(json.dumps(result, indent=2))
    if args.json:
        print_json(result)
        return 0
    red = result["reduction"]
    assert isinstance(red, dict)
    rows: list[tuple[str, object]] = [
        ("k (m/rad)", red["k"]), ("d' (m)", red["d_prime"]), ("nominal d' = s_t - s_h (m)", red["nominal_d_prime"]),
        ("fit rms v (m/s)", red["v_rms_error"]), ("fit rms omega (rad/s)", red["omega_rms_error"])]
    for c in checks:
        rows.append((f"cmd v={c['v_cmd']:.2f} w={c['omega_cmd']:.2f}",
                     f"achieved v={c['v']:.3f} w={c['omega']:.3f}"))
    print_table(rows, title="snake experiment calibrate (003 Eq. 9-10)")
    return 0
