"""What a fit reads from a bag: commands, joint states, head positions (:class:`Recording`).

:func:`read_recording` takes ``/joint_commands``, ``/joint_states`` and the first pose topic of a
bag in the robot's joint order, or refuses it with one line (:class:`IdentifyError`, exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from snake_core.robot import RobotModel
from snake_tools.bag.series import BagSeries, read_series

MIN_DURATION_S = 5.0
"""Shortest recording a fit accepts, s."""


class IdentifyError(ValueError):
    """A recording the fit cannot use (one line naming the bag and what is missing)."""


@dataclass(frozen=True)
class Recording:
    """What a fit reads from a bag: commands, joint states, head positions (times in s)."""

    path: Path
    t_cmd: np.ndarray
    q_cmd: np.ndarray
    t_state: np.ndarray
    q_state: np.ndarray
    t_pose: np.ndarray
    xy_pose: np.ndarray
    pose_source: str
    heading_pose: np.ndarray = field(default_factory=lambda: np.empty(0))
    """The head's heading at ``t_pose``, rad, unwrapped (empty where the pose has no orientation)."""
    spans: tuple[tuple[float, float], ...] = ()
    """(start, end) s of each span of constant ``cmd_vel`` (of :data:`~snake_tools.twin.replay.SEGMENT_S`
    without one) within the poses: where the head's speed and turn rate are compared on the ground."""

    @property
    def start(self) -> float:
        """Where a replay starts, s: the first command's stamp, less whole physics steps to the first joint state.

        The rollouts count every stamp's physics step from here (rounded), so the step grid is the
        commands': a command period of whole physics steps puts every command on it, and a joint
        state's stamp error moves its own sample only. Counted from the first stamp, a joint state's
        (a bus read's, jittered) error shifted every sample against every command: a delay that the
        twin's latency, blended over one physics step, does not take, and the fit took it in kv and
        armature (a drawn hidden twist servo's kv fitted 40 % high, flagged identified with a +-10 %
        interval, under stamps jittered by +-1.5 ms). Within half a physics step of the first stamp.
        """
        from snake_hardware.sim.mjcf import SimOptions

        step = SimOptions().timestep   # the physics step of every twin a fit or replay builds
        first_cmd = float(self.t_cmd[0])
        lead = max(round((first_cmd - float(self.t_state[0])) / step), 0)
        return first_cmd - lead * step

    @property
    def duration(self) -> float:
        """Length of the recording, s."""
        return float(max(self.t_cmd[-1], self.t_state[-1])) - self.start


def read_recording(bag: Path | BagSeries, robot: RobotModel, pose_topic: str | None = None) -> Recording:
    """The series a fit needs, in ``robot``'s joint order.

    Raises:
        IdentifyError: No ``/joint_commands``, no ``/joint_states``, other joints, or too short.
        BagError: The bag cannot be read.
    """
    from snake_tools.twin.replay import ReplayError, _joint_matrix, _segments, heading_of

    bs = bag if isinstance(bag, BagSeries) else read_series(Path(bag), progress=False, pose_topic=pose_topic)
    path = bs.summary.path
    for topic in ("/joint_commands", "/joint_states"):
        if not bs.has(topic) or len(bs.series[topic].t) < 2:
            raise IdentifyError(f"{path}: no {topic}: a fit needs what the robot was told and what its joints did")
    names = robot.joint_names
    try:
        q_cmd = _joint_matrix(bs.series["/joint_commands"].rows, names, "/joint_commands", path)
        q_state = _joint_matrix(bs.series["/joint_states"].rows, names, "/joint_states", path)
    except ReplayError as err:
        raise IdentifyError(str(err)) from err
    spans: tuple[tuple[float, float], ...] = ()
    if bs.pose_topics:
        pose = bs.series[bs.pose_topics[0]]
        rows = np.asarray(pose.rows, dtype=float).reshape(-1, 7)
        t_pose, xy, heading = bs.stamped_times(bs.pose_topics[0]), rows[:, :2], np.unwrap(heading_of(rows[:, 3:]))
        source = bs.pose_topics[0]
        if len(t_pose):
            spans = tuple((a, b) for a, b, _ in _segments(bs, float(t_pose[-1])))
    else:
        t_pose, xy, heading, source = np.empty(0), np.empty((0, 2)), np.empty(0), ""
    rec = Recording(path, bs.stamped_times("/joint_commands"), q_cmd, bs.stamped_times("/joint_states"), q_state,
                    t_pose, xy, source, heading, spans)
    if rec.duration < MIN_DURATION_S:
        raise IdentifyError(f"{path}: {rec.duration:.1f} s recorded: a fit needs at least {MIN_DURATION_S:g} s "
                            "of excitation (snake twin excite)")
    return rec
