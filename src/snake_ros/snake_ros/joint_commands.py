"""``joint_commands`` intake shared by the nodes that drive joints (bridge, twin)."""

from __future__ import annotations

from rclpy.impl.rcutils_logger import RcutilsLogger
from sensor_msgs.msg import JointState

from snake_hardware.command import ABSURD_TARGET_RAD, FilteredCommand, JointTargetFilter

WARN_THROTTLE_S = 2.0  # s between repeated warnings of one kind


def filter_joint_command(msg: JointState, command_filter: JointTargetFilter,
                         logger: RcutilsLogger) -> FilteredCommand | None:
    """Match a ``joint_commands`` message by name, drop NaN/absurd/unknown joints, clamp to limits.

    An absurd target (magnitude above :data:`snake_hardware.command.ABSURD_TARGET_RAD`)
    is dropped for its joint only; the message's other joints are kept. Every dropped or
    clamped entry is reported with a throttled warning.

    Returns:
        The filtered command, or None for a malformed message (names and positions of
        different lengths, or a joint named twice), which is dropped whole.
    """
    if len(msg.name) != len(msg.position):
        logger.warning(f"joint_commands with {len(msg.name)} names and {len(msg.position)} positions dropped",
                       throttle_duration_sec=WARN_THROTTLE_S)
        return None
    if len(set(msg.name)) != len(msg.name):
        twice = sorted({name for name in msg.name if list(msg.name).count(name) > 1})
        logger.warning(f"joint_commands naming {twice} more than once dropped",
                       throttle_duration_sec=WARN_THROTTLE_S)
        return None
    cmd = command_filter.filter(list(msg.name), list(msg.position))
    if cmd.dropped:
        logger.warning(f"joint_commands: dropped unknown {cmd.unknown}, non-finite {cmd.not_finite} and "
                       f"absurd (|target| > {ABSURD_TARGET_RAD:g} rad) {cmd.absurd}",
                       throttle_duration_sec=WARN_THROTTLE_S)
    if cmd.clamped:
        logger.warning(f"joint_commands: clamped to limits {cmd.clamped}", throttle_duration_sec=WARN_THROTTLE_S)
    return cmd
