"""``joint_commands`` intake shared by the nodes that drive joints (bridge, twin)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rclpy.event_handler import QoSSubscriptionMatchedInfo, SubscriptionEventCallbacks
from rclpy.impl.rcutils_logger import RcutilsLogger
from rclpy.node import Node
from sensor_msgs.msg import JointState

from snake_hardware.command import ABSURD_TARGET_RAD, FilteredCommand, JointTargetFilter
from snake_ros.throttled_log import log_throttled

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
        log_throttled(logger, f"joint_commands with {len(msg.name)} names and {len(msg.position)} positions dropped",
                      WARN_THROTTLE_S)
        return None
    if len(set(msg.name)) != len(msg.name):
        twice = sorted({name for name in msg.name if list(msg.name).count(name) > 1})
        log_throttled(logger, f"joint_commands naming {twice} more than once dropped", WARN_THROTTLE_S)
        return None
    cmd = command_filter.filter(list(msg.name), list(msg.position))
    if cmd.dropped:
        log_throttled(logger, f"joint_commands: dropped unknown {cmd.unknown}, non-finite {cmd.not_finite} and "
                      f"absurd (|target| > {ABSURD_TARGET_RAD:g} rad) {cmd.absurd}", WARN_THROTTLE_S)
    if cmd.clamped:
        log_throttled(logger, f"joint_commands: clamped to limits {cmd.clamped}", WARN_THROTTLE_S)
    return cmd


UNDISCOVERED = "(a node not yet discovered)"  # how a publisher whose node is not yet known is named
_UNKNOWN_NAME = "_NODE_NAME_UNKNOWN_"  # what the graph gives before the writer's node is discovered


def node_names(infos: Iterable[Any]) -> list[str]:
    """``namespace/name`` of each endpoint's node, sorted; :data:`UNDISCOVERED` for one not yet known.

    A writer's endpoint can be discovered before its node (participant data arrives apart,
    later on a loaded machine); the graph then names it ``_NODE_NAMESPACE_UNKNOWN_/_NODE_NAME_UNKNOWN_``.
    """
    return sorted(UNDISCOVERED if i.node_name == _UNKNOWN_NAME else f"{i.node_namespace.rstrip('/')}/{i.node_name}"
                  for i in infos)


def publisher_names(node: Node, topic: str) -> list[str]:
    """The nodes publishing on ``topic`` as seen by ``node``'s graph (:func:`node_names`)."""
    return node_names(node.get_publishers_info_by_topic(topic))


class CommanderWatch:
    """Watches how many writers a ``joint_commands`` subscription has matched: one commander at a time.

    Event-driven: the subscription's matched event (no polling of the graph). ``on_change``
    gets a one-line description naming the publishers while more than one is matched,
    and '' once one (or none) is left.

    Args:
        node: The subscribing node (its graph names the publishers).
        topic: The topic as given to the subscription (resolved here).
        on_change: Called with the new description whenever it changes.
    """

    def __init__(self, node: Node, topic: str, on_change: Callable[[str], None]) -> None:
        """Nothing matched yet."""
        self._node = node
        self._topic = node.resolve_topic_name(topic)
        self._on_change = on_change
        self.crowd = ""

    @property
    def event_callbacks(self) -> SubscriptionEventCallbacks:
        """The callbacks to give the subscription (``event_callbacks=``)."""
        return SubscriptionEventCallbacks(matched=self._on_matched)

    def _on_matched(self, info: QoSSubscriptionMatchedInfo) -> None:
        count = int(info.current_count)
        crowd = ""
        if count > 1:
            names = publisher_names(self._node, self._topic)
            crowd = f"{count} publishers on {self._topic} ({', '.join(names) or 'names not yet discovered'})"
        if crowd != self.crowd:
            self.crowd = crowd
            self._on_change(crowd)
