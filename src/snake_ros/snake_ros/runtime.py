"""Process plumbing shared by the nodes' ``main`` functions."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from snake_core.errors import SnakeCoreError

EXIT_OK = 0
EXIT_BAD_CONFIG = 2

N = TypeVar("N", bound=Node)


def spin(node: Node) -> None:
    """Spin ``node`` until shutdown; Ctrl-C / SIGINT / SIGTERM end it cleanly.

    rclpy's signal handler shuts the context down from another thread; depending on
    where the executor is at that moment, ``spin`` ends with KeyboardInterrupt,
    ExternalShutdownException, or an RCLError about an invalid context (the wait set
    was being built). The last is a clean shutdown too when the context is no longer
    ok; any error while the context is still ok is re-raised.
    """
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        if rclpy.ok(context=node.context):
            raise


def run_node(factory: Callable[[], N], args: list[str] | None = None,
             on_exit: Callable[[N], None] | None = None) -> int:
    """Init rclpy, build the node with ``factory``, spin it, clean up; the exit code.

    A bad configuration (an error of the core, e.g. a robot YAML field, or a ValueError
    naming a parameter) is logged as one FATAL line and gives exit code 2, not a
    traceback. A shutdown request that arrives while the node is still being built is a
    clean exit. ``on_exit(node)`` (e.g. hold or torque off the servos, publish a stop)
    then ``destroy_node`` run on every exit once the node exists, Ctrl-C included.
    """
    try:
        with rclpy.init(args=args):
            try:
                node = factory()
            except (SnakeCoreError, ValueError) as err:
                if not rclpy.ok():
                    return EXIT_OK
                print(f"[FATAL] cannot start: {err}", file=sys.stderr, flush=True)
                return EXIT_BAD_CONFIG
            except Exception:
                if not rclpy.ok():
                    return EXIT_OK
                raise
            try:
                spin(node)
            finally:
                if on_exit is not None:
                    on_exit(node)
                node.destroy_node()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    return EXIT_OK
