"""The case studies of 004 (Reyes & Ma): parameters, configuration sweeps, Table 2.

Parameters come from ``config/experiments/slippage_case_studies.yaml`` (Table 1 of 004), read by
:func:`load_case_study`. A sweep evaluates every configuration on the input ellipsoid
of Eq. (31) (directions x levels, see :func:`~snake_core.slippage.dynamics.ellipsoid_inputs`)
and keeps per configuration the best input for the object (largest ``||a_obj||^2``,
Eq. 27), the largest slippage ratio (Eq. 30), the largest ``||lambda||^2`` and the polar
coordinates of the COM. Table 2's "best / worst" are the largest / smallest of these
per-configuration maxima over all configurations.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snake_core import config_files
from snake_core.schema import Fail, check_keys, load_yaml, mapping, number, require, suggest
from snake_core.slippage.dynamics import ellipsoid_inputs, evaluate, input_ellipsoid, unit_directions
from snake_core.slippage.extrema import (
    compass_sr_max,
    exact_extrema,
    linear_response,
    quadratic_forms,
    unsaturated_scale,
)
from snake_core.slippage.model import SCENARIOS, SlippageError, SnakeObjectParams, build_system, polar_com

CONFIG_NAME = "slippage_case_studies"  # config/experiments/<name>.yaml
_CHUNK = 1024  # configurations per vectorised block
# Table 2 of 004 (case study 2), by scenario: worst/best ||a_obj||^2, worst/best sr.
PAPER_TABLE_2: dict[str, dict[str, float]] = {
    "1": {"worst_a_obj": 0.000763215, "best_a_obj": 0.00785302, "worst_sr": 0.00138484, "best_sr": 0.0267348},
    "2": {"worst_a_obj": 0.00107454, "best_a_obj": 0.00861168, "worst_sr": 0.00185713, "best_sr": 0.988638},
    "3": {"worst_a_obj": 0.00107454, "best_a_obj": 0.00861168, "worst_sr": 0.00185098, "best_sr": 0.988643},
}
# Keys of a case-study block and their rule ("positive", "non_negative", "number", "count" (int >= 1),
# "index" (int >= 0), "side" (+-1), "unit_interval" ((0, 1]); "_list": a non-empty list of those).
_BLOCK_RULES = {
    "link_mass": "positive", "link_length": "positive", "link_inertia": "positive", "mu_s": "non_negative",
    "kappa": "positive", "gravity": "positive", "contact_link": "index", "contact_offset": "number",
    "contact_side": "side", "object_com_distance": "non_negative", "object_com_lateral": "number",
    "object_gyration": "positive", "n_joints": "count", "joint_min_deg": "number", "joint_max_deg": "number",
    "joint_step_deg": "positive", "figure_q_deg": "number_list", "figure_kappas": "positive_list",
    "n_directions": "count", "radii": "unit_interval_list",
}
_BLOCK_REQUIRED = ("n_joints", "link_mass", "link_length", "link_inertia")
_PARAM_KEYS = ("kappa", "mu_s", "contact_link", "contact_offset", "contact_side", "object_com_distance",
               "object_com_lateral", "object_gyration", "gravity")


def default_config_path() -> Path:
    """``config/experiments/slippage_case_studies.yaml`` of the workspace (see :mod:`snake_core.config_files`).

    Raises:
        SlippageError: The file is not there, naming the path tried.
    """
    return config_files.resolve("experiment", CONFIG_NAME, SlippageError)


def load_case_study(name: str, path: str | Path | None = None) -> dict[str, Any]:
    """One case study block (``case_study_1`` / ``case_study_2``) of the YAML file.

    The whole file is checked: every block that is not a node's ``ros__parameters``
    block may hold only the keys of ``_BLOCK_RULES`` (so a typo is an error with the
    closest valid name, never a silent default), with values in range; the requested
    block must hold the link parameters of Table 1 (``_BLOCK_REQUIRED``).

    Raises:
        SlippageError: Missing file or block, YAML error, unknown key or bad value; one
            line, ``<file>: <block>.<key>: <problem>``.
    """
    p = config_files.resolve("experiment", path, SlippageError) if path is not None else default_config_path()
    data = load_yaml(p, SlippageError, "case studies")

    def fail(field_name: str, msg: str) -> SlippageError:
        return SlippageError(f"{p}: {field_name}: {msg}")

    data = mapping(data, "", fail)
    studies = {k: v for k, v in data.items() if not (isinstance(v, Mapping) and "ros__parameters" in v)}
    for block_name, block in studies.items():
        _check_block(str(block_name), mapping(block, str(block_name), fail), fail)
    if name not in studies:
        raise fail(name, f"no such case study block{suggest(name, studies, 'blocks')}")
    block = studies[name]
    require(block, _BLOCK_REQUIRED, name, fail)
    if "figure_q_deg" in block and len(block["figure_q_deg"]) != block["n_joints"]:
        raise fail(f"{name}.figure_q_deg", f"needs n_joints = {block['n_joints']} angles, got {block['figure_q_deg']}")
    return dict(block)


def _check_block(name: str, block: Mapping[str, Any], fail: Fail) -> None:
    """Keys and values of one case-study block (or of a partial block used as a YAML anchor)."""
    check_keys(block, _BLOCK_RULES, name, fail, f" of case study block {name}")
    for key, value in block.items():
        rule, path = _BLOCK_RULES[key], f"{name}.{key}"
        if rule == "side":
            if isinstance(value, bool) or value not in (1, -1):
                raise fail(path, f"must be 1 or -1, got {value!r}")
        elif rule.endswith("_list"):
            if not isinstance(value, list) or not value:
                raise fail(path, f"must be a non-empty list, got {value!r}")
            for i, item in enumerate(value):
                _check_value(rule.removesuffix("_list"), item, f"{path}[{i}]", fail)
        else:
            _check_value(rule, value, path, fail)
    low, high = block.get("joint_min_deg"), block.get("joint_max_deg")
    if low is not None and high is not None and low > high:
        raise fail(f"{name}.joint_min_deg", f"{low} must not exceed joint_max_deg {high}")


def _check_value(rule: str, value: Any, path: str, fail: Fail) -> None:
    if rule == "unit_interval":
        number(value, path, fail, low=0.0, low_open=True, high=1.0)
    elif rule in ("count", "index"):
        number(value, path, fail, low=1 if rule == "count" else 0, integer=True)
    else:
        number(value, path, fail, low=None if rule == "number" else 0.0, low_open=rule == "positive")


def params_from_config(cfg: Mapping[str, Any], **overrides: Any) -> SnakeObjectParams:
    """Build :class:`SnakeObjectParams` from a case-study block (Table 1), with overrides."""
    try:
        n_j = int(cfg["n_joints"])
        kw = {k: cfg[k] for k in _PARAM_KEYS if k in cfg}
        kw.update({k: v for k, v in overrides.items() if v is not None})
        return SnakeObjectParams.uniform(n_j, float(cfg["link_mass"]), float(cfg["link_length"]),
                                         float(cfg["link_inertia"]), **kw)
    except KeyError as err:
        raise SlippageError(f"case study config: missing key {err}") from err
    except TypeError as err:
        raise SlippageError(f"case study config: {err}") from err


def joint_grid(n_joints: int, lo_deg: float = -135.0, hi_deg: float = 135.0, step_deg: float = 10.0) -> np.ndarray:
    """Every combination of joint angles lo, lo + step, ..., hi (deg) as q_s rows, rad.

    Case study 1: 2 joints, [-135, 135] every 10 deg -> 28^2 = 784 configurations.
    The base pose is zero (the norms do not depend on it).
    """
    if step_deg <= 0 or hi_deg < lo_deg:
        raise SlippageError(f"joint grid: need step > 0 and max >= min, got {lo_deg}, {hi_deg}, {step_deg}")
    ang = np.deg2rad(np.arange(lo_deg, hi_deg + 1e-9, step_deg))
    grid = np.stack(np.meshgrid(*([ang] * n_joints), indexing="ij"), axis=-1).reshape(-1, n_joints)
    q = np.zeros((grid.shape[0], 3 + n_joints))
    q[:, 3:] = grid
    return q


@dataclass(frozen=True)
class SweepResult:
    """Per-configuration summaries of a sweep (arrays of length n_config).

    Attributes:
        q: Configurations, ``(n_config, n_s)``.
        a_obj_max: Largest ||a_obj||^2 over the input ellipsoid (Eq. 27).
        sr_at_best: Slippage ratio at that input (Eq. 30).
        qdd_at_best: ||q_s''||^2 at that input (Eq. 26).
        sr_max: Largest slippage ratio over the input ellipsoid.
        sr_max_tau: An input reaching it, N m, ``(n_config, n_a)``.
        lam_max: Largest ||lambda||^2 over the input ellipsoid.
        com_radius: |COM| w.r.t. the contact point, m.
        com_angle: angle COM, rad.
        refined: Configurations whose maximum came from the SLSQP search (scenario 2).
        exact: True when the maxima are the closed forms of
            :mod:`~snake_core.slippage.extrema` (False: sampled inputs only).
    """

    q: np.ndarray
    a_obj_max: np.ndarray
    sr_at_best: np.ndarray
    qdd_at_best: np.ndarray
    sr_max: np.ndarray
    sr_max_tau: np.ndarray
    lam_max: np.ndarray
    com_radius: np.ndarray
    com_angle: np.ndarray
    refined: np.ndarray
    exact: bool = True


def summarize_block(params: SnakeObjectParams, q: np.ndarray, scenario: int, directions: np.ndarray,
                    radii: tuple[float, ...]) -> dict[str, np.ndarray]:
    """Summarize a block of configurations from sampled inputs of the ellipsoid only (Eq. 31)."""
    system = build_system(params, q, scenario)
    tau = ellipsoid_inputs(system, directions, radii)
    ev = evaluate(system, tau)
    best = np.argmax(ev.a_obj_norm, axis=-1)
    best_sr = np.argmax(ev.sr, axis=-1)
    idx = np.arange(q.shape[0])
    r, ang = polar_com(params, system.kin, system.geometry)
    return {
        "a_obj_max": ev.a_obj_norm[idx, best],
        "sr_at_best": ev.sr[idx, best],
        "qdd_at_best": ev.qdd_norm[idx, best],
        "sr_max": ev.sr[idx, best_sr],
        "sr_max_tau": tau[idx, best_sr],
        "lam_max": ev.lam_norm.max(axis=-1),
        "com_radius": r,
        "com_angle": ang,
        "refined": np.zeros(q.shape[0], dtype=bool),
    }


def _quad(form: np.ndarray, tau: np.ndarray) -> np.ndarray:
    return np.einsum("...i,...ij,...j->...", tau, form, tau)


def summarize_block_exact(params: SnakeObjectParams, q: np.ndarray, scenario: int, directions: np.ndarray,
                          radii: tuple[float, ...]) -> dict[str, np.ndarray]:
    """Summarize a block of configurations with the exact extrema (Eq. 26-31 of 004).

    Scenarios 1 and 3: the closed forms of :func:`~snake_core.slippage.extrema.exact_extrema`
    (``directions`` and ``radii`` unused). Scenario 2: the largest sr is scenario 3's exact
    maximum (reached without saturating a wheel, at the scaled input) unless an input
    that saturates a wheel does better; the sampled inputs (``directions`` x ``radii``,
    plus scenario 3's maximisers) are solved in closed form where no wheel saturates and
    with the box-LCP where one does, and configurations where a saturated input beats
    the unsaturated maximum are flagged ``refined``, with that input; :func:`sweep` then
    refines them all at once with the batched local search
    :func:`~snake_core.slippage.extrema.compass_sr_max` (the tests check it against
    the SLSQP search of :func:`~snake_core.slippage.extrema.bounded_sr_max`).
    """
    idx = np.arange(q.shape[0])
    ideal = build_system(params, q, 3 if scenario == 2 else scenario)
    r, ang = polar_com(params, ideal.kin, ideal.geometry)
    ex = exact_extrema(ideal)
    forms = quadratic_forms(ideal)
    if scenario != 2:
        tau = ex.a_obj_max.tau
        a = _quad(forms.omega, tau)
        qdd = _quad(forms.xi_closed, tau)
        moving = a + qdd > 0
        return {"a_obj_max": ex.a_obj_max.value, "sr_at_best": np.where(moving, a / np.where(moving, a + qdd, 1), 0),
                "qdd_at_best": qdd, "sr_max": ex.sr_max.value, "sr_max_tau": ex.sr_max.tau,
                "lam_max": ex.lam_max.value, "com_radius": r, "com_angle": ang,
                "refined": np.zeros(q.shape[0], dtype=bool)}
    system = build_system(params, q, 2)
    tau_sr = unsaturated_scale(system, ex.sr_max.tau)[:, None] * ex.sr_max.tau
    samples = ellipsoid_inputs(system, directions, radii)
    tau = np.concatenate([samples, ex.a_obj_max.tau[:, None], tau_sr[:, None]], axis=1)  # (n, K, n_a)
    closed = linear_response(ideal, True)
    opened = linear_response(ideal, False)
    push = (tau @ forms.contact[:, :, None])[..., 0] >= 0
    lam = np.where(push[..., None], tau @ np.swapaxes(closed.lam, -1, -2), tau @ np.swapaxes(opened.lam, -1, -2))
    saturated = (np.abs(lam[..., 1:]) > system.upper[1:]).any(axis=-1)

    def batch_quad(form: np.ndarray) -> np.ndarray:
        return np.sum((tau @ form) * tau, axis=-1)

    a_obj = np.where(push, batch_quad(forms.omega), 0.0)
    qdd = np.where(push, batch_quad(forms.xi_closed), batch_quad(forms.xi_open))
    lam_norm = np.where(push, batch_quad(forms.lam_closed), batch_quad(forms.lam_open))
    ci, ki = np.nonzero(saturated)
    if ci.size:
        # the active set the clipped ideal-wheel forces suggest: contact free or open, wheels at +-bound
        lam_ck = lam[ci, ki]
        guess = np.zeros(lam_ck.shape, dtype=int)
        guess[:, 0] = np.where(push[ci, ki], 0, 1)
        guess[:, 1:] = np.where(lam_ck[:, 1:] > system.upper[1:], 2, np.where(lam_ck[:, 1:] < system.lower[1:], 1, 0))
        ev = evaluate(system, tau[ci, ki][:, None, :], guess=guess[:, None, :], index=ci)
        a_obj[ci, ki] = ev.a_obj_norm[:, 0]
        qdd[ci, ki] = ev.qdd_norm[:, 0]
        lam_norm[ci, ki] = ev.lam_norm[:, 0]
    den = a_obj + qdd
    sr = np.where(den > 0, a_obj / np.where(den > 0, den, 1.0), 0.0)
    sr[:, -1] = ex.sr_max.value  # tau_sr: scenario 3's response, exactly
    best = np.argmax(a_obj, axis=-1)
    sr_max = sr[:, -1].copy()
    sr_tau = tau_sr.copy()
    sat_best = np.where(saturated, sr, -1.0).max(axis=-1)
    refined = sat_best > sr_max
    sr_tau[refined] = tau[refined, np.argmax(np.where(saturated[refined], sr[refined], -1.0), axis=-1)]
    sr_max[refined] = sat_best[refined]
    return {"a_obj_max": a_obj[idx, best], "sr_at_best": sr[idx, best], "qdd_at_best": qdd[idx, best],
            "sr_max": sr_max, "sr_max_tau": sr_tau, "lam_max": lam_norm.max(axis=-1), "com_radius": r,
            "com_angle": ang, "refined": refined}


def _block_job(args: tuple[SnakeObjectParams, np.ndarray, int, np.ndarray, tuple[float, ...], bool]
               ) -> dict[str, np.ndarray]:
    *rest, exact = args
    return (summarize_block_exact if exact else summarize_block)(*rest)  # type: ignore[arg-type]


def sweep(params: SnakeObjectParams, q: np.ndarray, scenario: int, *, n_directions: int = 72,
          radii: Iterable[float] = (1.0 / 3.0, 2.0 / 3.0, 1.0), workers: int = 1,
          progress: Callable[[int], None] | None = None, exact: bool = True) -> SweepResult:
    """Evaluate every configuration of ``q`` over the input ellipsoid (Eq. 31 of 004).

    Args:
        params: System parameters.
        q: Configurations ``(n_config, n_s)``.
        scenario: 1, 2 or 3.
        n_directions: Input directions on the ellipsoid (sampled summaries, and the
            saturated inputs of scenario 2 in the exact ones).
        radii: Ellipsoid levels in (0, 1] (scenario 2 is not homogeneous in tau).
        workers: Processes (1 = in this process; the result is the same either way).
        progress: Called with the number of configurations finished after each block.
        exact: Closed-form extrema (:func:`summarize_block_exact`); False: sampled inputs only.

    Returns:
        The :class:`SweepResult`.
    """
    if scenario not in SCENARIOS:
        raise SlippageError(f"scenario: must be one of {SCENARIOS}, got {scenario!r}")
    radii_t = tuple(float(r) for r in radii)
    if not radii_t or any(not 0 < r <= 1 for r in radii_t):
        raise SlippageError(f"radii: must be in (0, 1], got {radii_t}")
    dirs = unit_directions(params.n_a, n_directions)
    q = np.asarray(q, float)
    chunk = _CHUNK if workers <= 1 else max(64, min(_CHUNK, -(-q.shape[0] // (4 * workers))))
    jobs = [(params, q[i:i + chunk], scenario, dirs, radii_t, exact) for i in range(0, q.shape[0], chunk)]
    parts: list[dict[str, np.ndarray]] = []
    if workers <= 1 or len(jobs) == 1:
        for job in jobs:
            parts.append(_block_job(job))
            if progress:
                progress(job[1].shape[0])
    else:
        with ProcessPoolExecutor(max_workers=min(workers, os.cpu_count() or 1)) as pool:
            for job, part in zip(jobs, pool.map(_block_job, jobs), strict=True):
                parts.append(part)
                if progress:
                    progress(job[1].shape[0])
    out = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    rows = np.flatnonzero(out["refined"])
    if rows.size:  # scenario 2: inputs saturating a wheel beat the unsaturated maximum here
        found = compass_sr_max(build_system(params, q[rows], 2), out["sr_max_tau"][rows])
        out["sr_max"][rows], out["sr_max_tau"][rows] = found.value, found.tau
    return SweepResult(q=q, exact=exact, **out)


def table_2(results: Mapping[int, SweepResult]) -> dict[str, dict[str, float]]:
    """Best / worst ||a_obj||^2 and sr per scenario (Table 2 of 004) from sweeps.

    Best / worst = largest / smallest over configurations of the per-configuration
    maximum over the input ellipsoid.
    """
    out = {}
    for sc, r in results.items():
        out[str(sc)] = {
            "best_a_obj": float(np.max(r.a_obj_max)),
            "worst_a_obj": float(np.min(r.a_obj_max)),
            "best_sr": float(np.max(r.sr_max)),
            "worst_sr": float(np.min(r.sr_max)),
            "best_a_obj_q_deg": np.rad2deg(r.q[int(np.argmax(r.a_obj_max)), 3:]).tolist(),
            "worst_a_obj_q_deg": np.rad2deg(r.q[int(np.argmin(r.a_obj_max)), 3:]).tolist(),
            "best_sr_q_deg": np.rad2deg(r.q[int(np.argmax(r.sr_max)), 3:]).tolist(),
            "worst_sr_q_deg": np.rad2deg(r.q[int(np.argmin(r.sr_max)), 3:]).tolist(),
        }
    return out


@dataclass(frozen=True)
class InputMap:
    """Norms over a grid of joint torques for one configuration (Fig. 4 of 004).

    Attributes:
        tau1: Torque grid of joint 1, N m, ``(n,)``.
        tau2: Torque grid of joint 2, N m, ``(n,)``.
        inside: True inside the input ellipsoid (Eq. 31), ``(n, n)``.
        a_obj: ||a_obj||^2, NaN outside, ``(n, n)``.
        qdd: ||q_s''||^2, NaN outside.
        sr: Slippage ratio, NaN outside.
    """

    tau1: np.ndarray
    tau2: np.ndarray
    inside: np.ndarray
    a_obj: np.ndarray
    qdd: np.ndarray
    sr: np.ndarray


def input_map(params: SnakeObjectParams, q: np.ndarray, scenario: int, n: int = 101) -> InputMap:
    """Norms over the (tau_1, tau_2) plane inside the ellipsoid of Eq. (31) (two joints only)."""
    if params.n_a != 2:
        raise SlippageError(f"input map: needs 2 joints, got {params.n_a}")
    system = build_system(params, np.asarray(q, float), scenario)
    e = input_ellipsoid(system)
    half = np.sqrt(np.diag(np.linalg.inv(e)))  # extent of the ellipse along each axis
    t1 = np.linspace(-half[0], half[0], n)
    t2 = np.linspace(-half[1], half[1], n)
    tt = np.stack(np.meshgrid(t1, t2, indexing="ij"), -1).reshape(-1, 2)
    inside = np.einsum("ki,ij,kj->k", tt, e, tt) <= 1.0 + 1e-12
    ev = evaluate(system, tt)
    shape = (n, n)

    def mask(v: np.ndarray) -> np.ndarray:
        return np.where(inside, v, np.nan).reshape(shape)

    return InputMap(tau1=t1, tau2=t2, inside=inside.reshape(shape), a_obj=mask(ev.a_obj_norm),
                    qdd=mask(ev.qdd_norm), sr=mask(ev.sr))
