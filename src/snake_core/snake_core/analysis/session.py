"""Analysis of a recorded session (a rosbag of the stack, or the twin's run): pure numpy.

Everything here takes plain arrays already on one time base (seconds); reading bags and
choosing the time base is the caller's job (``snake_tools.bag``). The pieces:

- :func:`sim_time_map`: receive time -> the recorded ``/clock`` (simulated time), so
  that twists measured on a twin running faster than real time come out per simulated
  second, as the nodes saw them;
- :func:`command_segments`: constant-``cmd_vel`` segments (a gap longer than the gait
  node's deadman is a segment of zero command);
- :func:`segment_twists`: commanded vs achieved twist of the reduced drive per segment
  (003 Eq. 9-10 frame, :func:`snake_core.analysis.drive_twist`);
- :func:`chain_points_batch`: the body from a base pose and ``joint_states`` for many
  samples at once (the same chain as :func:`snake_core.kinematics.chain_points`);
- :func:`tracking_errors`: per-joint RMS / max error of ``joint_states`` against the
  held ``joint_commands``, and the lag that best aligns them;
- :func:`cross_track`: distance of a path to a planned polyline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from snake_core.analysis import drive_twist
from snake_core.errors import SnakeCoreError
from snake_core.kinematics import joint_offsets, tail_offset
from snake_core.robot import RobotModel

_SAME_COMMAND = 1e-9  # m/s or rad/s: two cmd_vel closer than this are the same command
_STILL_LINEAR = 1e-6  # m/s: below this a command does not translate
_STILL_ANGULAR = 1e-6  # rad/s: below this a command does not turn
_SAME_TIME_S = 1e-9  # s: samples closer than this count as simultaneous (float rounding of stamps)
_TRACKING_BLOCK = 8192  # state samples whose errors are held at once by tracking_errors


@dataclass(frozen=True)
class CommandSegment:
    """A stretch of constant commanded twist.

    Attributes:
        label: ``translate``, ``turn``, ``turn in place`` or ``stop``.
        v_cmd: Commanded linear speed, m/s.
        omega_cmd: Commanded yaw rate, rad/s.
        start_s: First time the command held, s.
        end_s: Last time it held, s.
    """

    label: str
    v_cmd: float
    omega_cmd: float
    start_s: float
    end_s: float


def command_label(v: float, omega: float) -> str:
    """Name of a commanded twist: ``translate``, ``turn``, ``turn in place`` or ``stop``."""
    moving, turning = abs(v) > _STILL_LINEAR, abs(omega) > _STILL_ANGULAR
    if moving and turning:
        return "turn"
    if moving:
        return "translate"
    return "turn in place" if turning else "stop"


def command_segments(t: np.ndarray, v: np.ndarray, omega: np.ndarray, timeout_s: float,
                     end_s: float | None = None) -> list[CommandSegment]:
    """Split a ``cmd_vel`` stream into segments of constant command.

    A command holds from its first message until the next different one, or until
    ``timeout_s`` after its last message (the gait node's deadman), after which the
    commanded twist is zero until the next message (a ``stop`` segment). The last
    command holds to ``end_s`` (or ``timeout_s`` past its last message).

    Args:
        t: Message times, s, non-decreasing.
        v: Commanded linear speeds, m/s.
        omega: Commanded yaw rates, rad/s.
        timeout_s: Deadman time, s.
        end_s: End of the recording, s (default: last message + ``timeout_s``).

    Returns:
        Segments in time order; adjacent segments with the same command are merged.
    """
    t, v, omega = (np.asarray(x, dtype=float) for x in (t, v, omega))
    if len(t) == 0:
        return []
    if np.any(np.diff(t) < 0):
        raise SnakeCoreError("command_segments: times must be non-decreasing")
    end = float(t[-1] + timeout_s) if end_s is None else max(float(end_s), float(t[-1]))
    raw: list[tuple[float, float, float, float]] = []  # (v, omega, start, end)
    start = 0
    for k in range(1, len(t) + 1):
        last = k == len(t)
        changed = not last and (abs(v[k] - v[start]) > _SAME_COMMAND or abs(omega[k] - omega[start]) > _SAME_COMMAND)
        gap = not last and t[k] - t[k - 1] > timeout_s
        if not (last or changed or gap):
            continue
        stop_at = min(t[k - 1] + timeout_s, end) if (gap or last) else t[k]
        raw.append((float(v[start]), float(omega[start]), float(t[start]), float(stop_at)))
        if gap or last:
            zero_end = end if last else float(t[k])
            if zero_end > stop_at:
                raw.append((0.0, 0.0, float(stop_at), zero_end))
        start = k
    merged: list[list[float]] = []
    for seg in raw:
        if merged and abs(merged[-1][0] - seg[0]) <= _SAME_COMMAND and abs(merged[-1][1] - seg[1]) <= _SAME_COMMAND:
            merged[-1][3] = seg[3]
        else:
            merged.append(list(seg))
    return [CommandSegment(command_label(a, b), a, b, s, e) for a, b, s, e in merged if e > s]


def segment_twists(segments: Sequence[CommandSegment], t: np.ndarray, centre: np.ndarray, heading: np.ndarray,
                   measure_from: float, forward_offset_rad: float) -> list[dict[str, float | str]]:
    """Commanded vs achieved twist per segment.

    The achieved twist is the reduced drive's mean twist (:func:`snake_core.analysis.drive_twist`,
    003 Eq. 9-10) over the part of the segment after ``measure_from`` of its duration
    (the acceleration limits make the start a transient).

    Args:
        segments: Command segments.
        t: Body sample times, s (same time base as the segments).
        centre: Body centre, m, shape (n, 2).
        heading: Unwrapped body-axis yaw (head to tail), rad.
        measure_from: Fraction of each segment skipped before measuring, in [0, 1).
        forward_offset_rad: Drive's forward direction relative to the body axis, rad
            (+pi/2 for the T-Snake's rolling gait, pi for a snake crawling head first).

    Returns:
        One dict per segment: label, v_cmd, omega_cmd, v, omega (NaN when fewer than
        three samples fall in the measured part), start_s, end_s, samples.
    """
    t, centre, heading = np.asarray(t, float), np.asarray(centre, float), np.asarray(heading, float)
    out: list[dict[str, float | str]] = []
    for seg in segments:
        keep = (t >= seg.start_s + measure_from * (seg.end_s - seg.start_s)) & (t <= seg.end_s)
        v = w = float("nan")
        if keep.sum() >= 3 and t[keep][-1] > t[keep][0]:
            v, w = drive_twist(t[keep], centre[keep], heading[keep] + forward_offset_rad - np.pi / 2)
        out.append({"label": seg.label, "v_cmd": seg.v_cmd, "omega_cmd": seg.omega_cmd, "v": v, "omega": w,
                    "start_s": seg.start_s, "end_s": seg.end_s, "samples": int(keep.sum())})
    return out


def flag_short_segments(rows: list[dict[str, Any]], min_duration_s: float, min_samples: int,
                        left_out: dict[int, str] | None = None) -> dict[str, Any]:
    """Mark segments too short to be a measurement, and average the others.

    A segment is *measured* when it lasts at least ``min_duration_s`` (one gait period)
    and at least ``min_samples`` pose samples fall in its measured part; otherwise its
    ``v`` and ``omega`` become None and ``flag`` says why. A segment named in ``left_out``
    (the bridge was not applying the commands during it) keeps the twist it achieved but
    is not measured either: ``flag`` gives the reason and ``left_out`` is True. The means
    are over measured segments only: mean of (achieved - commanded) and of its magnitude,
    per component.

    Args:
        rows: :func:`segment_twists` output, changed in place (``measured``, ``flag``,
            ``left_out`` added).
        min_duration_s: Shortest measured segment, s.
        min_samples: Fewest pose samples in the measured part.
        left_out: Row index -> why the row is left out of the means.

    Returns:
        ``measured``, ``flagged`` and ``left_out`` counts (left-out rows are also flagged),
        ``min_duration_s``, ``min_samples``, and the means (m/s, rad/s; None when no
        segment is measured).
    """
    errors = []
    left_out = left_out or {}
    for k, row in enumerate(rows):
        row["left_out"] = k in left_out
        if k in left_out:
            row["measured"], row["flag"] = False, left_out[k]
            continue
        duration = float(row["end_s"]) - float(row["start_s"])
        why = []
        if duration < min_duration_s:
            why.append(f"{duration:.2f} s, shorter than {min_duration_s:.2f} s")
        if int(row["samples"]) < min_samples:
            why.append(f"{row['samples']} samples, fewer than {min_samples}")
        v, w = row.get("v"), row.get("omega")
        if not why and (v is None or w is None or not (np.isfinite(v) and np.isfinite(w))):
            why.append("no achieved twist")
        row["measured"] = not why
        row["flag"] = "; ".join(why) or None
        if why:
            row["v"] = row["omega"] = None
        else:
            errors.append((float(v) - float(row["v_cmd"]), float(w) - float(row["omega_cmd"])))  # type: ignore[arg-type]
    e = np.asarray(errors, dtype=float).reshape(-1, 2)

    def mean(x: np.ndarray) -> float | None:
        return float(x.mean()) if len(x) else None

    return {"measured": len(errors), "flagged": len(rows) - len(errors), "left_out": len(left_out),
            "min_duration_s": min_duration_s,
            "min_samples": min_samples, "v_error_mean_m_s": mean(e[:, 0]), "omega_error_mean_rad_s": mean(e[:, 1]),
            "v_error_abs_mean_m_s": mean(np.abs(e[:, 0])), "omega_error_abs_mean_rad_s": mean(np.abs(e[:, 1]))}


def sim_time_map(receive_s: np.ndarray, clock_s: np.ndarray, query_s: np.ndarray) -> np.ndarray:
    """Map receive times to the recorded clock by piecewise-linear interpolation.

    Between two ``/clock`` messages time runs at their ratio; before the first and after
    the last, it runs at rate one from the nearest message.

    Args:
        receive_s: Receive times of the ``/clock`` messages, s, non-decreasing.
        clock_s: Their clock values, s, non-decreasing.
        query_s: Receive times to map, s.
    """
    rx, ck, q = (np.asarray(x, dtype=float) for x in (receive_s, clock_s, query_s))
    if len(rx) == 0:
        raise SnakeCoreError("sim_time_map: no clock samples")
    if np.any(np.diff(rx) < 0) or np.any(np.diff(ck) < 0):
        raise SnakeCoreError("sim_time_map: receive times and clock values must be non-decreasing")
    out = np.interp(q, rx, ck)
    out = np.where(q < rx[0], ck[0] + (q - rx[0]), out)
    return np.where(q > rx[-1], ck[-1] + (q - rx[-1]), out)


def _axis_rotations(axes: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """Rotation matrices about unit ``axes`` (j, 3) by ``angles`` (n, j), Rodrigues; shape (n, j, 3, 3)."""
    c, s = np.cos(angles)[..., None, None], np.sin(angles)[..., None, None]
    k = np.zeros((len(axes), 3, 3))
    k[:, 0, 1], k[:, 0, 2], k[:, 1, 2] = -axes[:, 2], axes[:, 1], -axes[:, 0]
    k = k - np.transpose(k, (0, 2, 1))
    outer = np.einsum("ji,jk->jik", axes, axes)
    return c * np.eye(3) + s * k + (1 - c) * outer


def quat_to_matrix(quat_wxyz: np.ndarray) -> np.ndarray:
    """Rotation matrices of unit quaternions (w, x, y, z), shape (n, 4) -> (n, 3, 3)."""
    q = np.asarray(quat_wxyz, dtype=float)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], -2)


def chain_points_batch(robot: RobotModel, base_position: np.ndarray, base_quat_wxyz: np.ndarray,
                       q: np.ndarray) -> np.ndarray:
    """World positions of head end, joints and tail end for many samples, m.

    The chain of :func:`snake_core.kinematics.chain_points` (offsets along each link's
    x, rotation about each joint's YAML axis), with the rotations composed as matrices
    for all samples at once.

    Args:
        robot: Robot description.
        base_position: Head frame origins, m, shape (n, 3).
        base_quat_wxyz: Head frame orientations (w, x, y, z), shape (n, 4).
        q: Joint angles in robot joint order, rad, shape (n, n_joints).

    Returns:
        Array (n, n_joints + 2, 3), head end first.
    """
    pos = np.asarray(base_position, dtype=float)
    q = np.asarray(q, dtype=float)
    n, nj = len(pos), len(robot.joints)
    if q.shape != (n, nj) or pos.shape != (n, 3):
        raise SnakeCoreError(f"chain_points_batch: expected positions (n, 3) and angles (n, {nj}), "
                             f"got {pos.shape} and {q.shape}")
    axes = np.asarray([j.axis for j in robot.joints], dtype=float)
    axes = axes / np.linalg.norm(axes, axis=1, keepdims=True)
    joint_rot = _axis_rotations(axes, q)
    rot = quat_to_matrix(base_quat_wxyz)
    out = np.empty((n, nj + 2, 3))
    out[:, 0] = pos
    here = pos.copy()
    for k, offset in enumerate(joint_offsets(robot)):
        here = here + rot[:, :, 0] * offset
        out[:, k + 1] = here
        rot = rot @ joint_rot[:, k]
    out[:, -1] = here + rot[:, :, 0] * tail_offset(robot)
    return out


def body_centres_headings(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Planar centre (m, shape (n, 2)) and unwrapped head-to-tail axis yaw (rad) of body snapshots.

    Args:
        points: Body points, shape (n, m, 2 or 3), head first.

    The heading is :func:`snake_core.analysis.body_heading` for every snapshot at once
    (principal axis by a batched SVD, signed from head towards tail).
    """
    p = np.asarray(points, dtype=float)[..., :2]
    if len(p) == 0:
        return np.empty((0, 2)), np.empty(0)
    centre = p.mean(axis=1)
    _, _, vt = np.linalg.svd(p - centre[:, None, :], full_matrices=False)
    axis = vt[:, 0, :]
    flip = np.einsum("ni,ni->n", axis, p[:, -1] - p[:, 0]) < 0
    axis[flip] *= -1
    return centre, np.unwrap(np.arctan2(axis[:, 1], axis[:, 0]))


def hold_previous(t_src: np.ndarray, values: np.ndarray, t_query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zero-order hold of a sampled signal: the latest source value at or before each query.

    "At" allows ``_SAME_TIME_S`` of rounding, so a delay of exactly k sample periods
    lands on sample k whatever the float error of ``t - delay``.

    Returns:
        (values at the queries, mask of queries that have a previous source sample).
    """
    idx = np.searchsorted(np.asarray(t_src, float), np.asarray(t_query, float) + _SAME_TIME_S, side="right") - 1
    valid = idx >= 0
    return np.asarray(values)[np.clip(idx, 0, None)], valid


@dataclass(frozen=True)
class JointTracking:
    """Tracking of one joint.

    Attributes:
        rms_rad: RMS of state minus the held command, rad.
        max_rad: Largest absolute error, rad.
        lag_s: Delay of the state behind the command that minimises the RMS error, s.
        rms_at_lag_rad: RMS error after shifting the commands by ``lag_s``, rad.
    """

    rms_rad: float
    max_rad: float
    lag_s: float
    rms_at_lag_rad: float


def tracking_errors(t_cmd: np.ndarray, q_cmd: np.ndarray, t_state: np.ndarray, q_state: np.ndarray,
                    max_lag_s: float, lag_step_s: float) -> list[JointTracking]:
    """Per-joint tracking error of measured positions against commanded ones.

    Error at each state sample: state minus the latest command at or before it (the
    bridge holds a target until the next). The lag is the delay tau on a grid of
    ``lag_step_s`` in [0, ``max_lag_s``] that minimises the RMS of
    state(t) - command(t - tau), with the commands interpolated linearly between samples
    (a held command would make every tau within one command period equally good).

    Args:
        t_cmd: Command times, s, non-decreasing; shape (n,).
        q_cmd: Commanded positions, rad, shape (n, joints).
        t_state: State times, s, non-decreasing; shape (m,).
        q_state: Measured positions, rad, shape (m, joints).
        max_lag_s: Largest lag searched, s.
        lag_step_s: Lag grid step, s.

    Returns:
        One :class:`JointTracking` per joint (NaN when no state follows a command).
    """
    t_cmd, t_state = np.asarray(t_cmd, float), np.asarray(t_state, float)
    q_cmd, q_state = np.asarray(q_cmd, float), np.asarray(q_state, float)
    nj = q_state.shape[1] if q_state.ndim == 2 else 0
    if len(t_cmd) == 0 or len(t_state) == 0:
        return [JointTracking(*(float("nan"),) * 4) for _ in range(nj)]
    lags = np.arange(0.0, max_lag_s + 0.5 * lag_step_s, lag_step_s)
    # Sums over the state samples, a block at a time (a long recording's errors never exist whole).
    sq_err, max_err, n_err = np.zeros(nj), np.zeros(nj), 0
    sq_lag, n_lag = np.zeros((len(lags), nj)), np.zeros((len(lags), nj))
    for a in range(0, len(t_state), _TRACKING_BLOCK):
        ts, qs = t_state[a: a + _TRACKING_BLOCK], q_state[a: a + _TRACKING_BLOCK]
        held, valid = hold_previous(t_cmd, q_cmd, ts)
        err = (qs - held)[valid]
        if len(err):
            sq_err += np.sum(err ** 2, axis=0)
            max_err = np.maximum(max_err, np.max(np.abs(err), axis=0))
            n_err += len(err)
        # The commands around this block (one sample either side of its lagged span): interpolating
        # on them gives what interpolating on all of them does.
        lo = max(0, int(np.searchsorted(t_cmd, ts[0] - lags[-1] - _SAME_TIME_S, side="left")) - 1)
        hi = int(np.searchsorted(t_cmd, ts[-1] + _SAME_TIME_S, side="right")) + 1
        tc, qc = t_cmd[lo:hi], np.ascontiguousarray(q_cmd[lo:hi].T)
        for i, lag in enumerate(lags):
            shifted = ts - lag
            valid_l = (shifted >= t_cmd[0] - _SAME_TIME_S) & (shifted <= t_cmd[-1] + _SAME_TIME_S)
            if valid_l.any():
                interp = np.column_stack([np.interp(shifted[valid_l], tc, qc[j]) for j in range(nj)])
                d2 = (qs[valid_l] - interp) ** 2
                finite = np.isfinite(d2)
                sq_lag[i] += np.sum(np.where(finite, d2, 0.0), axis=0)
                n_lag[i] += np.sum(finite, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rms_by_lag = np.where(n_lag > 0, np.sqrt(sq_lag / np.maximum(n_lag, 1)), np.nan)
    out = []
    for j in range(nj):
        if not n_err:
            out.append(JointTracking(*(float("nan"),) * 4))
            continue
        col = rms_by_lag[:, j]
        best = int(np.nanargmin(col)) if np.isfinite(col).any() else 0
        out.append(JointTracking(rms_rad=float(np.sqrt(sq_err[j] / n_err)), max_rad=float(max_err[j]),
                                 lag_s=float(lags[best]), rms_at_lag_rad=float(col[best])))
    return out


def cross_track(path_xy: np.ndarray, points_xy: np.ndarray) -> np.ndarray:
    """Distance from each point to a polyline, m.

    Args:
        path_xy: Polyline vertices, m, shape (k, 2), k >= 1.
        points_xy: Points, m, shape (n, 2).
    """
    a = np.asarray(path_xy, dtype=float)
    p = np.asarray(points_xy, dtype=float)
    if len(a) == 0:
        raise SnakeCoreError("cross_track: empty path")
    if len(a) == 1:
        return np.linalg.norm(p - a[0], axis=1)
    s, e = a[:-1], a[1:]
    d = e - s
    length2 = np.maximum(np.einsum("ij,ij->i", d, d), 1e-300)
    rel = p[:, None, :] - s[None, :, :]
    u = np.clip(np.einsum("nki,ki->nk", rel, d) / length2, 0.0, 1.0)
    nearest = s[None] + u[..., None] * d[None]
    return np.min(np.linalg.norm(p[:, None, :] - nearest, axis=2), axis=1)


def constant_runs(t: np.ndarray, values: np.ndarray, min_duration_s: float) -> list[tuple[float, float]]:
    """Stretches where every column of ``values`` stays constant, at least ``min_duration_s`` long.

    Args:
        t: Sample times, s, non-decreasing; shape (n,).
        values: Samples, shape (n, k); rows equal within ``_SAME_COMMAND`` are the same.
        min_duration_s: Shortest stretch kept, s.

    Returns:
        (first time, last time) of each stretch, s, in time order.
    """
    t, v = np.asarray(t, dtype=float), np.asarray(values, dtype=float)
    if len(t) == 0:
        return []
    change = np.flatnonzero(np.any(np.abs(np.diff(v, axis=0)) > _SAME_COMMAND, axis=1)) + 1
    starts = np.r_[0, change]
    ends = np.r_[change - 1, len(t) - 1]
    return [(float(t[a]), float(t[b])) for a, b in zip(starts, ends, strict=True) if t[b] - t[a] >= min_duration_s]
