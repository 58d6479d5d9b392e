"""Path length of a measured planar trajectory with the measurement noise removed (pure numpy/scipy).

The length of the polyline through raw samples grows with the measurement noise and with
the sample rate: each step adds about ``1.8 sigma`` of noise (the mean norm of the
difference of two 2-D gaussian samples of per-axis std sigma), so a robot held still for
29 s under motion capture of 0.5 mm noise at 100 Hz "travels" metres. The path length here
is the length of a smooth curve through the samples that leaves exactly the noise as
residual:

1. **Noise level** (:func:`noise_sigma`): the difference-based estimator of Gasser, Sroka
   and Jennen-Steinmetz (1986, "Residual variance and residual pattern in nonlinear
   regression", Biometrika 73(3), Eq. 2-3): each sample minus the straight line through
   its two neighbours (exact for any locally linear motion, for uneven sampling too),
   scaled by ``1 / sqrt(a^2 + b^2 + 1)`` of its weights, gives pseudo-residuals of std
   sigma; sigma is their median absolute value x 1.4826 (robust to the few steps where the
   motion's curvature or a lost sample shows). What the motion itself contributes is about
   ``|x''| dt^2 / 2`` per sample (25 micrometres for a 5 cm, 0.5 Hz undulation at 100 Hz),
   small beside a motion capture's noise, and it shrinks as the rate grows.
2. **Outliers**: a sample farther than ``_OUTLIER_SIGMAS`` sigma from the running median of
   ``_MEDIAN_WINDOW`` samples (scipy's :func:`scipy.ndimage.median_filter`, per axis), and
   farther than as many times the median of those distances x 1.4826, and farther than 1 cm
   (the median cuts the corners of real motion: up to 2.6 mm on the demo's ground truth), is left out: a
   motion capture's whole-frame jump (a reflection taken for a marker) is not motion, and a
   curve held to the noise level would have to pass through it.
3. **Smoothing** (:func:`smooth_path`): the cubic smoothing spline of Reinsch (1967),
   minimising ``sum |y_i - f(t_i)|^2 + lam * integral |f''(t)|^2 dt`` (scipy's
   :func:`scipy.interpolate.make_smoothing_spline`, one ``lam`` for x and y), with ``lam``
   chosen by Morozov's discrepancy principle: the residual RMS per axis equals the noise
   sigma found in step 1, raised by two standard errors of that estimate
   (``1.17 sigma / sqrt(n)`` for a median absolute deviation of gaussian samples), so
   that an estimate that happens to fall low does not make the curve chase the noise
   (the root in ``log10 lam`` by Brent's method). A still robot's
   samples are then fitted by a near-straight line (its path length is its net
   displacement), a moving robot's undulation stays (it is far above the noise), and the
   result does not depend on the sample rate: more samples of the same noise give the same
   curve.
4. **Length** (:func:`path_length`): the polyline through the smoothed samples, m.

Where the least smoothing searched already leaves more residual than the noise (noise-free
data: simulated ground truth), the samples are used as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from snake_core.errors import SnakeCoreError

_MAD_TO_SIGMA = 1.4826  # std of a gaussian per median absolute deviation
_MAD_SE = 1.17  # standard error of a MAD-based sigma, in sigma / sqrt(n) (gaussian samples)
_SE_MARGIN = 2.0  # standard errors added to the noise estimate when it sets the residual
_LOG_LAM_LO = -14.0  # log10 lam searched, lam in m^2 s^3 / m^2 = s^3 (t in s)
_LOG_LAM_HI = 12.0
_LOG_LAM_TOL = 0.02  # log10 lam: the root to 5 % in lam
_MIN_SAMPLES = 5  # fewer samples: no noise estimate, the path is the polyline
_SAME_TIME_S = 1e-9  # s, samples closer than this are one sample (their mean)
_MEDIAN_WINDOW = 7  # samples of the running median that outliers are measured from (bursts of up to 3)
_OUTLIER_SIGMAS = 10.0  # noise sigmas from the running median beyond which a sample is an outlier
_OUTLIER_MIN_M = 0.01  # m: a sample closer than this to the running median is never an outlier (the corners
#                        the median cuts off a snake's head sweep reach 2.6 mm at 50 Hz in the demo's ground truth)

METHOD = ("cubic smoothing spline (Reinsch 1967; scipy make_smoothing_spline), lam by the discrepancy principle "
          "(residual RMS = noise sigma + 2 standard errors); sigma by Gasser-Sroka-Jennen-Steinmetz (1986) "
          "pseudo-residuals, MAD")
"""One line naming the method of this module (for reports)."""


@dataclass(frozen=True)
class SmoothedPath:
    """A planar trajectory with its measurement noise removed.

    Attributes:
        t: Sample times, s (strictly increasing: samples at one time merged).
        xy: Smoothed positions at ``t``, m, shape (n, 2).
        noise_sigma_m: Noise std per axis estimated from the samples, m.
        residual_rms_m: RMS per axis of the samples minus the smoothed curve, m.
        lam: Smoothing parameter used, s^3 (None: samples used as they are).
        length_m: Path length of the smoothed curve, m.
        raw_length_m: Path length of the polyline through the samples, m.
        displacement_m: Net displacement of the smoothed curve (last minus first), m.
        outliers: Samples left out as outliers (module docstring), count.
    """

    t: np.ndarray
    xy: np.ndarray
    noise_sigma_m: float
    residual_rms_m: float
    lam: float | None
    length_m: float
    raw_length_m: float
    displacement_m: float
    outliers: int = 0


def path_length(xy: np.ndarray) -> float:
    """Length of the polyline through points, m (0 for fewer than two).

    Args:
        xy: Points, m, shape (n, k).
    """
    p = np.asarray(xy, dtype=float)
    return float(np.linalg.norm(np.diff(p, axis=0), axis=1).sum()) if len(p) >= 2 else 0.0


def noise_sigma(t: np.ndarray, values: np.ndarray) -> float:
    """Std of white measurement noise on a sampled smooth signal (Gasser et al. 1986, Eq. 2-3), robust.

    Pseudo-residual of sample i: ``a_i y_{i-1} + b_i y_{i+1} - y_i`` with
    ``a_i = (t_{i+1} - t_i) / (t_{i+1} - t_{i-1})``, ``b_i = 1 - a_i`` (the line through the
    neighbours at t_i), divided by ``sqrt(a_i^2 + b_i^2 + 1)``; sigma = 1.4826 x their median
    absolute value.

    Args:
        t: Sample times, s, strictly increasing, shape (n,).
        values: Samples, shape (n,) or (n, k) (one sigma over all columns: isotropic noise).

    Returns:
        The noise std in the samples' unit (0 for fewer than three samples).
    """
    t = np.asarray(t, dtype=float)
    y = np.asarray(values, dtype=float).reshape(len(t), -1)
    if len(t) < 3:
        return 0.0
    h1, h2 = t[1:-1] - t[:-2], t[2:] - t[1:-1]
    if np.any(h1 <= 0) or np.any(h2 <= 0):
        raise SnakeCoreError("noise_sigma: times must be strictly increasing")
    a = (h2 / (h1 + h2))[:, None]
    b = 1.0 - a
    e = (a * y[:-2] + b * y[2:] - y[1:-1]) / np.sqrt(a * a + b * b + 1.0)
    e = e[np.isfinite(e)]
    return float(_MAD_TO_SIGMA * np.median(np.abs(e))) if len(e) else 0.0


def _merge_same_times(t: np.ndarray, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Samples at one time (within ``_SAME_TIME_S``) replaced by their mean; times strictly increasing."""
    new = np.r_[True, np.diff(t) > _SAME_TIME_S]
    if new.all():
        return t, xy
    group = np.cumsum(new) - 1
    count = np.bincount(group)
    out = np.column_stack([np.bincount(group, weights=xy[:, k]) / count for k in range(xy.shape[1])])
    return t[new], out


def smooth_path(t: np.ndarray, xy: np.ndarray) -> SmoothedPath:
    """Remove the measurement noise from a planar trajectory (module docstring: method).

    Args:
        t: Sample times, s, non-decreasing, shape (n,).
        xy: Positions, m, shape (n, 2); rows with a NaN are left out.

    Returns:
        The smoothed trajectory, the noise level found and both path lengths.

    Raises:
        SnakeCoreError: Shapes do not match, or the times decrease.
    """
    from scipy.interpolate import make_smoothing_spline
    from scipy.optimize import brentq

    t = np.asarray(t, dtype=float)
    p = np.asarray(xy, dtype=float)
    if p.ndim != 2 or p.shape[1] != 2 or len(p) != len(t):
        raise SnakeCoreError(f"smooth_path: expected times (n,) and positions (n, 2), got {t.shape} and {p.shape}")
    if np.any(np.diff(t) < 0):
        raise SnakeCoreError("smooth_path: times must be non-decreasing")
    ok = np.all(np.isfinite(p), axis=1) & np.isfinite(t)
    t, p = _merge_same_times(t[ok], p[ok])
    raw = path_length(p)
    sigma = noise_sigma(t, p) if len(t) >= _MIN_SAMPLES else 0.0

    def unsmoothed() -> SmoothedPath:
        return SmoothedPath(t, p, sigma, 0.0, None, raw, raw, float(np.linalg.norm(p[-1] - p[0])) if len(p) else 0.0)

    if sigma <= 0.0:
        return unsmoothed()
    from scipy.ndimage import median_filter

    deviation = np.linalg.norm(p - median_filter(p, size=(_MEDIAN_WINDOW, 1), mode="nearest"), axis=1)
    # The median cuts the corners of the motion itself: the deviations' own scale (MAD) bounds from below.
    outlier = deviation > max(_OUTLIER_SIGMAS * max(sigma, _MAD_TO_SIGMA * float(np.median(deviation))),
                              _OUTLIER_MIN_M)
    t, p = t[~outlier], p[~outlier]
    if len(t) < _MIN_SAMPLES:
        return unsmoothed()

    def fit(log_lam: float) -> np.ndarray:
        return np.asarray(make_smoothing_spline(t, p, lam=10.0 ** log_lam)(t))  # x and y in one banded solve

    target = sigma * (1.0 + _SE_MARGIN * _MAD_SE / np.sqrt(len(t)))

    def excess(log_lam: float) -> float:
        return float(np.sqrt(np.mean((fit(log_lam) - p) ** 2))) - target

    if excess(_LOG_LAM_LO) >= 0.0:  # the least smoothing already leaves more than the noise
        return unsmoothed()
    log_lam = _LOG_LAM_HI if excess(_LOG_LAM_HI) <= 0.0 else float(
        brentq(excess, _LOG_LAM_LO, _LOG_LAM_HI, xtol=_LOG_LAM_TOL))
    smooth = fit(log_lam)
    return SmoothedPath(t=t, xy=smooth, noise_sigma_m=sigma,
                        residual_rms_m=float(np.sqrt(np.mean((smooth - p) ** 2))), lam=10.0 ** log_lam,
                        length_m=path_length(smooth), raw_length_m=raw,
                        displacement_m=float(np.linalg.norm(smooth[-1] - smooth[0])), outliers=int(outlier.sum()))
