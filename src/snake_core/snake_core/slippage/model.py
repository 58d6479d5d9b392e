"""Planar floating-base snake touching one object: kinematics, inertia and constraints.

Implements the model of Reyes & Ma, *Studying slippage on pushing applications with
snake robots* (paper 004 of the stack, same paper as 000), Sec. "Unconstrained model"
and "Summary of constraints" (Eq. 3-11).

Conventions (all batched: ``q`` may have any leading shape ``(..., n_s)``):

- Generalized coordinates ``q_s = [x, y, theta, phi_1 .. phi_na]`` (m, m, rad, rad):
  ``(x, y)`` is the centre of link 0 (the tail, the paper's first link), ``theta`` its
  heading, ``phi_j`` the relative angle of joint j between link j and link j+1.
  The paper's Fig. 4 configuration ``q_s = {0, 0, 0, -135 deg, -135 deg}`` reads the
  same way.
- Link i spans ``[-l_i/2, +l_i/2]`` along its axis around its centre (= its COM); joint j
  sits at the front end of link j. Twists are ``[v_x, v_y, omega]`` of a link's COM,
  wrenches ``[f_x, f_y, torque_z]``, all in the world frame.
- The object is a rigid planar body of mass ``kappa * m`` (m = mean link mass) with
  unit-mass inertia ``diag(1, 1, rho^2)`` (``rho``: radius of gyration, m); its COM lies
  ``object_com_distance`` m behind the contact along the contact normal (plus an
  optional lateral offset), so with the default zero lateral offset the contact normal
  passes through the object's COM.
- Contact: frictionless point contact at ``contact_offset`` m from the centre of link
  ``contact_link`` along its axis; the normal ``n`` is the link's lateral axis on the
  side ``contact_side`` (+1: left, -1: right) and points from the robot into the object.
- Passive wheels: one per link in ``wheel_links`` (default: every link but the contact
  link, the paper's Assumption 4), at the link's COM, giving one lateral constraint.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from snake_core.errors import SnakeCoreError

_GRAVITY = 9.81  # m/s^2, loads the passive wheels of scenario 2
_N_BASE = 3  # floating base DOFs of a planar body (x, y, theta)
_N_OP = 3  # operational space of a planar object (Eq. 6)
SCENARIOS = (1, 2, 3)


class SlippageError(SnakeCoreError, ValueError):
    """Invalid slippage-model input; the message names the offending field."""


@dataclass(frozen=True)
class SnakeObjectParams:
    """Parameters of the snake + object system (Table 1 of 004 for the case studies).

    Attributes:
        masses: Link masses m_i, kg, one per link (n_l = n_a + 1 values).
        lengths: Link lengths l_i, m.
        inertias: Rotational inertia of each link about its COM, kg m^2.
        kappa: Object mass as a multiple of the (mean) link mass, m_obj = kappa m.
        mu_s: Static friction coefficient of the passive wheels (scenario 2).
        contact_link: Index of the link touching the object (0 = tail).
        contact_offset: Contact point along the contact link's axis from its centre, m.
        contact_side: +1 if the object is on the link's left (+y of the link), -1 right.
        object_com_distance: Distance of the object's COM from the contact along n, m.
        object_com_lateral: Offset of the object's COM along the contact link's axis, m.
        object_gyration: Radius of gyration of the object about its COM, m.
        wheel_links: Links carrying a passive wheel; ``None`` = all but the contact link.
        gravity: Gravity, m/s^2 (normal load of the wheels, scenario 2).
    """

    masses: tuple[float, ...]
    lengths: tuple[float, ...]
    inertias: tuple[float, ...]
    kappa: float = 100.0
    mu_s: float = 0.1
    contact_link: int = 0
    contact_offset: float = 0.0
    contact_side: int = 1
    object_com_distance: float = 0.1
    object_com_lateral: float = 0.0
    object_gyration: float = 0.1
    wheel_links: tuple[int, ...] | None = None
    gravity: float = _GRAVITY

    def __post_init__(self) -> None:
        n_l = len(self.masses)
        if n_l < 2:
            raise SlippageError(f"masses: need at least 2 links, got {n_l}")
        for name in ("lengths", "inertias"):
            if len(getattr(self, name)) != n_l:
                raise SlippageError(f"{name}: need {n_l} values (one per link), got {len(getattr(self, name))}")
        for name in ("masses", "lengths", "inertias"):
            vals = np.asarray(getattr(self, name), dtype=float)
            if not np.all(np.isfinite(vals)) or np.any(vals <= 0):
                raise SlippageError(f"{name}: must be positive finite numbers, got {list(vals)}")
        if not np.isfinite(self.kappa) or self.kappa <= 0:
            raise SlippageError(f"kappa: must be positive, got {self.kappa}")
        if not self.mu_s >= 0:
            raise SlippageError(f"mu_s: must be >= 0, got {self.mu_s}")
        if not 0 <= self.contact_link < n_l:
            raise SlippageError(f"contact_link: must be in [0, {n_l - 1}], got {self.contact_link}")
        half = 0.5 * self.lengths[self.contact_link]
        if not -half <= self.contact_offset <= half:
            raise SlippageError(
                f"contact_offset: must be within +-{half} m of the link centre, got {self.contact_offset}")
        if self.contact_side not in (1, -1):
            raise SlippageError(f"contact_side: must be +1 or -1, got {self.contact_side}")
        if not self.object_gyration > 0:
            raise SlippageError(f"object_gyration: must be positive, got {self.object_gyration}")
        for k in self.wheels:
            if not 0 <= k < n_l:
                raise SlippageError(f"wheel_links: link {k} out of range [0, {n_l - 1}]")
            if k == self.contact_link:
                raise SlippageError(f"wheel_links: link {k} touches the object (Assumption 4: one constraint per link)")

    @classmethod
    def uniform(cls, n_joints: int, mass: float, length: float, inertia: float, **kw: object) -> SnakeObjectParams:
        """Snake with identical links (the paper's Table 1 setting)."""
        n_l = n_joints + 1
        return cls(masses=(mass,) * n_l, lengths=(length,) * n_l, inertias=(inertia,) * n_l, **kw)  # type: ignore[arg-type]

    def with_(self, **kw: object) -> SnakeObjectParams:
        """A copy with some fields replaced."""
        return replace(self, **kw)  # type: ignore[arg-type]

    @property
    def n_links(self) -> int:
        """Number of links n_l = n_a + 1."""
        return len(self.masses)

    @property
    def n_a(self) -> int:
        """Number of actuated joints."""
        return self.n_links - 1

    @property
    def n_s(self) -> int:
        """Robot DOFs n_s = 3 + n_a."""
        return _N_BASE + self.n_a

    @property
    def n(self) -> int:
        """System DOFs n = n_s + n_op (robot + planar object)."""
        return self.n_s + _N_OP

    @property
    def m_ref(self) -> float:
        """Reference link mass m (mean link mass), kg; m_obj = kappa m."""
        return float(np.mean(self.masses))

    @property
    def wheels(self) -> tuple[int, ...]:
        """Links with a passive wheel (all but the contact link unless given)."""
        if self.wheel_links is None:
            return tuple(k for k in range(self.n_links) if k != self.contact_link)
        return tuple(self.wheel_links)


@dataclass(frozen=True)
class Kinematics:
    """Batched planar kinematics of the snake (shapes with leading batch dims ``...``).

    Attributes:
        heading: Link headings, rad, ``(..., n_l)``.
        com: Link COM positions, m, ``(..., n_l, 2)``.
        joints: Joint positions, m, ``(..., n_a, 2)``.
        link_jac: Link twist Jacobians J_i of Eq. (3), ``(..., n_l, 3, n_s)``.
    """

    heading: np.ndarray
    com: np.ndarray
    joints: np.ndarray
    link_jac: np.ndarray


def _check_q(params: SnakeObjectParams, q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=float)
    if q.shape[-1:] != (params.n_s,):
        raise SlippageError(
            f"q: last dimension must be n_s = {params.n_s} (x, y, theta, {params.n_a} joints), got {q.shape}")
    if not np.all(np.isfinite(q)):
        raise SlippageError("q: must be finite")
    return q


def kinematics(params: SnakeObjectParams, q: np.ndarray) -> Kinematics:
    """Link poses and link twist Jacobians J_i (Eq. 3 of 004) for configurations ``q``.

    Args:
        params: System parameters.
        q: Generalized coordinates ``(..., n_s)``: m, m, rad, then joint angles in rad.

    Returns:
        The batched :class:`Kinematics`.
    """
    q = _check_q(params, q)
    batch = q.shape[:-1]
    n_l, n_s = params.n_links, params.n_s
    lengths = np.asarray(params.lengths)
    rel = np.concatenate([q[..., 2:3], q[..., 3:]], axis=-1)
    heading = np.cumsum(rel, axis=-1)  # (..., n_l)
    axis = np.stack([np.cos(heading), np.sin(heading)], axis=-1)  # (..., n_l, 2)
    com = np.empty((*batch, n_l, 2))
    joints = np.empty((*batch, n_l - 1, 2))
    com[..., 0, :] = q[..., 0:2]
    for i in range(n_l - 1):
        joints[..., i, :] = com[..., i, :] + 0.5 * lengths[i] * axis[..., i, :]
        com[..., i + 1, :] = joints[..., i, :] + 0.5 * lengths[i + 1] * axis[..., i + 1, :]
    jac = np.zeros((*batch, n_l, 3, n_s))
    for i in range(n_l):
        jac[..., i, 0, 0] = 1.0
        jac[..., i, 1, 1] = 1.0
        r = com[..., i, :] - com[..., 0, :]  # omega x r, omega = z
        jac[..., i, 0, 2] = -r[..., 1]
        jac[..., i, 1, 2] = r[..., 0]
        jac[..., i, 2, 2] = 1.0
        for j in range(i):  # joint j moves links j+1..n_l-1
            r = com[..., i, :] - joints[..., j, :]
            jac[..., i, 0, 3 + j] = -r[..., 1]
            jac[..., i, 1, 3 + j] = r[..., 0]
            jac[..., i, 2, 3 + j] = 1.0
    return Kinematics(heading=heading, com=com, joints=joints, link_jac=jac)


def mass_matrix(params: SnakeObjectParams, kin: Kinematics) -> np.ndarray:
    """Robot inertia matrix M_s of Eq. (4) of 004, ``(..., n_s, n_s)``, kg / kg m / kg m^2.

    ``M_s = sum_i J_i^T diag(m_i, m_i, I_i) J_i`` with J_i the COM twist Jacobians.
    """
    spatial = np.zeros((params.n_links, 3, 3))
    spatial[:, 0, 0] = params.masses
    spatial[:, 1, 1] = params.masses
    spatial[:, 2, 2] = params.inertias
    return np.einsum("...iak,iab,...ibl->...kl", kin.link_jac, spatial, kin.link_jac)


def actuation_matrix(params: SnakeObjectParams) -> np.ndarray:
    """B of Eq. (5) of 004: ``[0_{3 x na}; 1_{na x na}]``."""
    return np.vstack([np.zeros((_N_BASE, params.n_a)), np.eye(params.n_a)])


def object_inertia(params: SnakeObjectParams) -> np.ndarray:
    """I_obj = kappa m diag(1, 1, rho^2) of Eq. (6) of 004 (kg, kg m^2), at the object's COM."""
    return params.kappa * params.m_ref * np.diag([1.0, 1.0, params.object_gyration**2])


def _perp(v: np.ndarray) -> np.ndarray:
    return np.stack([-v[..., 1], v[..., 0]], axis=-1)


def _cross2(r: np.ndarray, f: np.ndarray) -> np.ndarray:
    return r[..., 0] * f[..., 1] - r[..., 1] * f[..., 0]


@dataclass(frozen=True)
class ContactGeometry:
    """Where the contact is, batched: point and normal (m, unit), object COM (m)."""

    point: np.ndarray
    normal: np.ndarray
    object_com: np.ndarray


def contact_geometry(params: SnakeObjectParams, kin: Kinematics) -> ContactGeometry:
    """Contact point, normal (robot -> object) and the object's COM position."""
    c = params.contact_link
    axis = np.stack([np.cos(kin.heading[..., c]), np.sin(kin.heading[..., c])], axis=-1)
    normal = params.contact_side * _perp(axis)
    point = kin.com[..., c, :] + params.contact_offset * axis
    obj = point + params.object_com_distance * normal + params.object_com_lateral * axis
    return ContactGeometry(point=point, normal=normal, object_com=obj)


@dataclass(frozen=True)
class ConstrainedSystem:
    """Everything Eq. (12)-(31) of 004 need for a batch of configurations.

    Attributes:
        params: The system parameters.
        scenario: 1 (no ground friction), 2 (friction-bounded wheels), 3 (ideal wheels).
        mass: M_s, ``(..., n_s, n_s)``.
        inertia: I = blockdiag(M_s, I_obj) of Eq. (12), ``(..., n, n)``.
        inertia_inv: I^{-1}, ``(..., n, n)``.
        robot_jacobian: J_s of Eq. (10), ``(..., n_c, n_s)``.
        grasp: G of Eq. (9)-(11), ``(..., 3, n_c)``.
        constraint: A = [-J_s, G^T] of Eq. (9), ``(..., n_c, n)``.
        lower: Lower bounds of lambda*, N, ``(n_c,)`` (0 for the unilateral contact).
        upper: Upper bounds of lambda*, N, ``(n_c,)``.
        kin: The kinematics.
        geometry: The contact geometry.
    """

    params: SnakeObjectParams
    scenario: int
    mass: np.ndarray
    inertia: np.ndarray
    inertia_inv: np.ndarray
    robot_jacobian: np.ndarray
    grasp: np.ndarray
    constraint: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    kin: Kinematics
    geometry: ContactGeometry

    @property
    def n_c(self) -> int:
        """Number of constraints (contact first, then the wheels)."""
        return int(self.constraint.shape[-2])

    @property
    def actuation(self) -> np.ndarray:
        """B of Eq. (5)."""
        return actuation_matrix(self.params)


def build_system(params: SnakeObjectParams, q: np.ndarray, scenario: int) -> ConstrainedSystem:
    """Constraint matrix, grasp matrix and robot Jacobian (Eq. 8-11 of 004) for a scenario.

    Constraint rows: row 0 is the frictionless contact (unilateral, lambda* >= 0: the
    robot may only push); then one lateral row per passive wheel in scenarios 2 and 3.
    Each row k of J_s is ``T_k^T J_*`` (Eq. 10) with ``J_*`` the twist Jacobian of the
    constrained link and ``T_k = [n; (p - c) x n]`` the unit constraint wrench at the
    link's COM c for a force along n at point p. Wheel forces are bounded by
    ``mu_s m_i g`` in scenario 2 and unbounded (bilateral) in scenario 3.

    Args:
        params: System parameters.
        q: Configurations ``(..., n_s)``.
        scenario: 1, 2 or 3.

    Returns:
        The batched :class:`ConstrainedSystem`.
    """
    if scenario not in SCENARIOS:
        raise SlippageError(f"scenario: must be one of {SCENARIOS}, got {scenario!r}")
    kin = kinematics(params, q)
    geo = contact_geometry(params, kin)
    batch = kin.heading.shape[:-1]
    rows_t: list[np.ndarray] = []  # T_k, (..., 3)
    rows_link: list[int] = []
    c = params.contact_link
    rows_t.append(np.concatenate([geo.normal, _cross2(geo.point - kin.com[..., c, :], geo.normal)[..., None]], -1))
    rows_link.append(c)
    lower = [0.0]
    upper = [np.inf]
    if scenario in (2, 3):
        for k in params.wheels:
            lat = _perp(np.stack([np.cos(kin.heading[..., k]), np.sin(kin.heading[..., k])], axis=-1))
            rows_t.append(np.concatenate([lat, np.zeros((*batch, 1))], -1))  # wheel at the COM
            rows_link.append(k)
            bound = params.mu_s * params.masses[k] * params.gravity if scenario == 2 else np.inf
            lower.append(-bound)
            upper.append(bound)
    t = np.stack(rows_t, axis=-2)  # (..., n_c, 3)
    j_star = kin.link_jac[..., rows_link, :, :]  # (..., n_c, 3, n_s)
    j_s = np.einsum("...ka,...kan->...kn", t, j_star)  # Eq. (10)
    r = geo.point - geo.object_com
    g_col = np.concatenate([geo.normal, _cross2(r, geo.normal)[..., None]], -1)  # object wrench per unit lambda
    grasp = np.zeros((*batch, _N_OP, len(rows_t)))
    grasp[..., :, 0] = g_col
    a_mat = np.concatenate([-j_s, np.swapaxes(grasp, -1, -2)], axis=-1)  # Eq. (9)
    m_s = mass_matrix(params, kin)
    i_obj = np.broadcast_to(object_inertia(params), (*batch, _N_OP, _N_OP))
    n_s, n = params.n_s, params.n
    inertia = np.zeros((*batch, n, n))
    inertia[..., :n_s, :n_s] = m_s
    inertia[..., n_s:, n_s:] = i_obj
    inertia_inv = np.zeros_like(inertia)
    inertia_inv[..., :n_s, :n_s] = np.linalg.inv(m_s)
    inertia_inv[..., n_s:, n_s:] = np.linalg.inv(i_obj)
    return ConstrainedSystem(
        params=params, scenario=scenario, mass=m_s, inertia=inertia, inertia_inv=inertia_inv,
        robot_jacobian=j_s, grasp=grasp, constraint=a_mat, lower=np.asarray(lower), upper=np.asarray(upper),
        kin=kin, geometry=geo,
    )


def polar_com(params: SnakeObjectParams, kin: Kinematics, geo: ContactGeometry) -> tuple[np.ndarray, np.ndarray]:
    """Polar coordinates (|COM|, angle COM) of the snake's COM w.r.t. the contact point.

    Sec. "Polar coordinates of the COM" of 004 (Fig. 3): |COM| is the distance from the
    contact point to the robot's COM, m; angle COM is the signed angle, rad in (-pi, pi],
    from the contact link's axis (tail -> head direction) to that vector.

    Returns:
        ``(radius, angle)``, each of the batch shape.
    """
    m = np.asarray(params.masses)
    com = np.einsum("i,...ia->...a", m, kin.com) / m.sum()
    d = com - geo.point
    h = kin.heading[..., params.contact_link]
    ang = np.arctan2(d[..., 1], d[..., 0]) - h
    return np.hypot(d[..., 0], d[..., 1]), np.angle(np.exp(1j * ang))


def _segments(params: SnakeObjectParams, kin: Kinematics) -> tuple[np.ndarray, np.ndarray]:
    axis = np.stack([np.cos(kin.heading), np.sin(kin.heading)], axis=-1)
    half = 0.5 * np.asarray(params.lengths)[:, None] * axis
    return kin.com - half, kin.com + half


def _seg_point_dist(a: np.ndarray, b: np.ndarray, p: np.ndarray) -> np.ndarray:
    ab = b - a
    t = np.clip(np.einsum("...i,...i->...", p - a, ab) / np.einsum("...i,...i->...", ab, ab), 0.0, 1.0)
    return np.linalg.norm(a + t[..., None] * ab - p, axis=-1)


def _side(p: np.ndarray, q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
    """Which side of the line q0 -> q1 the point p is on (+1 left, -1 right, 0 on it)."""
    return np.sign(_cross2(q1 - q0, p - q0))


def feasible(params: SnakeObjectParams, kin: Kinematics, geo: ContactGeometry, clearance: float = 0.0) -> np.ndarray:
    """Configurations a real snake can take while touching the object (boolean, batch shape).

    Not in 004 (which does not say which configurations it discards): links that are not
    neighbours must not cross or come closer than ``clearance`` m, and no link but the
    contact link may enter the object, modelled as a disc of radius
    ``object_com_distance`` touching the contact link at the contact point.
    """
    a, b = _segments(params, kin)
    ok = np.ones(kin.heading.shape[:-1], dtype=bool)
    n_l = params.n_links
    for i in range(n_l):
        for j in range(i + 2, n_l):
            d = np.minimum.reduce([
                _seg_point_dist(a[..., i, :], b[..., i, :], a[..., j, :]),
                _seg_point_dist(a[..., i, :], b[..., i, :], b[..., j, :]),
                _seg_point_dist(a[..., j, :], b[..., j, :], a[..., i, :]),
                _seg_point_dist(a[..., j, :], b[..., j, :], b[..., i, :]),
            ])
            ai, bi, aj, bj = a[..., i, :], b[..., i, :], a[..., j, :], b[..., j, :]
            cross = (_side(aj, ai, bi) * _side(bj, ai, bi) < 0) & (_side(ai, aj, bj) * _side(bi, aj, bj) < 0)
            ok &= ~cross & (d >= clearance)
    radius = params.object_com_distance
    for i in range(n_l):
        if i == params.contact_link:
            continue
        ok &= _seg_point_dist(a[..., i, :], b[..., i, :], geo.object_com) >= radius - 1e-12
    return ok
