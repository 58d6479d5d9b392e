"""Head pose from motion capture (001 Sec. VI: three markers on the head module).

Two sources:

- a rigid-body pose, as vrpn_mocap and similar drivers publish it (position + quaternion);
- three (or more) marker positions, fitted to the head's marker template by the
  least-squares rigid transform (Kabsch/Umeyama without scale): the rotation from
  ``scipy.spatial.transform.Rotation.align_vectors`` on the centred point sets, the
  translation from the centroids. Marker order must match the template.

Either way the planar head pose is ``(x, y, yaw)`` with yaw the heading of the head's x axis
projected on the ground. :class:`HeadPoseFilter` then drops samples with NaN, samples whose
jump from the last accepted pose implies a speed beyond the physical limit (outliers, marker
swaps), and reports a dropout when no sample has been accepted for a timeout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from snake_core.angles import wrap_to_pi
from snake_core.errors import SnakeCoreError

if TYPE_CHECKING:
    from scipy.spatial.transform import Rotation

_MIN_SPREAD_M = 1e-4  # m, markers closer together than this cannot define an orientation
_NOISE_FLOOR_M = 0.01  # m, jump always accepted regardless of dt (marker noise)
_NOISE_FLOOR_RAD = 0.1  # rad, same for yaw


class MocapError(SnakeCoreError, ValueError):
    """Unusable motion-capture input (the message says why)."""


@dataclass(frozen=True)
class RigidFit:
    """Result of fitting the marker template to measured markers.

    Attributes:
        rotation: Head orientation in the world.
        translation: Head origin in the world, m.
        rms: Root-mean-square residual of the markers, m.
    """

    rotation: Rotation
    translation: np.ndarray
    rms: float

    def planar(self) -> tuple[float, float, float]:
        """``(x m, y m, yaw rad)``: position and the heading of the head's x axis on the ground."""
        ex = self.rotation.apply([1.0, 0.0, 0.0])
        return float(self.translation[0]), float(self.translation[1]), math.atan2(ex[1], ex[0])


def fit_markers(template: np.ndarray, measured: np.ndarray) -> RigidFit:
    """Least-squares rigid transform taking the template onto the measured markers (Kabsch).

    Minimises ``sum_k |R t_k + p - m_k|^2`` over rotations R and translations p.

    Args:
        template: Marker positions in the head frame, m, ``(K, 3)``, K >= 3, not collinear.
        measured: The same markers in the world, m, ``(K, 3)``, same order.

    Returns:
        The fit.

    Raises:
        MocapError: Wrong shapes, NaN, or markers too close / collinear to define a rotation.
    """
    t = np.asarray(template, dtype=float)
    m = np.asarray(measured, dtype=float)
    if t.ndim != 2 or t.shape[1] != 3 or t.shape[0] < 3 or m.shape != t.shape:
        raise MocapError(f"markers: need (K >= 3, 3) arrays of the same shape, got {t.shape} and {m.shape}")
    if not (np.isfinite(t).all() and np.isfinite(m).all()):
        raise MocapError("markers: non-finite position")
    tc, mc = t.mean(axis=0), m.mean(axis=0)
    a, b = t - tc, m - mc
    for name, pts in (("template", a), ("measured", b)):
        sv = np.linalg.svd(pts, compute_uv=False)
        if sv[0] < _MIN_SPREAD_M or sv[1] < _MIN_SPREAD_M:
            raise MocapError(f"{name} markers: collinear or coincident, orientation undefined")
    from scipy.spatial.transform import Rotation  # on first use: keeps scipy.spatial off start-up

    rot, _ = Rotation.align_vectors(b, a)
    p = mc - rot.apply(tc)
    res = rot.apply(t) + p - m
    return RigidFit(rotation=rot, translation=p, rms=float(np.sqrt((res**2).sum(axis=1).mean())))


def pose_from_rigid_body(position: np.ndarray, quaternion_xyzw: np.ndarray) -> tuple[float, float, float]:
    """Planar head pose from a rigid-body pose (geometry_msgs/Pose convention, quaternion x, y, z, w).

    Raises:
        MocapError: NaN or a zero quaternion.
    """
    p = np.asarray(position, dtype=float)
    q = np.asarray(quaternion_xyzw, dtype=float)
    if not (np.isfinite(p).all() and np.isfinite(q).all()) or float(np.linalg.norm(q)) < 1e-9:
        raise MocapError("rigid body: non-finite position or zero/non-finite quaternion")
    from scipy.spatial.transform import Rotation  # on first use: keeps scipy.spatial off start-up

    ex = Rotation.from_quat(q).apply([1.0, 0.0, 0.0])
    return float(p[0]), float(p[1]), math.atan2(ex[1], ex[0])


@dataclass(frozen=True)
class HeadPoseFilterConfig:
    """Head pose filter settings.

    Attributes:
        max_speed: Largest believable head speed, m/s.
        max_yaw_rate: Largest believable yaw rate, rad/s.
        timeout: Time without an accepted sample after which the pose is lost, s.
        max_rms: Largest marker-fit residual accepted, m.
    """

    max_speed: float = 1.0
    max_yaw_rate: float = 6.0
    timeout: float = 0.5
    max_rms: float = 0.005

    def __post_init__(self) -> None:
        for name in ("max_speed", "max_yaw_rate", "timeout", "max_rms"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise MocapError(f"{name}: must be a positive number, got {v!r}")


class HeadPoseFilter:
    """Gatekeeper of head poses: NaN ignored, physically impossible jumps rejected, dropouts timed out.

    Args:
        config: Settings.
    """

    def __init__(self, config: HeadPoseFilterConfig | None = None) -> None:
        self.config = config or HeadPoseFilterConfig()
        self.pose: tuple[float, float, float] | None = None
        self.stamp = -math.inf
        self.accepted = self.rejected_nan = self.rejected_jump = self.rejected_fit = 0

    def offer(self, t: float, pose: tuple[float, float, float]) -> bool:
        """Offer a planar pose measured at ``t`` s; return True if accepted.

        A sample is an outlier when its distance from the last accepted pose exceeds
        ``max_speed * (t - t_last)`` plus a noise floor (likewise for yaw). Since the
        allowance grows with the time since the last accepted sample, the filter locks
        on again after a dropout.
        """
        if not all(math.isfinite(v) for v in pose) or not math.isfinite(t):
            self.rejected_nan += 1
            return False
        if self.pose is not None:
            dt = max(t - self.stamp, 0.0)
            dist = math.hypot(pose[0] - self.pose[0], pose[1] - self.pose[1])
            dyaw = abs(wrap_to_pi(pose[2] - self.pose[2]))
            if (dist > self.config.max_speed * dt + _NOISE_FLOOR_M
                    or dyaw > self.config.max_yaw_rate * dt + _NOISE_FLOOR_RAD):
                self.rejected_jump += 1
                return False
        self.pose, self.stamp = (float(pose[0]), float(pose[1]), float(pose[2])), t
        self.accepted += 1
        return True

    def offer_markers(self, t: float, template: np.ndarray, measured: np.ndarray, yaw_offset: float = 0.0) -> bool:
        """Fit markers (NaN markers make the sample be ignored) and offer the pose.

        Args:
            t: Time of the measurement, s.
            template: Markers in the head frame, m, ``(K, 3)``.
            measured: Markers in the world, m, ``(K, 3)``, same order.
            yaw_offset: Added to the fitted yaw (e.g. pi when the head frame's x points to the tail), rad.
        """
        m = np.asarray(measured, dtype=float)
        if not np.isfinite(m).all():
            self.rejected_nan += 1
            return False
        try:
            fit = fit_markers(template, m)
        except MocapError:
            self.rejected_fit += 1
            return False
        if fit.rms > self.config.max_rms:
            self.rejected_fit += 1
            return False
        x, y, yaw = fit.planar()
        return self.offer(t, (x, y, yaw + yaw_offset))

    def current(self, now: float) -> tuple[float, float, float] | None:
        """The last accepted pose, or None if there is none or it is older than the timeout."""
        if self.pose is None or now - self.stamp > self.config.timeout:
            return None
        return self.pose
