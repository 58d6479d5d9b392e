"""Exact extrema of the norms and of the slippage ratio over the input ellipsoid (Eq. 26-31 of 004).

Scenarios 1 and 3 (no wheels / ideal wheels) have one inequality, the unilateral
contact. Starting from rest, the response to the joint torques ``tau`` is linear on
each side of the hyperplane ``c . tau = 0`` where ``c . tau`` is the contact force of the
all-active solution (Eq. 17): the contact pushes (``c . tau >= 0``, the equality
solution of Eq. 17-18 holds) or opens (the object stays at rest, the robot moves under
the remaining constraints). On each side every quantity of Eq. 26-29 is a quadratic
form ``tau^T Q tau`` that is even in ``tau``, so its extremes over the half ellipsoid
are those over the whole ellipsoid ``tau^T E tau <= 1`` (Eq. 31):

- ``max tau^T Q tau`` over the ellipsoid is the largest generalised eigenvalue of
  ``(Q, E)`` (with ``E = L L^T``: the largest eigenvalue of ``L^-1 Q L^-T``), reached
  on the boundary at the eigenvector; the smallest one is the minimum over the boundary.
- The slippage ratio of Eq. 30 on the pushing side is the Rayleigh quotient
  ``sr = tau^T Omega tau / tau^T (Omega + Xi) tau`` (Omega: Eq. 29, Xi: Eq. 28),
  homogeneous of degree 0, so its maximum and minimum over pushing inputs are the
  extreme generalised eigenvalues of ``(Omega, Omega + Xi)``, restricted to the range of
  ``Omega + Xi`` (directions that move nothing have sr = 0 by definition). On the
  opening side sr = 0.

The sign of each eigenvector is chosen so that it lies on the side the form belongs to.

Scenario 2 (friction-bounded wheels) is not homogeneous in ``tau``. Every input whose
scenario-3 wheel forces stay within their bounds ``|lambda_w| <= mu_s m_i g`` has the
scenario-3 response (the LCP solution is unique and the scenario-3 one satisfies all
of scenario 2's conditions), and scaling an input down scales its wheel forces down.
So scenario 3's exact maximum slippage ratio is also reached in scenario 2, at the
scenario-3 maximiser scaled until no wheel saturates; larger values could only come
from inputs that saturate a wheel. :func:`bounded_sr_max` searches those with a
constrained optimisation (SLSQP from the best of a dense sample, objective evaluated
with the exact box-LCP of :func:`~snake_core.slippage.dynamics.evaluate`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from snake_core.slippage.dynamics import ellipsoid_inputs, evaluate, input_ellipsoid, unit_directions
from snake_core.slippage.model import ConstrainedSystem, SlippageError, SnakeObjectParams, build_system

_RANGE_RTOL = 1e-12  # eigenvalues of Omega + Xi below this fraction of the largest are its null space
_SATURATION_MARGIN = 1.0 - 1e-9  # scale inputs to just inside the wheels' friction bound
_SLSQP_TOL = 1e-12  # SLSQP function tolerance (sr is in [0, 1])
_SLSQP_ITER = 200  # SLSQP iterations per start
_BOUNDED_RADII = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)  # sampled ellipsoid levels, scenario 2
_COMPASS_STEP = 0.1  # initial step of the batched compass search, in ellipsoid-normalised units
_COMPASS_MIN_STEP = 1e-7  # ... which stops when its step falls below this ...
_COMPASS_MAX_ITER = 150  # ... or after this many iterations


@dataclass(frozen=True)
class LinearResponse:
    """The linear response of one side of the contact hyperplane (batch shape ``S``).

    Attributes:
        lam: Constraint forces per unit torque, N / (N m), ``S + (n_c, n_a)``; rows follow
            the system's constraints (the contact row is zero when the contact is open).
        acc: Accelerations per unit torque, ``S + (n, n_a)`` (robot, then object).
        gc: The metric G_c = A I^-1 A^T of the active constraints, ``S + (n_c, n_c)``
            (contact row and column zero when the contact is open).
    """

    lam: np.ndarray
    acc: np.ndarray
    gc: np.ndarray


def linear_response(system: ConstrainedSystem, contact_closed: bool) -> LinearResponse:
    """Constraint forces and accelerations per unit joint torque, all listed constraints active.

    Eq. 17-18 of 004 with ``f* = [B tau; 0]``: ``lambda* = -A^{T+} f*`` and
    ``a = I^-1 (1 - A^T A^{T+}) f*`` (Eq. 14-19), for the system's constraints with the
    contact row kept (closed) or dropped (open). Wheel rows are taken as equalities
    (scenarios 1 and 3; in scenario 2, the response while no wheel saturates).

    Args:
        system: The constrained system (batch shape ``S``).
        contact_closed: Keep the contact row (True) or drop it (False).

    Returns:
        The :class:`LinearResponse`.
    """
    p = system.params
    n_s, n_c = p.n_s, system.n_c
    rows = np.arange(n_c) if contact_closed else np.arange(1, n_c)
    batch = system.mass.shape[:-2]
    i_inv = system.inertia_inv
    f = np.zeros((*batch, p.n, p.n_a))
    f[..., n_s:, :] = 0.0
    f[..., :n_s, :] = system.actuation  # f* per unit tau: [B; 0]
    lam = np.zeros((*batch, n_c, p.n_a))
    gc = np.zeros((*batch, n_c, n_c))
    acc = i_inv @ f
    if rows.size:
        a = system.constraint[..., rows, :]
        a_iinv = a @ i_inv
        g = a_iinv @ np.swapaxes(a, -1, -2)
        lam_r = -np.linalg.solve(g, a_iinv @ f)  # Eq. 17: -G_c^-1 A I^-1 f*
        lam[..., rows, :] = lam_r
        gc[..., rows[:, None], rows[None, :]] = g
        acc = i_inv @ (f + np.swapaxes(a, -1, -2) @ lam_r)  # Eq. 12 / 18
    return LinearResponse(lam=lam, acc=acc, gc=gc)


@dataclass(frozen=True)
class QuadraticForms:
    """The norms of Eq. 26-27 and ||lambda||^2 as quadratic forms in tau, per contact side.

    Attributes:
        omega: ||a_obj||^2 = tau^T Omega tau while pushing (Eq. 29), ``S + (n_a, n_a)``.
        xi_closed: ||q_s''||^2 while pushing (Eq. 28).
        xi_open: ||q_s''||^2 with the contact open.
        lam_closed: ||lambda||^2 = lambda^T G_c lambda while pushing.
        lam_open: ||lambda||^2 with the contact open.
        contact: c with lambda_c = c . tau in the all-active solution, ``S + (n_a,)``.
        ellipsoid: E of Eq. 31, ``S + (n_a, n_a)``.
    """

    omega: np.ndarray
    xi_closed: np.ndarray
    xi_open: np.ndarray
    lam_closed: np.ndarray
    lam_open: np.ndarray
    contact: np.ndarray
    ellipsoid: np.ndarray


def _form(k: np.ndarray, metric: np.ndarray) -> np.ndarray:
    q = np.swapaxes(k, -1, -2) @ metric @ k
    return 0.5 * (q + np.swapaxes(q, -1, -2))


def quadratic_forms(system: ConstrainedSystem) -> QuadraticForms:
    """Omega, Xi and the constraint-force form on both sides of the contact (Eq. 26-29 of 004)."""
    n_s = system.params.n_s
    closed = linear_response(system, True)
    opened = linear_response(system, False)
    i_obj = system.inertia[..., n_s:, n_s:]
    return QuadraticForms(
        omega=_form(closed.acc[..., n_s:, :], i_obj),
        xi_closed=_form(closed.acc[..., :n_s, :], system.mass),
        xi_open=_form(opened.acc[..., :n_s, :], system.mass),
        lam_closed=_form(closed.lam, closed.gc),
        lam_open=_form(opened.lam, opened.gc),
        contact=closed.lam[..., 0, :],
        ellipsoid=input_ellipsoid(system),
    )


@dataclass(frozen=True)
class Extremum:
    """An extreme value over the input ellipsoid and an input reaching it.

    Attributes:
        value: The extreme value, batch shape ``S``.
        tau: A joint torque reaching it, N m, ``S + (n_a,)`` (on the boundary of Eq. 31
            for scenarios 1 and 3).
    """

    value: np.ndarray
    tau: np.ndarray


def _whitening(e: np.ndarray) -> np.ndarray:
    """L^-1 with E = L L^T (batched)."""
    return np.linalg.inv(np.linalg.cholesky(e))


def _signed(tau: np.ndarray, contact: np.ndarray, pushing: np.ndarray | bool) -> np.ndarray:
    """Flip each tau to the pushing (c . tau >= 0) or opening (c . tau <= 0) side."""
    s = np.einsum("...i,...i->...", tau, contact)
    want = np.where(pushing, 1.0, -1.0)
    return np.where((s * want < 0)[..., None], -tau, tau)


def form_extrema(form: np.ndarray, e: np.ndarray) -> tuple[Extremum, Extremum]:
    """Max and min of ``tau^T Q tau`` over the boundary ``tau^T E tau = 1`` (Eq. 31).

    Generalised symmetric eigenproblem ``Q v = mu E v``, solved as the ordinary one of
    ``L^-1 Q L^-T`` with ``E = L L^T``; the maximum is also the maximum over the solid
    ellipsoid.

    Returns:
        ``(max, min)`` with the inputs (unsigned: +-tau give the same value).
    """
    w = _whitening(e)
    c = w @ form @ np.swapaxes(w, -1, -2)
    mu, vec = np.linalg.eigh(0.5 * (c + np.swapaxes(c, -1, -2)))
    tau = np.swapaxes(w, -1, -2) @ vec  # columns: L^-T u, unit in the E metric
    return Extremum(mu[..., -1], tau[..., :, -1]), Extremum(mu[..., 0], tau[..., :, 0])


def ratio_extrema(num: np.ndarray, den: np.ndarray, e: np.ndarray) -> tuple[Extremum, Extremum]:
    """Max and min of ``tau^T N tau / tau^T D tau`` (N, D PSD, N <= D) over directions.

    Generalised eigenproblem ``N v = mu D v`` on the range of D (directions with
    ``tau^T D tau = 0`` also have ``tau^T N tau = 0`` and count as 0), in coordinates
    where E is the identity so that the inputs come out on the boundary of Eq. 31.

    Returns:
        ``(max, min)`` over the directions in the range of D, each with an input on
        ``tau^T E tau = 1``.
    """
    w = _whitening(e)
    wt = np.swapaxes(w, -1, -2)
    n_w = w @ num @ wt
    d_w = w @ den @ wt
    d, v = np.linalg.eigh(0.5 * (d_w + np.swapaxes(d_w, -1, -2)))
    keep = d > _RANGE_RTOL * np.maximum(d[..., -1:], np.finfo(float).tiny)
    scale = np.where(keep, 1.0 / np.sqrt(np.where(keep, d, 1.0)), 0.0)
    basis = v * scale[..., None, :]  # D-orthonormal basis of the range of D
    c = np.swapaxes(basis, -1, -2) @ n_w @ basis
    mu, y = np.linalg.eigh(0.5 * (c + np.swapaxes(c, -1, -2)))
    n_kept = keep.sum(axis=-1)
    # Dropped directions give zero rows: their eigenvalue 0 must not stand for the minimum
    # over the range, so take the smallest eigenvalue among the kept ones.
    mu_kept = np.where(np.arange(mu.shape[-1]) >= mu.shape[-1] - n_kept[..., None], mu, np.inf)
    i_min = np.argmin(mu_kept, axis=-1)
    u_max = basis @ y[..., :, -1:]
    u_min = np.take_along_axis(basis @ y, i_min[..., None, None], axis=-1)

    def boundary(u: np.ndarray) -> np.ndarray:
        u = u[..., 0]
        norm = np.linalg.norm(u, axis=-1, keepdims=True)
        return np.einsum("...ij,...j->...i", wt, u / np.where(norm > 0, norm, 1.0))

    mu_min = np.take_along_axis(mu, i_min[..., None], axis=-1)[..., 0]
    return Extremum(np.clip(mu[..., -1], 0.0, 1.0), boundary(u_max)), Extremum(np.clip(mu_min, 0.0, 1.0),
                                                                               boundary(u_min))


@dataclass(frozen=True)
class ExactExtrema:
    """Exact extrema over the input ellipsoid of Eq. 31 (scenarios 1 and 3), batch shape ``S``.

    Attributes:
        sr_max: Largest slippage ratio (Eq. 30), at a pushing input on the boundary.
        sr_min: Smallest slippage ratio over the pushing inputs (opening ones give 0).
        a_obj_max: Largest ||a_obj||^2 (Eq. 27), kg m^2/s^4 (minimum: 0, contact open).
        qdd_max: Largest ||q_s''||^2 (Eq. 26).
        qdd_min: Smallest ||q_s''||^2 on the boundary tau^T E tau = 1.
        lam_max: Largest ||lambda||^2 = lambda^T G_c lambda.
    """

    sr_max: Extremum
    sr_min: Extremum
    a_obj_max: Extremum
    qdd_max: Extremum
    qdd_min: Extremum
    lam_max: Extremum


def _pick(a: Extremum, b: Extremum, take_a: np.ndarray) -> Extremum:
    return Extremum(np.where(take_a, a.value, b.value), np.where(take_a[..., None], a.tau, b.tau))


def exact_extrema(system: ConstrainedSystem) -> ExactExtrema:
    """Closed-form extrema over the input ellipsoid for scenarios 1 and 3 (module docstring).

    Args:
        system: A scenario-1 or scenario-3 system (batch shape ``S``).

    Returns:
        The :class:`ExactExtrema`.

    Raises:
        SlippageError: For a scenario-2 system (use :func:`bounded_sr_max`).
    """
    if system.scenario == 2:
        raise SlippageError("scenario: exact extrema need scenario 1 or 3 (scenario 2: bounded_sr_max)")
    f = quadratic_forms(system)
    e, c = f.ellipsoid, f.contact
    sr_hi, sr_lo = ratio_extrema(f.omega, f.omega + f.xi_closed, e)
    a_hi, _ = form_extrema(f.omega, e)
    qc_hi, qc_lo = form_extrema(f.xi_closed, e)
    qo_hi, qo_lo = form_extrema(f.xi_open, e)
    lc_hi, _ = form_extrema(f.lam_closed, e)
    lo_hi, _ = form_extrema(f.lam_open, e)

    def push(x: Extremum) -> Extremum:
        return Extremum(x.value, _signed(x.tau, c, True))

    def opening(x: Extremum) -> Extremum:
        return Extremum(x.value, _signed(x.tau, c, False))

    return ExactExtrema(
        sr_max=push(sr_hi), sr_min=push(sr_lo), a_obj_max=push(a_hi),
        qdd_max=_pick(push(qc_hi), opening(qo_hi), qc_hi.value >= qo_hi.value),
        qdd_min=_pick(push(qc_lo), opening(qo_lo), qc_lo.value <= qo_lo.value),
        lam_max=_pick(push(lc_hi), opening(lo_hi), lc_hi.value >= lo_hi.value),
    )


def subsystem(system: ConstrainedSystem, index: np.ndarray) -> ConstrainedSystem:
    """The configurations ``index`` of a batch of shape ``(n,)`` (repeats allowed), for :func:`evaluate`."""
    kin, geo = system.kin, system.geometry
    return replace(
        system, mass=system.mass[index], inertia=system.inertia[index], inertia_inv=system.inertia_inv[index],
        robot_jacobian=system.robot_jacobian[index], grasp=system.grasp[index],
        constraint=system.constraint[index],
        kin=replace(kin, heading=kin.heading[index], com=kin.com[index], joints=kin.joints[index],
                    link_jac=kin.link_jac[index]),
        geometry=replace(geo, point=geo.point[index], normal=geo.normal[index], object_com=geo.object_com[index]))


def unsaturated_scale(system: ConstrainedSystem, tau: np.ndarray) -> np.ndarray:
    """Largest s in (0, 1] with no wheel at its friction bound at ``s tau`` (scenario 2).

    Uses the all-active (scenario 3) wheel forces, linear in tau; just inside the bound.

    Args:
        system: A scenario-2 system (batch shape ``S``).
        tau: Pushing inputs ``S + (n_a,)``, N m.

    Returns:
        The scale, batch shape ``S``.
    """
    lam = np.einsum("...ca,...a->...c", linear_response(system, True).lam, tau)[..., 1:]
    bound = system.upper[1:]
    with np.errstate(divide="ignore"):
        ratio = np.where(np.abs(lam) > 0, bound / np.abs(lam), np.inf)
    s = ratio.min(axis=-1) if ratio.shape[-1] else np.full(lam.shape[:-1], np.inf)
    return np.minimum(1.0, _SATURATION_MARGIN * s)


@dataclass(frozen=True)
class BoundedMax:
    """Largest slippage ratio of scenario 2 over the solid input ellipsoid.

    Attributes:
        sr_max: The maximum found.
        tau: The input reaching it, N m.
        sr_unsaturated: Scenario 3's exact maximum, reached in scenario 2 without saturation.
        sr_searched: Best value of the dense sample and the SLSQP runs.
        evaluations: Objective evaluations of the optimisation.
    """

    sr_max: float
    tau: np.ndarray
    sr_unsaturated: float
    sr_searched: float
    evaluations: int


def bounded_sr_max(params: SnakeObjectParams, q: np.ndarray, n_directions: int = 2000,
                   radii: tuple[float, ...] = _BOUNDED_RADII, n_starts: int = 4,
                   starts: np.ndarray | None = None) -> BoundedMax:
    """Maximise the slippage ratio of scenario 2 over ``tau^T E tau <= 1`` (Eq. 30-31 of 004).

    The unsaturated part is exact (module docstring). Inputs that saturate a wheel can do
    better in narrow regions of the input space (0.07 % of the inputs at some case-study-2
    shapes), so: a dense sample of the solid ellipsoid (``n_directions`` x ``radii``), then
    SLSQP (constraint ``1 - |u|^2 >= 0`` in coordinates ``tau = L^-T u``) from the
    ``n_starts`` best samples, the ``n_starts`` best samples that saturate a wheel, the
    scenario-3 maximiser and ``starts``, and a final :func:`compass_sr_max` polish of the
    best point (sr is only piecewise smooth where the LCP's active set changes).

    Args:
        params: System parameters.
        q: One configuration ``(n_s,)``: m, m, rad, then joint angles in rad.
        n_directions: Sample directions.
        radii: Sample levels in (0, 1].
        n_starts: SLSQP starts taken from the best samples (and as many from the best
            saturating ones).
        starts: More starting inputs ``(k, n_a)``, N m (e.g. the best of a coarser sweep).

    Returns:
        The :class:`BoundedMax`.
    """
    q = np.asarray(q, float)
    if q.ndim != 1:
        raise SlippageError(f"q: bounded_sr_max takes one configuration, got shape {q.shape}")
    p = params
    system = build_system(p, q[None], 2)
    one = subsystem(system, np.array([0]))
    ex = exact_extrema(build_system(p, q, 3))
    tau3 = ex.sr_max.tau
    tau_unsat = unsaturated_scale(system, tau3[None])[0] * tau3
    sr_unsat = float(evaluate(one, tau_unsat[None, None]).sr[0, 0])
    low = np.linalg.cholesky(input_ellipsoid(system)[0])  # E = L L^T, tau = L^-T u
    wt = np.linalg.inv(low).T
    count = 0

    def sr_of(u: np.ndarray) -> float:
        nonlocal count
        count += 1
        return float(evaluate(one, (wt @ u)[None, None]).sr[0, 0])

    samples = ellipsoid_inputs(system, unit_directions(p.n_a, n_directions), radii)[0]
    ev = evaluate(one, samples[None])
    count += samples.shape[0]
    sr_s = ev.sr[0]
    at_bound = np.isclose(np.abs(ev.lam[0, :, 1:]), system.upper[1:], rtol=1e-9).any(axis=-1)
    u_samples = samples @ low  # u = L^T tau
    order = np.argsort(sr_s)[::-1]
    picks = list(order[:n_starts]) + list(order[at_bound[order]][:n_starts])
    inits = [u_samples[i] for i in picks] + [low.T @ tau3]
    if starts is not None:
        inits += list(np.asarray(starts, float).reshape(-1, p.n_a) @ low)
    best_u, best = u_samples[order[0]], float(sr_s[order[0]])
    cons = [{"type": "ineq", "fun": lambda u: 1.0 - u @ u, "jac": lambda u: -2.0 * u}]
    from scipy.optimize import minimize  # only this search needs it: keeps scipy.optimize off start-up

    for u0 in inits:
        res = minimize(lambda u: -sr_of(u), u0, method="SLSQP", constraints=cons,
                       options={"ftol": _SLSQP_TOL, "maxiter": _SLSQP_ITER})
        u = res.x / max(1.0, float(np.linalg.norm(res.x)))  # stay feasible
        val = sr_of(u)
        if val > best:
            best, best_u = val, u
    polished = compass_sr_max(system, (wt @ best_u)[None])
    if polished.value[0] > best:
        best, best_u = float(polished.value[0]), low.T @ polished.tau[0]
    if sr_unsat >= best:
        return BoundedMax(sr_unsat, tau_unsat, sr_unsat, best, count)
    return BoundedMax(best, wt @ best_u, sr_unsat, best, count)


def compass_sr_max(system: ConstrainedSystem, tau0: np.ndarray) -> Extremum:
    """Batched compass search for the largest sr over ``tau^T E tau <= 1`` (scenario 2, Eq. 30-31).

    Derivative-free local maximisation for many configurations at once (one box-LCP
    call per iteration for all of them): in coordinates ``u = L^T tau`` (the ellipsoid
    is the unit ball) try ``u +- h e_i`` projected onto the ball, move to the best
    improvement and double ``h`` (up to its start value), halve ``h`` where none improves,
    stop below ``_COMPASS_MIN_STEP`` (or after ``_COMPASS_MAX_ITER`` iterations).
    sr is continuous but only piecewise smooth (the active set of the LCP changes), which
    this search tolerates; :func:`bounded_sr_max` is the SLSQP equivalent for one shape.

    Args:
        system: Configurations, batch shape ``(n,)``.
        tau0: Starting inputs ``(n, n_a)`` inside the ellipsoid, N m.

    Returns:
        The best value and input per configuration (never below the start's).
    """
    n_a = system.params.n_a
    low = np.linalg.cholesky(input_ellipsoid(system))
    lt_inv = np.linalg.inv(np.swapaxes(low, -1, -2))
    u = np.einsum("nji,nj->ni", low, tau0)  # L^T tau
    best = evaluate(system, tau0[:, None, :]).sr[:, 0]
    h = np.full(u.shape[0], _COMPASS_STEP)
    steps = np.concatenate([np.eye(n_a), -np.eye(n_a)])
    active = np.arange(u.shape[0])
    iterations = 0
    while active.size:
        cand = u[active, None, :] + h[active, None, None] * steps[None]
        cand /= np.maximum(1.0, np.linalg.norm(cand, axis=-1, keepdims=True))
        tau = np.einsum("nij,nkj->nki", lt_inv[active], cand)
        sr = evaluate(system, tau, index=active).sr
        k = np.argmax(sr, axis=-1)
        val = sr[np.arange(active.size), k]
        up = val > best[active]
        u[active[up]] = cand[up, k[up]]
        best[active[up]] = val[up]
        h[active] = np.where(up, np.minimum(2.0 * h[active], _COMPASS_STEP), 0.5 * h[active])
        iterations += 1
        active = active[h[active] >= _COMPASS_MIN_STEP] if iterations < _COMPASS_MAX_ITER else active[:0]
    return Extremum(best, np.einsum("nij,nj->ni", lt_inv, u))
