"""Gait node contract over real DDS: cmd_vel in, joint_commands out; deadman; bad input."""

from __future__ import annotations

import math
import signal
import time
from typing import Any

import pytest
from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import Twist, TwistStamped
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from sensor_msgs.msg import JointState

from snake_core.robot import load_robot
from snake_ros.joint_commands import UNDISCOVERED
from snake_ros.qos import COMMAND_QOS, SENSOR_QOS, STATUS_QOS

pytestmark = pytest.mark.graph


def _values(status: DiagnosticStatus) -> dict[str, float]:
    return {kv.key: float(kv.value) for kv in status.values}


def _publish_for(ros, pub, msg, seconds):
    end = ros.node.get_clock().now().nanoseconds + int(seconds * 1e9)
    while ros.node.get_clock().now().nanoseconds < end:
        pub.publish(msg)
        ros.spin_for(0.05)


@pytest.mark.parametrize("stamped", [True, False])
def test_cmd_vel_drives_joint_commands_then_deadman_holds_shape(ros, stamped):
    robot = load_robot("tsnake")
    cmds = ros.collect(JointState, "joint_commands", COMMAND_QOS)
    states = ros.collect(DiagnosticStatus, "gait_state", STATUS_QOS)
    node = ros.start("gait_node", {"stamped": stamped, "cmd_timeout": 0.3, "max_linear_accel": 1.0})
    assert ros.spin_until(lambda: len(cmds) > 3), ros.log_of(node)
    first = cmds[-1]
    assert list(first.name) == robot.joint_names
    assert all(p == 0.0 for p in first.position)  # straight until commanded

    msg = TwistStamped() if stamped else Twist()
    (msg.twist if stamped else msg).linear.x = 0.05
    pub = ros.node.create_publisher(TwistStamped if stamped else Twist, "cmd_vel", COMMAND_QOS)
    assert ros.spin_until(lambda: pub.get_subscription_count() > 0)

    def ramped_in() -> bool:
        # Drive until the speed ramp is done and the shape has ramped in (however long that takes here).
        pub.publish(msg)
        ros.spin_for(0.05)
        return (bool(states) and states[-1].message == "translating"
                and _values(states[-1])["v"] == pytest.approx(0.05) and max(abs(p) for p in cmds[-1].position) > 0.05)

    assert ros.spin_until(ramped_in), ros.log_of(node)
    moving = _values(states[-1])
    assert states[-1].message == "translating"
    assert moving["v"] == pytest.approx(0.05)
    assert moving["omega_h"] == pytest.approx(moving["omega_t"]) and moving["omega_h"] > 0
    assert max(abs(p) for p in cmds[-1].position) > 0.05  # the shape ramped in

    # Deadman: stop publishing -> ramps to a stop and holds a (non-straight) shape.
    # The stop, and the start-up envelope of the shape complete (it goes on ramping in after a stop).
    assert ros.spin_until(lambda: _values(states[-1])["v"] == 0.0 and _values(states[-1])["amplitude"] == 1.0)
    # Judged by the commands' own stamps (the node's clock, the host's here), not by when the probe
    # takes them: every command computed from 0.5 s to over 1 s after that holds one shape.
    stopped_ns = ros.node.get_clock().now().nanoseconds
    assert ros.spin_until(lambda: any(_stamp_ns(m) > stopped_ns + 1_000_000_000 for m in cmds)), ros.log_of(node)
    later = [m for m in cmds if _stamp_ns(m) > stopped_ns + 500_000_000]
    held = list(later[0].position)
    assert len(later) > 1 and all(list(m.position) == pytest.approx(held, abs=1e-12) for m in later)
    assert max(abs(p) for p in held) > 0.05
    assert ros.stop(node) == 0


def test_on_sigterm_the_last_command_is_where_the_body_is(ros):
    """The stop publishes the measured joint positions (joint_states), in the winding of the targets.

    A loaded joint lagging its target then stops where it is, and the bridge holds it there,
    instead of being driven on to a pose its load may not let it reach.
    """
    robot = load_robot("tsnake")
    names = robot.joint_names
    cmds = ros.collect(JointState, "joint_commands", COMMAND_QOS)
    states = ros.collect(DiagnosticStatus, "gait_state", STATUS_QOS)
    node = ros.start("gait_node")
    assert ros.spin_until(lambda: len(cmds) > 3), ros.log_of(node)
    targets = list(cmds[-1].position)
    measured = [t + 0.01 * (i + 1) for i, t in enumerate(targets)]   # each joint a little off its target
    reported = list(measured)
    reported[0] += 2 * math.pi   # a joint reported one turn on: its stop stays in its target's winding
    pub = ros.node.create_publisher(JointState, "joint_states", SENSOR_QOS)

    def heard() -> bool:   # joint_states keep coming (as from the bridge) until the node says it has them
        pub.publish(JointState(name=names, position=reported))
        return bool(states) and _values(states[-1])["joint_states_received"] > 0

    assert ros.spin_until(heard), ros.log_of(node)
    before = len(cmds)
    pub.publish(JointState(name=names, position=reported))
    node.send_signal(signal.SIGTERM)
    assert node.wait(timeout=60) == 0, ros.log_of(node)

    def stop() -> bool:   # the stop comes after the last tick (one publisher: in order)
        return any(list(m.position) == pytest.approx(measured, abs=1e-9) for m in cmds[before:])

    assert ros.spin_until(stop), (list(cmds[-1].position), measured, ros.log_of(node))
    assert list(cmds[-1].position) == pytest.approx(measured, abs=1e-9)   # and nothing after it


def _stamp_ns(msg: JointState) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def test_bad_commands_are_rejected_and_node_survives(ros):
    cmds = ros.collect(JointState, "joint_commands", COMMAND_QOS)
    states = ros.collect(DiagnosticStatus, "gait_state", STATUS_QOS)
    node = ros.start("gait_node", {"stamped": False, "max_linear": 0.1})
    pub = ros.node.create_publisher(Twist, "cmd_vel", COMMAND_QOS)
    assert ros.spin_until(lambda: pub.get_subscription_count() > 0 and len(states) > 0), ros.log_of(node)
    for bad in (math.nan, math.inf, 50.0):
        msg = Twist()
        msg.linear.x = bad
        _publish_for(ros, pub, msg, 0.3)
    assert ros.spin_until(lambda: _values(states[-1])["rejected_commands"] >= 3)
    assert _values(states[-1])["v"] == 0.0
    assert all(math.isfinite(p) for m in cmds for p in m.position)
    ok = Twist()
    ok.linear.x = 0.5  # above max_linear but not absurd: clamped
    first = len(states)

    def driven(done: Any) -> Any:
        def check() -> bool:
            pub.publish(ok)
            ros.spin_for(0.05)
            return bool(done())
        return check

    # The speed reaches the limit, and it stays there (a ramp towards 0.5 would pass 0.1 and go on).
    assert ros.spin_until(driven(lambda: _values(states[-1])["v"] == pytest.approx(0.1))), ros.log_of(node)
    assert _values(states[-1])["v"] == pytest.approx(0.1)
    at_limit = len(states)
    assert ros.spin_until(driven(lambda: len(states) >= at_limit + 20))
    assert max(_values(s)["v"] for s in states[first:]) == pytest.approx(0.1)
    assert node.poll() is None
    assert "rejected" in ros.log_of(node)


def test_invalid_parameter_update_is_refused_with_a_reason(ros):
    node = ros.start("gait_node")

    def set_param(name, value):
        req = SetParameters.Request()
        req.parameters = [Parameter(name=name, value=ParameterValue(type=ParameterType.PARAMETER_DOUBLE,
                                                                    double_value=value))]
        answer = ros.call(SetParameters, "/gait_node/set_parameters", req)
        assert answer is not None, ros.log_of(node)
        return answer.response.results[0]

    assert not set_param("max_linear", -1.0).successful  # outside the descriptor's range
    assert not set_param("cmd_timeout", 0.0).successful
    result = set_param("max_linear", 0.08)
    assert result.successful, result.reason


def test_a_twist_publisher_on_the_stamped_topic_gets_a_warning(ros):
    node = ros.start("gait_node", {"stamped": True})
    assert ros.spin_until(lambda: "[INFO]" in ros.log_of(node)), ros.log_of(node)
    ros.node.create_publisher(Twist, "cmd_vel", COMMAND_QOS)  # teleop's default type: it never connects
    assert ros.spin_until(lambda: "[WARN]" in ros.log_of(node)), ros.log_of(node)
    warnings = [line for line in ros.log_of(node).splitlines() if "[WARN]" in line]
    assert len(warnings) == 1 and "cmd_vel" in warnings[0] and "geometry_msgs/msg/Twist," in warnings[0]


def test_another_publisher_on_joint_commands_gets_a_warning_naming_both(ros):
    node = ros.start("gait_node")
    assert ros.spin_until(lambda: "[INFO]" in ros.log_of(node)), ros.log_of(node)
    ros.node.create_publisher(JointState, "joint_commands", COMMAND_QOS)  # a second commander, silent even
    other = f"/{ros.node.get_name()}"
    assert ros.spin_until(lambda: "publishers on /joint_commands" in ros.log_of(node)), ros.log_of(node)
    warnings = [line for line in ros.log_of(node).splitlines()
                if "[WARN]" in line and "publishers on /joint_commands" in line]
    assert warnings and "2 publishers" in warnings[0]
    # Named once the probe's node is discovered (on a loaded machine its endpoint can come first).
    assert "/gait_node" in warnings[0] and (other in warnings[0] or UNDISCOVERED in warnings[0]), warnings
    assert "_UNKNOWN_" not in warnings[0], warnings
    assert node.poll() is None


def _stamped(linear_x: float, stamp_ns: int) -> TwistStamped:
    msg = TwistStamped()
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
    msg.twist.linear.x = linear_x
    return msg


def test_stale_and_future_stamps_are_refused_fresh_ones_drive(ros):
    states = ros.collect(DiagnosticStatus, "gait_state", STATUS_QOS)
    node = ros.start("gait_node", {"stamped": True, "cmd_max_age": 1.0, "max_linear_accel": 1.0})
    pub = ros.node.create_publisher(TwistStamped, "cmd_vel", COMMAND_QOS)
    assert ros.spin_until(lambda: pub.get_subscription_count() > 0 and len(states) > 0), ros.log_of(node)
    now_ns = time.time_ns()
    # 1970, and an hour ahead. Each is sent until its own warning is logged (the warning is throttled,
    # so that can take a while): the rejection count alone would be met by the first one's messages.
    for stamp_ns, said in ((1_000_000_000, "s old (accepted"), (now_ns + 3600 * 1_000_000_000,
                                                                "s in the future (accepted")):
        bad = _stamped(0.05, stamp_ns)
        assert ros.spin_until(lambda m=bad, w=said: pub.publish(m) or (
            _values(states[-1])["rejected_commands"] >= 1 and w in ros.log_of(node))), ros.log_of(node)
    assert ros.spin_until(lambda: _values(states[-1])["rejected_commands"] >= 2
                          and "stamp is" in ros.log_of(node)), ros.log_of(node)
    assert _values(states[-1])["v"] == 0.0
    # Fresh wall-clock stamps (a teleop on the host) drive it; the yaw rate has its own key.
    assert ros.spin_until(lambda: pub.publish(_stamped(0.05, time.time_ns())) or
                          _values(states[-1])["v"] == pytest.approx(0.05)), ros.log_of(node)
    assert _values(states[-1])["yaw_rate"] == 0.0 and "omega" not in _values(states[-1])


def test_the_gait_reports_on_diagnostics(ros):
    from diagnostic_msgs.msg import DiagnosticArray

    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    node = ros.start("gait_node", {"diagnostics_rate_hz": 10.0})
    assert ros.spin_until(lambda: any(s.name == "gait_node: gait" and s.hardware_id == "tsnake"
                                      and {"v", "yaw_rate", "phi_h"} <= {kv.key for kv in s.values}
                                      for a in diags for s in a.status)), ros.log_of(node)


def test_a_changed_command_ticks_at_once_or_a_quarter_period_after_the_last_tick(ros):
    """On simulated time the test owns the clock: each tick's stamp says when the gait ticked."""
    from rosgraph_msgs.msg import Clock

    period_ns, t0_ns = 20_000_000, 100_000_000_000  # 50 Hz; the first clock, ns
    cmds = ros.collect(JointState, "joint_commands", COMMAND_QOS)
    clock = ros.node.create_publisher(Clock, "/clock", 10)
    node = ros.start("gait_node", {"use_sim_time": True, "rate_hz": 50, "max_linear_accel": 100.0,
                                   "max_angular_accel": 100.0})
    cmd = ros.node.create_publisher(TwistStamped, "cmd_vel", COMMAND_QOS)  # zero stamps: always fresh
    assert ros.spin_until(lambda: clock.get_subscription_count() > 0 and cmd.get_subscription_count() > 0)

    def set_clock(ns: int) -> None:
        msg = Clock()
        msg.clock.sec, msg.clock.nanosec = divmod(ns, 1_000_000_000)
        clock.publish(msg)

    def next_after(ns: int) -> JointState:
        assert ros.spin_until(lambda: any(_stamp_ns(m) > ns for m in cmds)), ros.log_of(node)
        return next(m for m in cmds if _stamp_ns(m) > ns)

    def ticked_at(ns: int) -> bool:
        set_clock(ns)
        ros.spin_for(0.05)
        return any(_stamp_ns(m) == ns for m in cmds)

    # The first tick, at rest. The tick that the first clock causes can be published before the
    # gait's joint_commands writer has matched this probe's reader (a volatile topic: such a message
    # reaches nobody), so while none arrives the clock moves one period on, which is due a tick.
    first = [t0_ns]

    def first_tick() -> bool:
        if ticked_at(first[0]):
            return True
        first[0] += period_ns
        return False

    assert ros.spin_until(first_tick), ros.log_of(node)
    t0_ns = first[0]
    rest = list(next(m for m in cmds if _stamp_ns(m) == t0_ns).position)
    drive = TwistStamped()
    drive.twist.linear.x = 0.1
    # Half a period after the tick: the changed command ticks at once (the regular tick is at t0 + period).
    set_clock(t0_ns + period_ns // 2)
    cmd.publish(drive)
    moving = next_after(t0_ns)
    assert _stamp_ns(moving) == t0_ns + period_ns // 2
    assert list(moving.position) != pytest.approx(rest, abs=1e-9)  # it moves
    # A change 1 ms after that tick waits until a quarter period has passed since it.
    last_ns = _stamp_ns(moving)
    set_clock(last_ns + 1_000_000)
    cmd.publish(TwistStamped())  # stop
    set_clock(last_ns + period_ns // 4)
    assert _stamp_ns(next_after(last_ns)) == last_ns + period_ns // 4
    # That tick restarted the period: the next regular tick is one period after it (not at
    # last_ns + period, where the period restarted by the previous change would put it).
    last_ns += period_ns // 4
    set_clock(last_ns + period_ns - 1_000_000)
    set_clock(last_ns + period_ns)
    assert _stamp_ns(next_after(last_ns)) == last_ns + period_ns
    assert ros.stop(node) == 0
