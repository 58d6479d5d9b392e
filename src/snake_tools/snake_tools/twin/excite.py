"""``snake twin excite``: publish an identification motion on ``joint_commands`` from the present pose.

The signal is :mod:`snake_core.excitation` (chirp or multisine inside the robot file's limits and
velocities). This module only reads the present pose from ``joint_states``, publishes the plan
at a fixed rate and, when stopped early, holds the last commanded pose. It never calls the
bridge's ``~/arm`` service: a disarmed bridge ignores the commands, as it does any commander's.

It starts once ``joint_commands`` has as many subscribers as asked (the bridge, and the
recorder when the run is recorded: no command is published before they listen). On simulated
time (``use_sim_time``: the twin's ``/clock``) the rate is one of simulated time, and each
command is stamped with the clock it answers: a twin in lock-step (one control period per
command) then runs the motion period by period, however fast the machine is.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from snake_core.excitation import Excitation, ExcitationError, JointBounds, plan_excitation
from snake_core.robot import RobotModel

_ACK_TIMEOUT_S = 2.0  # s to wait for subscribers to acknowledge the last command
_SPIN_S = 0.1  # s (wall), longest wait of one spin while waiting on the simulated clock


def joint_bounds(robot: RobotModel) -> list[JointBounds]:
    """Position and velocity limits of each joint from the robot file, head to tail."""
    return [JointBounds(lower=j.lower, upper=j.upper, velocity=j.velocity) for j in robot.joints]


def present_pose(names: list[str], positions: list[float], robot: RobotModel) -> list[float]:
    """The robot's joint angles, in its joint order, from one ``joint_states`` message, rad.

    Raises:
        ExcitationError: A joint of the robot missing from the message.
    """
    by_name = dict(zip(names, positions, strict=False))
    missing = [j.name for j in robot.joints if j.name not in by_name]
    if missing:
        raise ExcitationError(f"joint_states: no position for joints {missing} of robot {robot.name}")
    return [float(by_name[j.name]) for j in robot.joints]


def run_excitation(robot: RobotModel, signal: str, variant: str, duration: float, amplitude: float | None,
                   rate_hz: float, seed: int, pose_timeout_s: float,
                   report: Callable[[str], None] = print, subscribers: int = 1,
                   use_sim_time: bool = False) -> dict[str, Any]:
    """Wait for ``joint_states`` and the subscribers, then publish the excitation on ``joint_commands``.

    Args:
        robot: The robot (limits, velocities and joint names).
        signal: ``multisine`` or ``chirp``.
        variant: ``lifted`` or ``ground``.
        duration: Length of the motion, s.
        amplitude: Requested amplitude, rad (None: the variant's).
        rate_hz: Publishing rate, Hz.
        seed: Seed of the multisine's phases.
        pose_timeout_s: How long to wait for the first ``joint_states`` and the subscribers, s (wall).
        report: Where progress lines go.
        subscribers: Subscribers of ``joint_commands`` to wait for (the bridge; the recorder too).
        use_sim_time: Run on ``/clock`` (module docstring).

    Returns:
        What was done: plan summary and number of commands published.

    Raises:
        ExcitationError: No ``joint_states`` or too few subscribers in time, or a pose that does not
            fit the robot.
    """
    import rclpy
    from rclpy.duration import Duration
    from rclpy.parameter import Parameter
    from rclpy.signals import SignalHandlerOptions
    from sensor_msgs.msg import JointState

    from snake_ros.qos import COMMAND_QOS, SENSOR_QOS

    if not (math.isfinite(rate_hz) and rate_hz > 0.0):
        raise ExcitationError(f"--rate: {rate_hz!r} must be a positive rate, Hz")
    if subscribers < 0:
        raise ExcitationError(f"--subscribers: {subscribers} must be 0 or more")
    context = rclpy.Context()
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("snake_twin_excite", context=context,
                             parameter_overrides=[Parameter("use_sim_time", value=use_sim_time)])
    clock = node.get_clock()
    published = 0
    interrupted = False
    try:
        latest: list[JointState] = []
        node.create_subscription(JointState, "joint_states", latest.append, SENSOR_QOS)
        pub = node.create_publisher(JointState, "joint_commands", COMMAND_QOS)
        executor = rclpy.executors.SingleThreadedExecutor(context=context)
        executor.add_node(node)
        deadline = time.monotonic() + pose_timeout_s

        def ready() -> bool:
            ticking = not use_sim_time or clock.now().nanoseconds > 0
            return bool(latest) and ticking and pub.get_subscription_count() >= subscribers

        while not ready() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=_SPIN_S)
        if not latest:
            raise ExcitationError(f"no joint_states within {pose_timeout_s:g} s: is the bridge (or twin) running?")
        if not ready():
            if pub.get_subscription_count() < subscribers:
                raise ExcitationError(f"{pub.get_subscription_count()} of {subscribers} subscribers on "
                                      f"{pub.topic_name} within {pose_timeout_s:g} s: is the bridge (and the "
                                      "recorder) running?")
            raise ExcitationError(f"no /clock within {pose_timeout_s:g} s: --use-sim-time needs the twin's clock")
        q0 = present_pose(list(latest[-1].name), list(latest[-1].position), robot)
        plan = plan_excitation(q0, joint_bounds(robot), signal=signal, variant=variant, duration=duration,
                               amplitude=amplitude, seed=seed)
        report(f"excitation: {signal} ({variant}) for {duration:g} s on {pub.topic_name}, amplitude "
               f"{float(plan.amplitude.min()):.3f}-{float(plan.amplitude.max()):.3f} rad; the bridge must be "
               "armed (its ~/arm service) for the robot to move")
        names = [j.name for j in robot.joints]
        last = plan.q0
        start_ns = clock.now().nanoseconds
        period_ns = round(1e9 / rate_hz)  # whole ns: the k-th command is due at exactly start + k periods
        try:
            k = 0
            while True:
                t = min(k * period_ns * 1e-9, plan.duration)
                last = plan.positions(np.array([t]))[0]
                _publish(node, pub, names, last)
                published += 1
                if t >= plan.duration:
                    break
                k += 1
                while (wait_ns := start_ns + k * period_ns - clock.now().nanoseconds) > 0:
                    executor.spin_once(timeout_sec=min(wait_ns * 1e-9, _SPIN_S) if use_sim_time else wait_ns * 1e-9)
        except KeyboardInterrupt:
            interrupted = True
            _publish(node, pub, names, last)  # hold where the motion was: no jump
            published += 1
        pub.wait_for_all_acked(Duration(seconds=_ACK_TIMEOUT_S))
        return _summary(plan, names, published, interrupted)
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)


def _publish(node: Any, pub: Any, names: list[str], positions: np.ndarray) -> None:
    from sensor_msgs.msg import JointState

    msg = JointState()
    msg.header.stamp = node.get_clock().now().to_msg()
    msg.name = names
    msg.position = [float(x) for x in positions]
    pub.publish(msg)


def _summary(plan: Excitation, names: list[str], published: int, interrupted: bool) -> dict[str, Any]:
    return {
        "signal": plan.signal, "duration_s": plan.duration, "published": published, "interrupted": interrupted,
        "band_hz": [plan.variant.f_min, plan.variant.f_max],
        "start_pose_rad": dict(zip(names, [float(x) for x in plan.q0], strict=True)),
        "amplitude_rad": dict(zip(names, [float(x) for x in plan.amplitude], strict=True)),
        "velocity_bound_rad_s": dict(zip(names, [float(x) for x in plan.velocity_bound()], strict=True)),
    }
