"""The stack's node base: publishers without QoS-event handlers, incompatibilities still reported.

The handlers are what every wake-up of rclpy's wait-set executor walks; the property that
matters is that dropping them on the publishing side loses no report: the subscription
that asks for more than the publisher offers still hears of it (rclpy's own event, real
DDS), and the stack's subscriptions keep rclpy's handlers.
"""

from __future__ import annotations

import threading

import pytest
from rclpy.event_handler import EventHandler, PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Float64

from snake_ros.qos import COMMAND_QOS, SENSOR_PUB_QOS, STATUS_QOS
from snake_ros.stack_node import StackNode


def _handlers(node: StackNode) -> list[EventHandler]:
    return [w for w in node.waitables if isinstance(w, EventHandler)]


@pytest.mark.graph
def test_publishers_have_no_event_handlers_subscriptions_keep_theirs(ros) -> None:
    node = StackNode("stack_node_handlers", context=ros.context)
    try:
        # rclpy's own /parameter_events publisher, built in Node.__init__, is one of the stack's too.
        assert _handlers(node) == []
        node.create_publisher(Float64, "stack_node_out", SENSOR_PUB_QOS)
        node.create_publisher(Float64, "stack_node_status", STATUS_QOS)
        assert _handlers(node) == []
        # A publisher given its own callbacks keeps them.
        node.create_publisher(Float64, "stack_node_watched", STATUS_QOS,
                              event_callbacks=PublisherEventCallbacks(incompatible_qos=lambda _e: None,
                                                                      use_default_callbacks=False))
        assert len(_handlers(node)) == 1
        node.create_subscription(Float64, "stack_node_in", lambda _m: None, COMMAND_QOS)
        assert len(_handlers(node)) > 1  # rclpy's default incompatible-QoS (and type) handlers
    finally:
        node.destroy_node()


@pytest.mark.graph
def test_a_subscription_asking_more_than_a_stack_publisher_offers_is_told(ros) -> None:
    """A transient-local reader of a volatile stack publisher gets the incompatible-QoS event (its own side)."""
    node = StackNode("stack_node_offer", context=ros.context)
    told = threading.Event()
    policies: list[object] = []

    def on_incompatible(event: object) -> None:
        policies.append(getattr(event, "last_policy_kind", None))
        told.set()

    try:
        node.create_publisher(Float64, "stack_node_offered", STATUS_QOS)
        asks_more = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                               durability=DurabilityPolicy.TRANSIENT_LOCAL)
        ros.node.create_subscription(Float64, "stack_node_offered", lambda _m: None, asks_more,
                                     event_callbacks=SubscriptionEventCallbacks(incompatible_qos=on_incompatible))
        ros.executor.add_node(node)
        try:
            assert ros.spin_until(told.is_set, timeout=60.0), "the subscription was never told of the incompatibility"
        finally:
            ros.executor.remove_node(node)
        assert "DURABILITY" in str(policies[0]).upper()
    finally:
        node.destroy_node()


def test_every_node_of_the_stack_is_a_stack_node() -> None:
    from snake_ros.bench_robot_node import BenchRobotNode
    from snake_ros.robot_stack import NODES
    from snake_ros.twin_node import TwinNode

    classes = [spec().factory for spec in NODES.values()] + [BenchRobotNode, TwinNode]
    assert all(isinstance(c, type) and issubclass(c, StackNode) for c in classes), classes
