"""The HTML report of a gait study: history, parameter importances, failure classes, the best run.

One self-contained page: every figure is embedded as base64 (PNG, and the best run's
animation as a GIF drawn with matplotlib), no scripts, nothing fetched from the network.
Parameter importances are Optuna's PED-ANOVA
(:class:`optuna.importance.PedAnovaImportanceEvaluator`, Watanabe et al. 2023): deterministic
(no random forest, so no seed and no scikit-learn), the same study gives the same bars.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

_DPI = 90  # dots per inch of the embedded PNG figures
_FRAMES = 40  # frames of the best run's animation
_FRAME_MS = 100  # ms per animation frame
_FRAME_IN = 4.0  # inches, side of an animation frame (at _GIF_DPI)
_GIF_DPI = 72  # dots per inch of the animation frames


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI)
    return base64.b64encode(buf.getvalue()).decode()


def history_figure(numbers: Sequence[int], values: Sequence[float], pruned: Sequence[int], minimise: bool,
                   label: str) -> str:
    """Objective per complete trial, the best so far, and the pruned (failed-run) trials; base64 PNG."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    v = np.asarray(values, dtype=float)
    if len(v):
        best = (np.minimum if minimise else np.maximum).accumulate(v)
        ax.plot(numbers, v, "o", ms=4, label="trial")
        ax.plot(numbers, best, "-", label="best so far")
    if pruned:
        worst = float(v.max() if minimise else v.min()) if len(v) else 0.0  # drawn at the worst value
        ax.plot(pruned, np.full(len(pruned), worst), "x", color="tab:red", label="failed run (pruned, no value)")
    ax.set_xlabel("trial")
    ax.set_ylabel(label)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = _png(fig)
    plt.close(fig)
    return out


def importance_figure(importances: Mapping[str, float]) -> str:
    """Horizontal bars of the parameter importances; base64 PNG."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3))
    ax.barh(list(importances), list(importances.values()))
    ax.set_xlabel("importance (PED-ANOVA)")
    fig.tight_layout()
    out = _png(fig)
    plt.close(fig)
    return out


def path_figure(com: np.ndarray, head: np.ndarray) -> str:
    """The best run's centre of mass and head seen from above; base64 PNG."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot(com[:, 0], com[:, 1], label="centre of mass")
    ax.plot(head[:, 0], head[:, 1], lw=0.6, label="head")
    ax.set_aspect("equal")
    ax.set_xlabel("x, m")
    ax.set_ylabel("y, m")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = _png(fig)
    plt.close(fig)
    return out


def animation_gif(t: np.ndarray, body: np.ndarray) -> bytes:
    """Animated GIF of the body seen from above (backbone, head marked), drawn frame by frame with matplotlib.

    Args:
        t: Sample times, s, (samples,).
        body: Backbone points head to tail, m, (samples, n, 3).
    """
    import matplotlib.pyplot as plt
    from PIL import Image

    idx = np.unique(np.linspace(0, len(t) - 1, min(_FRAMES, len(t))).round().astype(int))
    xy = body[..., :2]
    lo, hi = xy.reshape(-1, 2).min(axis=0), xy.reshape(-1, 2).max(axis=0)
    centre, half = 0.5 * (lo + hi), 0.5 * float(max(hi - lo)) + 0.05
    fig, ax = plt.subplots(figsize=(_FRAME_IN, _FRAME_IN), dpi=_GIF_DPI)
    ax.set_xlim(centre[0] - half, centre[0] + half)
    ax.set_ylim(centre[1] - half, centre[1] + half)
    ax.set_aspect("equal")
    ax.set_xlabel("x, m")
    ax.set_ylabel("y, m")
    (line,) = ax.plot([], [], "-", lw=3, color="tab:blue")
    (head,) = ax.plot([], [], "o", color="tab:red")
    title = ax.set_title("")
    fig.tight_layout()
    frames = []
    for k in idx:
        line.set_data(xy[k, :, 0], xy[k, :, 1])
        head.set_data([xy[k, 0, 0]], [xy[k, 0, 1]])
        title.set_text(f"t = {t[k]:5.2f} s")
        fig.canvas.draw()
        rgba = np.asarray(fig.canvas.buffer_rgba())  # type: ignore[attr-defined]
        frames.append(Image.fromarray(rgba[..., :3].copy()).quantize(colors=32))
    plt.close(fig)
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:], duration=_FRAME_MS, loop=0)
    return buf.getvalue()


_UNITS = {"speed": "m/s", "turn_rate": "rad/s", "cost_of_transport": "-"}  # of the objectives


def comparison_html(c: Mapping[str, Any]) -> str:
    """The best trial against the defaults: at the compared command, and the command's share apart.

    Args:
        c: :func:`snake_tools.commands.optimize.against_defaults`'s result.
    """
    e = html.escape
    eq, sh = c["equal_command"], c["shares"]
    unit = _UNITS.get(str(eq["objective"]), "-")
    cmd = eq["cmd_vel"]
    native = ", ".join(f"{k} = {v:.4g}" for k, v in eq["native"].items())

    def ratio(x: Any) -> str:
        return "-" if x is None else f"{x:.3f}"

    rows = [
        ("compared at cmd_vel", f"v = {cmd['v_m_s']:.4g} m/s, omega = {cmd['omega_rad_s']:.4g} rad/s ({native})", ""),
        (f"defaults' {eq['objective']} at that command", f"{eq['defaults_value']:.4g}", unit),
        (f"best gait's {eq['objective']} at that command", f"{eq['best_value']:.4g}", unit),
        ("gait's share: best / defaults, same command", ratio(sh["gait_ratio"]), "-"),
        (f"best gait's {eq['objective']} at its own command", f"{c['best_remeasured']['value']:.4g}", unit),
        ("command's share: own command / compared command, same gait", ratio(sh["command_ratio"]), "-"),
        ("total: best at its own command / defaults", ratio(sh["total_ratio"]), "-"),
    ]
    body = "".join(f"<tr><td>{e(a)}</td><td>{e(b)}</td><td>{e(u)}</td></tr>" for a, b, u in rows)
    return ("<h2>best against the defaults, at equal command</h2><table><tr><th>quantity</th><th>value</th>"
            f"<th>unit</th></tr>{body}</table>")


def write_report(study: Any, params: Mapping[str, float], trace: Mapping[str, np.ndarray], out: Path,
                 failure_counts: Mapping[str, int], comparison: Mapping[str, Any] | None = None) -> Path:
    """Write the study's self-contained HTML page to ``out``.

    Args:
        study: The Optuna study.
        params: The best trial's parameters.
        trace: The best run re-run: ``t`` (s), ``com`` and ``head`` (m, planar), ``body`` (m, (samples, n, 3)).
        out: The HTML file.
        failure_counts: Trials per failure class.
        comparison: The best against the defaults (:func:`comparison_html`), or None.

    Returns:
        ``out``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import optuna

    state = optuna.trial.TrialState
    done = [t for t in study.trials if t.state == state.COMPLETE]
    pruned = [t.number for t in study.trials if t.state == state.PRUNED]
    minimise = study.direction == optuna.study.StudyDirection.MINIMIZE
    images = [("history", "image/png",
               history_figure([t.number for t in done], [float(t.value) for t in done], pruned, minimise,
                              study.study_name))]
    if len(done) >= 2:
        evaluator = optuna.importance.PedAnovaImportanceEvaluator()
        images.append(("parameter importances", "image/png",
                       importance_figure(optuna.importance.get_param_importances(study, evaluator=evaluator))))
    images.append(("best run from above", "image/png", path_figure(trace["com"], trace["head"])))
    images.append(("best run, animated", "image/gif",
                   base64.b64encode(animation_gif(trace["t"], trace["body"])).decode()))
    e = html.escape
    params_rows = "".join(f"<tr><td>{e(k)}</td><td>{v:.6g}</td></tr>" for k, v in params.items())
    failure_rows = "".join(f"<tr><td>{e(k)}</td><td>{n}</td></tr>" for k, n in failure_counts.items())
    counts = {s.name.lower(): sum(t.state == s for t in study.trials) for s in state}
    summary = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
    body = "".join(f'<h2>{e(n)}</h2><img alt="{e(n)}" src="data:{mime};base64,{d}">' for n, mime, d in images)
    best = f"{study.best_value:.6g}" if done else "none"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(study.study_name)}</title></head><body>"
        f"<h1>{e(study.study_name)}</h1><p>{len(study.trials)} trials: {e(summary)}; best value {best}</p>"
        f"<h2>best parameters</h2><table>{params_rows}</table>{comparison_html(comparison) if comparison else ''}"
        f"<h2>failed runs by class (told as pruned)</h2><table>{failure_rows}</table>{body}</body></html>")
    return out
