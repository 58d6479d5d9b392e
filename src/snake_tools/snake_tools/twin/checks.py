"""Recordings checked before a fit or a replay uses them: the bridge's state, the sampling, the kind of run.

A fit (:mod:`snake_tools.twin.identify`) or a replay (:mod:`snake_tools.twin.replay`) assumes
that every recorded command reached the servos and that every sample is stamped when it was
taken. A recording tells whether that held; each check here either keeps a part of it, with one
line per part left out, or refuses it with one line (:class:`~snake_tools.twin.identify.IdentifyError`,
exit 2):

* **Bridge state** (:func:`armed_window`): the bridge's states read from the bag as
  ``snake bag analyze`` reads them (the ``bridge: bus`` status on ``/diagnostics`` and the
  ``"<FROM> -> <TO>: <reason>"`` lines on ``/rosout``, joined by
  :func:`snake_core.analysis.bridge_states.state_spans`). Only in ``ARMED`` do the servos apply
  the commands; every other span (``HOLDING``, ``FAULT``, ...) and the time before the first
  state seen is left out, and so is the last :data:`STATUS_PERIOD_S` of an ``ARMED`` span that
  another state follows (a change seen only in the periodic status is late by up to one period,
  and a fault is detected after its cause). A rollout runs one continuous stretch from its
  recorded initial angles, so the longest ``ARMED`` span is fitted; it must last at least
  :data:`~snake_tools.twin.identify.MIN_DURATION_S`. A bag with no bridge state at all (the
  twin's own recordings) is used whole, with one line saying so.
* **Sampling** (:func:`check_sampling`): the noise model's stamp term ``qdot^2 s_t^2``
  (:func:`~snake_tools.twin.identify.noise_model`) is a linearisation over a small stamp error
  ``s_t`` (the stamps' spread about their regular grid, :func:`stamp_jitter`): it holds while neighbouring samples keep
  their order and spacing, ``s_t`` at most :data:`MAX_STAMP_SPREAD` of the sample period; beyond
  that the stamps, not the servos, make the residual, and a "noise floor" grown from them would
  call any model adequate. The rate must be at least :data:`MIN_RATE_HZ` (six samples per period
  of the lifted excitation's fastest component, 3 Hz). Checked on ``/joint_states`` and, where
  the fit or replay uses it, the pose topic.
* **Kind of run** (:func:`recording_kind`): with a pose, a head that moved more than
  :data:`~snake_tools.twin.identify.MAX_LIFTED_TRAVEL_M` is a run on the ground, else a lifted
  one. Without a pose the joints tell (:func:`lifted_by_joints`): the first
  :data:`KIND_TEST_S` of motion are rolled out through the lifted twin and through the twin on
  the ground, both with the starting physics; the run is of one kind when that twin's joint
  residual is at least :data:`KIND_MARGIN` times smaller than the other's, and undecided
  otherwise. On the ground the body's contact with the floor loads every servo and the joints
  lag their commands by far more than in the air; but where the starting servo model is far
  from the robot's, its misfit dominates both residuals (the emulated bench robot lifted: 0.023
  rad lifted, 0.020 rad on the ground), hence the margin. An undecided run is fitted (the fit's
  adequacy judges it: a first lifted fit starts from servo models far from the robot's) unless
  the bag holds a gait's commands (:data:`GAIT_TOPICS`): the documented on-ground run, which a
  lifted fit refuses unless the joints show the body lifted.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from snake_core.analysis.bridge_states import FOLLOWING, StateSpan, state_spans
from snake_core.robot import RobotModel
from snake_core.twin_params import TwinParams
from snake_tools.bag.series import BagSeries, bridge_state_samples
from snake_tools.twin.identify import (
    MAX_LIFTED_TRAVEL_M,
    MIN_DURATION_S,
    IdentifyError,
    Recording,
    recording_head,
    simulate,
)
from snake_tools.twin.noise import stamp_spread

STATUS_PERIOD_S = 0.5
"""Period of the bridge's ``bridge: bus`` status, s: an ARMED span's last this long is left out when another
state follows it."""
MIN_RATE_HZ = 20.0
"""Least sample rate of ``/joint_states`` (and a pose topic the fit or replay uses), Hz."""
MAX_STAMP_SPREAD = 0.25
"""Largest standard deviation of the stamps about their regular grid, as a fraction of the sample period."""
KIND_TEST_S = 10.0
"""Seconds of motion rolled out to tell a lifted run from one on the ground by its joints alone, s."""
KIND_MARGIN = 1.5
"""How many times closer one twin (lifted, on the ground) must follow the joints to tell the kind of run."""
GAIT_TOPICS = ("/gait_state", "/cmd_vel")
"""Topics whose messages say a gait drove the run (``gait_node``'s state, its differential-drive command)."""

Report = Callable[[str], None]


def bridge_spans(bs: BagSeries, end_s: float) -> list[StateSpan]:
    """The bridge's states over a recording (as ``snake bag analyze`` reads them), or [] when it has none.

    Args:
        bs: The bag's series (``/diagnostics`` and ``/rosout`` read when present).
        end_s: End of the recording on the series' time base, s.
    """
    samples = bridge_state_samples(bs)
    return state_spans(samples, end_s) if samples else []


def armed_window(bs: BagSeries, start_s: float, end_s: float, what: str = "a fit") -> \
        tuple[tuple[float, float] | None, list[str]]:
    """The stretch of ``[start_s, end_s]`` in which the servos applied the commands (module docstring).

    Returns:
        ``(window, lines)``: the window (start, end) in s, or None when the bag records no
        bridge state (use all of it); one line per part left out (or the one line saying no
        state was recorded).

    Raises:
        IdentifyError: No ARMED stretch, or the longest shorter than
            :data:`~snake_tools.twin.identify.MIN_DURATION_S` (one line: the longest, and why the
            rest was left out).
    """
    path = bs.summary.path
    spans = bridge_spans(bs, end_s)
    if not spans:
        return None, [f"{path}: no bridge state recorded (no 'bridge: bus' status on /diagnostics, no state change on "
                      f"/rosout): every command is taken as applied"]
    lines: list[str] = []
    if spans[0].start_s > start_s + 1e-9:
        lines.append(f"left out {start_s:.1f}-{spans[0].start_s:.1f} s: before the bridge's first state")
    armed: list[tuple[float, float]] = []
    for k, sp in enumerate(spans):
        a, b = max(sp.start_s, start_s), min(sp.end_s, end_s)
        if b <= a:
            continue
        if sp.state != FOLLOWING:
            lines.append(f"left out {a:.1f}-{b:.1f} s: bridge {sp.state}" + (f" ({sp.reason})" if sp.reason else ""))
            continue
        if k + 1 < len(spans) and spans[k + 1].start_s < end_s:
            b = max(a, b - STATUS_PERIOD_S)
        armed.append((a, b))
    longest = max(armed, key=lambda w: w[1] - w[0]) if armed else None
    if longest is None or longest[1] - longest[0] < MIN_DURATION_S:
        have = f"{longest[1] - longest[0]:.1f} s" if longest else "no span"
        faults = "; ".join(line.removeprefix("left out ") for line in lines if "bridge" in line)
        raise IdentifyError(f"{path}: {have} with the servos ARMED: {what} needs at least {MIN_DURATION_S:g} s in one "
                            f"span in which the bridge applied the commands" + (f" (not ARMED: {faults})"
                                                                                 if faults else ""))
    for w in armed:
        if w is not longest:
            lines.append(f"left out {w[0]:.1f}-{w[1]:.1f} s: ARMED, but a rollout runs one continuous span "
                         f"(the longest, {longest[0]:.1f}-{longest[1]:.1f} s, is used)")
    return longest, lines


def window_of(rec: Recording, a: float, b: float) -> Recording:
    """The part of a recording stamped within [a, b] s (commands, joint states, poses)."""
    keep_cmd = (rec.t_cmd >= a) & (rec.t_cmd <= b)
    keep = (rec.t_state >= a) & (rec.t_state <= b)
    keep_pose = (rec.t_pose >= a) & (rec.t_pose <= b)
    heading = rec.heading_pose[keep_pose] if len(rec.heading_pose) else rec.heading_pose
    spans = tuple((max(s, a), min(e, b)) for s, e in rec.spans if min(e, b) > max(s, a))
    return Recording(rec.path, rec.t_cmd[keep_cmd], rec.q_cmd[keep_cmd], rec.t_state[keep], rec.q_state[keep],
                     rec.t_pose[keep_pose], rec.xy_pose[keep_pose], rec.pose_source, heading, spans)


stamp_jitter = stamp_spread
"""``(period, std)`` of stamps, s: the noise model's estimator (:func:`snake_tools.twin.noise.stamp_spread`)."""


def check_sampling(path: Path, topic: str, t: np.ndarray) -> None:
    """Refuse a topic sampled too slowly or stamped too loosely for the noise model (module docstring).

    Raises:
        IdentifyError: One line naming the topic and how bad.
    """
    if len(t) < 3:
        return
    period, spread = stamp_jitter(t)
    rate = 1.0 / period if period > 0 else float("inf")
    if rate < MIN_RATE_HZ:
        raise IdentifyError(f"{path}: {topic} at {rate:.1f} Hz: the fit needs at least {MIN_RATE_HZ:g} Hz (six "
                            "samples per period of the excitation's fastest component)")
    if spread > MAX_STAMP_SPREAD * period:
        raise IdentifyError(f"{path}: {topic}: stamps spread {spread * 1e3:.3g} ms (std) about their "
                            f"{period * 1e3:.3g} ms grid, more than the noise model absorbs "
                            f"({MAX_STAMP_SPREAD:g} of the period, {MAX_STAMP_SPREAD * period * 1e3:.3g} ms)")


def screen(bs: BagSeries, rec: Recording, report: Report | None = None, pose: bool = True,
           what: str = "a fit") -> Recording:
    """A recording restricted to its ARMED span and checked for sampling (module docstring).

    Args:
        bs: The bag's series ``rec`` was read from.
        rec: The recording.
        report: Called with each line on what was left out (or that no bridge state was recorded).
        pose: Check the pose topic's sampling too (a ground fit or replay uses it).
        what: What needs the recording, for the refusal's line.

    Raises:
        IdentifyError: No usable span, or a topic sampled beyond what the noise model absorbs.
    """
    window, lines = armed_window(bs, rec.start, rec.start + rec.duration, what)
    if window is not None:
        rec = window_of(rec, *window)
    check_sampling(rec.path, "/joint_states", rec.t_state)
    if pose and len(rec.t_pose):
        check_sampling(rec.path, rec.pose_source, rec.t_pose)
    if report is not None:
        for line in lines:
            report(line)
    return rec


def lifted_by_joints(rec: Recording, robot: RobotModel, start: TwinParams, world: str | Path | None) -> \
        tuple[str | None, float, float]:
    """The kind of run a recording's joints show (module docstring, "Kind of run").

    Returns:
        ``(kind, rms_lifted, rms_ground)``: ``"lifted"``, ``"ground"`` or None (undecided), and
        the joint residual RMS (rad) of the lifted twin and of the twin on the ground over the
        first :data:`KIND_TEST_S` of motion.
    """
    from snake_tools.twin.identify import head_seconds

    head, _ = recording_head(rec, head_seconds(rec, KIND_TEST_S))
    rms = []
    for lifted in (True, False):
        q, _ = simulate(head, robot, start, world, lifted=lifted)
        rms.append(float(np.sqrt(np.mean((q - head.q_state) ** 2))))
    kind = "lifted" if rms[0] * KIND_MARGIN < rms[1] else "ground" if rms[1] * KIND_MARGIN < rms[0] else None
    return kind, rms[0], rms[1]


def recording_kind(rec: Recording, robot: RobotModel, start: TwinParams, world: str | Path | None) -> \
        tuple[str | None, str]:
    """``("lifted" | "ground" | None, how it was told)`` of a recording (module docstring, "Kind of run")."""
    if len(rec.t_pose):
        travel = float(np.hypot(*np.ptp(rec.xy_pose, axis=0)))
        told = "ground" if travel > MAX_LIFTED_TRAVEL_M else "lifted"
        return told, f"the head moved {travel:.3f} m (a lifted head at most {MAX_LIFTED_TRAVEL_M} m)"
    kind, rms_l, rms_g = lifted_by_joints(rec, robot, start, world)
    return kind, (f"no pose; over its first {KIND_TEST_S:g} s of motion the joints follow the lifted twin to "
                  f"{rms_l:.3g} rad RMS and the twin on the ground to {rms_g:.3g} rad (one kind: {KIND_MARGIN:g} "
                  "times closer)")


def gait_driven(bs: BagSeries) -> list[str]:
    """The topics of :data:`GAIT_TOPICS` with messages in the bag (a gait drove the run)."""
    return [t for t in GAIT_TOPICS if t in bs.summary.topics and bs.summary.topics[t].count > 0]


def check_kind(rec: Recording, robot: RobotModel, start: TwinParams, world: str | Path | None, lifted: bool,
               role: str, gait_topics: list[str] | None = None) -> str | None:
    """Refuse a recording of the other kind than the fit's.

    Args:
        rec: The recording.
        robot: The robot recorded.
        start: The physics the joint test rolls out (the target's).
        world: The world of the twin on the ground.
        lifted: The fit is a lifted one.
        role: What the recording is for, in the line (``--lifted``).
        gait_topics: The bag's topics that say a gait drove the run (:func:`gait_driven`): an
            undecided run with them is refused by a lifted fit (module docstring, "Kind of run").

    Returns:
        None, or for an undecided run that is fitted, a line saying so and why.

    Raises:
        IdentifyError: One line naming both kinds and the evidence.
    """
    want = "lifted" if lifted else "ground"
    kind, why = recording_kind(rec, robot, start, world)
    wanted = "a lifted" if lifted else "an on-ground"
    if kind is not None and kind != want:
        raise IdentifyError(f"{rec.path}: not {wanted} run ({why}): {role} needs {wanted} one")
    if kind is None and lifted and gait_topics:
        raise IdentifyError(f"{rec.path}: a gait's run ({', '.join(gait_topics)}) that its joints do not show "
                            f"lifted ({why}): {role} needs {wanted} one (the head's pose, or snake twin excite "
                            "--variant lifted, tells it)")
    if kind is None:
        return f"{rec.path}: kind of run undecided ({why}): fitted as {wanted} run; the fit's adequacy judges it"
    return None

