"""Constrained accelerations, invariant norms and the slippage ratio (Eq. 12-31 of 004).

Two ways to the same answer live here:

- the paper's linear projector formulation (Eq. 14-19, 22-25, 28-29), valid when every
  constraint is an active equality (Eq. 17): :func:`constraint_projector`,
  :func:`orthogonal_projector`, :func:`input_maps`, :func:`norm_tensors`;
- :func:`evaluate`, which honours the *inequalities* of Eq. (8)/(13): the contact is
  unilateral (lambda_c >= 0, the robot can only push; when an input would pull, the
  contact opens and the object does not move, as in Fig. 4c) and in scenario 2 every
  wheel's lateral force is bounded, ``|lambda_w| <= mu_s m_i g`` (the limit surface of a
  wheel that only resists sideways). Starting from rest, the constraint accelerations
  are ``w = G_c lambda + A I^{-1} f`` and Coulomb friction / unilateral contact give the
  **box-constrained linear complementarity problem**

      lambda_i = lo_i  => w_i >= 0,   lambda_i = hi_i => w_i <= 0,   else w_i = 0,

  which, G_c being symmetric positive definite, is exactly the optimality condition of
  the strictly convex **bounded least-squares problem**
  ``min 1/2 ||L^T lambda + L^{-1} b||^2  s.t. lo <= lambda <= hi`` (G_c = L L^T), so it
  has one solution. :func:`solve_box_lcp` solves it exactly by vectorised enumeration of
  the active sets (each constraint free / at its lower / at its upper bound; one linear
  solve per pattern, the pattern that satisfies all the conditions wins; for one
  configuration with many inputs, as a monitor evaluates, every pattern is solved at once
  for every input) for up to ``_MAX_ENUMERATED`` constraints, and with scipy's bounded-variable least squares
  (``scipy.optimize.lsq_linear(method="bvls")``) above that. The tests check the two
  solvers against each other.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from snake_core.slippage.model import ConstrainedSystem, SlippageError

_MAX_ENUMERATED = 6  # constraints; 2 * 3^5 = 486 patterns at most
_ACCEPT = 1e-10  # relative violation accepted as round-off in the enumeration
_SR_EPS = 1e-300  # denominators below this give sr = 0 (no motion at all)
_MAX_PATTERNS_AT_ONCE = 200  # one configuration with at most this many patterns: all solved at once
_FLOAT_MAX = float(np.finfo(float).max)


# --- Eq. (14)-(19): projectors (all constraints active as equalities) -----------------
def constraint_metric(system: ConstrainedSystem) -> np.ndarray:
    """G_c = A I^{-1} A^T, metric tensor of the constrained basis e_c* (Eq. 14 of 004)."""
    a = system.constraint
    return a @ system.inertia_inv @ np.swapaxes(a, -1, -2)


def constraint_projector(system: ConstrainedSystem) -> np.ndarray:
    """Projector e_c*Phi_e* = G_c^{-1} A I^{-1} = A^{T+} (Eq. 14-15 of 004), ``(..., n_c, n)``."""
    return np.linalg.solve(constraint_metric(system), system.constraint @ system.inertia_inv)


def orthogonal_projector(system: ConstrainedSystem) -> np.ndarray:
    """Projector onto the complement of the constrained space, 1 - A^T A^{T+} (Eq. 19 of 004)."""
    n = system.params.n
    return np.eye(n) - np.swapaxes(system.constraint, -1, -2) @ constraint_projector(system)


def equality_solution(system: ConstrainedSystem, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Constraint forces and accelerations with every constraint active (Eq. 17-18 of 004).

    Args:
        system: The constrained system (batch shape ``S``).
        f: Generalized input forces ``f* = [B tau; f_obj]``, shape ``S + (K, n)``.

    Returns:
        ``(lambda*, a)``: ``lambda* = -Phi f`` (N) and ``a = I^{-1} Phi_perp f``.
    """
    phi = constraint_projector(system)
    lam = -np.einsum("...cn,...kn->...kc", phi, f)
    acc = np.einsum("...ij,...jk,...lk->...li", system.inertia_inv, orthogonal_projector(system), f)
    return lam, acc


@dataclass(frozen=True)
class InputMaps:
    """The mappings of Eq. (20)-(25) of 004 (inputs -> accelerations)."""

    qdd_tau: np.ndarray  # Eq. (22), (..., n_s, n_a)
    qdd_fobj: np.ndarray  # Eq. (23), (..., n_s, 3)
    aobj_tau: np.ndarray  # Eq. (24), (..., 3, n_a)
    aobj_fobj: np.ndarray  # Eq. (25), (..., 3, 3)


def input_maps(system: ConstrainedSystem) -> InputMaps:
    """Eq. (22)-(25) of 004, written with the actual (not unit-mass) inertias.

    With ``M_s = m Mbar``, ``I_obj = kappa m Ibar`` and G_c = A I^{-1} A^T these equal the
    paper's factored forms (whose G_c is the unit-mass one); written this way they also
    hold for links of different masses.
    """
    n_s = system.params.n_s
    m_inv = system.inertia_inv[..., :n_s, :n_s]
    o_inv = system.inertia_inv[..., n_s:, n_s:]
    js = system.robot_jacobian
    g = system.grasp
    gc_inv = np.linalg.inv(constraint_metric(system))
    b = system.actuation
    jst = np.swapaxes(js, -1, -2)
    gt = np.swapaxes(g, -1, -2)
    eye = np.eye(n_s)
    qdd_tau = m_inv @ (eye - jst @ gc_inv @ js @ m_inv) @ b
    qdd_fobj = m_inv @ jst @ gc_inv @ gt @ o_inv
    aobj_tau = o_inv @ g @ gc_inv @ js @ m_inv @ b
    aobj_fobj = o_inv @ (np.eye(3) - g @ gc_inv @ gt @ o_inv)
    return InputMaps(qdd_tau=qdd_tau, qdd_fobj=qdd_fobj, aobj_tau=aobj_tau, aobj_fobj=aobj_fobj)


def norm_tensors(system: ConstrainedSystem) -> tuple[np.ndarray, np.ndarray]:
    """Xi_tau (Eq. 28) and Omega_tau (Eq. 29) of 004: ``||qdd||^2 = tau^T Xi tau``, ``||a_obj||^2 = tau^T Omega tau``.

    Metric tensors: M_s for the robot's acceleration, I_obj for the object's (Eq. 1).
    Eq. (28) is written here as ``B^T (1 - Jhat^T)^T M_s^{-1} (1 - Jhat^T) B`` with
    ``Jhat^T = J_s^T G_c^{-1} J_s M_s^{-1}``, which is the paper's expression for m = 1 kg.
    """
    n_s = system.params.n_s
    m_inv = system.inertia_inv[..., :n_s, :n_s]
    js = system.robot_jacobian
    gc_inv = np.linalg.inv(constraint_metric(system))
    b = system.actuation
    jhat_t = np.swapaxes(js, -1, -2) @ gc_inv @ js @ m_inv
    p = (np.eye(n_s) - jhat_t) @ b
    xi = np.swapaxes(p, -1, -2) @ m_inv @ p
    maps = input_maps(system)
    i_obj = system.inertia[..., n_s:, n_s:]
    omega = np.swapaxes(maps.aobj_tau, -1, -2) @ i_obj @ maps.aobj_tau
    return xi, omega


# --- Eq. (31): input ellipsoid ---------------------------------------------------------
def input_ellipsoid(system: ConstrainedSystem) -> np.ndarray:
    """E = B^T Mbar_s^{-1} B: inputs with ``tau^T E tau <= 1`` (Eq. 31 of 004), ``(..., n_a, n_a)``.

    Eq. (31) writes ``tau^T Mbar_s^{-1} tau``; tau* acts on the robot as the generalized
    force B tau*, whose invariant squared length (Eq. 2) with the unit-mass inertia is
    ``tau^T B^T Mbar_s^{-1} B tau``. Units: tau in N m, Mbar in m^2 (inertia per kg).
    """
    n_s = system.params.n_s
    b = system.actuation
    mbar_inv = system.inertia_inv[..., :n_s, :n_s] * system.params.m_ref
    return b.T @ mbar_inv @ b


def unit_directions(n_a: int, count: int, seed: int = 0) -> np.ndarray:
    """``count`` unit vectors in R^n_a spread over the sphere, ``(count, n_a)``.

    n_a = 1: +-1; n_a = 2: evenly spaced angles; n_a = 3: a Fibonacci sphere; higher: a
    seeded Gaussian sample (reproducible).
    """
    if count < 1:
        raise SlippageError(f"directions: need at least one, got {count}")
    if n_a == 1:
        return np.array([[1.0], [-1.0]])
    if n_a == 2:
        ang = 2 * np.pi * np.arange(count) / count
        return np.stack([np.cos(ang), np.sin(ang)], axis=-1)
    if n_a == 3:
        i = np.arange(count) + 0.5
        z = 1 - 2 * i / count
        phi = np.pi * (1 + 5**0.5) * i
        r = np.sqrt(1 - z * z)
        return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=-1)
    u = np.random.default_rng(seed).standard_normal((count, n_a))
    return u / np.linalg.norm(u, axis=-1, keepdims=True)


def ellipsoid_inputs(system: ConstrainedSystem, directions: np.ndarray, radii: np.ndarray | tuple[float, ...] = (1.0,)
                     ) -> np.ndarray:
    """Joint torques on the ellipsoids ``tau^T E tau = r^2`` (Eq. 31 of 004), N m.

    Args:
        system: The constrained system (batch shape ``S``).
        directions: Unit vectors ``(K, n_a)``.
        radii: Ellipsoid levels r in (0, 1] (r = 1 is the boundary of Eq. 31).

    Returns:
        ``S + (len(radii) * K, n_a)`` torques, radius-major.
    """
    e = input_ellipsoid(system)
    low = np.linalg.cholesky(e)  # E = L L^T -> tau = r L^{-T} u
    lt_inv = np.linalg.inv(np.swapaxes(low, -1, -2))
    u = np.concatenate([r * np.asarray(directions, float) for r in np.atleast_1d(radii)], axis=0)
    return np.einsum("...ij,kj->...ki", lt_inv, u)


# --- the bounded problem -----------------------------------------------------------------
def _enumerate_one(gc: np.ndarray, b: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                   pats: np.ndarray) -> np.ndarray:
    """Every active-set pattern at once for K right-hand sides sharing one G_c ``(n_c, n_c)``.

    The same enumeration as :func:`solve_box_lcp`'s batched one, for the case a monitor
    meets (one configuration, K inputs, few constraints): pattern p's equations are
    ``A_p lambda = r_p`` with the rows of G_c for its free constraints and identity rows
    for those at a bound, solved for every pattern and every input in a few array
    operations. Each input takes the first pattern (fewest bounds first) that satisfies
    every condition to round-off, else the least violating one (zero when every pattern
    fails outright), as the batched enumeration does. ``pats`` are the patterns of
    :func:`_patterns` for these bounds, ``(P, n_c)``.
    """
    n_c = gc.shape[-1]
    free = pats == 0
    vals = np.where(pats == 1, lower, np.where(pats == 2, upper, 0.0))  # (P, n_c)
    with np.errstate(invalid="ignore"):
        system = np.where(free[:, :, None], gc, np.eye(n_c))
        lam = np.where(free[:, None, :], -b, vals[:, None, :]) @ np.linalg.inv(system).transpose(0, 2, 1)
        lam = np.where(free[:, None, :], lam, vals[:, None, :])  # (P, K, n_c); the bounds exactly
        # The constraint axis first from here: reductions over it are elementwise over (P, K).
        lam_c = np.ascontiguousarray(np.moveaxis(lam, -1, 0))
        w_c = np.ascontiguousarray(np.moveaxis(lam @ gc.T + b, -1, 0))
        scale_w = np.maximum(np.abs(b.T).max(axis=0), 1e-300)  # (K,): w has the scale of b
        scale_l = np.maximum(np.abs(lam_c).max(axis=0), 1e-300)  # (P, K)
        low, high = lower[:, None, None], upper[:, None, None]
        excess = np.minimum(np.fmax(np.fmax(low - lam_c, lam_c - high), 0.0), _FLOAT_MAX)  # NaN counts as 0
        at = np.moveaxis(pats, -1, 0)[:, :, None]  # (n_c, P, 1)
        viol = (excess * (at == 0)).max(axis=0) / scale_l
        viol = np.maximum(viol, np.where(at == 1, np.maximum(-w_c, 0.0), 0.0).max(axis=0) / scale_w)
        viol = np.maximum(viol, np.where(at == 2, np.maximum(w_c, 0.0), 0.0).max(axis=0) / scale_w)
    viol = np.where(np.isnan(viol), np.inf, viol)  # (P, K)
    passing = viol <= _ACCEPT
    chosen = np.where(passing.any(axis=0), passing.argmax(axis=0), viol.argmin(axis=0))  # (K,)
    rows = np.arange(b.shape[0])
    return np.where(np.isfinite(viol[chosen, rows])[:, None], lam[chosen, rows], 0.0)


def _patterns(lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Every active-set pattern of the bounds, fewest constraints at a bound first, ``(P, n_c)`` (read-only).

    Per constraint 0 (free), 1 (at its lower bound, where finite) or 2 (at its upper bound,
    where finite); the order is the one both enumerations try them in.
    """
    return _sorted_patterns(tuple(bool(x) for x in np.isfinite(lower)), tuple(bool(x) for x in np.isfinite(upper)))


@functools.lru_cache(maxsize=16)
def _sorted_patterns(lower_finite: tuple[bool, ...], upper_finite: tuple[bool, ...]) -> np.ndarray:
    states = [[0] + ([1] if lo else []) + ([2] if hi else [])
              for lo, hi in zip(lower_finite, upper_finite, strict=True)]
    out = np.array(sorted(itertools.product(*states), key=lambda p: sum(1 for s in p if s)), dtype=np.int8)
    out.flags.writeable = False
    return out


def solve_box_lcp(gc: np.ndarray, b: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                  method: str = "auto", guess: np.ndarray | None = None) -> np.ndarray:
    """Solve the box-LCP / bounded least squares for the constraint forces (Eq. 13, 16 of 004).

    Finds ``lo <= lambda <= hi`` with ``w = gc lambda + b`` and ``w_i >= 0`` where
    ``lambda_i = lo_i``, ``w_i <= 0`` where ``lambda_i = hi_i``, ``w_i = 0`` in between,
    i.e. ``argmin 1/2 lambda^T gc lambda + b^T lambda`` over the box.

    Args:
        gc: SPD matrices ``S + (n_c, n_c)``.
        b: Right-hand sides ``S + (K, n_c)``.
        lower: Lower bounds ``(n_c,)`` (may be -inf).
        upper: Upper bounds ``(n_c,)`` (may be +inf).
        method: ``"enumerate"`` (exact, vectorised active-set enumeration), ``"bvls"``
            (scipy ``lsq_linear`` per problem) or ``"auto"``.
        guess: Optional active set per problem to try first, ``S + (K, n_c)`` of 0 (free),
            1 (at the lower bound), 2 (at the upper bound); enumeration only. A wrong guess
            costs one extra linear solve; the result is the same. Unused for one
            configuration (``gc`` of shape ``(n_c, n_c)``), whose patterns are all solved at once.

    Returns:
        lambda, ``S + (K, n_c)``.
    """
    lower = np.asarray(lower, float)
    upper = np.asarray(upper, float)
    n_c = gc.shape[-1]
    if method == "auto":
        method = "enumerate" if n_c <= _MAX_ENUMERATED else "bvls"
    batch = gc.shape[:-2]
    k = b.shape[-2]
    gcf = gc.reshape(-1, n_c, n_c)
    bf = b.reshape(-1, k, n_c)
    if method == "bvls":
        from scipy.optimize import lsq_linear  # only for large contact sets: keeps scipy.optimize off start-up

        out = np.empty_like(bf)
        for i in range(gcf.shape[0]):
            low = np.linalg.cholesky(gcf[i])
            rhs = -np.linalg.solve(low, bf[i].T)  # (n_c, K)
            for j in range(k):
                if np.all(np.isinf(lower)) and np.all(np.isinf(upper)):
                    out[i, j] = np.linalg.solve(gcf[i], -bf[i, j])
                else:
                    out[i, j] = lsq_linear(low.T, rhs[:, j], bounds=(lower, upper), method="bvls", tol=1e-13).x
        return out.reshape(*batch, k, n_c)
    if method != "enumerate":
        raise SlippageError(f"method: must be auto, enumerate or bvls, got {method!r}")
    n = gcf.shape[0]
    patterns = _patterns(lower, upper)
    if n == 1 and len(patterns) <= _MAX_PATTERNS_AT_ONCE:
        return _enumerate_one(gcf[0], bf[0], lower, upper, patterns).reshape(*batch, k, n_c)
    flat_b = bf.reshape(n * k, n_c)
    owner = np.repeat(np.arange(n), k)  # which gc each problem uses
    best = np.zeros_like(flat_b)
    best_viol = np.full(n * k, np.inf)
    todo = np.arange(n * k)

    def attempt(st: np.ndarray, cand: np.ndarray) -> None:
        """Solve the problems ``cand`` with active set ``st``; keep the least violating solution."""
        free = np.flatnonzero(st == 0)
        fixed = np.flatnonzero(st != 0)
        fixed_vals = np.where(st[fixed] == 1, lower[fixed], upper[fixed])
        own = owner[cand]
        g = gcf[own]
        rhs_b = flat_b[cand]
        lam = np.zeros_like(rhs_b)
        lam[:, fixed] = fixed_vals
        if free.size:
            if own.size < n:  # invert only the matrices of the problems at hand
                g_ff_inv = np.linalg.inv(g[:, free][:, :, free])
            else:
                g_ff_inv = np.linalg.inv(gcf[:, free][:, :, free])[own]
            rhs = rhs_b[:, free] + g[:, free][:, :, fixed] @ fixed_vals
            lam[:, free] = -(g_ff_inv @ rhs[:, :, None])[:, :, 0]
        w = (g @ lam[:, :, None])[:, :, 0] + rhs_b
        scale_w = np.maximum(np.abs(rhs_b).max(axis=-1), 1e-300)  # w has the scale of b
        scale_l = np.maximum(np.abs(lam).max(axis=-1), 1e-300)
        viol = np.zeros(cand.size)
        if free.size:
            lf = lam[:, free]
            with np.errstate(invalid="ignore"):
                excess = np.maximum(np.maximum(lower[free] - lf, lf - upper[free]), 0.0)
            viol = np.maximum(viol, np.nan_to_num(excess, nan=0.0).max(axis=-1) / scale_l)
        at_lo = fixed[st[fixed] == 1]
        at_hi = fixed[st[fixed] == 2]
        if at_lo.size:
            viol = np.maximum(viol, np.maximum(-w[:, at_lo], 0).max(axis=-1) / scale_w)
        if at_hi.size:
            viol = np.maximum(viol, np.maximum(w[:, at_hi], 0).max(axis=-1) / scale_w)
        better = viol < best_viol[cand]
        best[cand[better]] = lam[better]
        best_viol[cand[better]] = viol[better]

    if guess is not None:  # each problem first tries its own guessed pattern
        flat_guess = np.asarray(guess, dtype=np.int64).reshape(n * k, n_c)
        code = flat_guess @ (3 ** np.arange(n_c))  # one integer per pattern
        for c in np.unique(code):
            members = np.flatnonzero(code == c)
            attempt(flat_guess[members[0]], members)
        todo = todo[best_viol[todo] > _ACCEPT]
    # Most likely patterns first (fewest constraints at a bound); each problem leaves the
    # work list as soon as a pattern satisfies every condition to round-off.
    for pat in patterns:
        if todo.size == 0:
            break
        attempt(pat, todo)
        todo = todo[best_viol[todo] > _ACCEPT]
    return best.reshape(*batch, k, n_c)


@dataclass(frozen=True)
class Evaluation:
    """Response of the system to inputs, batch shape ``S + (K,)``.

    Attributes:
        tau: Joint torques, N m, ``(..., n_a)``.
        qdd: Robot accelerations q_s'' (m/s^2, rad/s^2), ``(..., n_s)``.
        a_obj: Object acceleration [a_x, a_y, alpha] at its COM, ``(..., 3)``.
        lam: Constraint forces lambda* (contact first, then wheels), N, ``(..., n_c)``.
        qdd_norm: ||q_s''||^2 with metric M_s (Eq. 26), W/s = kg m^2/s^4.
        a_obj_norm: ||a_obj||^2 with metric I_obj (Eq. 27), kg m^2/s^4.
        lam_norm: ||lambda||^2 with metric G_c (Eq. 2 with A^T lambda), same units.
        sr: Slippage ratio (Eq. 30), in [0, 1] (0 if nothing moves).
        constraint_accel: A a, the constraint-space accelerations (Eq. 13), ``(..., n_c)``.
        in_contact: True where the contact pushes (lambda_c > 0).
    """

    tau: np.ndarray
    qdd: np.ndarray
    a_obj: np.ndarray
    lam: np.ndarray
    qdd_norm: np.ndarray
    a_obj_norm: np.ndarray
    lam_norm: np.ndarray
    sr: np.ndarray
    constraint_accel: np.ndarray
    in_contact: np.ndarray


def evaluate(system: ConstrainedSystem, tau: np.ndarray, f_obj: np.ndarray | None = None,
             method: str = "auto", guess: np.ndarray | None = None, index: np.ndarray | None = None) -> Evaluation:
    """Accelerations, norms and slippage ratio for joint torques (Eq. 12-13, 20-30 of 004).

    Solves the bounded problem of the module docstring from rest (velocity terms of
    Eq. 16 vanish), then ``a = I^{-1}(f* + A^T lambda*)`` (Eq. 12).

    Args:
        system: The constrained system (batch shape ``S``).
        tau: Joint torques ``S + (K, n_a)``, N m.
        f_obj: External wrench on the object ``S + (K, 3)`` (N, N m), default zero.
        method: Box-LCP solver, see :func:`solve_box_lcp`.
        guess: Active sets to try first, see :func:`solve_box_lcp`.
        index: Evaluate the configurations ``index`` (integers, shape ``S'``) of a system
            with batch shape ``(n,)`` instead of all of them (repeats allowed); then
            ``S = S'`` above. Shares G_c between the rows of one configuration.

    Returns:
        The :class:`Evaluation`.
    """
    p = system.params
    tau = np.asarray(tau, float)
    if tau.shape[-1] != p.n_a:
        raise SlippageError(f"tau: last dimension must be n_a = {p.n_a}, got {tau.shape}")
    constraint, inertia_inv, mass, inertia = system.constraint, system.inertia_inv, system.mass, system.inertia
    a_iinv = constraint @ inertia_inv
    gc = a_iinv @ np.swapaxes(constraint, -1, -2)
    if index is not None:
        idx = np.asarray(index, dtype=np.intp)
        constraint, inertia_inv, mass, inertia = constraint[idx], inertia_inv[idx], mass[idx], inertia[idx]
        a_iinv, gc = a_iinv[idx], gc[idx]
    batch = mass.shape[:-2]
    tau = np.broadcast_to(tau, (*batch, *tau.shape[-2:])) if tau.ndim >= 2 else np.broadcast_to(tau, (*batch, 1, p.n_a))
    k = tau.shape[-2]
    f = np.zeros((*batch, k, p.n))
    f[..., 3:p.n_s] = tau
    if f_obj is not None:
        f[..., p.n_s:] = f_obj
    b = np.einsum("...cn,...kn->...kc", a_iinv, f)
    lam = solve_box_lcp(gc, b, system.lower, system.upper, method=method, guess=guess)
    total = f + np.einsum("...cn,...kc->...kn", constraint, lam)
    acc = np.einsum("...ij,...kj->...ki", inertia_inv, total)
    qdd = acc[..., :p.n_s]
    a_obj = acc[..., p.n_s:]
    qdd_norm = np.einsum("...ki,...ij,...kj->...k", qdd, mass, qdd)
    i_obj = inertia[..., p.n_s:, p.n_s:]
    a_norm = np.einsum("...ki,...ij,...kj->...k", a_obj, i_obj, a_obj)
    lam_norm = np.einsum("...ki,...ij,...kj->...k", lam, gc, lam)
    qdd_norm = np.maximum(qdd_norm, 0.0)
    a_norm = np.maximum(a_norm, 0.0)
    den = a_norm + qdd_norm
    sr = np.where(den > _SR_EPS, a_norm / np.where(den > _SR_EPS, den, 1.0), 0.0)  # Eq. (30)
    c_acc = np.einsum("...cn,...kn->...kc", constraint, acc)
    return Evaluation(tau=tau, qdd=qdd, a_obj=a_obj, lam=lam, qdd_norm=qdd_norm, a_obj_norm=a_norm,
                      lam_norm=lam_norm, sr=sr, constraint_accel=c_acc, in_contact=lam[..., 0] > 0)
