"""``snake experiment phase-reset``: 003 Sec. IV-A.1 in the MuJoCo twin.

omega_h = 1, omega_t = 3 rad/s (omega_c = 0) for 100 s, with and without Algorithm 1's
phase resetting.

Main figure: the body-shape error of the gait's output (RMS distance of the discrete
robot's joints from the backbone, :func:`snake_core.gait.rolling.body_shape_error`)
against the accumulated phase difference, offline, for the exact (adaptive) and the fixed
8-point integration of Eq. 11, with and without resetting, beside the largest quadrature
error of the fixed rule. Then the twin: with resetting the head trajectory should stay a
circle; without it, it should distort (003 Fig. 6): RMS residual of a circle fitted to the
whole head trajectory, and the drift of the circle's centre between the first and second
half of the run (a circle fitted to each half).
"""

from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import numpy as np

from snake_core.analysis import fit_circle
from snake_core.gait import Gait, make_gait
from snake_core.gait.rolling import shape_error_run
from snake_core.robot import RobotModel, load_robot
from snake_hardware.sim.twin import SimTwin
from snake_tools.cli import positive_float
from snake_tools.experiment import cache
from snake_tools.experiment._plot import savefig
from snake_tools.experiment.task import Command, GaitTask, Trace, run_task, twin_at_spawn
from snake_tools.output import print_json, print_table

_COMMAND = (1.0, 3.0, 0.0)  # rad/s, (omega_h, omega_t, omega_c) of 003 Sec. IV-A.1
_SETTLE_S = 5.0  # s, the start-up ramp left out of the circle fits


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake experiment phase-reset``."""
    p = subparsers.add_parser("phase-reset", help="003 IV-A.1: head trajectory with / without phase resetting")
    p.add_argument("--duration", type=positive_float, default=100.0, help="simulated seconds per run")
    p.add_argument("--world", default="flat", help="world name in config/worlds or a YAML path")
    p.add_argument("--out", type=Path, default=Path("out/experiments/phase_reset"), help="output directory")
    p.add_argument("--no-twin", action="store_true", help="only the offline shape-error runs (no MuJoCo)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


class TwinRun(TypedDict):
    """Circle fits to one twin run's head trajectory, m, and its heading change, rad."""

    circle_residual_m: float
    circle_radius_m: float
    centre_drift_m: float
    radius_change_m: float
    heading_change_rad: float
    _head: NotRequired[np.ndarray]  # (n, 2) head positions, m; taken out before the JSON is written


@dataclass
class TurningCircleTask(GaitTask[TwinRun]):
    """003 Sec. IV-A.1's turning run: hold (omega_h, omega_t, omega_c) = (1, 3, 0) rad/s on the T-Snake.

    Score: circles fitted to the head trajectory after the start-up ramp (:class:`TwinRun`).

    Attributes:
        phase_reset: Algorithm 1's phase resetting on.
        duration: Simulated s.
        world: World name or YAML path.
        integration: Eq. 11's rule, ``adaptive`` (exact) or ``fixed`` (8 points per piece).
    """

    phase_reset: bool
    duration: float
    world: str
    integration: str = "adaptive"

    @property
    def time_limit(self) -> float:
        """The run's length, s."""
        return self.duration

    def build_twin(self) -> SimTwin:
        """The T-Snake in the world at its spawn pose."""
        return twin_at_spawn(cache.robot("tsnake"), self.world)

    def build_gait(self, robot: RobotModel) -> Gait:
        """The rolling-vector gait with a 1 s ramp-in."""
        return make_gait("rolling", robot, phase_reset=self.phase_reset, ramp_time=1.0, integration=self.integration)

    def command(self, trace: Trace) -> Command:
        """The same command all run."""
        return _COMMAND

    def score(self, outcome: Trace) -> TwinRun:
        """Circle fits to the whole run, its first and its second half after the ramp, m; heading change, rad."""
        tr = outcome.arrays()
        settle = tr["t"] >= _SETTLE_S
        head = tr["head"][settle]
        half = len(head) // 2
        whole, first, second = fit_circle(head), fit_circle(head[:half]), fit_circle(head[half:])
        return TwinRun(
            circle_residual_m=whole.rms_residual,
            circle_radius_m=whole.radius,
            centre_drift_m=float(np.linalg.norm(second.centre - first.centre)),
            radius_change_m=second.radius - first.radius,
            heading_change_rad=float(tr["heading"][-1] - tr["heading"][0]),
            _head=tr["head"],
        )


_SHAPE_BINS = (0.0, 1.0, np.pi, 2 * np.pi, 20.0, 50.0, np.inf)  # rad, accumulated phase difference bins


def shape_errors(duration: float, every: int = 10) -> dict[str, Any]:
    """The offline body-shape error runs (with / without reset x adaptive / fixed integration)."""
    robot = load_robot("tsnake")
    out: dict[str, Any] = {}
    for reset in (True, False):
        for integration in ("adaptive", "fixed"):
            r = shape_error_run(robot, _COMMAND, duration, phase_reset=reset, integration=integration, every=every)
            d = np.abs(r.phase_difference)
            bins = {f"{lo:.3g}-{hi:.3g}": float(r.shape_error[(d > lo) & (d <= hi)].mean())
                    for lo, hi in itertools.pairwise(_SHAPE_BINS) if np.any((d > lo) & (d <= hi))}
            out[f"{'with' if reset else 'without'}_reset/{integration}"] = {
                "shape_error_m_mean": float(r.shape_error.mean()), "shape_error_m_max": float(r.shape_error.max()),
                "shape_error_m_by_phase_difference": bins,
                "fixed_rule_error_rad_max": float(r.integration_error.max()), "_run": r}
    return out


def run(args: argparse.Namespace) -> int:
    """Shape errors, both twin runs, table, JSON and figures."""
    if not np.isfinite(args.duration) or args.duration < 20:
        raise ValueError(f"--duration must be >= 20 s, got {args.duration}")
    if not args.no_twin:
        cache.world(args.world)  # a bad world file is refused before the minute of offline shape errors
    shapes = shape_errors(args.duration)
    results: dict[str, TwinRun] = {} if args.no_twin else {
        name: run_task(TurningCircleTask(flag, args.duration, args.world))
        for name, flag in (("with_reset", True), ("without_reset", False))}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_s, ax_i) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, res in shapes.items():
        r = res.pop("_run")
        style = "-" if name.endswith("adaptive") else "--"
        ax_s.plot(r.phase_difference, 100 * r.shape_error, style, lw=0.8, label=name.replace("_", " "))
        if name.endswith("adaptive"):
            ax_i.semilogy(r.phase_difference, np.maximum(r.integration_error, 1e-12), lw=0.8,
                          label=name.split("/")[0].replace("_", " "))
    ax_s.set_xlabel("accumulated phase difference phi_h - phi_t (rad)")
    ax_s.set_ylabel("body-shape error, RMS (cm)")
    ax_s.set_title("discrete robot vs backbone (Eq. 11 vs Eq. 2)", fontsize=9)
    ax_s.legend(fontsize=7)
    ax_i.set_xlabel("accumulated phase difference (rad)")
    ax_i.set_ylabel("max |q_fixed - q_exact| (rad)")
    ax_i.set_title("quadrature error of one 8-point rule per piece", fontsize=9)
    ax_i.legend(fontsize=7)
    fig.suptitle(f"omega_h = {_COMMAND[0]:g}, omega_t = {_COMMAND[1]:g} rad/s, {args.duration:g} s")
    fig.tight_layout()
    shape_figure = savefig(fig, args.out, "shape_error.png")
    plt.close(fig)
    out: dict[str, Any] = {"duration_s": args.duration, "world": args.world, "shape_error": shapes,
                           "shape_figure": shape_figure}
    if not results:
        (args.out / "phase_reset.json").write_text(json.dumps(out, indent=2))
        return _print(args, out, shapes, {})

    fig, axes = plt.subplots(1, 2, figsize=(10, 5))
    for ax, (name, res) in zip(axes, results.items(), strict=True):
        head = res.pop("_head")
        ax.plot(head[:, 0], head[:, 1], lw=0.7)
        ax.plot(*head[0], "go", label="start")
        ax.plot(*head[-1], "rs", label="end")
        ax.set_aspect("equal")
        ax.set_title(f"{name.replace('_', ' ')}: residual {res['circle_residual_m']:.3f} m, "
                     f"drift {res['centre_drift_m']:.3f} m", fontsize=9)
        ax.set_xlabel("x [m]")
        ax.set_ylabel("y [m]")
        ax.legend(fontsize=8)
    fig.suptitle(f"T-Snake head, omega_h = 1, omega_t = 3 rad/s, {args.duration:g} s ({args.world})")
    fig.tight_layout()
    out.update({**results, "figure": savefig(fig, args.out, "phase_reset.png")})
    (args.out / "phase_reset.json").write_text(json.dumps(out, indent=2))
    return _print(args, out, shapes, results)


def _print(args: argparse.Namespace, out: dict[str, Any], shapes: dict[str, Any], results: dict[str, Any]) -> int:
    if args.json:
        print_json(out)
        return 0
    rows: list[tuple[str, Any]] = []
    for n, r in shapes.items():
        rows += [(f"{n}: shape error mean / max (m)", f"{r['shape_error_m_mean']:.4f} / {r['shape_error_m_max']:.4f}"),
                 (f"{n}: fixed-rule error max (rad)", r["fixed_rule_error_rad_max"])]
    rows += [(f"twin {n}: {k}", v) for n, r in results.items() for k, v in r.items()]
    print_table(rows, title="snake experiment phase-reset (003 Sec. IV-A.1, Fig. 6)")
    return 0
