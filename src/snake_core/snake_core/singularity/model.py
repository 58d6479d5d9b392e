"""Planar n-link snake with passive wheels: the paper's kinematics and Jacobians (002).

Conventions (002 Sec. 2-3, Fig. 2, Tables 1-2), kept exactly:

- Links are numbered 1..n from the head (1-based everywhere in the public API).
- Link i carries its passive wheel at ``d_i`` from its front joint (for link 1, its
  front end) and ``l_i`` from its rear joint; ``L_i = d_i + l_i``.
- ``theta_i`` is the absolute angle of link i, ``phi_i = theta_i - theta_(i-1)``
  (i = 2..n) the relative angle of the joint in front of link i (Notation 3). A
  configuration is the vector ``(phi_2, ..., phi_n)``, rad.
- The wheel of link i sits at ``p_i = p_(i-1) + l_(i-1) e_(i-1) + d_i e_i`` with
  ``e_i = (cos theta_i, sin theta_i)`` (the relation above Eq. (1)). Everything
  geometric is expressed in the *first link's frame*: origin at the wheel of
  link 1, x axis along ``e_1`` (theta_1 = 0), y axis along the wheel axis of link 1.
- The quasi-velocity of link i is ``v_i = (omega_i, v_xi, v_yi)`` at its wheel in
  its own frame; a non side-slipping link has ``v_yi = 0``.

A link "side-slips" when its wheel does not constrain it (lifted, or wheel
retracted). ``slipping`` is a collection of 1-based link numbers.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from snake_core.errors import SnakeCoreError


class SingularityInputError(SnakeCoreError, ValueError):
    """Bad link parameters, angles or side-slipping set; the message names the field."""


@dataclass(frozen=True)
class SnakeParams:
    """Validated link parameters of an n-link wheeled snake.

    Attributes:
        d: d_i per link, m (wheel from the front joint), shape (n,).
        ell: l_i per link, m (wheel to the rear joint), shape (n,).
    """

    d: np.ndarray
    ell: np.ndarray

    @property
    def n(self) -> int:
        """Number of links."""
        return int(self.d.shape[0])

    @property
    def link_lengths(self) -> np.ndarray:
        """L_i = d_i + l_i, m (Table 1)."""
        return self.d + self.ell

    @property
    def length_scale(self) -> float:
        """Mean link length, m: the scale that makes the margin unit-free."""
        return float(np.mean(self.link_lengths))


def make_params(n: int, d: float | Sequence[float] | np.ndarray,
                ell: float | Sequence[float] | np.ndarray) -> SnakeParams:
    """Build per-link parameters from one value for all links or one value per link.

    Args:
        n: Number of links (>= 2).
        d: d_i, m: a scalar or n values.
        ell: l_i, m: a scalar or n values.

    Returns:
        The validated parameters.

    Raises:
        SingularityInputError: Wrong count, non-finite values, ``d_i <= 0`` for a link
            behind the head (the kinematics of Eq. (3) divide by d_i), ``l_i < 0``
            or ``d_1 < 0``.
    """
    if n < 2:
        raise SingularityInputError(f"n: a snake needs at least 2 links, got {n}")
    arrays = []
    for name, value in (("d", d), ("l", ell)):
        arr = np.atleast_1d(np.asarray(value, dtype=float))
        if arr.shape == (1,):
            arr = np.full(n, float(arr[0]))
        if arr.shape != (n,):
            raise SingularityInputError(f"{name}: expected 1 or {n} values, got {arr.size}")
        if not np.all(np.isfinite(arr)):
            raise SingularityInputError(f"{name}: values must be finite")
        arrays.append(arr)
    d_arr, l_arr = arrays
    if d_arr[0] < 0.0 or np.any(d_arr[1:] <= 0.0):
        raise SingularityInputError("d: d_1 must be >= 0 and d_i > 0 for i >= 2 (Eq. (3) divides by d_i)")
    if np.any(l_arr < 0.0):
        raise SingularityInputError("l: l_i must be >= 0")
    return SnakeParams(d=d_arr, ell=l_arr)


def check_angles(params: SnakeParams, phi: Sequence[float] | np.ndarray) -> np.ndarray:
    """Validate the relative angles phi_2..phi_n, rad; returns them as an array."""
    arr = np.asarray(phi, dtype=float).reshape(-1)
    if arr.shape != (params.n - 1,):
        raise SingularityInputError(
            f"angles: a {params.n}-link snake has {params.n - 1} relative angles phi_2..phi_n, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise SingularityInputError("angles: values must be finite")
    return arr


def check_slipping(n: int, slipping: Iterable[int] | None) -> frozenset[int]:
    """Validate a set of 1-based side-slipping link numbers."""
    out = set()
    for s in slipping or ():
        k = int(s)
        if k != s or not 1 <= k <= n:
            raise SingularityInputError(f"slipping: link numbers are 1..{n}, got {s}")
        out.add(k)
    return frozenset(out)


def grounded_links(n: int, slipping: frozenset[int]) -> list[int]:
    """The non side-slipping links G = (g_1, ..., g_eta), 1-based, increasing (Sec. 3.3)."""
    return [i for i in range(1, n + 1) if i not in slipping]


# --- kinematics around one joint, Eq. (4)-(7) ------------------------------------


def joint_matrix(phi: float, l_prev: float, d: float, front_slips: bool, hind_slips: bool) -> np.ndarray:
    """The 3x3 map v_(i-1) -> v_i around joint i with phi_i frozen, Eq. (4)-(7) of 002.

    Args:
        phi: phi_i, rad.
        l_prev: l_(i-1), m.
        d: d_i, m.
        front_slips: link i-1 side-slips.
        hind_slips: link i side-slips.

    Returns:
        (a) both grounded: A'_i of Eq. (4); (b) only the hind link slips:
        A''_hi = A'_hi I^(2x3) of Eq. (5); (c) both slip: A'_si of Eq. (6);
        (d) only the front link slips: A''_fi of Eq. (7) (the ``1/d_1`` printed in
        its (1,3) entry is read as ``1/d_i``, as the derivation requires). The
        ``Delta_i phi_dot_i`` terms of Eq. (5)-(6) vanish because phi_i is frozen.
    """
    c, s = math.cos(phi), math.sin(phi)
    if not front_slips and not hind_slips:  # Eq. (4)
        return np.array([[-l_prev / d * c, s / d, 0.0], [l_prev * s, c, 0.0], [0.0, 0.0, 0.0]])
    if not front_slips and hind_slips:  # Eq. (5)
        return np.array([[1.0, 0.0, 0.0], [l_prev * s, c, 0.0], [l_prev * c + d, -s, 0.0]])
    if front_slips and hind_slips:  # Eq. (6)
        return np.array([[1.0, 0.0, 0.0], [l_prev * s, c, s], [l_prev * c + d, -s, c]])
    return np.array([[-l_prev / d * c, s / d, -c / d], [l_prev * s, c, s], [0.0, 0.0, 0.0]])  # Eq. (7)


def b_matrices(params: SnakeParams, phi: np.ndarray, slipping: frozenset[int]) -> list[np.ndarray]:
    """B_1..B_eta of Eq. (10): the 2x2 maps (omega, v_x) of g_(k-1) -> g_k.

    B_1 = I (the reference is the first non side-slipping link g_1; the paper's
    A'_1 = I^(3x2)); B_k = A_k if g_k - g_(k-1) = 1, else
    A'_f,g_k (prod A'_s) A'_h,g_(k-1)+1 (Eq. (10)), built as I^(2x3) (prod of
    Eq. (4)-(7)) I^(3x2).
    """
    g = grounded_links(params.n, slipping)
    out = [np.eye(2)] if g else []
    for zeta, iota in itertools.pairwise(g):
        m = np.eye(3)
        for i in range(zeta + 1, iota + 1):
            m = joint_matrix(phi[i - 2], params.ell[i - 2], params.d[i - 1], (i - 1) in slipping, i in slipping) @ m
        out.append(m[:2, :2])
    return out


def jacobian_s(params: SnakeParams, phi: np.ndarray, slipping: frozenset[int] = frozenset()) -> np.ndarray:
    """J_s of Eq. (10) (J_g of Eq. (8) when nothing slips), shape (eta-1, 2).

    Row k is e_1^T (B_(k+1) - I) prod_(m<=k) B_m: the joint rate of the (k+1)-th
    non side-slipping link, for the reference input q = (omega, v_x) of g_1 (rad/s,
    m/s) with every side-slipping joint frozen (phi_dot_s = 0 in Eq. (9)).
    """
    bs = b_matrices(params, phi, slipping)
    rows = []
    prod = np.eye(2)
    for k in range(1, len(bs)):
        prod_prev = bs[k - 1] @ prod
        rows.append((bs[k][0] - np.array([1.0, 0.0])) @ prod_prev)
        prod = prod_prev
    return np.array(rows).reshape(-1, 2)


def jacobian_g(params: SnakeParams, phi: np.ndarray) -> np.ndarray:
    """J_g of Eq. (8): no link side-slips, shape (n-1, 2)."""
    return jacobian_s(params, phi, frozenset())


def normalised_jacobian(params: SnakeParams, jac: np.ndarray) -> np.ndarray:
    """J diag(1, L_bar): the input v_x measured in mean link lengths per second.

    Column 1 of J_s is unit-free and column 2 is 1/m; scaling the second column by
    the mean link length L_bar makes J unit-free and invariant to a common scaling of
    all lengths, so its singular values can be compared.
    """
    return jac * np.array([1.0, params.length_scale])


def svd_margin(params: SnakeParams, jac: np.ndarray) -> tuple[np.ndarray, float]:
    """Singular values of the normalised J_s and the margin sigma_2 / sigma_1 in [0, 1].

    The margin is 0 exactly when rank J_s < 2 (Theorems 1 and 3), i.e. at a
    singular configuration, and 1 for a perfectly conditioned Jacobian.
    """
    sv = np.zeros(2)
    if jac.shape[0]:
        s = np.linalg.svd(normalised_jacobian(params, jac), compute_uv=False)
        sv[: s.size] = s
    margin = float(sv[1] / sv[0]) if sv[0] > 0.0 else 0.0
    return sv, margin


# --- geometry: wheels, joints and wheel axes ---------------------------------------


@dataclass(frozen=True)
class Geometry:
    """Wheel and joint positions in the first link's frame, m.

    Attributes:
        theta: Absolute link angles theta_1..theta_n, rad (theta_1 = 0).
        wheels: Wheel positions p_i, shape (n, 2).
        front_joints: Front joint of each link (front end for link 1), shape (n, 2).
        rear_joints: Rear joint of each link (rear end for link n), shape (n, 2).
    """

    theta: np.ndarray
    wheels: np.ndarray
    front_joints: np.ndarray
    rear_joints: np.ndarray

    def axis_lines(self) -> np.ndarray:
        """Wheel axis of every link as [cos t, sin t, c]: points x with e_i . x = c_i."""
        e = np.stack([np.cos(self.theta), np.sin(self.theta)], axis=1)
        return np.column_stack([e, np.einsum("ij,ij->i", e, self.wheels)])


def geometry(params: SnakeParams, phi: np.ndarray) -> Geometry:
    """Forward geometry of the chain (the position relation above Eq. (1) of 002)."""
    theta = np.concatenate([[0.0], np.cumsum(phi)])
    e = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    steps = params.ell[:-1, None] * e[:-1] + params.d[1:, None] * e[1:]
    wheels = np.vstack([[0.0, 0.0], np.cumsum(steps, axis=0)])
    front = wheels - params.d[:, None] * e
    rear = wheels + params.ell[:, None] * e
    return Geometry(theta=theta, wheels=wheels, front_joints=front, rear_joints=rear)


def line_matrix(params: SnakeParams, geo: Geometry, links: Sequence[int]) -> np.ndarray:
    """Homogeneous line coordinates of the wheel axes of ``links`` (1-based), unit-free.

    Row k is [cos theta, sin theta, -c / L_bar], so a point (x, y) lies on the axis
    when the row times (x / L_bar, y / L_bar, 1) is 0. The matrix has rank < 3
    exactly when the axes meet at one point or are all parallel (Theorems 2 and 4).
    """
    lines = geo.axis_lines()[[i - 1 for i in links]]
    return np.column_stack([lines[:, :2], -lines[:, 2] / params.length_scale])


@dataclass(frozen=True)
class AxesMeeting:
    """Where the wheel axes of the non side-slipping links meet.

    Attributes:
        parallel: All axes (nearly) parallel: they meet at infinity.
        point: Least-squares meeting point in the first link's frame, m (None if parallel).
        residual: Geometric margin sigma_3 / sigma_1 of the unit-free line matrix
            (0 when the axes meet at one point or are all parallel).
        spread: RMS distance of the axes from ``point``, m (None if parallel).
    """

    parallel: bool
    point: tuple[float, float] | None
    residual: float
    spread: float | None


_PARALLEL_DET = 1e-12  # det of the axis-direction Gram matrix / eta^2 below which axes are parallel


def axes_meeting(params: SnakeParams, geo: Geometry, links: Sequence[int]) -> AxesMeeting:
    """Meeting point of the wheel axes of ``links`` (Theorems 2 and 4 of 002).

    The axes meet at one point or are all parallel exactly when the unit-free line
    matrix (:func:`line_matrix`) has rank < 3; ``residual`` is its sigma_3 / sigma_1.
    The reported point is the least-squares point (smallest sum of squared distances
    to the axes), exact when they meet. The axes count as parallel when the Gram
    determinant of their directions, sum over pairs of sin^2(theta_j - theta_k), is
    below 1e-12 eta^2.
    """
    eta = len(links)
    if eta == 0:
        return AxesMeeting(parallel=False, point=None, residual=0.0, spread=None)
    s = np.linalg.svd(line_matrix(params, geo, links), compute_uv=False)
    s_full = np.zeros(3)
    s_full[: s.size] = s
    residual = float(s_full[2] / s_full[0]) if s_full[0] > 0 else 0.0
    lines = geo.axis_lines()[[i - 1 for i in links]]
    e, c = lines[:, :2], lines[:, 2]
    gram = e.T @ e
    gdet = float(np.linalg.det(gram))
    if eta < 2 or gdet <= _PARALLEL_DET * eta * eta:
        return AxesMeeting(parallel=eta >= 2, point=None, residual=residual, spread=None)
    pt = np.linalg.solve(gram, e.T @ c)
    spread = float(np.sqrt(np.mean((e @ pt - c) ** 2)))
    return AxesMeeting(parallel=False, point=(float(pt[0]), float(pt[1])), residual=residual, spread=spread)


# --- pairwise conditions, Eq. (11) and (15); degenerate cases of the lemmas --------


def eq11(params: SnakeParams, phi: np.ndarray, i: int) -> float:
    """Left side of Eq. (11) of 002 for the triple of links (i-1, i, i+1), 2 <= i <= n-1.

    (d_i/l_(i-1) cos phi_i + 1) sin(phi_(i+1))/d_(i+1)
    - sin(phi_i)/l_(i-1) (l_i/d_(i+1) cos phi_(i+1) + 1); needs l_(i-1) > 0.
    """
    d, ell = params.d, params.ell
    p_i, p_n = phi[i - 2], phi[i - 1]
    return ((d[i - 1] / ell[i - 2] * math.cos(p_i) + 1.0) * math.sin(p_n) / d[i]
            - math.sin(p_i) / ell[i - 2] * (ell[i - 1] / d[i] * math.cos(p_n) + 1.0))


def eq15(params: SnakeParams, geo: Geometry, zeta: int, iota: int, kappa: int) -> float:
    """Left side of Eq. (15) of 002 for consecutive non side-slipping links zeta < iota < kappa.

    With ^j phi_k = theta_j - theta_k it is
    (d_iota cos ^iota phi_zeta + sum_(m=zeta+1)^(iota-1) L_m cos(theta_m - theta_zeta) + l_zeta)
    sin(^kappa phi_iota) / (l_zeta d_kappa)
    - sin(^iota phi_zeta) (l_iota cos ^kappa phi_iota + sum_(m=iota+1)^(kappa-1) L_m cos(theta_kappa - theta_m)
    + d_kappa) / (l_zeta d_kappa),
    i.e. Eq. (17): the intercepts b_zeta and b_kappa of the two axes on the axis of
    link iota coincide (the printed subscripts of Eq. (15) are read this way; it
    reduces to Eq. (11) when no link between them slips). Needs l_zeta > 0.
    """
    d, ell, big_l, th = params.d, params.ell, params.link_lengths, geo.theta
    z, i, k = zeta - 1, iota - 1, kappa - 1
    front = d[i] * math.cos(th[i] - th[z]) + ell[z]
    front += sum(big_l[m] * math.cos(th[m] - th[z]) for m in range(z + 1, i))
    rear = ell[i] * math.cos(th[k] - th[i]) + d[k]
    rear += sum(big_l[m] * math.cos(th[k] - th[m]) for m in range(i + 1, k))
    return (front * math.sin(th[k] - th[i]) - math.sin(th[i] - th[z]) * rear) / (ell[z] * d[k])


_DEGENERATE_TOL = 1e-6  # relative (to L_bar) distance / sine below which a lemma case is declared


def degenerate_cases(params: SnakeParams, geo: Geometry, slipping: frozenset[int],
                     tol: float = _DEGENERATE_TOL) -> list[str]:
    """Names of the cases the paper's lemmas exclude from the pairwise test.

    - ``fewer_than_three_wheels:...``: eta <= 2, J_s has at most one row, rank < 2
      always (and two lines always meet or are parallel).
    - ``overlapping_axes:zeta-iota`` (Lemma 1; Lemma 3 with side-slipping links):
      e_1^T (B_i - I) = 0, the axes of consecutive non side-slipping links coincide.
    - ``b_singular:zeta-iota`` (Lemma 2): the front joint of link iota lies on the
      wheel axis of link zeta, so B_i is singular (l_(i-1) = 0 without slipping links).
    """
    g = grounded_links(params.n, slipping)
    out: list[str] = []
    scale = params.length_scale
    if len(g) <= 2:
        out.append(f"fewer_than_three_wheels:{len(g)}")
    lines = geo.axis_lines()
    for zeta, iota in itertools.pairwise(g):
        ez = lines[zeta - 1, :2]
        joint_off = float(ez @ geo.front_joints[iota - 1] - lines[zeta - 1, 2])
        if abs(joint_off) <= tol * scale:
            out.append(f"b_singular:{zeta}-{iota}")
        sin_rel = math.sin(geo.theta[iota - 1] - geo.theta[zeta - 1])
        wheel_off = float(ez @ geo.wheels[iota - 1] - lines[zeta - 1, 2])
        if abs(sin_rel) <= tol and abs(wheel_off) <= tol * scale:
            out.append(f"overlapping_axes:{zeta}-{iota}")
    return out


def pairwise_values(params: SnakeParams, geo: Geometry, slipping: frozenset[int]) -> list[float | None]:
    """Eq. (15) (Eq. (11) with no slipping link) for every consecutive grounded triple.

    None where l_zeta = 0 (the equation divides by it; Lemma 2's case).
    """
    g = grounded_links(params.n, slipping)
    out: list[float | None] = []
    for zeta, iota, kappa in zip(g[:-2], g[1:-1], g[2:], strict=False):
        out.append(None if params.ell[zeta - 1] <= 0.0 else eq15(params, geo, zeta, iota, kappa))
    return out


# --- one evaluation -----------------------------------------------------------------

DEFAULT_TOL = 5e-3
"""Default margin below which a configuration is reported singular (unit-free).

The paper prints angles to 2-3 decimals; a configuration rounded that way from an
exact singularity has a margin of order 1e-3, a regular one of order 0.1-1."""


@dataclass(frozen=True)
class SingularityReport:
    """Everything one evaluation says about a configuration.

    Attributes:
        n: Number of links.
        grounded: Non side-slipping links g_1..g_eta (1-based).
        singular: margin <= tol (the Jacobian rank test, Theorems 1 and 3).
        margin: sigma_2 / sigma_1 of the normalised J_s, in [0, 1]; 0 at a singularity.
        singular_values: The two singular values of the normalised J_s.
        rank: Numerical rank of J_s (0, 1 or 2) at ``tol``.
        geometric_singular: The axes meet at one point or are all parallel (residual <= tol).
        meeting: The axes' meeting point (Theorems 2 and 4).
        pairwise: Eq. (11)/(15) per consecutive grounded triple (None where undefined).
        degenerate: Lemma cases found (see :func:`degenerate_cases`).
        description: One line for humans: the nearest-singularity description.
        tol: The tolerance used.
    """

    n: int
    grounded: tuple[int, ...]
    singular: bool
    margin: float
    singular_values: tuple[float, float]
    rank: int
    geometric_singular: bool
    meeting: AxesMeeting
    pairwise: tuple[float | None, ...]
    degenerate: tuple[str, ...]
    description: str
    tol: float

    def as_dict(self) -> dict[str, object]:
        """JSON-ready dictionary (``meeting_point`` is null when the axes are parallel)."""
        return {
            "n_links": self.n,
            "grounded_links": list(self.grounded),
            "slipping_links": [i for i in range(1, self.n + 1) if i not in self.grounded],
            "singular": self.singular,
            "margin": self.margin,
            "singular_values": list(self.singular_values),
            "rank": self.rank,
            "geometric_singular": self.geometric_singular,
            "geometric_residual": self.meeting.residual,
            "parallel": self.meeting.parallel,
            "meeting_point": list(self.meeting.point) if self.meeting.point is not None else None,
            "meeting_spread_m": self.meeting.spread,
            "pairwise_eq15": list(self.pairwise),
            "degenerate": list(self.degenerate),
            "description": self.description,
            "tol": self.tol,
        }


def rank_from_singular_values(sv: Sequence[float] | np.ndarray, tol: float) -> int:
    """Numerical rank of J_s: sigma_1 > 0 counts one, sigma_2 > tol sigma_1 a second."""
    if sv[0] <= 1e-12:
        return 0
    return 1 if sv[1] <= tol * sv[0] else 2


def describe(singular: bool, margin: float, meeting: AxesMeeting, degenerate: Sequence[str]) -> str:
    """A one-line description of the nearest singularity."""
    if meeting.parallel:
        where = "wheel axes parallel"
    elif meeting.point is not None:
        where = (f"wheel axes nearest to meeting at ({meeting.point[0]:.3f}, {meeting.point[1]:.3f}) m, "
                 f"spread {meeting.spread:.3g} m")
    else:
        where = "no wheel axes"
    head = "singular" if singular else f"regular, margin {margin:.3g}"
    extra = f"; degenerate: {', '.join(degenerate)}" if degenerate else ""
    return f"{head}: {where}{extra}"


def evaluate(params: SnakeParams, phi: Sequence[float] | np.ndarray, slipping: Iterable[int] | None = None,
             tol: float = DEFAULT_TOL) -> SingularityReport:
    """Full evaluation of one configuration with the paper's matrices (reference path).

    Args:
        params: Link parameters.
        phi: Relative angles phi_2..phi_n, rad.
        slipping: 1-based side-slipping links.
        tol: Margin at or below which the configuration counts as singular.

    Returns:
        The report: Jacobian rank test (Eq. (8)-(10)), geometric criterion
        (Theorems 2/4), pairwise conditions (Eq. (11)/(15)) and lemma cases.
    """
    phi_arr = check_angles(params, phi)
    slip = check_slipping(params.n, slipping)
    g = grounded_links(params.n, slip)
    jac = jacobian_s(params, phi_arr, slip)
    sv, margin = svd_margin(params, jac)
    geo = geometry(params, phi_arr)
    meeting = axes_meeting(params, geo, g)
    degenerate = degenerate_cases(params, geo, slip)
    singular = margin <= tol
    return SingularityReport(
        n=params.n, grounded=tuple(g), singular=singular, margin=margin,
        singular_values=(float(sv[0]), float(sv[1])), rank=rank_from_singular_values(sv, tol),
        geometric_singular=meeting.residual <= tol or len(g) <= 2, meeting=meeting,
        pairwise=tuple(pairwise_values(params, geo, slip)), degenerate=tuple(degenerate),
        description=describe(singular, margin, meeting, degenerate), tol=tol)
