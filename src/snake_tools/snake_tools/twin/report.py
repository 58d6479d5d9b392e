"""What a fit leaves: the target's ``twin:`` block (:func:`write_block`) and an HTML report (:func:`html_report`)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from snake_core.robot import RobotModel
from snake_core.twin_params import TwinParams, joint_types
from snake_tools.twin.data import Recording
from snake_tools.twin.ground import start_std
from snake_tools.twin.noise import noise_model
from snake_tools.twin.rollout import simulate
from snake_tools.twin.structure import where_chosen

if TYPE_CHECKING:
    from snake_tools.twin.identify import Fit


def write_block(fit: Fit, robot: RobotModel, target: str, bag: Path) -> tuple[Path, Path | None]:
    """Write the fitted parameters into the target's ``twin:`` block; the rest of its file is kept.

    Parameters the fit does not write (:meth:`Fit.writes`: an adequate lifted fit writes its twin, an
    on-ground fit its identified values, a lifted fit that is not adequate nothing) keep the block's
    value (or none); :func:`written_params` is the block's twin. The block's
    ``provenance`` keeps one entry per variant (``lifted``, ``on the ground``): the bag, the
    command, the date, the residuals, the noise floor and the adequacy verdict; a fit of one
    variant replaces its own entry and keeps the other's. A new target (no file yet) gets the
    gait calibration (``gaits:`` and its ``provenance``) of the default target ``twin``, so
    that the gait node and every experiment on it keep the calibrated coefficients.

    Returns:
        The file written, and the file whose gait calibration was copied (None: none copied).
    """
    import datetime

    import yaml

    from snake_core.robot import DEFAULT_CALIBRATION_TARGET, calibration_path, load_twin_params

    path = calibration_path(robot.name, target)
    data: dict[str, Any] = {}
    copied: Path | None = None
    if path.is_file():
        data = yaml.safe_load(path.read_text()) or {}
    else:
        source = calibration_path(robot.name, DEFAULT_CALIBRATION_TARGET)
        if source != path and source.is_file():
            src = yaml.safe_load(source.read_text()) or {}
            if "gaits" in src:
                data = {k: src[k] for k in ("gaits", "provenance") if k in src}
                copied = source
    current, _ = load_twin_params(robot.name, target)
    values = written_values(fit)
    block = written_params(fit, current).to_yaml_dict()
    block = {k: _rounded(v) for k, v in block.items()}
    old = _provenance(data)
    entry = {
        "command": f"snake twin identify {bag} --robot {robot.name} --target {target}"
                   f"{' --lifted' if fit.variant == 'lifted' else ''} --write",
        "bag": str(bag), "date": datetime.date.today().isoformat(),
        "residual_rms_before": round(fit.rms_before, 5), "residual_rms_after": round(fit.rms_after, 5),
        "noise_floor_rad": _rounded(fit.noise.get("noise_floor_rad", 0.0)),
        "adequacy_ratio": _rounded(fit.adequacy_after.get("ratio", 0.0)),
        "adequate": bool(fit.adequacy_after.get("adequate", False)),
        "not_identified": [n for n in fit.names if not fit.identified[n]],
        "written_not_identified": fit.written_not_identified(),
    }
    if fit.variant == "lifted":
        # The written servo values' standard deviations: an on-ground fit from this block carries
        # them into the ground friction's interval (snake_tools.twin.ground).
        entry["std"] = {n: _rounded(v) for n, v in start_std(fit.intervals, sorted(values)).items()}
    block["provenance"] = {k: v for k, v in old.items() if k != fit.variant} | {fit.variant: entry}
    data["twin"] = block
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, copied


def written_values(fit: Fit) -> dict[str, float]:
    """The values ``--write`` writes (:meth:`Fit.writes`), by flat name."""
    return {n: fit.fitted[n] for n in fit.names if fit.writes(n)}


def written_params(fit: Fit, current: TwinParams) -> TwinParams:
    """The twin of a target whose block held ``current`` once :func:`write_block` has written ``fit`` into it.

    An on-ground fit that chose a contact model (:attr:`Fit.contact_model`) writes it too, its
    friction the fit's where the fit identifies it, else the block's.
    """
    if fit.contact_model is not None:
        current = dataclasses.replace(current, contact=dataclasses.replace(
            fit.contact_model, ground_friction=current.contact.ground_friction))
    return current.with_flat(written_values(fit))


def recorded_fits(path: Path | None) -> dict[str, Any]:
    """A target file's ``twin.provenance``, one entry per fit variant (``{}``: no file, or none recorded)."""
    import yaml

    if path is None or not path.is_file():
        return {}
    return _provenance(yaml.safe_load(path.read_text()) or {})


def _provenance(data: dict[str, Any]) -> dict[str, Any]:
    """The ``twin.provenance`` of a target file's ``data``, keyed by variant (a single fit's entry: by its own)."""
    prov = (data.get("twin") or {}).get("provenance") or {}
    return {prov["variant"]: prov} if "variant" in prov else prov


def recorded_std(path: Path | None) -> dict[str, float]:
    """The lifted fit's standard deviations that :func:`write_block` recorded in ``path`` (``{}``: none).

    Raises:
        RobotConfigError: A recorded value that is not a positive finite number (naming the file and field).
    """
    from snake_core.errors import RobotConfigError

    lifted = recorded_fits(path).get("lifted")
    std = lifted.get("std") if isinstance(lifted, dict) else None
    if std is None:
        return {}
    if not isinstance(std, dict):
        raise RobotConfigError(f"{path}: twin.provenance.lifted.std: a mapping of parameter to standard deviation, "
                               f"got {type(std).__name__}")
    out = {}
    for name, value in std.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
            raise RobotConfigError(f"{path}: twin.provenance.lifted.std.{name}: a positive finite number, "
                                   f"got {value!r}")
        out[str(name)] = float(value)
    return out


def _rounded(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return float(f"{value:.6g}") if isinstance(value, float) else value


def html_report(fit: Fit, rec: Recording, robot: RobotModel, start: TwinParams, out: Path,
                world: str | Path | None = "flat") -> Path:
    """A self-contained HTML page: the parameter table and recorded vs twin motion before and after the fit.

    One joint per type (its largest commanded motion) for a lifted fit, the head path for an
    on-ground one; figures by matplotlib, embedded as PNG (no network).
    """
    import base64
    import html
    import io

    import matplotlib.pyplot as plt

    lifted = fit.variant == "lifted"
    q0, xy0 = simulate(rec, robot, start, world, lifted)
    q1, xy1 = simulate(rec, robot, fit.params, world, lifted)
    if lifted:
        types = joint_types(robot)
        sigma = noise_model(rec, fit.timestep_s).sigma
        fig, axes = plt.subplots(len(types), 2, figsize=(13, 2.6 * len(types)), sharex=True, squeeze=False)
        for row, t in zip(axes, types, strict=True):
            idx = [i for i, j in enumerate(robot.joints) if j.type == t]
            i = idx[int(np.argmax(np.ptp(rec.q_cmd[:, idx], axis=0)))]
            row[0].plot(rec.t_state, rec.q_state[:, i], "k", lw=1.2, label="robot")
            row[0].plot(rec.t_state, q0[:, i], "C1", lw=0.9, label="twin, start")
            row[0].plot(rec.t_state, q1[:, i], "C0--", lw=0.9, label="twin, fitted")
            row[0].set_ylabel(f"{robot.joints[i].name} (rad)")
            # Residual of every joint of the type after the fit, against the noise band (2 sigma, RMS over them).
            band = 2.0 * np.sqrt(np.mean(sigma[:, idx] ** 2, axis=1))
            row[1].fill_between(rec.t_state, -band, band, color="0.85", label="noise band (2 sigma)")
            row[1].plot(rec.t_state, q1[:, idx] - rec.q_state[:, idx], lw=0.6)
            row[1].set_ylabel(f"{t} residual (rad)")
        for ax in axes[-1]:
            ax.set_xlabel("time (s)")
        axes[0, 0].legend(loc="upper right", fontsize=8)
        axes[0, 1].legend(loc="upper right", fontsize=8)
    else:
        fig, ax = plt.subplots(figsize=(6, 6))
        for xy, style, label in ((rec.xy_pose, "k", "robot"), (xy0 - xy0[0] + rec.xy_pose[0], "C1", "twin, start"),
                                 (xy1 - xy1[0] + rec.xy_pose[0], "C0--", "twin, fitted")):
            ax.plot(xy[:, 0], xy[:, 1], style, label=label)
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
        ax.set_aspect("equal")
        ax.legend()
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    png = base64.b64encode(buf.getvalue()).decode()
    def interval(n: str) -> str:
        if n not in fit.intervals:
            return ""
        lo, hi = fit.intervals[n]
        return f"{lo:.4g} to {hi:.4g}" if math.isfinite(hi) else f"{lo:.4g} to (unbounded)"

    def told(n: str) -> str:   # identified, or written (of an adequate fit's twin), or neither
        return "yes" if fit.identified[n] else "written" if fit.writes(n) else "no"

    rows = "".join(f"<tr><td>{html.escape(n)}</td><td>{fit.start[n]:.5g}</td><td>{fit.fitted[n]:.5g}</td>"
                   f"<td>{fit.rel_std[n]:.3g}</td><td>{interval(n)}</td>"
                   f"<td>{told(n)}</td><td>{html.escape(fit.reasons.get(n, ''))}</td></tr>" for n in fit.names)
    verdict = ""
    if fit.adequacy_after:
        ad = fit.adequacy_after
        white = ", ".join(f"{t}: {'white' if v['white'] else 'not white'}"
                          f"{' (' + ', '.join(v['features']['found']) + ')' if v['features']['found'] else ''}"
                          for t, v in ad["by_type"].items())
        verdict = (f"<p><b>Adequacy: {'adequate' if ad['adequate'] else 'NOT adequate'}</b>: joint residual "
                   f"{ad['ratio']:.3g} times the noise floor ({fit.noise.get('noise_floor_rad', 0.0):.3g} rad; "
                   f"threshold {ad['threshold']:g}; {fit.adequacy_before.get('ratio', float('nan')):.3g} before the "
                   f"fit). Residual by joint type: {html.escape(white)}.</p>")
    if fit.structure.get("candidates"):
        st = fit.structure
        verdict += (f"<p>Structure: <b>{html.escape(st['chosen'])}</b> (least {html.escape(st['criterion'])}"
                    f"{html.escape(where_chosen(st))}; "
                    + "; ".join(f"{html.escape(c['name'])}: k {c['parameters']}, |r|^2 {c['cost']:.6g}, "
                                f"AIC {c['aic']:.6g}, BIC {c['bic']:.6g}" for c in st["candidates"]) + ").</p>")
    if fit.validation is not None:
        v = fit.validation
        verdict += (f"<p>Held-out recording {html.escape(str(v['bag']))}: joint residual RMS "
                    f"{v['joint_rms_rad']:.4g} rad fitted ({v['ratio_to_noise']:.3g} times its noise floor), "
                    f"{v['joint_rms_start_rad']:.4g} rad with the starting twin.</p>")
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>snake twin identify: {html.escape(robot.name)}"
            f"</title></head><body><h1>Twin identification ({html.escape(fit.variant)})</h1>"
            f"<p>Recording {html.escape(str(rec.path))}; residual RMS {fit.rms_before:.4g} before, "
            f"{fit.rms_after:.4g} after ({fit.rollouts} rollouts, {fit.wall_s:.1f} s).</p>{verdict}"
            "<table border='1' cellpadding='3'><tr><th>parameter</th><th>start</th><th>fitted</th>"
            "<th>spread (relative std; latency: physics steps; ground friction: 95 % interval's relative "
            "half-width)</th><th>95 % interval</th><th>identified (written: of an adequate fit's twin)</th>"
            "<th>why</th></tr>"
            f"{rows}</table><img alt='recorded and twin motion' src='data:image/png;base64,{png}'></body></html>")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    return out
