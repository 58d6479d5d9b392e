"""Elliptical-helix backbone of sidewinding and its arc-length map (003 Eq. 2-3).

The curve (003 Eq. 2), with u = theta + omega_c t the wave phase::

    c(theta, t) = [k_theta theta, k_b sin(u), k_a cos(u)]

has speed g(u) = |dc/dtheta| = sqrt(k_theta^2 + k_b^2 cos^2 u + k_a^2 sin^2 u), a
function of u alone with period pi. The arc length (003 Eq. 3) is therefore
s(theta, t) = G(theta + omega_c t) - G(omega_c t) with G(u) = int_0^u g. G is tabulated
once on one period (a 4-point Gauss-Legendre rule on each table interval, summed) and
extended by periodicity
(G(u + pi) = G(u) + G(pi)). Its inverse u = G^-1(x) is tabulated on equally spaced x
(each value solved by Newton's method on the quadrature) and interpolated linearly, so
theta(s, t) is a table look-up whose interval is found by one division.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from snake_core.errors import GaitError

_TABLE_POINTS = 4097  # samples of G and of its inverse over one period; inverse interpolation error ~4e-9 rad (003)
_TABLE_GAUSS_POINTS = 4  # Gauss-Legendre points per table interval (error ~1e-17 m on an interval of pi/4096 rad)
_TWO_PI = 2.0 * math.pi


@dataclass(frozen=True)
class HelixParams:
    """Shape of the elliptical helix (003 Eq. 2).

    Attributes:
        k_a: Vertical amplitude, m.
        k_b: Horizontal amplitude, m.
        k_theta: Pitch, m per rad of theta (wavelength 2 pi k_theta).
    """

    k_a: float
    k_b: float
    k_theta: float

    def __post_init__(self) -> None:
        for name in ("k_a", "k_b", "k_theta"):
            value = getattr(self, name)
            if not np.isfinite(value) or value < 0:
                raise GaitError(f"helix {name} must be finite and >= 0, got {value!r}")
        if self.k_theta <= 0:
            raise GaitError(f"helix k_theta must be positive, got {self.k_theta!r}")


def _cumulative_integral(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """G(x_k) = int_{x_0}^{x_k} f, by a Gauss-Legendre rule on every interval [x_k, x_k+1] (003 Eq. 3).

    Args:
        f: Smooth integrand, vectorised.
        x: Increasing abscissae.

    Returns:
        The primitive at ``x`` (0 at ``x[0]``), same length as ``x``.
    """
    nodes, weights = np.polynomial.legendre.leggauss(_TABLE_GAUSS_POINTS)
    half = 0.5 * np.diff(x)[:, None]
    mid = 0.5 * (x[1:] + x[:-1])[:, None]
    pieces = (half * f(mid + half * nodes) * weights).sum(axis=1)
    return np.concatenate([[0.0], np.cumsum(pieces)])


class EllipticalHelix:
    """The helix of 003 Eq. 2 with its numerical arc-length map (Eq. 3).

    Args:
        params: Helix shape.
    """

    def __init__(self, params: HelixParams) -> None:
        self.params = params
        u = np.linspace(0.0, np.pi, _TABLE_POINTS)
        self._u_table = u
        self._g_table = _cumulative_integral(self.speed, u)
        self._period_length = float(self._g_table[-1])  # arc length of one half wave, m
        self._x_inverse, self._u_inverse = self._inverse_table()  # u = G^-1(x) on equally spaced x
        self._u_list, self._g_list = u.tolist(), self._g_table.tolist()  # for the scalar look-up

    def speed(self, u: np.ndarray) -> np.ndarray:
        """g(u) = |dc/dtheta|, m/rad (derivative of 003 Eq. 2)."""
        p = self.params
        return np.sqrt(p.k_theta**2 + (p.k_b * np.cos(u)) ** 2 + (p.k_a * np.sin(u)) ** 2)

    def arc_of_phase(self, u: np.ndarray | float) -> np.ndarray:
        """G(u) = int_0^u g(alpha) d alpha, m: the arc-length primitive (003 Eq. 3)."""
        u = np.asarray(u, dtype=float)
        k = np.floor(u / np.pi)
        frac = u - k * np.pi
        return k * self._period_length + np.interp(frac, self._u_table, self._g_table)

    def arc_of_phase_scalar(self, u: float) -> float:
        """:meth:`arc_of_phase` for one phase u (rad), m, without array overhead."""
        k = math.floor(u / math.pi)
        frac = u - k * math.pi
        # np.interp's formula on the uniform table, the interval found by division
        j = min(max(int(frac * ((_TABLE_POINTS - 1) / math.pi)), 0), _TABLE_POINTS - 2)
        us, gs = self._u_list, self._g_list
        slope = (gs[j + 1] - gs[j]) / (us[j + 1] - us[j])
        return k * self._period_length + (slope * (frac - us[j]) + gs[j])

    def _arc_exact(self, u: np.ndarray) -> np.ndarray:
        """G(u) to quadrature precision between the table's samples (003 Eq. 3), m.

        The table value at the sample below ``u`` plus a Gauss-Legendre integral of g over
        the rest (a fraction of one table interval: error ~1e-17 m).
        """
        k = np.floor(u / np.pi)
        frac = u - k * np.pi
        j = np.clip((frac * ((_TABLE_POINTS - 1) / np.pi)).astype(np.intp), 0, _TABLE_POINTS - 2)
        nodes, weights = np.polynomial.legendre.leggauss(_TABLE_GAUSS_POINTS)
        lo = self._u_table[j]
        half = (0.5 * (frac - lo))[:, None]
        rest = (half * self.speed(lo[:, None] + half * (nodes + 1.0)) * weights).sum(axis=1)
        return k * self._period_length + self._g_table[j] + rest

    def _inverse_table(self) -> tuple[np.ndarray, np.ndarray]:
        """The inverse u = G^-1(x) at ``_TABLE_POINTS`` equally spaced x over one period [0, G(pi)] (003 Eq. 3).

        Each u solved from G(u) = x by Newton's method on :meth:`_arc_exact` (to rounding).
        """
        x = np.linspace(0.0, self._period_length, _TABLE_POINTS)
        u = np.interp(x, self._g_table, self._u_table)  # within ~1e-8 rad: Newton converges in two steps
        for _ in range(3):
            u = u - (self._arc_exact(u) - x) / self.speed(u)
        u[0], u[-1] = 0.0, np.pi
        return x, u

    def unrolled_table(self, s_min: float, s_max: float) -> tuple[np.ndarray, np.ndarray]:
        """The inverse u = G^-1(x) on equally spaced x over whole periods, for :meth:`phase_at` (003 Eq. 3).

        ``_TABLE_POINTS - 1`` equal steps of x per period G(pi), each u solved from
        G(u) = x by Newton's method on the quadrature of g (:meth:`_arc_exact`, to
        rounding), extended by G(u + pi) = G(u) + G(pi) so that it covers the arc lengths
        s + f for s in [s_min, s_max] and any f in [0, G(pi)). On a uniform grid of x the
        interval of a point is found by one division (:class:`UnrolledInverse`).

        Args:
            s_min: Smallest arc length to be looked up, m.
            s_max: Largest arc length to be looked up, m.

        Returns:
            (x = G values, m, equally spaced; u values, rad), both increasing.
        """
        u = self._u_inverse
        first = math.floor(s_min / self._period_length)
        last = math.ceil(s_max / self._period_length) + 1  # + 1: room for the shift f < G(pi)
        periods = np.arange(first, last, dtype=float)[:, None]
        step = self._period_length / (_TABLE_POINTS - 1)
        big_g = (first * (_TABLE_POINTS - 1) + np.arange((last - first) * (_TABLE_POINTS - 1) + 1)) * step
        u_all = (periods * np.pi + u[None, :-1]).ravel()
        return big_g, np.append(u_all, last * np.pi)

    def phase_at(self, s: np.ndarray, wave_phase: float, table: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """The wave phase u = theta(s, t) + omega_c t at arc lengths ``s`` (003 Eq. 3), rad: one look-up.

        The same map as :meth:`theta_of_s` plus the wave phase: with G(omega_c t) =
        k G(pi) + f, f in [0, G(pi)), u = k pi + G^-1(s + f) on the unrolled ``table``
        (:meth:`unrolled_table`, covering every ``s``).

        Args:
            s: Arc lengths from the head, m, inside the table's range.
            wave_phase: omega_c t, rad.
            table: From :meth:`unrolled_table`.

        Returns:
            u at each s, rad.
        """
        big = self.arc_of_phase_scalar(wave_phase)
        k = math.floor(big / self._period_length)
        return k * np.pi + np.interp(s + (big - k * self._period_length), table[0], table[1])

    def phase_of_arc(self, big_g: np.ndarray | float) -> np.ndarray:
        """Inverse of :meth:`arc_of_phase`: the u with G(u) = big_g, rad (003 Eq. 3; the inverse table)."""
        big_g = np.asarray(big_g, dtype=float)
        k = np.floor(big_g / self._period_length)
        frac = big_g - k * self._period_length
        return k * np.pi + np.interp(frac, self._x_inverse, self._u_inverse)

    def theta_of_s(self, s: np.ndarray, wave_phase: float) -> np.ndarray:
        """theta(s, t): the inverse of the arc-length map s(theta, t) of 003 Eq. 3.

        Args:
            s: Arc lengths from the head, m.
            wave_phase: omega_c t (or its integral for a varying omega_c), rad.

        Returns:
            theta at each s, rad.
        """
        return self.phase_of_arc(np.asarray(s) + self.arc_of_phase(wave_phase)) - wave_phase

    def point(self, theta: np.ndarray, wave_phase: float) -> np.ndarray:
        """c(theta, t) of 003 Eq. 2, shape (..., 3), m."""
        p = self.params
        u = np.asarray(theta) + wave_phase
        x = p.k_theta * np.asarray(theta) * np.ones_like(u)
        return np.stack([x, p.k_b * np.sin(u), p.k_a * np.cos(u)], axis=-1)

    def derivatives(self, theta: np.ndarray, wave_phase: float) -> tuple[np.ndarray, np.ndarray]:
        """dc/dtheta and d2c/dtheta2 at theta, each shape (..., 3)."""
        p = self.params
        u = np.asarray(theta) + wave_phase
        zeros = np.zeros_like(u)
        d1 = np.stack([np.full_like(u, p.k_theta), p.k_b * np.cos(u), -p.k_a * np.sin(u)], axis=-1)
        d2 = np.stack([zeros, -p.k_b * np.sin(u), -p.k_a * np.cos(u)], axis=-1)
        return d1, d2


class UnrolledInverse:
    """The inverse u = G^-1(x) on an unrolled table (:meth:`EllipticalHelix.unrolled_table`) without a search.

    The same piecewise-linear interpolant as ``np.interp(x, G, u)`` (003 Eq. 3), found by
    arithmetic instead of a binary search per point: the table's x (= G) is equally
    spaced, so the interval of ``x`` is ``floor((x - G_0) / step)``; each interval stores
    its line u = a + b x.

    Args:
        table: (G values, equally spaced; u values), both increasing, from
            :meth:`EllipticalHelix.unrolled_table`.
    """

    def __init__(self, table: tuple[np.ndarray, np.ndarray]) -> None:
        big_g, u = table
        steps = np.diff(big_g)
        if not np.allclose(steps, steps[0], rtol=1e-9, atol=0.0):
            raise GaitError("UnrolledInverse needs a table with equally spaced G values")
        slope = np.diff(u) / steps
        self.offset = float(big_g[0])
        self.inv_width = (len(big_g) - 1) / float(big_g[-1] - big_g[0])
        self.last = len(slope) - 1
        self.intercept = u[:-1] - slope * big_g[:-1]
        self.slope = slope
        # the same lines less a whole number of turns per interval, so that :meth:`pair_into`'s
        # phases lie within about pi of 0, where sin is cheapest (and the sines are the same)
        self.intercept_turns = self.intercept - _TWO_PI * np.round(0.5 * (u[:-1] + u[1:]) / _TWO_PI)

    def _interval(self, cells: np.ndarray) -> np.ndarray:
        """Table interval of cell positions ``cells`` (:meth:`cell_position`), the last one at the end."""
        return np.minimum(cells.astype(np.intp), self.last)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The wave phase u at arc lengths ``x`` inside the table's range, rad."""
        interval = self._interval(self.cell_position(x))
        return self.intercept[interval] + self.slope[interval] * x

    def cell_position(self, x: np.ndarray) -> np.ndarray:
        """(x - G_0) / step: the argument ``cells`` of :meth:`pair_into` for ``x``."""
        return (np.asarray(x, dtype=float) - self.offset) * self.inv_width

    def pair_into(self, x0: np.ndarray, cells: np.ndarray, shift: float, out: np.ndarray) -> None:
        """The wave phases u and u + pi/2, less whole turns, at the arc lengths x = ``x0 + shift``, rad.

        The same interpolant as :meth:`__call__` (003 Eq. 3) with fewer array operations
        (the cell position of ``x0``, :meth:`cell_position`, is computed once by the
        caller; x must lie below the table's last value), less 2 pi times a whole number
        that depends on the table interval: the sines and cosines are those of u, and the
        phases stay within about pi of 0, where ``np.sin`` is cheapest.

        Args:
            x0: Arc lengths before the shift, m.
            cells: :meth:`cell_position` of ``x0``.
            shift: Added to every arc length, m (the result must stay inside the table).
            out: (2, n) output: u, then u + pi/2 (each less the same whole number of turns).
        """
        interval = (cells + shift * self.inv_width).astype(np.intp)
        u = out[0]
        np.add(x0, shift, out=u)
        u *= self.slope[interval]
        u += self.intercept_turns[interval]
        np.add(u, 0.5 * math.pi, out=out[1])
