"""The base class of the stack's nodes: an rclpy ``Node`` whose publishers carry no QoS-event handlers.

rclpy gives every publisher two event handlers by default (a warning when a subscription
requests an incompatible QoS, another when one has an incompatible type). Each is a
Python waitable, and rclpy's wait-set executors (the ``SingleThreadedExecutor`` every
node spins by default) rebuild their wait set from every waitable at every wake-up: with
the robot stack's publishers (rclpy's own ``/parameter_events`` one per node among them)
that is about 70 handlers walked hundreds of times a second, for warnings that the
stack's publishers almost never have cause to give.

- The stack's publishers offer the most permissive QoS a topic of theirs can have
  (:mod:`snake_ros.qos`: reliable, so best-effort and reliable readers both match; no
  deadline or liveliness lease). A subscription is incompatible with one only when it
  asks for more: transient-local durability of a volatile publisher, a deadline, a
  liveliness lease.
- The subscription's side reports that incompatibility itself: rclpy's and rclcpp's
  subscriptions log it by default ("New publisher discovered on topic ..., offering
  incompatible QoS"), in the process of the tool that asked for more.
- The stack's own subscriptions keep rclpy's default handlers: a teleop or planner whose
  commands cannot reach the robot is reported in the robot's log.

A publisher given its own ``event_callbacks`` keeps them. docs/benchmarks.md has what the
handlers cost the robot stack (measured with ``snake bench stack``).
"""

from __future__ import annotations

from rclpy.callback_groups import CallbackGroup
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.qos import QoSProfile
from rclpy.qos_overriding_options import QoSOverridingOptions
from rclpy.type_support import MsgT


class StackNode(Node):
    """rclpy ``Node`` whose publishers have no default QoS-event handlers (see the module docstring)."""

    def create_publisher(self, msg_type: type[MsgT], topic: str, qos_profile: QoSProfile | int, *,
                         callback_group: CallbackGroup | None = None,
                         event_callbacks: PublisherEventCallbacks | None = None,
                         qos_overriding_options: QoSOverridingOptions | None = None,
                         publisher_class: type[Publisher[MsgT]] = Publisher) -> Publisher[MsgT]:
        """:meth:`rclpy.node.Node.create_publisher`; without ``event_callbacks``, no event handlers."""
        if event_callbacks is None:
            event_callbacks = PublisherEventCallbacks(use_default_callbacks=False)
        return super().create_publisher(msg_type, topic, qos_profile, callback_group=callback_group,
                                        event_callbacks=event_callbacks,
                                        qos_overriding_options=qos_overriding_options,
                                        publisher_class=publisher_class)
