"""QoS profiles of the stack, kept in one place (the nav2 ``amcl_pose_qos`` habit).

- Sensor streams (``joint_states``, motion capture): *subscribed* best effort (sensor
  data QoS), *published* reliable. A reliable publisher matches both reliable and
  best-effort subscribers (robot_state_publisher and RViz subscribe reliable), while a
  best-effort subscriber never stalls on a lossy link.
- Commands (``joint_commands``, ``cmd_vel``): reliable, keep last.
- Latched descriptions (``plan``, markers of static things, ``robot_description``):
  reliable, transient local, depth 1.
"""

from __future__ import annotations

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

SENSOR_QOS: QoSProfile = qos_profile_sensor_data
"""Subscriptions to joint states and motion capture: best effort, depth 5."""

SENSOR_PUB_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=10,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)
"""Publishers of joint states and motion capture: reliable, compatible with every subscriber."""

COMMAND_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=10,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)
"""cmd_vel, joint_commands: reliable so that no command is silently lost."""

LATCHED_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
"""Plans, static markers: late joiners get the last message."""

STATUS_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=10,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)
"""Diagnostics, gait state, monitors' outputs: reliable so they end up in bags."""
