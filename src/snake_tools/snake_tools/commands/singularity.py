"""``snake singularity evaluate|solve|sweep``: singular configurations of passive-wheel snakes (002).

- ``evaluate``: margin, verdict, rank of J_s and the wheel axes' meeting point of one
  configuration (``--d``/``--l`` one value for all links or one per link, ``--angles``
  phi_2..phi_n in rad, ``--slipping`` 1-based link numbers).
- ``solve``: ``--angles`` gives phi_2..phi_(n-1); prints every phi_n in (-pi, pi]
  that makes the robot singular.
- ``sweep``: the singular sets of Figures 8-11 (Table 3 cases) and the axis drawings
  of Figures 12-15 as PNG files in ``--out``, with the numbers compared to the paper.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from snake_core.singularity import (
    DEFAULT_TOL,
    FIGURE_CASES,
    TABLE3_CASES,
    evaluate,
    figure_case_solutions,
    geometry,
    make_params,
    singular_set_3link,
    singular_set_4link,
    solve_free_angle,
)
from snake_core.singularity.model import SingularityInputError
from snake_tools.cli import count, finite_float, int_at_least, non_negative_float
from snake_tools.output import print_json, print_table

_SWEEP_POINTS = 721  # samples of phi_2 over (-pi, pi] for the curves of Figures 8-9
_SURFACE_POINTS = 121  # samples per axis of (phi_2, phi_3) for the surfaces of Figures 10-11
_AXIS_HALF_LENGTH = 3.0  # m, half length of the drawn wheel axes in Figures 12-15


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake singularity`` with its three actions."""
    parser = subparsers.add_parser("singularity", help="singular configurations of passive-wheel snakes (002)")
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--d", type=non_negative_float, nargs="+", required=True,
                       help="d_i, m: wheel from the front joint (one value for all links, or one per link)")
        p.add_argument("--l", type=non_negative_float, nargs="+", required=True,
                       help="l_i, m: wheel to the rear joint (one value for all links, or one per link)")
        p.add_argument("--slipping", type=count, nargs="*", default=[], help="side-slipping links, 1-based")
        p.add_argument("--tol", type=non_negative_float, default=DEFAULT_TOL,
                       help="margin at or below which it is singular")
        p.add_argument("--json", action="store_true", help="print JSON")

    ev = sub.add_parser("evaluate", help="margin, rank of J_s and axes' meeting point of one configuration")
    ev.add_argument("--angles", type=finite_float, nargs="+", required=True, help="phi_2..phi_n, rad")
    common(ev)
    ev.set_defaults(func=run_evaluate)

    so = sub.add_parser("solve", help="every phi_n making the robot singular, given phi_2..phi_(n-1)")
    so.add_argument("--angles", type=finite_float, nargs="+", required=True, help="phi_2..phi_(n-1), rad")
    common(so)
    so.set_defaults(func=run_solve)

    sw = sub.add_parser("sweep", help="Figures 8-15 of 002 as PNG files, with the paper's numbers compared")
    sw.add_argument("--out", type=Path, required=True, help="directory for the PNG files")
    sw.add_argument("--points", type=int_at_least(2), default=_SWEEP_POINTS, help="phi_2 samples of the curves")
    sw.add_argument("--json", action="store_true", help="print JSON")
    sw.set_defaults(func=run_sweep)


def _params(args: argparse.Namespace, n: int) -> Any:
    if len(args.d) not in (1, n) or len(args.l) not in (1, n):
        raise SingularityInputError(f"--d/--l: give 1 value or {n} (one per link), got {len(args.d)} and {len(args.l)}")
    if not 0.0 <= args.tol < 1.0:
        raise SingularityInputError(f"--tol: must be in [0, 1), got {args.tol}")
    return make_params(n, args.d, args.l)


def _link_count(args: argparse.Namespace, extra: int) -> int:
    """Links implied by --angles (+ ``extra`` unknown angles), cross-checked with per-link --d/--l."""
    n = len(args.angles) + 1 + extra
    for flag, vals in (("--d", args.d), ("--l", args.l)):
        if len(vals) > 1 and len(vals) != n:
            raise SingularityInputError(f"{flag}: {len(vals)} values but --angles implies {n} links")
    return n


def run_evaluate(args: argparse.Namespace) -> int:
    """``snake singularity evaluate``."""
    n = _link_count(args, 0)
    report = evaluate(_params(args, n), args.angles, args.slipping, args.tol)
    data = report.as_dict()
    if args.json:
        print_json(data)
    else:
        mp = report.meeting.point
        print_table([("singular", str(report.singular)), ("margin", report.margin), ("rank J_s", report.rank),
                     ("meeting point [m]", "parallel" if mp is None else f"({mp[0]:.4f}, {mp[1]:.4f})"),
                     ("degenerate", ", ".join(report.degenerate) or "-")], title=report.description)
    return 0


def run_solve(args: argparse.Namespace) -> int:
    """``snake singularity solve``."""
    n = _link_count(args, 1)
    params = _params(args, n)
    sol = solve_free_angle(params, args.angles, args.slipping, args.tol)
    data = {"n_links": n, "free_angle": f"phi_{n}", **sol.as_dict()}
    if args.json:
        print_json(data)
    else:
        text = "every value" if sol.every_value else ", ".join(f"{s:.4f}" for s in sol.solutions) or "none"
        print_table([(f"phi_{n} [rad]", text), ("note", sol.note)])
    return 0


# --- sweep: Figures 8-15 ---------------------------------------------------------------

def _pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, imported only when a figure is drawn.

    Every ``snake`` call imports every command module to discover it; importing
    matplotlib there would slow all of them down.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


_CASE_COLOURS = {1: "tab:red", 2: "tab:green", 3: "tab:blue"}


def _plot_3link(out: Path, points: int) -> dict[str, Any]:
    plt = _pyplot()
    grid = np.linspace(-math.pi, math.pi, points)
    fig, ax = plt.subplots(figsize=(5.5, 5))
    counts = {}
    for case, (d, ell) in TABLE3_CASES.items():
        pts = singular_set_3link(make_params(3, d, ell), grid)
        counts[f"case{case}"] = len(pts)
        ax.plot(pts[:, 0], pts[:, 1], ".", ms=1.5, color=_CASE_COLOURS[case], label=f"Case {case}: d={d}, l={ell}")
    ax.set(xlabel=r"$\phi_2$ [rad]", ylabel=r"$\phi_3$ [rad]", xlim=(-math.pi, math.pi), ylim=(-math.pi, math.pi),
           title="Fig. 8: singular set, 3 links, no side-slipping")
    ax.legend(loc="lower right", fontsize=8, markerscale=6)
    ax.grid(alpha=0.3)
    path = out / "fig08_3link.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return {"file": str(path), "points": counts}


def _plot_4link(out: Path, points: int) -> dict[str, Any]:
    plt = _pyplot()
    grid = np.linspace(-math.pi, math.pi, points)
    fig = plt.figure(figsize=(6, 5.5))
    ax = fig.add_subplot(projection="3d")
    counts = {}
    for case, (d, ell) in TABLE3_CASES.items():
        pts = singular_set_4link(make_params(4, d, ell), grid)
        counts[f"case{case}"] = len(pts)
        ax.scatter(pts[:, 0], pts[:, 1], pts[:, 2], s=1, color=_CASE_COLOURS[case], label=f"Case {case}")
    ax.set(xlabel=r"$\phi_2$", ylabel=r"$\phi_3$", zlabel=r"$\phi_4$",
           title="Fig. 9: singular set, 4 links, no side-slipping")
    ax.legend(fontsize=8, markerscale=6)
    path = out / "fig09_4link.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return {"file": str(path), "points": counts}


def _plot_4link_slipping(out: Path, case: int, figure: int, points: int) -> dict[str, Any]:
    plt = _pyplot()
    d, ell = TABLE3_CASES[case]
    grid = np.linspace(-math.pi, math.pi, min(points, _SURFACE_POINTS))
    pts = singular_set_4link(make_params(4, d, ell), grid, [3])
    fig = plt.figure(figsize=(6, 5.5))
    ax = fig.add_subplot(projection="3d")
    ax.scatter(pts[:, 0], pts[:, 1], pts[:, 2], s=0.5, c=pts[:, 2], cmap="viridis")
    ax.set(xlabel=r"$\phi_2$", ylabel=r"$\phi_3$", zlabel=r"$\phi_4$",
           title=f"Fig. {figure}: 4 links, link 3 side-slipping, Case {case} (d={d}, l={ell})")
    path = out / f"fig{figure:02d}_4link_slip3_case{case}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return {"file": str(path), "points": len(pts)}


def _plot_axes(out: Path, fc: Any, config: tuple[float, ...]) -> str:
    plt = _pyplot()
    d, ell = TABLE3_CASES[fc.case]
    params = make_params(4, d, ell)
    geo = geometry(params, np.asarray(config))
    report = evaluate(params, config, fc.slipping)
    fig, ax = plt.subplots(figsize=(5.5, 5.5))
    for i in range(4):
        slips = (i + 1) in fc.slipping
        ax.plot(*np.vstack([geo.front_joints[i], geo.rear_joints[i]]).T, "-", lw=4,
                color="0.6" if slips else "tab:orange", solid_capstyle="round")
        ax.plot(*geo.wheels[i], "o", ms=6, mfc="white" if slips else "k", mec="k")
        ax.annotate(str(i + 1), geo.wheels[i], textcoords="offset points", xytext=(5, 5))
        if not slips:
            n_vec = np.array([-math.sin(geo.theta[i]), math.cos(geo.theta[i])])
            seg = np.vstack([geo.wheels[i] - _AXIS_HALF_LENGTH * n_vec, geo.wheels[i] + _AXIS_HALF_LENGTH * n_vec])
            ax.plot(*seg.T, "k-", lw=0.8)
    if report.meeting.point is not None:
        ax.plot(*report.meeting.point, "r*", ms=12, label="axes' meeting point")
        ax.legend(loc="best", fontsize=8)
    slip_txt = f", link {', '.join(map(str, fc.slipping))} side-slipping" if fc.slipping else ""
    angles = ", ".join(f"$\\phi_{k + 2}$={a:.3f}" for k, a in enumerate(config))
    ax.set(aspect="equal", xlabel="x [m]", ylabel="y [m]",
           title=f"Fig. {fc.figure}: Case {fc.case}{slip_txt}\n{angles}, margin {report.margin:.1e}")
    ax.grid(alpha=0.3)
    path = out / f"fig{fc.figure:02d}_axes_case{fc.case}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)


class FigureComparison(TypedDict):
    """One of Figures 12-15: the paper's singular angles beside ours, rad, and our margin there."""

    figure: int
    case: int
    slipping: list[int]
    given: list[float]
    paper: list[float]
    ours: list[float]
    max_abs_diff: float
    margin: float
    meeting_point: tuple[float, float] | None  # m, None when the axes are parallel
    other_solutions: list[list[float]]


def run_sweep(args: argparse.Namespace) -> int:
    """``snake singularity sweep``: Figures 8-15 and the numbers of Figures 12-15."""
    if args.points < 3:
        raise SingularityInputError(f"--points: need at least 3, got {args.points}")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {
        "fig08": _plot_3link(out, args.points),
        "fig09": _plot_4link(out, args.points),
        "fig10": _plot_4link_slipping(out, 2, 10, args.points),
        "fig11": _plot_4link_slipping(out, 3, 11, args.points),
    }
    comparisons: list[FigureComparison] = []
    for fc in FIGURE_CASES:
        sols = figure_case_solutions(fc)
        best = sols[0]
        d, ell = TABLE3_CASES[fc.case]
        report = evaluate(make_params(4, d, ell), best, fc.slipping)
        figures[f"fig{fc.figure}"] = {"file": _plot_axes(out, fc, best)}
        comparisons.append(FigureComparison(
            figure=fc.figure, case=fc.case, slipping=list(fc.slipping), given=list(fc.given),
            paper=list(fc.paper), ours=list(best[len(fc.given):]),
            max_abs_diff=float(np.max(np.abs(np.array(best[len(fc.given):]) - np.array(fc.paper)))),
            margin=report.margin, meeting_point=report.meeting.point,
            other_solutions=[list(s[len(fc.given):]) for s in sols[1:]],
        ))
    data = {"out": str(out), "figures": figures, "figures_12_15": comparisons}
    if args.json:
        print_json(data)
    else:
        rows = [(f"Fig. {c['figure']} (Case {c['case']})",
                 f"paper {c['paper']}  ours {[round(x, 4) for x in c['ours']]}  margin {c['margin']:.1e}")
                for c in comparisons]
        print_table(rows, title=f"figures written to {out}")
    return 0
