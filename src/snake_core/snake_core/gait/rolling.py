"""Rolling-vector sidewinding of the T-Snake with phase resetting (003).

Derivation used here (003 Sec. III; the paper's notation):

* Backbone: the elliptical helix c(theta, t) of Eq. 2, reparameterised by arc length
  s with Eq. 3 (:mod:`snake_core.gait.helix`).
* Phase along the body. Eq. 7-8 write the rolling vector as
  r(s, t) = [0, sin(omega_r(s) t), cos(omega_r(s) t)] with omega_r piecewise over the
  head [0, L_h), buffer [L_h, L_t) and tail [L_t, L]. For constant speeds,
  omega_r(s) t = (1 - lambda) omega_h t + lambda omega_t t in the buffer. Algorithm 1
  instead drives the rolling vector by accumulated segment phases
  phi_h = int omega_h dt, phi_t = int omega_t dt (line 3), which is the same thing for
  constant speeds and stays correct when the speeds change. We therefore make the
  phase along the body explicit:

      phi(s) = phi_h                              s <  L_h
      phi(s) = (1 - lambda) phi_h + lambda phi_t  L_h <= s < L_t, lambda = (s - L_h)/(L_t - L_h)
      phi(s) = phi_t                              s >= L_t

  and r(s) = [0, sin phi(s), cos phi(s)].
* Frames (Eq. 4-5): e1 = dc/ds, e_a = normalize(r - (r . e1) e1), e_b = e1 x e_a.
* Shape functions (Eq. 6), evaluated analytically rather than by finite differences.
  With p = r - (r . e1) e1 and ' = d/ds:
  e1' = (c'' g^2 - c' (c' . c'')) / g^4 (c', c'' derivatives in theta, g = |c'|),
  kappa_a = -e1' . e_b (6a), kappa_b = e1' . e_a (6b), and
  tau = e_a' . e_b = (p' . e_b) / |p| = (r' . e_b + (r . e1) kappa_a) / |p| (6c),
  with r' = phi'(s) [0, cos phi, -sin phi].
* Joint angles (Eq. 11): each joint integrates its shape function over
  [s_i - L0/2, s_i + L0/2]; we use Gauss-Legendre quadrature with the interval split
  at L_h and L_t, where phi'(s) (hence tau) jumps. Inside the buffer the frames turn
  about e1 by the phase difference |phi_h - phi_t| over L_t - L_h, and the integrands
  oscillate with that rotation: one 8-point rule per piece loses accuracy as the
  difference grows. The default ``integration="adaptive"`` cuts the body at every
  segment end and at L_h, L_t into cells (one third of a module where the joints sit L0/3
  apart), so that the three joints whose segments overlap on a cell share its nodes, and
  splits each buffer cell into panels that turn the frame by at most ``_PANEL_PHASE`` rad
  each; ``_QUAD_POINTS`` Gauss-Legendre points per panel. The number of nodes grows with
  |phi_h - phi_t| and the error stays bounded at any phase difference;
  ``integration="fixed"`` keeps the single 8-point rule per piece of each segment. The
  errors of both rules are measured in docs/gait.md. The step evaluates the shape
  functions in closed form without building the frames (:func:`_shape_functions`), and
  keeps everything about the nodes that does not depend on the phases (lambda(s), its
  slope, the weights per joint type) with the nodes of each panel count.
* Phase resetting (Algorithm 1): when |phi_h - phi_t| >= 2 pi, phi_h -= 2 pi sgn and
  C_twist += sgn. This changes phi(s) by -2 pi sgn (1 - lambda(s)). With Eq. 7's
  r = [0, sin phi, cos phi], increasing phi turns r from +z towards +y, a *negative*
  rotation about x, so e_a turns about e1 by +2 pi sgn (1 - lambda(s)) (exactly, where
  that angle is a multiple of pi). The twist integral (6c, 11c) of a joint whose
  segment ends at lambda(a), lambda(b) therefore jumps by -2 pi sgn (lambda(b) - lambda(a)),
  and the compensation that keeps it continuous is
  theta_twi += C_twist 2 pi (lambda(b) - lambda(a)). For the paper's geometry, whose
  buffer twist joints sit on L_h and L_t so that each covers half the buffer, this is
  C_twist pi per joint: Algorithm 1 line 11 up to its sign. The printed "-C_twist pi"
  produces a 2 pi jump under Eq. 6-7 as written (tested in test_gait_rolling.py), so
  the sign here follows the derivation.
* Wrapping when translating (beyond the paper). Algorithm 1 resets at
  |phi_h - phi_t| >= 2 pi, so after a turn a translation (omega_h = omega_t) carries
  whatever phase difference the turn left. A residual near 2 pi and the same value
  taken modulo 2 pi into (-pi, pi] roll head and tail alike, but the first leaves
  almost a full turn of twist in the buffer, which slows translation. So while
  translating, a difference beyond pi is reset once (same bookkeeping, compensation
  and blending) into (-pi, pi]. Turning keeps the paper's 2 pi threshold
  (``reset_threshold``); docs/gait.md gives the speeds measured in the twin both ways.
* Continuity (beyond the paper). The reset also changes the frames inside the buffer,
  so dorsal/lateral joints whose segments overlap the buffer (and twist joints at
  other placements) jump. The generator measures that jump at the reset instant and
  blends it out with a raised-cosine weight over ``reset_blend_time`` seconds, so the
  output is continuous with zero added velocity at both ends; 0 gives the paper's
  exact (discontinuous) output. Start-up ramps the shape in from straight over
  ``ramp_time`` seconds.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from snake_core.errors import GaitError
from snake_core.gait.base import Gait, GaitCommand
from snake_core.gait.helix import EllipticalHelix, HelixParams, UnrolledInverse
from snake_core.gait.reduction import DifferentialDrive, ReductionParams
from snake_core.robot import RobotModel

_TWO_PI = 2.0 * np.pi
# Gauss-Legendre points per panel, per rule: (outside the buffer, inside it). The adaptive rule's
# panels are a third of a module or shorter (within 6e-10 rad of scipy's adaptive quad, docs/gait.md).
_QUAD_POINTS = {"adaptive": (4, 6), "fixed": (8, 8)}
_PANEL_PHASE = 1.0  # rad, largest frame rotation inside one buffer panel (adaptive integration)
_INTEGRATION = ("adaptive", "fixed")
_REDUCTION_OPTIONS = frozenset(f.name for f in fields(ReductionParams))  # options of the twist mapping


@dataclass(frozen=True)
class RollingParams:
    """Parameters of the rolling-vector gait (003 Sec. IV values in the T-Snake YAML).

    Attributes:
        helix: Backbone shape (Eq. 2).
        head_end: L_h, end of the head segment, m (Eq. 8).
        tail_start: L_t, start of the tail segment, m (Eq. 8).
        reset_blend_time: Seconds over which a phase reset's residual jump is blended out
            (0: the paper's exact output).
        ramp_time: Seconds to ramp the shape in from straight when motion starts.
        phase_reset: Algorithm 1's phase resetting on (False reproduces the paper's baseline).
        reset_threshold: |phi_h - phi_t| at which a reset fires, rad (Algorithm 1: 2 pi).
        wrap_when_translating: Also reset when translating (omega_h = omega_t) with
            |phi_h - phi_t| > pi, so that the phase difference a turn left behind is brought
            into (-pi, pi] instead of being carried through the whole translation (see the
            module docstring).
        integration: ``adaptive`` (buffer pieces split into panels of at most
            ``_PANEL_PHASE`` rad of frame rotation, nodes shared between the joints: exact
            to 1e-9 rad at any phase difference) or ``fixed`` (one 8-point Gauss-Legendre rule per piece).
    """

    helix: HelixParams
    head_end: float
    tail_start: float
    reset_blend_time: float = 0.5
    ramp_time: float = 2.0
    phase_reset: bool = True
    reset_threshold: float = _TWO_PI
    wrap_when_translating: bool = True
    integration: str = "adaptive"

    def __post_init__(self) -> None:
        if self.integration not in _INTEGRATION:
            raise GaitError(f"rolling gait integration must be one of {_INTEGRATION}, got {self.integration!r}")
        if not np.pi - 1e-6 <= self.reset_threshold <= _TWO_PI + 1e-6:  # tolerate YAML rounding
            raise GaitError(f"rolling gait reset_threshold must be in [pi, 2 pi], got {self.reset_threshold}")
        if not 0.0 <= self.head_end < self.tail_start:
            raise GaitError(f"rolling gait needs 0 <= head_end < tail_start, got {self.head_end}, {self.tail_start}")
        if self.reset_blend_time < 0 or self.ramp_time < 0:
            raise GaitError("rolling gait reset_blend_time and ramp_time must be >= 0")

    @classmethod
    def from_robot(cls, robot: RobotModel, **overrides: Any) -> RollingParams:
        """Read ``gaits.rolling`` of a T-Snake description; keyword overrides win."""
        g = robot.gait("rolling")
        params: dict[str, Any] = {
            "helix": HelixParams(k_a=float(g["k_a"]), k_b=float(g["k_b"]), k_theta=float(g["k_theta"])),
            "head_end": float(g["head_end"]),
            "tail_start": float(g["tail_start"]),
        }
        if "reset_threshold" in g:
            params["reset_threshold"] = float(g["reset_threshold"])
        if "wrap_when_translating" in g:
            params["wrap_when_translating"] = bool(g["wrap_when_translating"])
        if "integration" in g:
            params["integration"] = str(g["integration"])
        params.update(overrides)
        return cls(**params)


def phase_along_body(
    s: np.ndarray, phi_h: float, phi_t: float, head_end: float, tail_start: float
) -> tuple[np.ndarray, np.ndarray]:
    """Rolling phase phi(s) and its slope d phi/ds along the body (003 Eq. 8, Alg. 1).

    Args:
        s: Arc lengths, m.
        phi_h: Accumulated head phase, rad.
        phi_t: Accumulated tail phase, rad.
        head_end: L_h, m.
        tail_start: L_t, m.

    Returns:
        (phi, dphi_ds) in rad and rad/m.
    """
    lam = np.clip((s - head_end) / (tail_start - head_end), 0.0, 1.0)
    phi = (1.0 - lam) * phi_h + lam * phi_t
    inside = (s >= head_end) & (s < tail_start)
    dphi = np.where(inside, (phi_t - phi_h) / (tail_start - head_end), 0.0)
    return phi, dphi


def _shape_components(
    helix: EllipticalHelix, s: np.ndarray, wave_phase: float, phi: np.ndarray, dphi_ds: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Frames (Eq. 4-5) and shape functions (Eq. 6), component by component.

    Returns (e1x, e1y, e1z, eax, eay, eaz, ebx, eby, ebz, kappa_a, kappa_b, tau); written
    with scalar-component arrays because this is the gait's hot path (no stack/cross).
    """
    hp = helix.params
    u = helix.theta_of_s(s, wave_phase) + wave_phase
    su, cu = np.sin(u), np.cos(u)
    d1x, d1y, d1z = hp.k_theta, hp.k_b * cu, -hp.k_a * su  # dc/dtheta
    d2y, d2z = -hp.k_b * su, -hp.k_a * cu  # d2c/dtheta2 (x component is 0)
    g2 = d1x * d1x + d1y * d1y + d1z * d1z
    g = np.sqrt(g2)
    e1x, e1y, e1z = d1x / g, d1y / g, d1z / g
    d1d2 = d1y * d2y + d1z * d2z
    g4 = g2 * g2
    de1x, de1y, de1z = (-d1x * d1d2) / g4, (d2y * g2 - d1y * d1d2) / g4, (d2z * g2 - d1z * d1d2) / g4
    sp, cp = np.sin(phi), np.cos(phi)
    r_e1 = sp * e1y + cp * e1z
    px, py, pz = -r_e1 * e1x, sp - r_e1 * e1y, cp - r_e1 * e1z
    p_norm = np.sqrt(px * px + py * py + pz * pz)
    eax, eay, eaz = px / p_norm, py / p_norm, pz / p_norm
    ebx, eby, ebz = e1y * eaz - e1z * eay, e1z * eax - e1x * eaz, e1x * eay - e1y * eax
    kappa_a = -(de1x * ebx + de1y * eby + de1z * ebz)
    kappa_b = de1x * eax + de1y * eay + de1z * eaz
    tau = (dphi_ds * (cp * eby - sp * ebz) + r_e1 * kappa_a) / p_norm
    return e1x, e1y, e1z, eax, eay, eaz, ebx, eby, ebz, kappa_a, kappa_b, tau


def _shape_functions(
    helix: EllipticalHelix, u: np.ndarray, phi: np.ndarray | float, dphi_ds: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shape functions kappa_a, kappa_b, tau (003 Eq. 6) without the frames, 1/m: the gait's hot path.

    The same quantities as :func:`_shape_components`, reduced in closed form. With
    d1 = dc/dtheta, d2 = d2c/dtheta2 (Eq. 2), g = |d1|, r = [0, sin phi, cos phi] (Eq. 7),
    r_e1 = r . e1 and |p| = sqrt(1 - r_e1^2) (Eq. 4): e_b = e1 x r / |p|, and since
    e1 . e1' = 0 and e1 x e1' = (d1 x d2) / g^3,

        kappa_b = (sin phi e1y' + cos phi e1z') / |p|                    (6b)
        kappa_a = (sin phi C_y + cos phi C_z) / |p|, C = e1 x e1'          (6a)
        tau = (r_e1 kappa_a - phi'(s) e1x / |p|) / |p|                   (6c)

    with d1 x d2 = [-k_a k_b, k_theta k_a cos u, -k_theta k_b sin u] and
    e1' = (d2 g^2 - d1 (d1 . d2)) / g^4, d1 . d2 = (k_a^2 - k_b^2) sin u cos u,
    g^2 = k_theta^2 + k_a^2 + (k_b^2 - k_a^2) cos^2 u.

    Args:
        helix: The backbone (Eq. 2).
        u: Wave phase theta(s, t) + omega_c t at the points (Eq. 3), rad.
        phi: Rolling phase there (Eq. 7-8), rad (a scalar: the same at every point).
        dphi_ds: Its slope, rad/m (a scalar: the same at every point).
    """
    hp = helix.params
    su, cu = np.sin(u), np.cos(u)
    d1y, d1z = hp.k_b * cu, -hp.k_a * su
    g2 = (hp.k_b * hp.k_b - hp.k_a * hp.k_a) * (cu * cu) + (hp.k_theta * hp.k_theta + hp.k_a * hp.k_a)
    inv_g = 1.0 / np.sqrt(g2)
    inv_g2 = inv_g * inv_g
    inv_g3 = inv_g2 * inv_g
    d1d2 = ((hp.k_a * hp.k_a - hp.k_b * hp.k_b) * inv_g2) * (su * cu)
    de1y = (-hp.k_b * su - d1y * d1d2) * inv_g2  # e1' = (d2 - d1 (d1 . d2) / g^2) / g^2
    de1z = (-hp.k_a * cu - d1z * d1d2) * inv_g2
    sp, cp = np.sin(phi), np.cos(phi)
    r_e1 = (sp * d1y + cp * d1z) * inv_g
    inv_p = 1.0 / np.sqrt(1.0 - r_e1 * r_e1)
    kappa_b = (sp * de1y + cp * de1z) * inv_p
    kappa_a = ((hp.k_theta * hp.k_a) * sp * cu - (hp.k_theta * hp.k_b) * cp * su) * inv_g3 * inv_p
    tau = (r_e1 * kappa_a - (hp.k_theta * dphi_ds) * inv_g * inv_p) * inv_p
    return kappa_a, kappa_b, tau


def frames_and_shape(
    helix: EllipticalHelix,
    s: np.ndarray,
    wave_phase: float,
    phi: np.ndarray,
    dphi_ds: np.ndarray,
) -> dict[str, np.ndarray]:
    """Complete frames (003 Eq. 4-5) and shape functions (Eq. 6) at arc lengths ``s``.

    Args:
        helix: The backbone (Eq. 2-3).
        s: Arc lengths, m.
        wave_phase: omega_c t, rad.
        phi: Rolling phase at ``s`` (Eq. 7-8), rad.
        dphi_ds: Its slope, rad/m.

    Returns:
        Arrays ``e1``, ``ea``, ``eb`` (..., 3) and ``kappa_a``, ``kappa_b``, ``tau`` (...), in 1/m.
    """
    c = _shape_components(helix, np.asarray(s, dtype=float), wave_phase, phi, dphi_ds)
    shape = np.shape(c[-1])
    vec = [np.stack(np.broadcast_arrays(*c[k:k + 3]), axis=-1).reshape(*shape, 3) for k in (0, 3, 6)]
    return {"e1": vec[0], "ea": vec[1], "eb": vec[2], "kappa_a": c[9], "kappa_b": c[10], "tau": c[11]}


@dataclass
class _Quadrature:
    """Gauss-Legendre nodes over every joint's integration segment (003 Eq. 11)."""

    nodes: np.ndarray  # all nodes, m
    weights: np.ndarray  # matching weights, m
    owner: np.ndarray  # joint index of each node
    n_joints: int
    lam: np.ndarray  # lambda(s) of Eq. 8 at the nodes
    buffer_slope: np.ndarray  # d lambda/ds at the nodes: 1/(L_t - L_h) inside the buffer, else 0, 1/m
    weights_by_type: tuple[np.ndarray, np.ndarray, np.ndarray]  # weights of dorsal, twist, lateral nodes, m

    @classmethod
    def build(cls, centers: np.ndarray, half_width: float, breaks: tuple[float, float],
              joint_types: np.ndarray, buffer_panels: int = 1, points: tuple[int, int] = (8, 8),
              shared: bool = False) -> _Quadrature:
        """Nodes per joint segment, split at ``breaks`` (L_h, L_t), ``points`` per panel (outside, inside the buffer).

        A piece inside the buffer [L_h, L_t] is split into
        ``ceil(buffer_panels * length / (L_t - L_h))`` equal panels. With ``shared``, the
        pieces are the cells between all segment ends and breaks together, so that the
        joints whose segments overlap use the same nodes on their common cells (a node
        then appears once per joint, with the same position). What does not depend on the
        phases (lambda(s), its slope, the weights split by the type of the owning joint,
        ``joint_types``) is computed here once.
        """
        rules = [np.polynomial.legendre.leggauss(k) for k in points]
        lo_b, hi_b = min(breaks), max(breaks)

        def panel_rule(lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
            inside = lo >= lo_b - 1e-12 and hi <= hi_b + 1e-12
            panels = max(1, math.ceil(buffer_panels * (hi - lo) / (hi_b - lo_b) - 1e-9)) if inside else 1
            edges = np.linspace(lo, hi, panels + 1)
            x, w = rules[1 if inside else 0]
            half, mid = 0.5 * np.diff(edges)[:, None], 0.5 * (edges[1:] + edges[:-1])[:, None]
            return (half * x + mid).ravel(), (half * w).ravel()

        ends = np.concatenate([centers - half_width, centers + half_width])
        if shared:
            cuts = np.sort(np.concatenate([ends, [t for t in breaks if ends.min() < t < ends.max()]]))
            cuts = cuts[np.concatenate([[True], np.diff(cuts) > 1e-12])]  # ends that meet, to rounding
            cells = [(lo, hi, *panel_rule(lo, hi)) for lo, hi in itertools.pairwise(cuts)]
        nodes, weights, owner = [], [], []
        for i, c in enumerate(centers):
            a, b = c - half_width, c + half_width
            if shared:
                pieces = [(cn, cw) for lo, hi, cn, cw in cells if lo >= a - 1e-12 and hi <= b + 1e-12]
            else:
                cut = [a, *sorted(t for t in breaks if a < t < b), b]
                pieces = [panel_rule(lo, hi) for lo, hi in itertools.pairwise(cut)]
            for cn, cw in pieces:
                nodes.append(cn)
                weights.append(cw)
                owner.append(np.full(len(cn), i))
        all_nodes, all_weights, all_owner = np.concatenate(nodes), np.concatenate(weights), np.concatenate(owner)
        inside = (all_nodes >= lo_b) & (all_nodes < hi_b)
        node_type = joint_types[all_owner]
        dorsal, twist, lateral = (np.where(node_type == t, all_weights, 0.0) for t in ("dorsal", "twist", "lateral"))
        return cls(all_nodes, all_weights, all_owner, len(centers),
                   lam=np.clip((all_nodes - lo_b) / (hi_b - lo_b), 0.0, 1.0),
                   buffer_slope=np.where(inside, 1.0 / (hi_b - lo_b), 0.0),
                   weights_by_type=(dorsal, twist, lateral))

    def integrate(self, values: np.ndarray) -> np.ndarray:
        """Sum weighted node values per joint."""
        return np.bincount(self.owner, weights=values * self.weights, minlength=self.n_joints)


@dataclass
class _Kernel:
    """Eq. 6 and Eq. 11 at the nodes of one :class:`_Quadrature` as a few batched array operations.

    :func:`_shape_functions` costs about 40 array operations per step on a few hundred
    nodes: the step is bound by the number of calls, not by the arithmetic. Its terms
    regroup as follows (A = k_a, B = k_b, T = k_theta; s_p, c_p = sin, cos phi;
    s_u, c_u = sin, cos u). With the eight products of [s_p, c_p, s_u, c_u] by
    [s_u, c_u] (one broadcast multiply), one matrix product gives

        rho = B s_p c_u - A c_p s_u          (= r . d1, so r_e1 = rho / g)
        sigma = B s_p s_u + A c_p c_u        (= -r . d2)
        mu = A s_p c_u - B c_p s_u           (kappa_a = T mu / (g^3 |p|))
        g^2 = (T^2 + A^2) s_u^2 + (T^2 + B^2) c_u^2
        (A^2 - B^2) s_u c_u                  (= d1 . d2)

    and then, with 1/|p|^2 = 1 / (1 - r_e1^2),

        kappa_b = -(sigma + (d1 . d2) rho / g^2) / (g^2 |p|)            (6b)
        kappa_a = T mu / (g^3 |p|)                                      (6a)
        tau = T (r_e1 mu / (g^3 |p|^2) - phi'(s) / (g |p|^2))            (6c)

    A node serves every joint whose segment contains it (the adaptive rule's nodes are shared
    by the three overlapping joints, one of each type: see :meth:`_Quadrature.build`), so the
    kernel evaluates the three shape functions once at each distinct node. Eq. 11's per-joint
    sums, the constant factors (-1, T, the slope of lambda(s)), the weights and the twist
    compensation are one matrix ``weights`` applied to the stacked node values
    [kappa_b, kappa_a, the two parts of tau, C_twist].
    """

    nodes: np.ndarray  # distinct quadrature nodes, m
    cells: np.ndarray  # the nodes' cell positions in the arc-length look-up (UnrolledInverse.cell_position)
    lam2: np.ndarray  # (2 nodes,) lambda(s) at the nodes, twice (rows of phi and phi + pi/2)
    quarter: np.ndarray  # (2 nodes,) 0 on the first row, pi/2 on the second
    products: np.ndarray  # (5, 8): rho, sigma, mu, g^2, d1 . d2 from the eight products
    weights: np.ndarray  # (joints, 4 nodes + 1): Eq. 11 weights of the node values and of C_twist
    angles: np.ndarray  # (4, nodes) work array: phi, phi + pi/2, u, u + pi/2
    phases: np.ndarray  # (2 nodes,) its first two rows as one contiguous view
    values: np.ndarray  # (4 nodes + 1,) work array: the node values and C_twist

    @classmethod
    def build(cls, quad: _Quadrature, helix: HelixParams, twist_comp: np.ndarray,
              inverse: UnrolledInverse) -> _Kernel:
        """Everything that depends on the robot and the panel count only (``inverse``: the u look-up)."""
        a, b, t = helix.k_a, helix.k_b, helix.k_theta
        # columns: s_p s_u, s_p c_u, c_p s_u, c_p c_u, s_u s_u, s_u c_u, c_u s_u, c_u c_u
        products = np.array([
            [0.0, b, -a, 0.0, 0.0, 0.0, 0.0, 0.0],  # rho
            [b, 0.0, 0.0, a, 0.0, 0.0, 0.0, 0.0],  # sigma
            [0.0, a, -b, 0.0, 0.0, 0.0, 0.0, 0.0],  # mu
            [0.0, 0.0, 0.0, 0.0, t * t + a * a, 0.0, 0.0, t * t + b * b],  # g^2
            [0.0, 0.0, 0.0, 0.0, 0.0, a * a - b * b, 0.0, 0.0],  # d1 . d2
        ])
        nodes, first, index = np.unique(quad.nodes, return_index=True, return_inverse=True)
        n = len(nodes)
        w_dorsal, w_twist, w_lateral = quad.weights_by_type
        # node values: kappa_b / -1, kappa_a / T, the two parts of tau / T (the second per unit phi_t - phi_h)
        weights = np.zeros((quad.n_joints, 4 * n + 1))
        for block, w in enumerate((-w_dorsal, t * w_lateral, t * w_twist, -t * w_twist * quad.buffer_slope)):
            np.add.at(weights, (quad.owner, block * n + index), w)
        weights[:, -1] = twist_comp
        angles = np.empty((4, n))
        return cls(nodes=nodes, cells=inverse.cell_position(nodes), lam2=np.tile(quad.lam[first], 2),
                   quarter=np.repeat([0.0, 0.5 * np.pi], n), products=products, weights=weights,
                   angles=angles, phases=angles[:2].reshape(-1), values=np.empty(4 * n + 1))

    def integrate(self, sines: np.ndarray, difference: float, twist_cycles: int) -> np.ndarray:
        """Joint angles (Eq. 11 and Algorithm 1 line 11) from sin of :attr:`angles`, rad."""
        n = len(self.nodes)
        terms = self.products @ (sines[:, None, :] * sines[None, 2:, :]).reshape(8, n)
        rho, g2 = terms[0], terms[3]
        inv_g2 = 1.0 / g2
        inv_g = np.sqrt(inv_g2)
        r_e1 = rho * inv_g
        inv_p2 = 1.0 / (1.0 - r_e1 * r_e1)
        inv_p = np.sqrt(inv_p2)
        v = self.values
        kappa_b, kappa_a, tau_1, tau_2 = v[:n], v[n:2 * n], v[2 * n:3 * n], v[3 * n:-1]
        np.multiply((terms[4] * inv_g2 * rho + terms[1]) * inv_g2, inv_p, out=kappa_b)  # (6b) up to -1
        np.multiply(terms[2] * inv_g, inv_p, out=kappa_a)  # (6a) up to T
        kappa_a *= inv_g2
        np.multiply(kappa_a, r_e1, out=tau_1)  # (6c): the first part up to T
        tau_1 *= inv_p
        np.multiply(inv_g * inv_p2, difference, out=tau_2)  # (6c): the second part up to -T phi'(s)
        v[-1] = twist_cycles
        return self.weights @ v


@dataclass
class _Blend:
    delta: np.ndarray
    age: float = 0.0


@dataclass
class RollingState:
    """Algorithm 1's state, published by the gait node so it ends up in bags."""

    phi_h: float = 0.0  # rad, accumulated head phase
    phi_t: float = 0.0  # rad, accumulated tail phase
    wave_phase: float = 0.0  # rad, int omega_c dt
    twist_cycles: int = 0  # C_twist
    resets: int = 0  # phase resets so far
    amplitude: float = 0.0  # start-up shape envelope in [0, 1]
    time: float = 0.0  # s
    blends: list[_Blend] = field(default_factory=list)


class RollingVectorGait(Gait):
    """T-Snake rolling-vector sidewinding (003 Eq. 2-8, 11, Algorithm 1).

    Native command: (omega_h, omega_t, omega_c) in rad/s.

    Its twist mapping is the locomotive reduction to a differential-drive car
    (003 Eq. 9-10, :class:`~snake_core.gait.reduction.DifferentialDrive`).

    Args:
        robot: A ``tsnake`` robot description (joint order dorsal, twist, lateral).
        params: Gait parameters; defaults from ``robot.gaits.rolling``.
        reduction: Coefficients of the twist mapping; defaults from ``robot.gaits.reduction``.
    """

    command_names = ("omega_h", "omega_t", "omega_c")
    robot_kinds = ("tsnake",)
    mapping: DifferentialDrive

    def __init__(self, robot: RobotModel, params: RollingParams | None = None,
                 reduction: ReductionParams | None = None) -> None:
        if robot.kind != "tsnake":
            raise GaitError(f"rolling gait needs a tsnake robot, got kind {robot.kind!r}")
        super().__init__(robot)
        self.params = params or RollingParams.from_robot(robot)
        self.mapping = (reduction or ReductionParams.from_robot(robot)).mapping()
        self.helix = EllipticalHelix(self.params.helix)
        self.s_joints = robot.joint_arc_positions()
        self.module_length = robot.tsnake_body.module_length
        types = np.array([j.type for j in robot.joints])
        self._is_dorsal = types == "dorsal"
        self._is_twist = types == "twist"
        self._is_lateral = types == "lateral"
        lh, lt = self.params.head_end, self.params.tail_start
        self._types = types
        self._quads: dict[int, _Quadrature] = {}
        self._kernels: dict[int, _Kernel] = {}
        half = 0.5 * self.module_length
        lam = lambda x: np.clip((x - lh) / (lt - lh), 0.0, 1.0)  # noqa: E731
        # Twist compensation per unit of C_twist (module docstring): +2 pi (lambda(b) - lambda(a)).
        self._twist_comp = np.where(
            self._is_twist, _TWO_PI * (lam(self.s_joints + half) - lam(self.s_joints - half)), 0.0
        )
        # G(u) unrolled over the body's arc lengths, for the per-step look-up of theta(s, t) (Eq. 3).
        self._arc_table = self.helix.unrolled_table(float(self.s_joints.min()) - half,
                                                    float(self.s_joints.max()) + half)
        self._arc_inverse = UnrolledInverse(self._arc_table)  # the same look-up without a search per node
        self._period_length = self.helix.arc_of_phase_scalar(math.pi)
        self.state = RollingState()

    @classmethod
    def from_options(cls, robot: RobotModel, **options: Any) -> RollingVectorGait:
        """Build from keyword overrides of the YAML's ``gaits.rolling`` and ``gaits.reduction``.

        ``k``, ``d_prime``, ``omega_max`` and ``omega_c_ratio`` go to the reduction
        (:meth:`ReductionParams.from_robot`), the rest to :meth:`RollingParams.from_robot`.
        """
        reduction = {k: options.pop(k) for k in list(options) if k in _REDUCTION_OPTIONS}
        return cls(robot, RollingParams.from_robot(robot, **options), ReductionParams.from_robot(robot, **reduction))

    # ------------------------------------------------------------------ pure maps
    def _panels(self, phase_difference: float) -> int:
        """Buffer panels for a phase difference (rad): each turns the frame by at most ``_PANEL_PHASE`` rad."""
        if self.params.integration == "adaptive":
            return max(1, math.ceil(abs(phase_difference) / _PANEL_PHASE))
        return 1

    def _quadrature(self, phase_difference: float) -> _Quadrature:
        """Nodes for a phase difference (rad): panels of at most ``_PANEL_PHASE`` rad in the buffer.

        Built once per panel count and kept.
        """
        panels = self._panels(phase_difference)
        quad = self._quads.get(panels)
        if quad is None:
            p = self.params
            quad = _Quadrature.build(self.s_joints, 0.5 * self.module_length, (p.head_end, p.tail_start),
                                     self._types, panels, _QUAD_POINTS[p.integration],
                                     shared=p.integration == "adaptive")
            self._quads[panels] = quad
        return quad

    def _kernel(self, phase_difference: float) -> _Kernel:
        """The step's constant arrays for a phase difference (rad), built once per panel count."""
        panels = self._panels(phase_difference)
        kernel = self._kernels.get(panels)
        if kernel is None:
            kernel = _Kernel.build(self._quadrature(phase_difference), self.params.helix, self._twist_comp,
                                   self._arc_inverse)
            self._kernels[panels] = kernel
        return kernel

    def raw_angles(self, phi_h: float, phi_t: float, wave_phase: float, twist_cycles: int) -> np.ndarray:
        """Joint angles of Eq. 11 with Algorithm 1's compensation (line 11), rad.

        No blending or start-up envelope: the paper's map from phases to joints. The
        shape functions of :func:`_shape_functions` (Eq. 6) at the quadrature nodes,
        batched into a few array operations (see :class:`_Kernel`).
        """
        kernel = self._kernel(phi_h - phi_t)
        difference = phi_t - phi_h
        # u = k pi + G^-1(s + f) (Eq. 3, :meth:`EllipticalHelix.phase_at`); u -> u + k pi is
        # phi -> phi + k pi in every term of Eq. 6, so k pi goes to the (scalar) phase.
        big = self.helix.arc_of_phase_scalar(wave_phase)
        k = math.floor(big / self._period_length)
        # less whole turns: phi0 + lambda (phi_t - phi_h) stays within pi + |phi_t - phi_h| / 2 of 0 (cheaper sin)
        phi0 = math.remainder(phi_h + k * math.pi + 0.5 * difference, _TWO_PI) - 0.5 * difference
        angles = kernel.angles
        # rows: phi, phi + pi/2, u, u + pi/2, so that one sin gives sin/cos of both (Eq. 7-8, Eq. 3)
        self._arc_inverse.pair_into(kernel.nodes, kernel.cells, big - k * self._period_length, angles[2:])
        phases = kernel.phases  # contiguous: one-dimensional operations are the cheapest
        np.multiply(kernel.lam2, difference, out=phases)
        np.add(phases, kernel.quarter, out=phases)
        np.add(phases, phi0, out=phases)
        return kernel.integrate(np.sin(angles), difference, twist_cycles)

    # ------------------------------------------------------------------ Gait API
    def reset(self) -> None:
        """Back to Algorithm 1's initial state (phases 0, C_twist 0, straight body)."""
        self.state = RollingState()

    def step(self, dt: float, command: GaitCommand) -> np.ndarray:
        """Advance one control step (Algorithm 1 STEP-1 to STEP-4) and return joint targets.

        Args:
            dt: Time step, s.
            command: (omega_h, omega_t, omega_c), rad/s.

        Returns:
            Joint targets in robot joint order, rad.
        """
        omega_h, omega_t, omega_c = self.check_command(command)
        st, p = self.state, self.params
        st.time += dt
        # STEP-1: phase update and resetting (Alg. 1 lines 3-6).
        st.phi_h += omega_h * dt
        st.phi_t += omega_t * dt
        st.wave_phase += omega_c * dt
        moving = omega_h != 0.0 or omega_t != 0.0 or omega_c != 0.0
        if moving or st.amplitude > 0.0:
            st.amplitude = 1.0 if p.ramp_time == 0 else min(1.0, st.amplitude + dt / p.ramp_time)
        diff = abs(st.phi_h - st.phi_t)
        wrap = p.wrap_when_translating and omega_h == omega_t != 0.0 and diff > np.pi
        before = None  # joint angles just before a reset, when its jump is to be blended out
        if p.phase_reset and (diff >= min(p.reset_threshold, _TWO_PI) or wrap):
            sgn = 1 if st.phi_h > st.phi_t else -1
            if p.reset_blend_time > 0:
                before = self.raw_angles(st.phi_h, st.phi_t, st.wave_phase, st.twist_cycles)
            st.phi_h -= _TWO_PI * sgn
            st.twist_cycles += sgn
            st.resets += 1
        # STEP-2..4: frames, shape functions, joint angles, compensation.
        q = self.raw_angles(st.phi_h, st.phi_t, st.wave_phase, st.twist_cycles)
        if before is not None:
            st.blends.append(_Blend(delta=before - q))
        if st.blends:
            for blend in st.blends:
                blend.age += dt
                weight = 0.5 * (1.0 + math.cos(math.pi * min(blend.age / p.reset_blend_time, 1.0)))
                q = q + weight * blend.delta
            st.blends = [b for b in st.blends if b.age < p.reset_blend_time]
        return q if st.amplitude == 1.0 else st.amplitude * q  # q is a new array either way

    def state_dict(self) -> dict[str, float]:
        """Phases, twist cycle counter and mode, for logging and the gait-state topic."""
        st = self.state
        return {
            "phi_h": st.phi_h,
            "phi_t": st.phi_t,
            "phase_difference": st.phi_h - st.phi_t,
            "wave_phase": st.wave_phase,
            "twist_cycles": float(st.twist_cycles),
            "resets": float(st.resets),
            "amplitude": st.amplitude,
            "time": st.time,
        }

    def backbone(self, n: int = 200) -> dict[str, np.ndarray]:
        """The current continuous backbone (Eq. 2) and frames, for figures."""
        st, p = self.state, self.params
        s = np.linspace(0.0, self.robot.length, n)
        phi, dphi = phase_along_body(s, st.phi_h, st.phi_t, p.head_end, p.tail_start)
        out = frames_and_shape(self.helix, s, st.wave_phase, phi, dphi)
        out["s"] = s
        out["points"] = self.helix.point(self.helix.theta_of_s(s, st.wave_phase), st.wave_phase)
        return out


def body_shape_error(gait: RollingVectorGait, q: np.ndarray, wave_phase: float) -> float:
    """How far the discrete robot is from the backbone it approximates, m (RMS).

    Forward kinematics of the joint angles ``q`` (:func:`snake_core.kinematics.chain_points`:
    head end, every joint, tail end) against the backbone of Eq. 2-3 at the same arc
    lengths, after the best rigid alignment of the two point sets (Kabsch, rotation
    and translation), since a joint-angle output fixes the shape, not the pose. The
    backbone does not depend on the rolling phases (they only turn the frames), so the
    error measures how well Eq. 11's joint angles reproduce one curve.

    Args:
        gait: The gait (robot geometry and helix).
        q: Joint angles, rad, robot joint order.
        wave_phase: omega_c t of the backbone, rad.

    Returns:
        The RMS distance over the points, m.
    """
    from scipy.spatial.transform import Rotation

    from snake_core.kinematics import chain_points

    robot = gait.robot
    points = chain_points(robot, np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]), q)
    s = np.concatenate([[0.0], gait.s_joints, [robot.length]])
    ref = gait.helix.point(gait.helix.theta_of_s(s, wave_phase), wave_phase)
    a, b = points - points.mean(axis=0), ref - ref.mean(axis=0)
    rot, _ = Rotation.align_vectors(b, a)
    return float(np.sqrt(np.mean(np.sum((rot.apply(a) - b) ** 2, axis=1))))


@dataclass(frozen=True)
class ShapeErrorRun:
    """Body-shape and integration errors along a run of the gait (one row per sample).

    Attributes:
        t: Time, s.
        phase_difference: Accumulated phi_h - phi_t including the resets (2 pi per twist cycle), rad.
        shape_error: :func:`body_shape_error` of the output, m.
        integration_error: Largest |q_fixed - q_exact| over the joints of the raw angles at
            the current phases, rad (fixed 8-point rule vs the adaptive panels).
    """

    t: np.ndarray
    phase_difference: np.ndarray
    shape_error: np.ndarray
    integration_error: np.ndarray


def shape_error_run(robot: RobotModel, command: GaitCommand, duration: float, dt: float = 0.02,
                    phase_reset: bool = True, integration: str = "adaptive", every: int = 5) -> ShapeErrorRun:
    """Run the gait offline and measure its body-shape error (003 Eq. 11 vs Eq. 2).

    Args:
        robot: A T-Snake description.
        command: (omega_h, omega_t, omega_c), rad/s, held for the whole run.
        duration: s.
        dt: Control step, s.
        phase_reset: Algorithm 1's phase resetting.
        integration: ``adaptive`` or ``fixed`` (see :class:`RollingParams`).
        every: Sample every this many steps.

    Returns:
        The :class:`ShapeErrorRun` (no start-up ramp: the full shape from the first step).
    """
    gait = RollingVectorGait(robot, RollingParams.from_robot(robot, phase_reset=phase_reset, ramp_time=0.0,
                                                           integration=integration))
    other = RollingVectorGait(robot, RollingParams.from_robot(
        robot, integration="fixed" if integration == "adaptive" else "adaptive"))
    rows: list[tuple[float, float, float, float]] = []
    for k in range(round(duration / dt)):
        q = gait.step(dt, command)
        if k % every:
            continue
        st = gait.state
        raw = gait.raw_angles(st.phi_h, st.phi_t, st.wave_phase, st.twist_cycles)
        raw_other = other.raw_angles(st.phi_h, st.phi_t, st.wave_phase, st.twist_cycles)
        rows.append((st.time, st.phi_h - st.phi_t + _TWO_PI * st.twist_cycles,
                     body_shape_error(gait, q, st.wave_phase), float(np.abs(raw - raw_other).max())))
    arr = np.asarray(rows).reshape(-1, 4)
    return ShapeErrorRun(t=arr[:, 0], phase_difference=arr[:, 1], shape_error=arr[:, 2],
                         integration_error=arr[:, 3])
