"""``snake slippage evaluate|case-study-1|case-study-2``: pushing and slippage analysis (004).

- ``evaluate``: one configuration (``--q-deg`` joint angles) and one input (``--tau``,
  N m) or the whole input ellipsoid of Eq. (31) (default): ||a_obj||^2, ||q_s''||^2,
  sr, constraint forces, per scenario.
- ``case-study-1``: two joints, Table 1, 784 configurations; Figure-4-like maps over the
  input plane for several kappa and maps over the configuration grid, as PNG in ``--out``.
- ``case-study-2``: three joints; polar plots over (|COM|, angle COM) like Figures 5-6 and
  Table 2 beside the paper's values.
- ``batch``: many shapes (and optionally inputs) from a CSV or JSON file: per shape and
  scenario the exact extrema over the ellipsoid with their inputs, and the response to
  the given input; CSV or JSON out.

Parameters come from ``config/experiments/slippage_case_studies.yaml`` (``--config`` to use another).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.slippage import (
    SCENARIOS,
    SlippageError,
    build_system,
    ellipsoid_inputs,
    evaluate,
    polar_com,
    unit_directions,
)
from snake_core.slippage.extrema import bounded_sr_max, exact_extrema
from snake_core.slippage.model import SnakeObjectParams, feasible
from snake_core.slippage.studies import (
    PAPER_TABLE_2,
    SweepResult,
    input_map,
    joint_grid,
    load_case_study,
    params_from_config,
    sweep,
    table_2,
)
from snake_tools.cli import count, finite_float, non_negative_float, non_negative_int, positive_float
from snake_tools.output import print_json, print_table

_MAP_POINTS = 121  # torque samples per axis of the Figure-4 maps
_DRAW_LINK_WIDTH = 3.0  # points, robot links in Figure 6
_SCENARIO_2_DIRECTIONS = 360  # sampled directions for scenario 2's norms in ``evaluate`` ...
_SCENARIO_2_RADII = (0.25, 0.5, 0.75, 1.0)  # ... at these ellipsoid levels


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake slippage`` with its three actions."""
    parser = subparsers.add_parser("slippage", help="pushing and slippage analysis of a snake touching an object (004)")
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True

    def common(p: argparse.ArgumentParser, study: str) -> None:
        p.add_argument("--config", type=Path, default=None,
                       help="case-study YAML (default config/experiments/slippage_case_studies.yaml)")
        p.add_argument("--case-study", default=study, help=f"block of the YAML (default {study})")
        p.add_argument("--kappa", type=positive_float, default=None,
                       help="object mass / link mass (default from the YAML)")
        p.add_argument("--mu", type=non_negative_float, default=None,
                       help="wheel friction coefficient mu_s (default from the YAML)")
        p.add_argument("--contact-link", type=non_negative_int, default=None, help="link touching the object, 0 = tail")
        p.add_argument("--contact-offset", type=finite_float, default=None,
                       help="contact point from the link centre, m (default from the YAML)")
        p.add_argument("--directions", type=count, default=None, help="input directions on the ellipsoid (Eq. 31)")
        p.add_argument("--json", action="store_true", help="print JSON")

    ev = sub.add_parser("evaluate", help="one configuration: norms, sr and constraint forces")
    common(ev, "case_study_1")
    ev.add_argument("--q-deg", type=finite_float, nargs="+", required=True, help="joint angles, deg (one per joint)")
    ev.add_argument("--tau", type=finite_float, nargs="+", default=None,
                    help="joint torques, N m (default: the whole input ellipsoid, Eq. 31)")
    ev.add_argument("--scenario", type=int, choices=SCENARIOS, default=None, help="1, 2 or 3 (default all)")
    ev.set_defaults(func=run_evaluate)

    bt = sub.add_parser("batch", help="many shapes / inputs from a CSV or JSON file")
    common(bt, "case_study_1")
    bt.add_argument("--input", type=_input_file, required=True,
                    help="CSV with columns q1..qN (deg) [tau1..tauN (N m)], or JSON: a list of "
                         "{\"q_deg\": [...], \"tau\": [...]} objects (tau optional)")
    bt.add_argument("--scenario", type=int, choices=SCENARIOS, default=None, help="1, 2 or 3 (default all)")
    bt.add_argument("--out", type=Path, default=None, help="also write the rows here (.csv or .json)")
    bt.set_defaults(func=run_batch)

    for name, study, helptext in (("case-study-1", "case_study_1", "two joints, 784 configurations, Figure 4"),
                                  ("case-study-2", "case_study_2", "three joints, Figures 5-6 and Table 2")):
        p = sub.add_parser(name, help=helptext)
        common(p, study)
        p.add_argument("--step-deg", type=positive_float, default=None,
                       help="joint grid step, deg (default from the YAML)")
        p.add_argument("--workers", type=count, default=2, help="processes for the sweep (1 = this process)")
        p.add_argument("--out", type=Path, default=None, help="directory for the PNG figures")
        p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
        if study == "case_study_2":
            p.add_argument("--feasible-only", action="store_true",
                           help="drop configurations whose links cross or enter the object (not in the paper)")
        p.set_defaults(func=run_case_study_1 if study == "case_study_1" else run_case_study_2)


def _params(args: argparse.Namespace) -> tuple[dict[str, Any], SnakeObjectParams]:
    cfg = load_case_study(args.case_study, args.config)
    params = params_from_config(cfg, kappa=args.kappa, mu_s=args.mu, contact_link=args.contact_link,
                                contact_offset=args.contact_offset)
    return cfg, params


def _directions(args: argparse.Namespace, cfg: dict[str, Any]) -> int:
    n = args.directions if args.directions is not None else int(cfg.get("n_directions", 72))
    if n < 1:
        raise SlippageError(f"--directions: must be >= 1, got {n}")
    return n


def run_evaluate(args: argparse.Namespace) -> int:
    """``snake slippage evaluate``."""
    cfg, params = _params(args)
    if len(args.q_deg) != params.n_a:
        raise SlippageError(f"--q-deg: {args.case_study} has {params.n_a} joints, got {len(args.q_deg)} angles")
    q = np.concatenate([[0.0, 0.0, 0.0], np.deg2rad(args.q_deg)])
    scenarios = [args.scenario] if args.scenario else list(SCENARIOS)
    out: dict[str, Any] = {"q_deg": args.q_deg, "kappa": params.kappa, "mu_s": params.mu_s}
    for sc in scenarios:
        system = build_system(params, q, sc)
        r, ang = polar_com(params, system.kin, system.geometry)
        out["com_radius"], out["com_angle_deg"] = float(r), float(np.rad2deg(ang))
        if args.tau is not None:
            if len(args.tau) != params.n_a:
                raise SlippageError(f"--tau: need {params.n_a} torques, got {len(args.tau)}")
            tau = np.asarray(args.tau, float)[None, :]
        else:
            tau = ellipsoid_inputs(system, unit_directions(params.n_a, _directions(args, cfg)),
                                   tuple(cfg.get("radii", (1.0,))))
        ev = evaluate(system, tau)
        best = int(np.argmax(ev.a_obj_norm))
        if args.tau is None:
            exact = _exact_summary(params, q, sc, system)
            if float(exact["a_obj_max"]) > float(ev.a_obj_norm[best]):
                tau = np.asarray(exact["a_obj_max_tau"])[None, :]
                ev, best = evaluate(system, tau), 0
        res: dict[str, Any] = {
            "tau": ev.tau[best], "a_obj": ev.a_obj_norm[best], "qdd": ev.qdd_norm[best], "sr": ev.sr[best],
            "lambda": ev.lam[best], "lambda_norm": ev.lam_norm[best], "in_contact": bool(ev.in_contact[best]),
        }
        if args.tau is None:
            res.update({"note": "input of the ellipsoid (Eq. 31) with the largest ||a_obj||^2", **exact})
        out[str(sc)] = res
    if args.json:
        print_json(out)
    else:
        for sc in scenarios:
            r = out[str(sc)]
            print_table([("||a_obj||^2", float(r["a_obj"])), ("||qdd||^2", float(r["qdd"])), ("sr", float(r["sr"])),
                         ("lambda* (N)", np.array2string(np.asarray(r["lambda"]), precision=4)),
                         ("tau (N m)", np.array2string(np.asarray(r["tau"]), precision=4))]
                        + ([("max sr over the ellipsoid", float(r["sr_max"])),
                            ("  reached at tau (N m)", np.array2string(np.asarray(r["sr_max_tau"]), precision=4)),
                            ("  method", r["method"])] if "sr_max" in r else []),
                        title=f"scenario {sc}" + (" (best input of the ellipsoid)" if args.tau is None else ""))
    return 0


def _exact_summary(params: SnakeObjectParams, q: np.ndarray, scenario: int, system: Any) -> dict[str, Any]:
    """Extrema over the input ellipsoid: closed forms (scenarios 1, 3), SLSQP search (2)."""
    if scenario != 2:
        ex = exact_extrema(system)
        return {"method": "exact (generalised eigenvalues)",
                "sr_max": ex.sr_max.value, "sr_max_tau": ex.sr_max.tau,
                "sr_min_pushing": ex.sr_min.value, "sr_min_pushing_tau": ex.sr_min.tau,
                "a_obj_max": ex.a_obj_max.value, "a_obj_max_tau": ex.a_obj_max.tau,
                "qdd_max": ex.qdd_max.value, "qdd_max_tau": ex.qdd_max.tau,
                "qdd_min_boundary": ex.qdd_min.value, "qdd_min_boundary_tau": ex.qdd_min.tau,
                "lambda_norm_max": ex.lam_max.value, "lambda_norm_max_tau": ex.lam_max.tau}
    bounded = bounded_sr_max(params, q)
    a3 = exact_extrema(build_system(params, q, 3)).a_obj_max.tau  # candidate for the sampled maximum
    dirs = unit_directions(params.n_a, _SCENARIO_2_DIRECTIONS)
    tau = np.concatenate([ellipsoid_inputs(system, dirs, _SCENARIO_2_RADII), a3[None]])
    ev = evaluate(system, tau)
    best = int(np.argmax(ev.a_obj_norm))
    return {"method": "sr: exact unsaturated maximum + SLSQP over saturated inputs; norms: sampled",
            "sr_max": bounded.sr_max, "sr_max_tau": bounded.tau, "sr_max_unsaturated": bounded.sr_unsaturated,
            "sr_max_searched": bounded.sr_searched, "a_obj_max": ev.a_obj_norm[best], "a_obj_max_tau": ev.tau[best],
            "qdd_max": ev.qdd_norm.max(), "lambda_norm_max": ev.lam_norm.max(), "n_inputs": int(tau.shape[0]),
            "contact_fraction": float(ev.in_contact.mean())}


def _input_file(text: str) -> Path:
    """The ``type=`` of ``--input``: an existing .csv or .json file."""
    path = Path(text)
    if path.suffix not in (".csv", ".json"):
        raise argparse.ArgumentTypeError(f"must end in .csv or .json, got {text}")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    return path


def read_batch(path: Path, n_a: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Joint angles (deg, ``(rows, n_a)``) and torques (N m, or None) of a batch file.

    Raises:
        SlippageError: Naming the file and what is wrong.
    """
    try:
        if path.suffix == ".json":
            rows = json.loads(path.read_text())
            if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
                raise SlippageError(f"--input {path}: need a non-empty list of objects")
            unknown = {k for r in rows for k in r} - {"q_deg", "tau"}
            if unknown:
                raise SlippageError(f"--input {path}: unknown keys {sorted(unknown)}")
            q = np.asarray([r["q_deg"] for r in rows], dtype=float)
            has_tau = ["tau" in r for r in rows]
            if any(has_tau) and not all(has_tau):
                raise SlippageError(f"--input {path}: give tau for every row or for none")
            tau = np.asarray([r["tau"] for r in rows], dtype=float) if all(has_tau) else None
        else:
            with path.open() as fh:
                header = [h.strip() for h in fh.readline().split(",")]
            data = np.atleast_2d(np.loadtxt(path, delimiter=",", skiprows=1, dtype=float))
            q_cols = [f"q{i + 1}" for i in range(n_a)]
            tau_cols = [f"tau{i + 1}" for i in range(n_a)]
            if header not in (q_cols, q_cols + tau_cols):
                raise SlippageError(f"--input {path}: header must be {','.join(q_cols)}[,{','.join(tau_cols)}], "
                                    f"got {','.join(header)}")
            q = data[:, :n_a]
            tau = data[:, n_a:] if len(header) > n_a else None
    except (OSError, ValueError, KeyError, TypeError) as err:
        if isinstance(err, SlippageError):
            raise
        raise SlippageError(f"--input {path}: cannot read: {err}") from err
    if q.ndim != 2 or q.shape[1] != n_a or (tau is not None and tau.shape != q.shape):
        raise SlippageError(f"--input {path}: every row needs {n_a} joint angles (and {n_a} torques if any)")
    if not np.all(np.isfinite(q)) or (tau is not None and not np.all(np.isfinite(tau))):
        raise SlippageError(f"--input {path}: values must be finite")
    return q, tau


def run_batch(args: argparse.Namespace) -> int:
    """``snake slippage batch``."""
    cfg, params = _params(args)
    q_deg, tau = read_batch(args.input, params.n_a)
    q = np.zeros((q_deg.shape[0], params.n_s))
    q[:, 3:] = np.deg2rad(q_deg)
    scenarios = [args.scenario] if args.scenario else list(SCENARIOS)
    rows: list[dict[str, Any]] = [{"q_deg": q_deg[i].tolist()} for i in range(q.shape[0])]
    if tau is not None:
        for i in range(q.shape[0]):
            rows[i]["tau"] = tau[i].tolist()
    for sc in scenarios:
        res = sweep(params, q, sc, n_directions=_directions(args, cfg), radii=tuple(cfg.get("radii", (1.0,))))
        ev = evaluate(build_system(params, q, sc), tau[:, None, :]) if tau is not None else None
        for i, row in enumerate(rows):
            row[f"{sc}/sr_max"] = float(res.sr_max[i])
            row[f"{sc}/sr_max_tau"] = res.sr_max_tau[i].tolist()
            row[f"{sc}/a_obj_max"] = float(res.a_obj_max[i])
            row[f"{sc}/lambda_norm_max"] = float(res.lam_max[i])
            if ev is not None:
                row[f"{sc}/a_obj"] = float(ev.a_obj_norm[i, 0])
                row[f"{sc}/qdd"] = float(ev.qdd_norm[i, 0])
                row[f"{sc}/sr"] = float(ev.sr[i, 0])
    out = {"n_rows": len(rows), "kappa": params.kappa, "mu_s": params.mu_s, "scenarios": scenarios, "rows": rows}
    if args.out is not None:
        _write_batch(args.out, rows)
        out["out"] = str(args.out)
    if args.json:
        print_json(out)
    else:
        for row in rows:
            print(f"q = {row['q_deg']} deg: " + ", ".join(
                f"S{sc} sr_max {row[f'{sc}/sr_max']:.4g}" for sc in scenarios))
    return 0


def _write_batch(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        path.write_text(json.dumps(rows, indent=2))
        return
    if path.suffix != ".csv":
        raise SlippageError(f"--out: must end in .csv or .json, got {path}")
    flat: list[dict[str, float]] = []
    for row in rows:
        cells: dict[str, float] = {}
        for key, val in row.items():
            vals = val if isinstance(val, list) else [val]
            for j, v in enumerate(vals):
                cells[f"{key}[{j}]" if isinstance(val, list) else key] = float(v)
        flat.append(cells)
    header = list(flat[0])
    np.savetxt(path, np.array([[r[h] for h in header] for r in flat]), delimiter=",", header=",".join(header),
               comments="")


def _progress(total: int, label: str, disable: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=label, unit="cfg", file=sys.stderr, disable=disable, leave=False)


def _run_sweeps(args: argparse.Namespace, cfg: dict[str, Any], params: SnakeObjectParams
                ) -> tuple[np.ndarray, dict[int, SweepResult], dict[int, float]]:
    step = args.step_deg if args.step_deg is not None else float(cfg.get("joint_step_deg", 10))
    q = joint_grid(params.n_a, float(cfg.get("joint_min_deg", -135)), float(cfg.get("joint_max_deg", 135)), step)
    if getattr(args, "feasible_only", False):
        system = build_system(params, q, 1)
        q = q[feasible(params, system.kin, system.geometry)]
    radii = tuple(cfg.get("radii", (1.0,)))
    results: dict[int, SweepResult] = {}
    times: dict[int, float] = {}
    for sc in SCENARIOS:
        with _progress(q.shape[0], f"scenario {sc}", args.no_progress) as bar:
            t0 = time.perf_counter()
            results[sc] = sweep(params, q, sc, n_directions=_directions(args, cfg), radii=radii,
                                workers=args.workers, progress=bar.update)
            times[sc] = time.perf_counter() - t0
    return q, results, times


def run_case_study_1(args: argparse.Namespace) -> int:
    """``snake slippage case-study-1``."""
    cfg, params = _params(args)
    q, results, times = _run_sweeps(args, cfg, params)
    summary = table_2(results)
    fig_q = np.concatenate([[0.0, 0.0, 0.0], np.deg2rad(cfg.get("figure_q_deg", [-135, -135]))])
    kappas = [float(k) for k in cfg.get("figure_kappas", [params.kappa])]
    fig4: dict[str, Any] = {}
    maps = {}
    for kappa in kappas:
        for sc in SCENARIOS:
            m = input_map(params.with_(kappa=kappa), fig_q, sc, n=_MAP_POINTS)
            maps[(kappa, sc)] = m
            fig4[f"kappa={kappa:g}/{sc}"] = {"a_obj_max": np.nanmax(m.a_obj), "qdd_max": np.nanmax(m.qdd),
                                             "qdd_min": np.nanmin(m.qdd), "sr_max_grid": np.nanmax(m.sr),
                                             "high_sr_area": float(np.nanmean(m.sr[m.inside] > 0.5))}
            if sc != 2:
                ex = exact_extrema(build_system(params.with_(kappa=kappa), fig_q, sc))
                fig4[f"kappa={kappa:g}/{sc}"].update(sr_max=ex.sr_max.value, sr_max_tau=ex.sr_max.tau,
                                                     a_obj_max_exact=ex.a_obj_max.value)
    out: dict[str, Any] = {"n_configurations": int(q.shape[0]), "kappa": params.kappa,
                           "sweep_s": {str(k): v for k, v in times.items()}, **summary, "figure_4": fig4}
    if args.out is not None:
        fig4_max = {(k, sc): np.asarray(fig4[f"kappa={k:g}/{sc}"]["sr_max_tau"]) for k in kappas for sc in (1, 3)}
        out["figures"] = _figures_case_1(args.out, params, q, results, maps, kappas, fig4_max)
    if args.json:
        print_json(out)
    else:
        print(f"case study 1: {q.shape[0]} configurations, kappa = {params.kappa:g}")
        for sc in SCENARIOS:
            s = summary[str(sc)]
            print_table([("best ||a_obj||^2", s["best_a_obj"]), ("worst ||a_obj||^2", s["worst_a_obj"]),
                         ("best sr", s["best_sr"]), ("worst sr", s["worst_sr"]), ("sweep s", times[sc])],
                        title=f"scenario {sc}")
        for key, val in fig4.items():
            exact = f" (exact {val['sr_max']:.4g})" if "sr_max" in val else ""
            print(f"  Fig. 4 {key}: max ||a_obj||^2 {val['a_obj_max']:.4g}, sr max on the grid {val['sr_max_grid']:.4g}"
                  f"{exact}, "
                  f"share of inputs with sr > 0.5: {val['high_sr_area']:.3f}")
    return 0


def run_case_study_2(args: argparse.Namespace) -> int:
    """``snake slippage case-study-2``."""
    cfg, params = _params(args)
    q, results, times = _run_sweeps(args, cfg, params)
    summary = table_2(results)
    out: dict[str, Any] = {"n_configurations": int(q.shape[0]), "kappa": params.kappa,
                           "feasible_only": bool(args.feasible_only),
                           "sweep_s": {str(k): v for k, v in times.items()}}
    for sc in SCENARIOS:
        out[str(sc)] = {**summary[str(sc)], "paper": PAPER_TABLE_2[str(sc)]}
    if args.out is not None:
        out["figures"] = _figures_case_2(args.out, params, results)
    if args.json:
        print_json(out)
    else:
        print(f"case study 2 (Table 2): {q.shape[0]} configurations, kappa = {params.kappa:g}")
        print(f"  {'':<22}" + "".join(f"{'scenario ' + str(s):>26}" for s in SCENARIOS))
        print(f"  {'':<22}" + "".join(f"{'ours':>13}{'paper':>13}" for _ in SCENARIOS))
        for key, label in (("worst_a_obj", "worst ||a_obj||^2"), ("best_a_obj", "best ||a_obj||^2"),
                           ("worst_sr", "worst sr"), ("best_sr", "best sr")):
            cells = "".join(f"{out[str(s)][key]:>13.6g}{PAPER_TABLE_2[str(s)][key]:>13.6g}" for s in SCENARIOS)
            print(f"  {label:<22}{cells}")
    return 0


# --- figures ---------------------------------------------------------------------------
def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _figures_case_1(out: Path, params: SnakeObjectParams, q: np.ndarray, results: dict[int, SweepResult],
                    maps: dict[tuple[float, int], Any], kappas: list[float],
                    fig4_max: dict[tuple[float, int], np.ndarray]) -> list[str]:
    plt = _plt()
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for kappa in kappas:
        fig, axes = plt.subplots(3, 3, figsize=(11, 10), constrained_layout=True)
        for col, sc in enumerate(SCENARIOS):
            m = maps[(kappa, sc)]
            for row, (field, label) in enumerate((("a_obj", "||a_obj||^2"), ("qdd", "||q_s''||^2"), ("sr", "sr"))):
                ax = axes[row, col]
                im = ax.pcolormesh(m.tau1, m.tau2, getattr(m, field).T, shading="auto", cmap="viridis")
                fig.colorbar(im, ax=ax)
                ax.set_title(f"scenario {sc}: {label}")
                tau_max = fig4_max.get((kappa, sc))
                if field == "sr" and tau_max is not None:
                    ax.plot(*tau_max, "r*", ms=9, label="exact max sr")
                    ax.legend(loc="lower left", fontsize=7)
                ax.set_xlabel("tau_1 (N m)")
                ax.set_ylabel("tau_2 (N m)")
        fig.suptitle(f"Figure 4 (004): q = (0, 0, 0, -135, -135 deg), kappa = {kappa:g}")
        path = out / f"slippage_fig4_kappa{kappa:g}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        files.append(str(path))
    ang = np.rad2deg(np.unique(q[:, 3]))
    n = ang.size
    fig, axes = plt.subplots(2, 3, figsize=(12, 7), constrained_layout=True)
    for col, sc in enumerate(SCENARIOS):
        for row, (field, label) in enumerate((("a_obj_max", "max ||a_obj||^2"), ("sr_max", "max sr"))):
            ax = axes[row, col]
            im = ax.pcolormesh(ang, ang, getattr(results[sc], field).reshape(n, n).T, shading="auto")
            fig.colorbar(im, ax=ax)
            ax.set_title(f"scenario {sc}: {label} over the ellipsoid")
            ax.set_xlabel("phi_1 (deg)")
            ax.set_ylabel("phi_2 (deg)")
    fig.suptitle(f"Case study 1: {q.shape[0]} configurations, kappa = {params.kappa:g}")
    path = out / "slippage_case1_configurations.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    files.append(str(path))
    return files


def _draw_robot(ax: Any, params: SnakeObjectParams, q: np.ndarray, title: str) -> None:
    system = build_system(params, q, 1)
    kin, geo = system.kin, system.geometry
    for i in range(params.n_links):
        c = kin.com[i]
        d = 0.5 * params.lengths[i] * np.array([np.cos(kin.heading[i]), np.sin(kin.heading[i])])
        ax.plot([c[0] - d[0], c[0] + d[0]], [c[1] - d[1], c[1] + d[1]], "-o", lw=_DRAW_LINK_WIDTH, ms=3,
                color="C0" if i else "C3")
    m = np.asarray(params.masses)
    com = (m[:, None] * kin.com).sum(0) / m.sum()
    ax.plot(*com, "k*", ms=10)
    ax.plot(*geo.point, "rx", ms=8)
    ax.add_patch(_plt().Circle(tuple(geo.object_com), params.object_com_distance, color="0.8", zorder=0))
    ax.set_aspect("equal")
    ax.set_title(title, fontsize=8)


def _figures_case_2(out: Path, params: SnakeObjectParams, results: dict[int, SweepResult]) -> list[str]:
    plt = _plt()
    out.mkdir(parents=True, exist_ok=True)
    files = []
    fig, axes = plt.subplots(3, 3, figsize=(13, 12), subplot_kw={"projection": "polar"}, constrained_layout=True)
    for col, sc in enumerate(SCENARIOS):
        r = results[sc]
        for row, (field, label) in enumerate((("lam_max", "||lambda||^2"), ("a_obj_max", "||a_obj||^2"),
                                              ("sr_max", "sr"))):
            ax = axes[row, col]
            order = np.argsort(getattr(r, field))
            sc_plot = ax.scatter(r.com_angle[order], r.com_radius[order], c=getattr(r, field)[order], s=3,
                                 cmap="viridis")
            fig.colorbar(sc_plot, ax=ax, shrink=0.7)
            ax.set_title(f"({'abc'[row]}) scenario {sc}: max {label}", fontsize=9)
    fig.suptitle("Figure 5 (004): norms over the polar coordinates (angle COM, |COM|) of the COM")
    path = out / "slippage_fig5_polar.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    files.append(str(path))
    fig, axes = plt.subplots(3, 4, figsize=(14, 10), constrained_layout=True)
    for row, sc in enumerate(SCENARIOS):
        r = results[sc]
        picks = (("best ||a_obj||^2", int(np.argmax(r.a_obj_max)), r.a_obj_max),
                 ("worst ||a_obj||^2", int(np.argmin(r.a_obj_max)), r.a_obj_max),
                 ("best sr", int(np.argmax(r.sr_max)), r.sr_max), ("worst sr", int(np.argmin(r.sr_max)), r.sr_max))
        for col, (label, i, vals) in enumerate(picks):
            deg = np.round(np.rad2deg(r.q[i, 3:])).astype(int).tolist()
            _draw_robot(axes[row, col], params, r.q[i], f"scen. {sc} {label} = {vals[i]:.4g}\nq = {deg} deg")
    fig.suptitle("Figure 6 (004): best and worst configurations (red: contact link, x: contact, *: COM)")
    path = out / "slippage_fig6_configurations.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    files.append(str(path))
    return files
