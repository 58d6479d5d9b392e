"""The verdict on a fitted model: its residual against the noise floor, its whiteness, its features.

A model is adequate (:func:`adequacy`) when the noise-weighted residual's RMS is at most
:data:`ADEQUACY_THRESHOLD`, over every joint and over the joints of each type (the joints of a
hanging robot move one another: a type the model does not explain biases the others' values,
however small its share of the whole residual); per joint type the residual's whiteness (Ljung, System
Identification, 16.6) and its features (lag, dead band, speed saturation,
:func:`residual_features`) say what a model that is not adequate lacks. A lifted fit that is not
adequate identifies nothing and ``--write`` writes none of its values
(:func:`snake_tools.twin.identify.identify`); of an adequate one ``--write`` writes the twin judged
(``Fit.written``), identified or not. An adequate fit whose residual on a joint type is above the
noise floor and not white identifies nothing (that type sits in a second minimum or lacks an
effect, and biases the others' values through the body): its twin is written as this model's best
for the robot, not as the robot's own values.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from snake_core.robot import RobotModel
from snake_core.twin_params import joint_types
from snake_tools.twin.data import Recording
from snake_tools.twin.noise import NoiseModel

ADEQUACY_THRESHOLD = 2.0
"""A fit is adequate when its joint residual's RMS is at most this many times the noise floor."""
WHITE_LAGS = 20
"""Lags (samples) of the residual's autocorrelation tested for whiteness."""
WHITE_OUTSIDE = 0.25
"""A joint type's residual is white when at most this fraction of its autocorrelations lie outside +-1.96/sqrt(N)."""
FEATURE_EXPLAINED = 0.2
"""A residual feature (lag, dead band) is reported when it explains at least this fraction of a type's residual."""


def adequacy(rec: Recording, q: np.ndarray, noise: NoiseModel, robot: RobotModel) -> dict[str, Any]:
    """The verdict on a model (module docstring, "Adequacy"): residual against the noise floor, whiteness, features.

    Returns:
        ``ratio`` (RMS of the residual in units of each sample's sigma), ``adequate`` (ratio at
        most :data:`ADEQUACY_THRESHOLD`, and so is every type's), ``threshold``, ``joint_rms_rad``, and per joint type
        ``by_type``: its ratio, whiteness (lag-1 autocorrelation, fraction of the first
        :data:`WHITE_LAGS` autocorrelations outside +-1.96/sqrt(N), ``white``) and ``features``.
    """
    e = q - rec.q_state
    ratio = float(np.sqrt(np.mean((e / noise.sigma) ** 2)))
    by_type: dict[str, Any] = {}
    for jtype in joint_types(robot):
        idx = [i for i, j in enumerate(robot.joints) if j.type == jtype]
        by_type[jtype] = {"ratio": float(np.sqrt(np.mean((e[:, idx] / noise.sigma[:, idx]) ** 2))),
                          **_whiteness(e[:, idx]), "features": residual_features(rec, e, idx)}
    worst = max((v["ratio"] for v in by_type.values()), default=ratio)
    return {"ratio": ratio, "adequate": max(ratio, worst) <= ADEQUACY_THRESHOLD, "threshold": ADEQUACY_THRESHOLD,
            "joint_rms_rad": float(np.sqrt(np.mean(e ** 2))), "by_type": by_type}


def _whiteness(e: np.ndarray) -> dict[str, Any]:
    """Autocorrelation test of residual columns (Ljung, System Identification, 16.6: ``|rho(k)| <= 1.96/sqrt(N)``)."""
    n = e.shape[0]
    lags = min(WHITE_LAGS, n - 1)
    rho = np.zeros((lags, e.shape[1]))
    for j in range(e.shape[1]):
        x = e[:, j] - e[:, j].mean()
        c0 = float(x @ x)
        if c0 <= 0.0:
            continue
        rho[:, j] = [float(x[k:] @ x[:-k]) / c0 for k in range(1, lags + 1)]
    outside = float(np.mean(np.abs(rho) > 1.96 / math.sqrt(n)))
    return {"lag1_autocorrelation": float(np.mean(rho[0])) if lags else 0.0, "outside_fraction": outside,
            "white": outside <= WHITE_OUTSIDE}


def residual_features(rec: Recording, e: np.ndarray, idx: list[int]) -> dict[str, Any]:
    """What a joint type's residual looks like: lag, dead band, speed saturation.

    Least squares of the residual ``e = q_twin - q_robot`` on two regressors at once, pooled
    over the type's joints: the recorded speed (``e ~ lag * qdot``: a robot later than the
    twin by ``lag``) and the sign of the recorded tracking error (``e ~ band * sign(q_cmd -
    q)``: a robot stopping ``band`` short of its goal, a dead band); each with the fraction of
    the residual's sum of squares it explains alone. ``speed_ratio`` is the 99th percentile of
    the recorded speed over the twin's (well below 1: the robot's speed saturates where the
    twin's does not).
    ``found`` lists those that explain at least :data:`FEATURE_EXPLAINED` (and ``speed
    saturation`` when ``speed_ratio < 0.8``).
    """
    t = rec.t_state
    qdot = np.gradient(rec.q_state[:, idx], t, axis=0)
    held = np.clip(np.searchsorted(rec.t_cmd, t, side="right") - 1, 0, len(rec.t_cmd) - 1)
    sign = np.sign(rec.q_cmd[held][:, idx] - rec.q_state[:, idx])
    y = e[:, idx].ravel()
    total = float(y @ y)
    out: dict[str, Any] = {}
    found = []
    for key, reg in (("lag_s", qdot.ravel()), ("dead_band_rad", sign.ravel())):
        rr = float(reg @ reg)
        coef = float(reg @ y) / rr if rr > 0 else 0.0
        explained = coef * coef * rr / total if total > 0 else 0.0
        out[key] = coef
        out[key.rsplit("_", 1)[0] + "_explained"] = explained
        if explained >= FEATURE_EXPLAINED:
            found.append(key.rsplit("_", 1)[0].replace("_", " "))
    twin_dot = np.gradient(rec.q_state[:, idx] + e[:, idx], t, axis=0)
    p_twin = float(np.percentile(np.abs(twin_dot), 99))
    out["speed_ratio"] = float(np.percentile(np.abs(qdot), 99)) / p_twin if p_twin > 0 else 1.0
    if out["speed_ratio"] < 0.8:
        found.append("speed saturation")
    out["found"] = found
    return out
