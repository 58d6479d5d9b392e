"""Synthetic motion capture of the head (001 Sec. VI: three markers on the head module; pure numpy, seeded).

:class:`MocapModel` turns a true head pose and the head marker positions into what a
motion-capture system would deliver. It is the one measurement model of the stack: the
twin node (:mod:`snake_ros.twin_node`) feeds it the MuJoCo twin's head, and the closed loop
(:func:`snake_core.following.loop.run_follow_loop`, driving the twin or the viscous model)
feeds it the plant's head markers once per control period. Per captured sample:

- **noise**: every position (the rigid body's origin and each marker, independently) gets
  zero-mean gaussian noise of std ``position_noise_m`` per axis; the orientation is
  multiplied by a small rotation whose rotation vector has zero-mean gaussian components
  of std ``orientation_noise_rad`` (applied in the world frame, q_meas = dq * q_true);
- **outliers**: with probability ``outlier_probability``, independently of every other
  sample, the whole frame is displaced: the origin and every marker move by the same
  horizontal vector ``outlier_jump_m * (cos a, sin a, 0)``, ``a`` uniform in [0, 2 pi)
  (a wrong marker association or a reflection taken for the body; the orientation is
  kept). A lost sample is never an outlier, so the long-run fraction of released outliers
  is ``q (1 - lost fraction)`` for q = ``outlier_probability``;
- **latency**: a delay line; a sample captured at simulated time t is released at the first
  :meth:`MocapModel.release` call with time >= t + ``latency_s``;
- **dropouts**: a two-state process over samples. Outside a dropout, each sample starts a
  dropout with probability ``dropout_probability``; a dropout lasts L samples (this one
  included), L geometric on {1, 2, ...} with mean ``max(1, dropout_burst_s * rate)``
  samples (``rate`` the capture rate, Hz). The long-run fraction of lost samples is
  p B / (p B + 1 - p) for p = ``dropout_probability`` and B the mean burst length in
  samples (= p for B = 1). A lost sample is still released (after the same latency) with
  ``valid = False`` and NaN in every field, so a consumer sees the gap; the twin node
  publishes nothing for it.

All randomness comes from one ``numpy.random.Generator`` (or a seed), so a run reproduces.
It is split into three independent streams (``Generator.spawn``): noise, outliers,
dropouts. Every sample draws the same amount from each stream whatever the settings, so
with one seed the noise sequence does not depend on the outlier or dropout settings, the
outlier sequence not on the noise or dropout settings, and the dropout sequence not on the
other two. Positions in m, angles in rad, times in s, quaternions (w, x, y, z).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

_TIME_EPS_S = 1e-9  # s, tolerance when comparing release times (float sums of periods)


class MocapConfigError(ValueError):
    """A motion-capture parameter is out of range; the message names it."""


@dataclass(frozen=True)
class MocapConfig:
    """Parameters of the synthetic motion capture.

    Attributes:
        position_noise_m: Std of the gaussian noise on each position coordinate, m.
        orientation_noise_rad: Std of each component of the orientation-noise rotation vector, rad.
        latency_s: Delay between capture and release, s (>= 0).
        dropout_probability: Probability that a sample outside a dropout starts one, [0, 1).
        dropout_burst_s: Mean duration of a dropout, s (0: single-sample dropouts).
        outlier_probability: Probability that a sample is a whole-frame outlier, [0, 1].
        outlier_jump_m: Horizontal displacement of an outlier frame, m (>= 0).
        rate_hz: Capture rate, Hz (converts ``dropout_burst_s`` to samples).
    """

    position_noise_m: float = 0.0
    orientation_noise_rad: float = 0.0
    latency_s: float = 0.0
    dropout_probability: float = 0.0
    dropout_burst_s: float = 0.0
    outlier_probability: float = 0.0
    outlier_jump_m: float = 0.5
    rate_hz: float = 100.0

    def __post_init__(self) -> None:
        """Validate the ranges.

        Raises:
            MocapConfigError: A value out of range (the field is named).
        """
        for name in ("position_noise_m", "orientation_noise_rad", "latency_s", "dropout_burst_s", "outlier_jump_m"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise MocapConfigError(f"{name}: must be a finite number >= 0, got {v}")
        if not (0.0 <= self.dropout_probability < 1.0):
            raise MocapConfigError(f"dropout_probability: must be in [0, 1), got {self.dropout_probability}")
        if not (0.0 <= self.outlier_probability <= 1.0):
            raise MocapConfigError(f"outlier_probability: must be in [0, 1], got {self.outlier_probability}")
        if not (math.isfinite(self.rate_hz) and self.rate_hz > 0):
            raise MocapConfigError(f"rate_hz: must be > 0, got {self.rate_hz}")

    @property
    def mean_burst_samples(self) -> float:
        """Mean dropout length B in samples (>= 1)."""
        return max(1.0, self.dropout_burst_s * self.rate_hz)

    @property
    def expected_loss_fraction(self) -> float:
        """Long-run fraction of lost samples, p B / (p B + 1 - p)."""
        p, b = self.dropout_probability, self.mean_burst_samples
        return p * b / (p * b + 1.0 - p)

    @property
    def expected_outlier_fraction(self) -> float:
        """Long-run fraction of samples released as outliers, q (1 - lost fraction)."""
        return self.outlier_probability * (1.0 - self.expected_loss_fraction)


@dataclass(frozen=True)
class MocapSample:
    """One motion-capture measurement.

    Attributes:
        capture_time: Simulated time the pose was captured, s.
        release_time: Simulated time it is delivered (capture + latency), s.
        valid: False during a dropout (every array is NaN then).
        position: Rigid-body origin, m, shape (3,).
        quaternion: Rigid-body orientation (w, x, y, z), shape (4,), unit norm.
        markers: Marker positions, m, shape (n, 3).
    """

    capture_time: float
    release_time: float
    valid: bool
    position: np.ndarray
    quaternion: np.ndarray
    markers: np.ndarray


def quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a * b of quaternions (w, x, y, z)."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ])


def quat_from_rotvec(r: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of the rotation vector ``r`` (axis * angle, rad)."""
    angle = float(np.linalg.norm(r))
    if angle < 1e-12:
        return np.array([1.0, 0.0, 0.0, 0.0])
    axis = np.asarray(r, dtype=float) / angle
    return np.array([math.cos(angle / 2), *(math.sin(angle / 2) * axis)])


class MocapModel:
    """Noise, outliers, latency and dropouts of a motion-capture system (see the module docstring).

    Args:
        config: The parameters (may be replaced between captures: ``model.config = ...``).
        rng: Random generator, or a seed for ``numpy.random.default_rng``; the model spawns
            its three streams (noise, outliers, dropouts) from it.

    Attributes:
        captured: Samples captured so far.
        dropped: Samples lost in dropouts so far.
        outliers: Samples displaced as whole-frame outliers so far.
    """

    def __init__(self, config: MocapConfig, rng: np.random.Generator | int | None = None) -> None:
        """Start outside a dropout with an empty delay line."""
        self.config = config
        parent = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        self._noise_rng, self._outlier_rng, self._dropout_rng = parent.spawn(3)
        self._burst_left = 0
        self._line: deque[MocapSample] = deque()
        self.captured = 0
        self.dropped = 0
        self.outliers = 0

    def _lost(self) -> bool:
        """Advance the dropout process by one sample; True if this sample is lost.

        Draws two numbers from the dropout stream every sample (a uniform and a burst length),
        used or not.
        """
        cfg = self.config
        u = self._dropout_rng.random()
        length = int(self._dropout_rng.geometric(1.0 / cfg.mean_burst_samples))
        if self._burst_left == 0 and u < cfg.dropout_probability:
            self._burst_left = length
        if self._burst_left > 0:
            self._burst_left -= 1
            return True
        return False

    def capture(self, time: float, position: np.ndarray, quaternion: np.ndarray, markers: np.ndarray) -> MocapSample:
        """Measure the true pose at simulated ``time`` and put the sample in the delay line.

        Args:
            time: Simulated time of the capture, s.
            position: True rigid-body origin, m, shape (3,).
            quaternion: True orientation (w, x, y, z), shape (4,).
            markers: True marker positions, m, shape (n, 3).

        Returns:
            The sample (also queued for :meth:`release`).
        """
        cfg = self.config
        pos = np.asarray(position, dtype=float)
        quat = np.asarray(quaternion, dtype=float)
        mk = np.asarray(markers, dtype=float)
        release = time + cfg.latency_s
        # Every stream is drawn whether or not its draws are used (see the module docstring).
        dp = cfg.position_noise_m * self._noise_rng.standard_normal(3)
        dm = cfg.position_noise_m * self._noise_rng.standard_normal(mk.shape)
        dr = cfg.orientation_noise_rad * self._noise_rng.standard_normal(3)
        u_outlier, u_angle = self._outlier_rng.random(2)
        lost = self._lost()
        self.captured += 1
        if lost:
            self.dropped += 1
            nan = np.nan
            sample = MocapSample(time, release, False, np.full(3, nan), np.full(4, nan), np.full(mk.shape, nan))
        else:
            q = quat_multiply(quat_from_rotvec(dr), quat)
            q = q / np.linalg.norm(q)
            if q[0] < 0:
                q = -q
            shift = np.zeros(3)
            if u_outlier < cfg.outlier_probability:
                self.outliers += 1
                angle = 2.0 * math.pi * u_angle
                shift = cfg.outlier_jump_m * np.array([math.cos(angle), math.sin(angle), 0.0])
            sample = MocapSample(time, release, True, pos + dp + shift, q, mk + dm + shift)
        self._line.append(sample)
        return sample

    def release(self, time: float) -> list[MocapSample]:
        """Samples whose release time has come at simulated ``time``, s, oldest first."""
        out = []
        while self._line and self._line[0].release_time <= time + _TIME_EPS_S:
            out.append(self._line.popleft())
        return out

    @property
    def pending(self) -> int:
        """Samples still in the delay line."""
        return len(self._line)

    def reset(self) -> None:
        """Empty the delay line and leave any dropout (the generator keeps its state)."""
        self._line.clear()
        self._burst_left = 0
