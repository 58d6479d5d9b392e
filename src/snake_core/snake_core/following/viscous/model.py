"""N-link snake in a viscous environment with pegs as Gaussian humps of lateral friction (001 Sec. II).

Frames and conventions (the URDF/twin convention for the joint sign):

- Link 0 is the head; link ``i`` has its frame at its centre, x along the link pointing to
  the head, z up. Joint ``j`` (1..N-1) joins link ``j - 1`` (head side) to link ``j``;
  a positive joint angle turns link ``j`` counter-clockwise relative to link ``j - 1``,
  so in the head frame link ``i`` has heading ``theta_i = alpha_1 + ... + alpha_i``.
- Body velocities are ``xi = (v_x, v_y, omega)`` in m/s and rad/s.

The model (001 Eq. 1-10): the body velocity of link ``i`` relative to the head is
``xi_0i = J_i alpha_dot`` (Eq. 1-2); its body velocity in the world is
``xi_wi = Ad_{g_0i^-1} xi_w0 + xi_0i`` (Eq. 3); the viscous force on it, in its own frame,
is ``F_i = -K_i xi_wi`` with ``K_i = diag(k_x, k_y,i, k_theta,i)`` (Eq. 4), ``k_y,i`` raised
by a 2-D Gaussian hump around every peg (Eq. 5); forces are mapped to the head frame
with the transposed adjoint (Eq. 6) and sum to zero (Eq. 7), which is linear in the
head's body velocity (Eq. 8-9) and solved for it (Eq. 10).

Choices the paper leaves open, made here:

- ``k_theta,i = k_y,i L^2 / 12``: the rotational drag of a slender link whose lateral drag
  ``k_y,i`` is spread uniformly along its length ``L`` (the paper sets ``k_z = 1`` without
  units, which does not scale with the link length).
- Hump width: full width at half maximum equal to the peg diameter (``sigma = D / (2
  sqrt(2 ln 2))``), the paper's "the hump of the 2-D Gaussian attains a width of 4 inches,
  the width of the pegs".
- Time stepping: the shape moves from ``alpha_k`` to ``alpha_{k+1}`` during a step; the
  head velocity is solved at the mid-step shape with ``alpha_dot = (alpha_{k+1} -
  alpha_k) / dt`` and the friction at the pose at the start of the step, then the head
  pose advances by the exact SE(2) exponential. This is second order in the shape
  (the only fast variable: the friction field changes on the scale of a peg, the head
  moves millimetres per step) and makes one solve per step, which is what buys the
  speed (see :func:`simulate`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from snake_core.errors import SnakeCoreError

_FWHM_PER_SIGMA = 2.0 * math.sqrt(2.0 * math.log(2.0))  # full width at half maximum of a Gaussian / sigma
_SMALL_ANGLE = 1e-9  # rad, below which the SE(2) exponential uses its series
_HUMP_CUTOFF_SIGMA = 6.0  # humps further than this many sigma from every link are skipped
_NEAR_REFRESH_M = 0.5  # m, head travel after which the set of nearby pegs is gathered again
_MAX_PEG_ATTEMPTS = 200  # random draws per peg before giving up on a non-overlapping field


class ViscousModelError(SnakeCoreError, ValueError):
    """Bad parameters of the viscous model (the message names the field)."""


@dataclass(frozen=True)
class ViscousParams:
    """Parameters of the N-link viscous model.

    Attributes:
        n_links: Number of links N (>= 2).
        link_length: Length of every link, m.
        kx: Longitudinal viscous coefficient, N s/m (the paper's k_x = 1).
        ky_ground: Lateral coefficient on bare ground, N s/m; ``ky_ground / kx`` is the
            paper's ratio 4 (Eq. 5, ``K_height``).
        hump_amplitude: Height ``A`` of each peg's Gaussian hump of lateral friction, N s/m (Eq. 5).
        peg_diameter: Peg diameter, m; sets the hump width (FWHM = diameter).
    """

    n_links: int = 9
    link_length: float = 0.12
    kx: float = 1.0
    ky_ground: float = 4.0
    hump_amplitude: float = 40.0
    peg_diameter: float = 0.06

    def __post_init__(self) -> None:
        if int(self.n_links) != self.n_links or self.n_links < 2:
            raise ViscousModelError(f"n_links: must be an integer >= 2, got {self.n_links!r}")
        for name in ("link_length", "kx", "ky_ground", "peg_diameter"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ViscousModelError(f"{name}: must be a positive number, got {v!r}")
        if not (math.isfinite(self.hump_amplitude) and self.hump_amplitude >= 0):
            raise ViscousModelError(f"hump_amplitude: must be >= 0, got {self.hump_amplitude!r}")

    @property
    def sigma(self) -> float:
        """Standard deviation of each hump, m (FWHM = peg diameter)."""
        return self.peg_diameter / _FWHM_PER_SIGMA


@dataclass(frozen=True)
class ShapeTerms:
    """Shape-only parts of Eq. (8-9), batched over a leading axis of shapes.

    ``A(xi) = A0 + sum_i ky_i Ay_i`` and ``r = r0 + sum_i ky_i ry_i``; the head's body
    velocity solves ``A xi = -r`` (Eq. 9-10).

    Attributes:
        centres: Link centres in the head frame, m, ``(T, N, 2)``.
        headings: Link headings in the head frame, rad, ``(T, N)``.
        a0: ``k_x sum_i a_i a_i^T``, ``(T, 3, 3)``.
        ay: Per-link ``b_i b_i^T + (L^2/12) c c^T``, ``(T, N, 3, 3)``.
        r0: ``k_x sum_i a_i (J_i alpha_dot)_x``, ``(T, 3)``.
        ry: Per-link ``b_i (J_i alpha_dot)_y + (L^2/12) c (J_i alpha_dot)_theta``, ``(T, N, 3)``.
    """

    centres: np.ndarray
    headings: np.ndarray
    a0: np.ndarray
    ay: np.ndarray
    r0: np.ndarray
    ry: np.ndarray


def link_frames(alpha: np.ndarray, link_length: float) -> tuple[np.ndarray, np.ndarray]:
    """Link centres and headings in the head frame for joint angles ``alpha``.

    Forward kinematics ``g_0i(alpha)`` of the chain (the frames of Eq. 1-3).

    Args:
        alpha: Joint angles, rad, ``(..., N - 1)``.
        link_length: m.

    Returns:
        ``(centres (..., N, 2) in m, headings (..., N) in rad)``; link 0 at the origin, heading 0.
    """
    alpha = np.asarray(alpha, dtype=float)
    zero = np.zeros((*alpha.shape[:-1], 1))
    theta = np.concatenate([zero, np.cumsum(alpha, axis=-1)], axis=-1)
    e = np.stack([np.cos(theta), np.sin(theta)], axis=-1)
    steps = e[..., :-1, :] + e[..., 1:, :]
    centres = np.concatenate([np.zeros((*alpha.shape[:-1], 1, 2)), -0.5 * link_length * np.cumsum(steps, axis=-2)],
                             axis=-2)
    return centres, theta


def shape_terms(alpha: np.ndarray, alpha_dot: np.ndarray, params: ViscousParams) -> ShapeTerms:
    """Body Jacobians and adjoint rows for a batch of shapes (001 Eq. 1-4, 8-9).

    For link ``i`` at ``p_i`` with heading ``theta_i`` (head frame), the rows of
    ``Ad_{g_0i^-1}`` (Eq. 3) are ``a_i = (cos, sin, p_x sin - p_y cos)``,
    ``b_i = (-sin, cos, p_x cos + p_y sin)``, ``c = (0, 0, 1)``; the body Jacobian
    (Eq. 1-2) gives link ``i``'s velocity relative to the head as
    ``sum_{j<=i} alpha_dot_j z x (p_i - q_j)`` (``q_j`` the joint positions) and angular
    velocity ``sum_{j<=i} alpha_dot_j``, both projected on the link's axes.

    Args:
        alpha: Joint angles, rad, ``(T, N - 1)``.
        alpha_dot: Joint rates, rad/s, ``(T, N - 1)``.
        params: Model parameters.

    Returns:
        The shape terms for every row.
    """
    alpha = np.atleast_2d(np.asarray(alpha, dtype=float))
    alpha_dot = np.atleast_2d(np.asarray(alpha_dot, dtype=float))
    n = params.n_links
    if alpha.shape[-1] != n - 1 or alpha_dot.shape != alpha.shape:
        raise ViscousModelError(f"alpha: need shape (T, {n - 1}) for {n} links, got {alpha.shape} / {alpha_dot.shape}")
    ell = params.link_length
    p, theta = link_frames(alpha, ell)
    c, s = np.cos(theta), np.sin(theta)
    px, py = p[..., 0], p[..., 1]
    t = alpha.shape[0]
    a = np.stack([c, s, px * s - py * c], axis=-1)  # (T, N, 3)
    b = np.stack([-s, c, px * c + py * s], axis=-1)
    # Joint j (1..N-1) sits at the rear end of link j-1.
    q = p[:, :-1, :] - 0.5 * ell * np.stack([c[:, :-1], s[:, :-1]], axis=-1)  # (T, N-1, 2)
    zero1 = np.zeros((t, 1))
    s_rate = np.concatenate([zero1, np.cumsum(alpha_dot, axis=-1)], axis=-1)  # theta_dot_i, (T, N)
    q_rate = np.concatenate([np.zeros((t, 1, 2)), np.cumsum(alpha_dot[..., None] * q, axis=1)], axis=1)
    w = s_rate[..., None] * p - q_rate  # sum_j alpha_dot_j (p_i - q_j)
    vrel = np.stack([-w[..., 1], w[..., 0]], axis=-1)  # z x w, head-frame coordinates
    jx = c * vrel[..., 0] + s * vrel[..., 1]
    jy = -s * vrel[..., 0] + c * vrel[..., 1]
    rot = ell * ell / 12.0
    a0 = params.kx * np.einsum("tni,tnj->tij", a, a)
    ay = np.einsum("tni,tnj->tnij", b, b)
    ay[..., 2, 2] += rot
    r0 = params.kx * np.einsum("tni,tn->ti", a, jx)
    ry = b * jy[..., None]
    ry[..., 2] += rot * s_rate
    return ShapeTerms(centres=p, headings=theta, a0=a0, ay=ay, r0=r0, ry=ry)


def lateral_friction(points: np.ndarray, pegs: np.ndarray, params: ViscousParams) -> np.ndarray:
    """Lateral viscous coefficient at world points: ground plus one Gaussian hump per peg (001 Eq. 5).

    ``k_y(X, Y) = K_height + sum_k A exp(-((X - x_k)^2 + (Y - y_k)^2) / (2 sigma^2))``.

    Args:
        points: World points, m, ``(..., 2)``.
        pegs: Peg centres, m, ``(P, 2)`` (may be empty).
        params: Model parameters (``ky_ground``, ``hump_amplitude``, ``sigma``).

    Returns:
        ``k_y`` at each point, N s/m, shape ``points.shape[:-1]``.
    """
    points = np.asarray(points, dtype=float)
    ky = np.full(points.shape[:-1], params.ky_ground)
    if len(pegs) == 0 or params.hump_amplitude == 0:
        return ky
    d = points[..., None, :] - pegs
    r2 = np.einsum("...k,...k->...", d, d)
    return ky + params.hump_amplitude * np.exp(-r2 / (2.0 * params.sigma**2)).sum(axis=-1)


def head_velocity(terms: ShapeTerms, row: int, pose: np.ndarray, pegs: np.ndarray,
                  params: ViscousParams) -> np.ndarray:
    """Head body velocity for one shape row at a world head pose (001 Eq. 7-10).

    Args:
        terms: Shape terms from :func:`shape_terms`.
        row: Which row of the batch.
        pose: Head pose ``(x m, y m, yaw rad)``.
        pegs: Peg centres, m, ``(P, 2)``.
        params: Model parameters.

    Returns:
        ``xi_w0 = (v_x m/s, v_y m/s, omega rad/s)`` in the head frame.
    """
    return solve_head_velocity(terms, row, lateral_friction(to_world(terms.centres[row], pose), pegs, params))


def solve_head_velocity(terms: ShapeTerms, row: int, ky: np.ndarray) -> np.ndarray:
    """Solve the force balance for the head's body velocity given each link's k_y (001 Eq. 9-10).

    Args:
        terms: Shape terms from :func:`shape_terms`.
        row: Which row of the batch.
        ky: Lateral coefficient of every link, N s/m, ``(N,)``.

    Returns:
        ``xi_w0 = (v_x m/s, v_y m/s, omega rad/s)`` in the head frame.
    """
    a = terms.a0[row] + np.einsum("n,nij->ij", ky, terms.ay[row])
    r = terms.r0[row] + ky @ terms.ry[row]
    return -np.linalg.solve(a, r)


def to_world(points: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """Head-frame points -> world points for a head pose ``(x, y, yaw)``, m."""
    c, s = math.cos(pose[2]), math.sin(pose[2])
    return points @ np.array([[c, s], [-s, c]]) + pose[:2]


def se2_step(pose: np.ndarray, xi: np.ndarray, dt: float) -> np.ndarray:
    """Advance a world pose by a constant body velocity for ``dt`` s (exact SE(2) exponential).

    Args:
        pose: ``(x m, y m, yaw rad)``.
        xi: Body velocity ``(v_x m/s, v_y m/s, omega rad/s)``.
        dt: s.

    Returns:
        The new pose.
    """
    vx, vy, w = float(xi[0]) * dt, float(xi[1]) * dt, float(xi[2]) * dt
    if abs(w) < _SMALL_ANGLE:
        dx, dy = vx - 0.5 * w * vy, vy + 0.5 * w * vx
    else:
        sw, cw = math.sin(w), math.cos(w)
        dx = (sw * vx - (1.0 - cw) * vy) / w
        dy = ((1.0 - cw) * vx + sw * vy) / w
    c, s = math.cos(pose[2]), math.sin(pose[2])
    return np.array([pose[0] + c * dx - s * dy, pose[1] + s * dx + c * dy, pose[2] + w])


@dataclass
class Trajectory:
    """A simulated run.

    Attributes:
        t: Times, s, ``(T + 1,)``.
        head: Head poses ``(x, y, yaw)``, ``(T + 1, 3)``.
        com: Centroid of the link centres, m, ``(T + 1, 2)`` (equal links: the centre of mass).
        alpha: Joint angles, rad, ``(T + 1, N - 1)``.
    """

    t: np.ndarray
    head: np.ndarray
    com: np.ndarray
    alpha: np.ndarray

    @property
    def duration(self) -> float:
        """Simulated time, s."""
        return float(self.t[-1] - self.t[0])

    @property
    def mean_speed(self) -> float:
        """Net displacement of the centre of mass over the duration, m/s."""
        return float(np.linalg.norm(self.com[-1] - self.com[0]) / max(self.duration, 1e-12))

    @property
    def path_speed(self) -> float:
        """Length of the centre of mass's path over the duration, m/s."""
        return float(np.linalg.norm(np.diff(self.com, axis=0), axis=1).sum() / max(self.duration, 1e-12))


def simulate(alpha: np.ndarray, dt: float, params: ViscousParams, pegs: np.ndarray | None = None,
             start: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> Trajectory:
    """Integrate the head pose for a prescribed shape sequence (001 Eq. 10, open loop).

    Everything that depends on the shape only (Jacobians, adjoint rows, Eq. 8-9 without
    the friction weights) is computed for all steps at once; the loop does only the
    pose-dependent part: the friction at the links (Eq. 5), one 3x3 solve, one SE(2)
    exponential.

    Args:
        alpha: Joint angles at ``t_k = k dt``, rad, ``(T + 1, N - 1)``.
        dt: Step, s.
        params: Model parameters.
        pegs: Peg centres, m, ``(P, 2)``.
        start: Initial head pose ``(x m, y m, yaw rad)``.

    Returns:
        The trajectory.
    """
    alpha = np.asarray(alpha, dtype=float)
    if alpha.ndim != 2 or alpha.shape[0] < 2:
        raise ViscousModelError(f"alpha: need at least two shapes (T + 1, N - 1), got {alpha.shape}")
    if not dt > 0:
        raise ViscousModelError(f"dt: must be positive, got {dt!r}")
    pegs_arr = np.zeros((0, 2)) if pegs is None else np.asarray(pegs, dtype=float).reshape(-1, 2)
    mid = 0.5 * (alpha[1:] + alpha[:-1])
    terms = shape_terms(mid, np.diff(alpha, axis=0) / dt, params)
    steps = alpha.shape[0] - 1
    n = params.n_links
    base = np.concatenate([terms.a0.reshape(steps, 9), terms.r0], axis=1)  # (T, 12): A0 | r0
    per_link = np.concatenate([terms.ay.reshape(steps, n, 9), terms.ry], axis=2)  # (T, N, 12)
    centres_mid = terms.centres
    near = _NearPegs(pegs_arr, params)
    head = np.empty((steps + 1, 3))
    head[0] = start
    pose = np.asarray(start, dtype=float)
    for k in range(steps):
        ky = near.friction(to_world(centres_mid[k], pose))
        v = base[k] + ky @ per_link[k]
        xi = _solve3(v[:9], v[9:])
        pose = se2_step(pose, xi, dt)
        head[k + 1] = pose
    centres, _ = link_frames(alpha, params.link_length)
    c, s = np.cos(head[:, 2]), np.sin(head[:, 2])
    local = centres.mean(axis=1)
    com = head[:, :2] + np.stack([c * local[:, 0] - s * local[:, 1], s * local[:, 0] + c * local[:, 1]], axis=-1)
    return Trajectory(t=dt * np.arange(steps + 1), head=head, com=com, alpha=alpha)


class _NearPegs:
    """Lateral friction (Eq. 5) summed over the pegs near the body only.

    A hump is cut off beyond ``_HUMP_CUTOFF_SIGMA`` standard deviations (relative error
    below 1e-7 of its height). The pegs within reach of the body are cached and refreshed
    when the body's centroid has moved ``_NEAR_REFRESH_M`` from where they were gathered.
    """

    def __init__(self, pegs: np.ndarray, params: ViscousParams) -> None:
        self.pegs, self.params = pegs, params
        self.pad = _HUMP_CUTOFF_SIGMA * params.sigma + _NEAR_REFRESH_M
        self.where = np.array([np.inf, np.inf])
        self.px = self.py = pegs[:0, 0]
        self.inv = -0.5 / params.sigma**2
        self.floor = -0.5 * _HUMP_CUTOFF_SIGMA**2 * 4.0  # exponent at twice the cut-off distance

    def friction(self, points: np.ndarray) -> np.ndarray:
        p = self.params
        if not len(self.pegs) or p.hump_amplitude == 0:
            return np.full(len(points), p.ky_ground)
        centre = points[len(points) // 2]
        if math.hypot(centre[0] - self.where[0], centre[1] - self.where[1]) > _NEAR_REFRESH_M:
            self.where = centre.copy()
            radius = math.sqrt(float(((points - centre) ** 2).sum(axis=1).max())) + self.pad
            d2 = ((self.pegs - centre) ** 2).sum(axis=1)
            sub = self.pegs[d2 <= radius**2]
            self.px, self.py = sub[:, 0], sub[:, 1]
        dx = points[:, 0:1] - self.px
        dy = points[:, 1:2] - self.py
        # Clipping the exponent at the cut-off keeps exp() off its slow underflow path.
        arg = np.maximum((dx * dx + dy * dy) * self.inv, self.floor)
        return p.ky_ground + p.hump_amplitude * np.exp(arg).sum(axis=1)


def _solve3(a: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``-A^-1 r`` for a 3x3 ``A`` given row-major as 9 numbers (Cramer's rule; A is SPD here)."""
    a00, a01, a02, a10, a11, a12, a20, a21, a22 = a.tolist()
    r0, r1, r2 = r.tolist()
    c00 = a11 * a22 - a12 * a21
    c01 = a12 * a20 - a10 * a22
    c02 = a10 * a21 - a11 * a20
    det = a00 * c00 + a01 * c01 + a02 * c02
    x0 = (r0 * c00 + a01 * (a12 * r2 - r1 * a22) + a02 * (r1 * a21 - a11 * r2)) / det
    x1 = (a00 * (r1 * a22 - a12 * r2) + r0 * c01 + a02 * (a10 * r2 - r1 * a20)) / det
    x2 = (a00 * (a11 * r2 - r1 * a21) + a01 * (r1 * a20 - a10 * r2) + r0 * c02) / det
    return np.array([-x0, -x1, -x2])


class ViscousSnake:
    """The viscous model stepped one shape at a time, for closed loops (the shape is not known ahead).

    Same scheme as :func:`simulate`: a step from the current shape to ``alpha_next``.

    Args:
        params: Model parameters.
        pegs: Peg centres, m, ``(P, 2)``.
        alpha: Initial joint angles, rad.
        pose: Initial head pose ``(x m, y m, yaw rad)``.
    """

    def __init__(self, params: ViscousParams, pegs: np.ndarray | None, alpha: np.ndarray,
                 pose: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> None:
        self.params = params
        self.pegs = np.zeros((0, 2)) if pegs is None else np.asarray(pegs, dtype=float).reshape(-1, 2)
        self._near = _NearPegs(self.pegs, params)
        self.alpha = np.asarray(alpha, dtype=float).copy()
        self.pose = np.asarray(pose, dtype=float).copy()
        self.time = 0.0

    def step(self, alpha_next: np.ndarray, dt: float) -> np.ndarray:
        """Move the shape to ``alpha_next`` over ``dt`` s; return the new head pose."""
        alpha_next = np.asarray(alpha_next, dtype=float)
        terms = shape_terms((0.5 * (self.alpha + alpha_next))[None], ((alpha_next - self.alpha) / dt)[None],
                            self.params)
        ky = self._near.friction(to_world(terms.centres[0], self.pose))
        self.pose = se2_step(self.pose, solve_head_velocity(terms, 0, ky), dt)
        self.alpha = alpha_next.copy()
        self.time += dt
        return self.pose

    def com(self) -> np.ndarray:
        """Centroid of the link centres in the world, m."""
        centres, _ = link_frames(self.alpha, self.params.link_length)
        return to_world(centres.mean(axis=0), self.pose)

    def link_centres(self) -> np.ndarray:
        """Link centres in the world, m, ``(N, 2)``."""
        centres, _ = link_frames(self.alpha, self.params.link_length)
        return to_world(centres, self.pose)


def random_pegs(density: float, xlim: tuple[float, float], ylim: tuple[float, float], diameter: float,
                rng: np.random.Generator, gap: float = 0.0) -> np.ndarray:
    """A seeded random field of non-overlapping pegs.

    Args:
        density: Pegs per square metre.
        xlim: x range of peg centres, m.
        ylim: y range of peg centres, m.
        diameter: Peg diameter, m.
        rng: Random generator.
        gap: Smallest free space between two pegs, m.

    Returns:
        Peg centres, m, ``(round(density * area), 2)``.

    Raises:
        ViscousModelError: Negative density, or too dense to place without overlap.
    """
    if not (math.isfinite(density) and density >= 0):
        raise ViscousModelError(f"density: must be >= 0 pegs/m^2, got {density!r}")
    area = (xlim[1] - xlim[0]) * (ylim[1] - ylim[0])
    count = round(density * area)
    min_d2 = (diameter + gap) ** 2
    out = np.empty((count, 2))
    placed = 0
    attempts = 0
    while placed < count:
        batch = rng.uniform((xlim[0], ylim[0]), (xlim[1], ylim[1]), size=(64, 2))
        for cand in batch:
            attempts += 1
            if placed == 0 or (((out[:placed] - cand) ** 2).sum(axis=1) >= min_d2).all():
                out[placed] = cand
                placed += 1
                if placed == count:
                    break
        if attempts > _MAX_PEG_ATTEMPTS * max(count, 1):
            raise ViscousModelError(
                f"density: {density} pegs/m^2 of diameter {diameter} m cannot be placed without overlap")
    return out


def serpenoid_shapes(step: Callable[[float], np.ndarray], steps: int, dt: float, alpha0: np.ndarray) -> np.ndarray:
    """Joint angles ``(steps + 1, N - 1)`` from a gait's ``step(dt)``, starting at ``alpha0``."""
    out = np.empty((steps + 1, len(alpha0)))
    out[0] = alpha0
    for k in range(steps):
        out[k + 1] = step(dt)
    return out
