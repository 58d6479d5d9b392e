"""How sure a fit is of each parameter: its spread, its 95 % interval, and whether it is identified.

Servo fit (least squares on the noise-weighted residual ``r``, Jacobian ``J``, ``H = J^T J``):

* **White** (:func:`noise_covariance`): ``(J^T J)^-1`` (Ljung, System Identification, eq. 9.18),
  scaled up by ``s^2 = |r|^2 / (m - n)`` when that exceeds 1, never down. Exact when the errors
  are independent with the noise model's sigma.
* **Correlated** (:func:`correlated_covariance`): quantization (an angle rounded to one tick over
  many slow samples), stamp errors and a model that misses a little leave errors correlated in
  time, and the white covariance is then far too small. The sandwich ``H^-1 S H^-1`` with ``S``
  the Newey-West estimate of the covariance of the gradient ``J^T r`` (White 1980,
  Econometrica 48(4); Newey and West 1987, Econometrica 55(3), eq. 2): per sample time ``g_t``, the
  sum over joints of ``J_t^T r_t``, and ``S = sum_|l|<=L (1 - |l| / (L + 1)) sum_t g_t g_{t+l}^T``
  over lags up to :data:`CORRELATION_WINDOW_S` (Bartlett weights keep ``S`` positive
  semidefinite). It holds for any error correlated over less than that window, the errors'
  actual size included.
* The spread is the larger of the two, per variable (:func:`parameter_std`): the white one when the
  residual is smaller than the noise model's sigma (a near-perfect fit does not make a parameter
  certain), the correlated one when the residual's correlation or size says more.
* **Held-out segments** (:func:`segment_stability`): the recording cut into :data:`SEGMENTS` time
  segments; each one's own optimum, one Gauss-Newton step from the fit's
  ``x_k = x - H_k^-1 J_k^T r_k``, with its own spread (as above, on the segment alone). A parameter
  whose segment optimum lies more than :data:`SEGMENT_Z` of their difference's standard deviation
  (``sqrt(var_k - var)``: the fit holds the segment) from the fit's in any segment that tells it
  is not stable: what one part of the recording says, another contradicts, and its interval is
  not trusted (not identified).

A latency's spread adds the time base's (:func:`time_base_std_steps`): it is measured between
the commands' stamps and the joint states', and an error common to the joint states' stamps
shifts every sample at once.

A direction of ``H`` whose standard deviation exceeds :data:`UNBOUNDED_STD` is not excited and
its parameters' spreads are infinite. The square-root diagonal is the relative standard
deviation of a log-fitted parameter, the standard deviation in physics steps of a latency, and
that over max(|value|, 5 mN m) of a friction loss; the 95 % interval is the value +- 1.96 of it
(in log for a log-fitted one). A parameter whose spread exceeds :data:`IDENTIFIABLE_REL_STD`
(latency: :data:`LATENCY_STD_STEPS`), is infinite, lies on its physical range's bound or is not
stable across the segments is reported as not identified and keeps its starting value.

The ground friction's interval is a profile-likelihood one (:func:`profile_interval`,
:mod:`snake_tools.twin.ground`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

IDENTIFIABLE_REL_STD = 0.15
"""A fitted parameter whose relative standard deviation exceeds this is reported as not identified."""
LATENCY_STD_STEPS = 1.0
"""A fitted latency whose standard deviation exceeds this many physics steps is reported as not identified."""
UNBOUNDED_STD = 5.0
"""A direction of the fitted variables with a standard deviation above this (log units, physics steps,
scaled friction) is not excited by the recording: its parameters get an unbounded spread."""
CORRELATION_WINDOW_S = 1.0
"""Longest lag of the residual's correlation the correlated covariance takes in, s (50 samples at 50 Hz)."""
SEGMENTS = 4
"""Time segments of the held-out stability check."""
SEGMENT_Z = 2.5
"""A segment's optimum farther than this many standard deviations from the fit's makes a parameter unstable
(two-sided 5 % over four segments, Bonferroni: 1.25 % each)."""
QUANTIZATION_DRAWS = 32
"""Shifts of the encoder's grid drawn to spread the rounding's effect on the estimate."""
_CHI2_95 = 3.84             # 95 % quantile of chi-square with one degree of freedom
_EXP_MAX = 700.0            # largest argument of math.exp kept finite (it overflows above 709.78)
_Z_95 = 1.96                # two-sided 95 % quantile of the standard normal (its square: _CHI2_95)


def _scaled(jac: np.ndarray, x_scale: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(jd, d, hinv, unbounded)`` of a Jacobian and its variables' scales.

    The Jacobian in scaled variables, the scales, ``H``'s inverse over its excited directions,
    and the variables with a component above 0.1 in a direction that is not.
    """
    n = jac.shape[1]
    d = np.asarray(x_scale, dtype=float)
    jd = jac * d
    lam, vec = np.linalg.eigh(jd.T @ jd)
    excited = lam > 1.0 / UNBOUNDED_STD ** 2
    hinv = (vec[:, excited] / lam[excited]) @ vec[:, excited].T
    unbounded = np.any(np.abs(vec[:, ~excited]) > 0.1, axis=1) if (~excited).any() else np.zeros(n, dtype=bool)
    return jd, d, hinv, unbounded


def noise_covariance(jac: np.ndarray, res: np.ndarray, x_scale: np.ndarray) -> np.ndarray:
    """Standard deviations of fitted variables from the noise-weighted Jacobian, white errors (inf: not excited).

    With ``J`` the Jacobian of the residual weighted by each sample's noise sigma, the
    first-order covariance is ``(J^T J)^-1`` (Ljung, System Identification, eq. 9.18 with the
    measured noise); it is scaled up by ``s^2 = |r|^2 / (m - n)`` when that exceeds 1 (a model
    that does not explain the data is less certain), never down (a near-perfect fit does not
    make a parameter certain). The inverse is taken over the eigenvectors of ``D J^T J D``
    (``D``: the variables' typical scales); an eigen-direction whose standard deviation exceeds
    :data:`UNBOUNDED_STD` is not excited, and every variable with a component above 0.1 in it
    gets an infinite standard deviation.
    """
    n = jac.shape[1]
    _, d, hinv, unbounded = _scaled(jac, x_scale)
    s2 = max(float(res @ res) / max(res.size - n, 1), 1.0)
    std = d * np.sqrt(np.clip(np.diag(hinv), 0.0, None) * s2)
    std[unbounded] = math.inf
    return std


def correlated_covariance(jac: np.ndarray, res: np.ndarray, x_scale: np.ndarray, samples: int,
                          lags: int) -> np.ndarray:
    """Standard deviations of fitted variables with errors correlated over up to ``lags`` samples (module docstring).

    The sandwich ``H^-1 S H^-1`` with the Newey-West (Bartlett) estimate ``S`` of the gradient's
    covariance (Newey and West 1987, eq. 2).

    Args:
        jac: Jacobian of the noise-weighted residual, (samples x joints, variables), rows in time
            order with the joints of one sample together.
        res: The noise-weighted residual at the optimum, same rows.
        x_scale: The variables' typical scales.
        samples: Sample times (rows / joints).
        lags: Largest lag taken in, samples.

    Returns:
        Per variable the standard deviation (inf: not excited).
    """
    jd, d, hinv, unbounded = _scaled(jac, x_scale)
    n = jac.shape[1]
    g = (jd * res[:, None]).reshape(samples, -1, n).sum(axis=1)
    s = g.T @ g
    for lag in range(1, min(int(lags), samples - 1) + 1):
        c = g[lag:].T @ g[:-lag]
        s += (1.0 - lag / (lags + 1.0)) * (c + c.T)
    std = d * np.sqrt(np.clip(np.diag(hinv @ s @ hinv), 0.0, None))
    std[unbounded] = math.inf
    return std


def parameter_std(jac: np.ndarray, res: np.ndarray, x_scale: np.ndarray, samples: int,
                  lags: int) -> np.ndarray:
    """Per variable the larger of the white and the correlated standard deviation (module docstring)."""
    return np.maximum(noise_covariance(jac, res, x_scale), correlated_covariance(jac, res, x_scale, samples, lags))


def correlation_lags(t_state: np.ndarray) -> int:
    """The lags (samples, at least 1) within :data:`CORRELATION_WINDOW_S` at the recording's median sample period."""
    return max(round(CORRELATION_WINDOW_S / float(np.median(np.diff(t_state)))), 1)


@dataclass(frozen=True)
class Stability:
    """The held-out segment check of a servo fit (:func:`segment_stability`).

    Attributes:
        z: Per segment and variable, the segment optimum's distance from the fit's in standard
            deviations of their difference (nan: the segment does not tell that variable).
        stable: Per variable, whether every segment that tells it is within :data:`SEGMENT_Z`.
    """

    z: np.ndarray
    stable: np.ndarray

    def worst(self, i: int) -> tuple[int, float]:
        """The segment (0-based) farthest for variable ``i``, and its distance (nan: none tells it)."""
        col = self.z[:, i]
        if not np.isfinite(col).any():
            return -1, math.nan
        k = int(np.nanargmax(np.abs(col)))
        return k, float(col[k])


def segment_stability(jac: np.ndarray, res: np.ndarray, x_scale: np.ndarray, samples: int, lags: int,
                      segments: int = SEGMENTS) -> Stability:
    """Whether each variable's value holds in every time segment of the recording (module docstring).

    Args:
        jac: Jacobian of the noise-weighted residual (as :func:`correlated_covariance`).
        res: The noise-weighted residual at the optimum.
        x_scale: The variables' typical scales.
        samples: Sample times.
        lags: Largest lag of the correlated covariance, samples.
        segments: Time segments.
    """
    n = jac.shape[1]
    per = res.size // samples
    full = parameter_std(jac, res, x_scale, samples, lags)
    edges = np.linspace(0, samples, segments + 1).round().astype(int)
    z = np.full((segments, n), math.nan)
    for k in range(segments):
        a, b = edges[k], edges[k + 1]
        if b - a <= n:
            continue
        jk, rk = jac[a * per:b * per], res[a * per:b * per]
        jd, d, hinv, unbounded = _scaled(jk, x_scale)
        step = -d * (hinv @ (jd.T @ rk))
        sd = parameter_std(jk, rk, x_scale, b - a, lags)
        with np.errstate(invalid="ignore"):   # inf - inf: a variable not told (left out below)
            spread = np.sqrt(np.clip(sd ** 2 - full ** 2, 0.0, None))
        tells = ~unbounded & np.isfinite(sd) & np.isfinite(full) & (spread > 0)
        z[k, tells] = step[tells] / spread[tells]
    stable = ~np.any(np.abs(np.nan_to_num(z, nan=0.0)) > SEGMENT_Z, axis=0)
    return Stability(z, stable)


def grid_offsets(q: np.ndarray, resolution: float) -> np.ndarray | None:
    """Per joint the offset of a recording's angle grid, rad, or None when the angles are not on one.

    An encoder's angles are whole ticks times ``resolution`` plus a constant offset per joint (a
    zero set in rad); they lie on that grid when every angle's remainder modulo the resolution
    is that joint's within 1e-6 of a tick.
    """
    if resolution <= 0 or q.size == 0:
        return None
    phase = np.mod(q / resolution, 1.0)
    ref = phase[0]
    gap = np.abs(phase - ref)
    gap = np.minimum(gap, 1.0 - gap)
    if float(gap.max()) > 1e-6:
        return None
    return (ref - np.round(ref)) * resolution


def quantization_std(jac: np.ndarray, q_fit: np.ndarray, sigma: np.ndarray, resolution: float,
                     offsets: np.ndarray, x_scale: np.ndarray, draws: int = QUANTIZATION_DRAWS,
                     seed: int = 0) -> np.ndarray:
    """Per variable the spread of the estimate that rounding the angles to the encoder's ticks makes (module docstring).

    Rounding is no independent noise: an angle that lingers within one tick (at a reversal, in a
    slow stretch) keeps one error for many samples, in step with the motion, and a fit reads it as
    physics (a friction, a damping). To first order a change ``dy`` of the weighted data moves the
    estimate by ``H^-1 J^T dy``; the rounding errors ``e = Q(q) - q`` of the true motion are
    unknown, but they are those of the fitted motion ``q_fit`` on a grid shifted by an unknown
    fraction of a tick per joint. Over ``draws`` such shifts ``u`` (uniform over one tick), the
    estimate's moves ``d_u = H^-1 J^T (Q(q_fit + u) - q_fit - u) / sigma``; their RMS is the spread.

    Args:
        jac: Jacobian of the noise-weighted residual, (samples x joints, variables).
        q_fit: The fitted twin's angles at the samples, (samples, joints), rad.
        sigma: The noise model's sigma of each sample, same shape, rad.
        resolution: The encoder's resolution, rad.
        offsets: Per joint the offset of the recording's grid, rad (:func:`grid_offsets`).
        x_scale: The variables' typical scales.
        draws: Shifts of the grid drawn.
        seed: Seed of the shifts.

    Returns:
        Per variable the RMS move, in the variables' units (inf where not excited).
    """
    jd, d, hinv, unbounded = _scaled(jac, x_scale)
    gain = hinv @ jd.T
    rng = np.random.default_rng(seed)
    moves = []
    for u in rng.uniform(0.0, resolution, size=(draws, q_fit.shape[1])):
        x = q_fit + u - offsets
        e = (np.round(x / resolution) * resolution - x) / sigma
        moves.append(d * (gain @ e.ravel()))
    std = np.sqrt(np.mean(np.square(moves), axis=0))
    std[unbounded] = math.inf
    return std


def fit_std(jac: np.ndarray, res: np.ndarray, x_scale: np.ndarray, samples: int, lags: int, q_state: np.ndarray,
            sigma: np.ndarray, resolution: float, offsets: np.ndarray | None) -> np.ndarray:
    """Per variable the spread of a fit at its optimum: correlated errors, and the encoder's rounding where on a grid.

    :func:`parameter_std` of the noise-weighted residual ``res`` (errors correlated over
    ``lags`` samples), combined in quadrature with :func:`quantization_std` where the recorded
    angles ``q_state`` lie on the encoder's grid (``offsets``, :func:`grid_offsets`; ``None``:
    they do not). The fitted twin's angles there are ``q_state + sigma * res``.

    Args:
        jac: Jacobian of the noise-weighted residual, (samples x joints, variables).
        res: The noise-weighted residual at the optimum (samples x joints, raveled).
        x_scale: The variables' typical scales.
        samples: Sample times of the recording.
        lags: Lags over which the errors are correlated, samples.
        q_state: The recorded angles, (samples, joints), rad.
        sigma: The noise model's sigma of each sample, same shape, rad.
        resolution: The encoder's resolution, rad.
        offsets: Per joint the offset of the recording's grid, rad, or ``None``.

    Returns:
        Per variable the standard deviation, in the variables' units (inf where not excited).
    """
    std = parameter_std(jac, res, x_scale, samples, lags)
    if offsets is None:
        return std
    q_fit = q_state + sigma * res.reshape(q_state.shape)
    quant = quantization_std(jac, q_fit, sigma, resolution, offsets, x_scale)
    return np.sqrt(std ** 2 + quant ** 2)


def time_base_std_steps(stamp_std_s: float, step_s: float) -> float:
    """Standard deviation a latency takes from the recording's time base, physics steps (module docstring).

    A latency is measured between the commands' stamps and the joint states': the rollout places
    every sample at its stamp's physics step counted from the first command's
    (:attr:`snake_tools.twin.data.Recording.start`), so an error common to the joint states'
    stamps (taken of the size of their spread about their grid, ``stamp_std_s``) shifts every
    sample at once, fully correlated, and the fit moves the latency by it: ``stamp_std_s / step_s``
    steps.
    """
    return stamp_std_s / step_s if step_s > 0 else 0.0


FRICTION_FLOOR = 0.005
"""N m: a friction loss below this is judged on this absolute size (its relative spread has no meaning near 0)."""
LOAD_FRICTION_FLOOR = 0.02
"""A load-dependent friction below this (N m per N m) is judged on this absolute size."""
ZERO_OFFSET_FLOOR = 2.0 * math.pi / 4096
"""rad, one count of a 12-bit encoder: a zero offset below it is judged on this absolute size."""
_ZERO_IS_PHYSICAL = ("frictionloss", "latency_s", "load_friction")
"""Fields whose search bound at 0 is a physical value, not a bound the optimiser was stopped by."""
_ON_BOUND = 1e-3
"""How near its search bound, as a fraction of the search range, a value is taken as stopped there."""


@dataclass(frozen=True)
class Judgement:
    """What the fit says of one parameter (:func:`judge`).

    Attributes:
        rel: Its spread: the relative standard deviation, or the std in physics steps for a latency.
        interval: Its 95 % interval within its physical range (``inf`` where unbounded).
        identified: The recording tells it (finite, off the range's bound, spread within the
            limit, stable across held-out segments).
        reason: One line saying why or why not.
    """

    rel: float
    interval: tuple[float, float]
    identified: bool
    reason: str


@dataclass
class Judged:
    """Fitted values with their verdicts, by name (``joint.<name>.<field>``).

    Attributes:
        values: The fitted values.
        start: Each at its start.
        rel, intervals, identified, reasons: Per name, a :class:`Judgement`'s fields.
    """

    values: dict[str, float]
    start: dict[str, float]
    rel: dict[str, float] = field(default_factory=dict)
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    identified: dict[str, bool] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)

    def record(self, name: str, judgement: Judgement, held: str) -> None:
        """Store ``name``'s verdict; ``held`` says what the fit held fixed (appended to the reason)."""
        self.rel[name], self.intervals[name] = judgement.rel, judgement.interval
        self.identified[name], self.reasons[name] = judgement.identified, f"{judgement.reason} ({held})"


def _limit(field: str) -> float:
    """The spread within which a field is identified: :data:`LATENCY_STD_STEPS` for a latency, else relative."""
    return LATENCY_STD_STEPS if field == "latency_s" else IDENTIFIABLE_REL_STD


def judge(field: str, value: float, std: float, *, log: bool, step_s: float, physical: tuple[float, float],
          search: tuple[float, float, float], stability: tuple[bool, tuple[int, float]]) -> Judgement:
    """Spread, 95 % interval and verdict of one fitted parameter, per type or per joint alike.

    Args:
        field: The parameter's field (``kp``, ``latency_s``, ``backlash_rad``, ...).
        value: Its fitted value.
        std: Its standard deviation: of ``log p`` where fitted in log (relative), in physics
            steps for a latency (the time base's share included), else in the value's unit.
        log: Fitted in log.
        step_s: The physics step, s.
        physical: The field's physical range.
        search: The fitted variable and its search bounds, in the fit's units: a value within
            :data:`_ON_BOUND` of the range from a bound sits on it (a bound the optimiser
            stopped at), unless 0 is a physical value of the field (:data:`_ZERO_IS_PHYSICAL`).
        stability: Whether the held-out segments agree with the fit, and the worst segment
            with its distance from the fit in standard deviations
            (:meth:`Stability.worst`).
    """
    limit, what = _limit(field), "relative std"
    if log:
        rel = std
        # A finite spread beyond exp's range (a fit far from the data) is an interval without an upper end.
        low = value * math.exp(-_Z_95 * std)
        high = value * math.exp(_Z_95 * std) if _Z_95 * std < _EXP_MAX else math.inf
    elif field == "latency_s":
        rel, what = std, "physics steps std"
        low, high = value - _Z_95 * std * step_s, value + _Z_95 * std * step_s
    else:
        floor = {"load_friction": LOAD_FRICTION_FLOOR, "zero_offset_rad": ZERO_OFFSET_FLOOR}.get(field, FRICTION_FLOOR)
        size = value if field == "backlash_rad" else max(abs(value), floor)
        rel = std / size
        low, high = value - _Z_95 * std, value + _Z_95 * std
    p_lo, p_hi = physical
    interval = (max(low, p_lo) if math.isfinite(low) else p_lo, min(high, p_hi) if math.isfinite(high) else math.inf)
    stable, (segment, z) = stability
    x, lo, hi = search
    on_bound = field not in _ZERO_IS_PHYSICAL and min(x - lo, hi - x) < _ON_BOUND * (hi - lo)
    identified = bool(math.isfinite(std) and not on_bound and rel <= limit and stable)
    if not math.isfinite(std):
        reason = "not excited: the recording leaves a direction of it unbounded"
    elif on_bound:
        reason = f"on its physical range's bound {physical}"
    elif rel > limit:
        reason = f"spread {rel:.3g} ({what}) above {limit:g}"
    elif not stable:
        reason = (f"not stable across held-out segments: segment {segment + 1} of {SEGMENTS} puts it {z:+.2g} std "
                  f"from the fit (more than {SEGMENT_Z:g})")
    else:
        reason = f"spread {rel:.3g} ({what}) within {limit:g}"
    return Judgement(rel, interval, identified, reason)


def _identified(name: str, spread: float) -> bool:
    """Whether a fitted parameter is told by the recording (relative std, or std in steps for a latency)."""
    return spread <= _limit(name.rsplit(".", 1)[-1])


def profile_interval(x: np.ndarray, cost: np.ndarray, threshold: float) -> tuple[float, float]:
    """Profile-likelihood interval of a scanned scalar: where ``cost`` is within ``threshold`` of its minimum.

    The region ``{x : cost(x) <= min cost + threshold}`` is taken from its outermost evaluated
    points on each side of the best, each extended to the threshold's crossing, interpolated
    linearly in x between that point and the next evaluated point outward. A region that reaches
    the first or last evaluated point has no crossing there: that bound is infinite.

    Args:
        x: Evaluated points (any order; in log mu for the ground friction).
        cost: The cost at each point.
        threshold: Allowed rise of the cost above its minimum (3.84 s^2 for 95 %).

    Returns:
        (lower, upper) bounds in x; ``-inf`` / ``inf`` where the region is not closed.
    """
    order = np.argsort(x)
    xs, cs = np.asarray(x, dtype=float)[order], np.asarray(cost, dtype=float)[order]
    level = float(cs.min()) + threshold
    inside = np.flatnonzero(cs <= level)
    lo_i, hi_i = int(inside[0]), int(inside[-1])

    def crossing(i: int, j: int) -> float:  # between inside point i and outside point j
        return float(xs[i] + (xs[j] - xs[i]) * (level - cs[i]) / (cs[j] - cs[i]))

    lower = -math.inf if lo_i == 0 else crossing(lo_i, lo_i - 1)
    upper = math.inf if hi_i == len(xs) - 1 else crossing(hi_i, hi_i + 1)
    return lower, upper
