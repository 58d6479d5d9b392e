"""Graph tests of the singularity monitor: real node process over DDS (the ``ros`` fixture)."""

from __future__ import annotations

import itertools
import time

import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, Int32MultiArray
from visualization_msgs.msg import Marker, MarkerArray

from snake_core.robot import load_robot
from snake_core.singularity import evaluate, make_params
from snake_ros.qos import COMMAND_QOS, SENSOR_PUB_QOS, STATUS_QOS

pytestmark = pytest.mark.graph

ROBOT = load_robot("wheeled_snake")
PARAMS = make_params(8, ROBOT.wheel_d, ROBOT.wheel_l)
REGULAR = [0.5, -0.5, 0.5, -0.5, 0.5, -0.5, 0.5]  # zig-zag: margin ~0.54
STRAIGHT = [0.0] * 7  # all wheel axes parallel: singular


def joint_state(names, positions):
    msg = JointState()
    msg.name = list(names)
    msg.position = [float(x) for x in positions]
    return msg


def start(ros, **params):
    base = {"diagnostics_rate_hz": 20.0, "warn_margin": 0.05, "error_margin": 0.01}
    base.update(params)
    proc = ros.start("singularity_monitor", base)
    margins = ros.collect(Float64, "singularity_margin", STATUS_QOS)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    markers = ros.collect(MarkerArray, "singularity_markers", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_states", SENSOR_PUB_QOS)
    assert ros.spin_until(lambda: pub.get_subscription_count() > 0), ros.log_of(proc)
    return proc, pub, margins, diags, markers


def publish_until(ros, pub, msg, predicate, timeout=20.0):
    """Publish ``msg`` repeatedly (best-effort subscription) until ``predicate()`` holds."""
    ok = False
    for _ in range(int(timeout / 0.1)):
        pub.publish(msg)
        if ros.spin_until(predicate, timeout=0.1):
            ok = True
            break
    return ok


def monitor_status(diags):
    return [s for arr in diags for s in arr.status if s.name == "singularity_monitor"]


def test_margin_diagnostics_and_markers(ros):
    proc, pub, margins, diags, markers = start(ros)
    # Joints deliberately shuffled and mixed with an unrelated joint: mapping is by name.
    names = [*ROBOT.joint_names[::-1], "gripper"]
    positions = [*REGULAR[::-1], 9.0]
    expected = evaluate(PARAMS, REGULAR).margin
    assert publish_until(ros, pub, joint_state(names, positions),
                         lambda: any(abs(m.data - expected) < 1e-9 for m in margins)), ros.log_of(proc)
    # Diagnostics and markers come only while the joint states are fresh, and their publishers may
    # match the probe after the margin's: the shape keeps coming until they are heard too.
    assert publish_until(ros, pub, joint_state(names, positions),
                         lambda: any(s.level == DiagnosticStatus.OK for s in monitor_status(diags))
                         and len(markers) > 0), ros.log_of(proc)
    ok = next(s for s in monitor_status(diags) if s.level == DiagnosticStatus.OK)
    values = {kv.key: kv.value for kv in ok.values}
    assert float(values["margin"]) == pytest.approx(expected, rel=1e-5)
    assert ros.spin_until(lambda: len(markers) > 0)
    axes = next(m for m in markers[-1].markers if m.ns == "wheel_axes")
    assert axes.type == Marker.LINE_LIST and len(axes.points) == 2 * 8

    # Straight line: every wheel axis parallel -> margin 0, ERROR, no meeting point marker.
    diags.clear()
    markers.clear()
    assert publish_until(ros, pub, joint_state(ROBOT.joint_names, STRAIGHT),
                         lambda: any(m.data < 1e-12 for m in margins))
    assert publish_until(ros, pub, joint_state(ROBOT.joint_names, STRAIGHT),
                         lambda: any(s.level == DiagnosticStatus.ERROR for s in monitor_status(diags)))
    err = next(s for s in monitor_status(diags) if s.level == DiagnosticStatus.ERROR)
    assert "parallel" in err.message

    # Links 4-8 lifted (topic) and phi_3 chosen so that the axes of links 1-3 meet at one
    # point (closed-form solve of the core): singular, meeting point drawn.
    from snake_core.singularity import solve_free_angle

    head = make_params(3, ROBOT.wheel_d[:3], ROBOT.wheel_l[:3])
    bent = [0.6, solve_free_angle(head, [0.6]).solutions[0], 0.3, -0.2, 0.1, 0.0, 0.4]
    slip_pub = ros.node.create_publisher(Int32MultiArray, "slipping_links", COMMAND_QOS)
    assert ros.spin_until(lambda: slip_pub.get_subscription_count() > 0)
    slip_pub.publish(Int32MultiArray(data=[4, 5, 6, 7, 8]))
    expected = evaluate(PARAMS, bent, [4, 5, 6, 7, 8]).margin
    assert expected < 1e-12 < evaluate(PARAMS, bent).margin  # singular only with links 4-8 lifted
    def lifted_and_singular() -> bool:
        # The status names the lifted links once the node took them; margins from here on are of
        # the bent shape (the straight shape's, still in flight, are singular too).
        statuses = monitor_status(diags)
        values = {kv.key: kv.value for kv in statuses[-1].values} if statuses else {}
        return values.get("slipping_links") == "4 5 6 7 8" and any(m.data < 1e-9 for m in margins[n:])

    n = len(margins)
    assert publish_until(ros, pub, joint_state(ROBOT.joint_names, bent), lifted_and_singular), ros.log_of(proc)
    markers.clear()  # from here on, every marker array is of the bent shape with links 4-8 lifted

    def meeting_marker():
        for arr in markers:
            for m in arr.markers:
                if m.ns == "meeting_point" and m.action == Marker.ADD:
                    return m
        return None

    assert publish_until(ros, pub, joint_state(ROBOT.joint_names, bent), lambda: meeting_marker() is not None)
    m = meeting_marker()
    point = evaluate(PARAMS, bent, [4, 5, 6, 7, 8]).meeting.point
    assert (m.pose.position.x, m.pose.position.y) == pytest.approx(point, abs=1e-9)
    assert m.header.frame_id == "wheel_1"
    last_axes = next(mk for mk in markers[-1].markers if mk.ns == "wheel_axes")
    assert len(last_axes.points) == 2 * 3  # only the non side-slipping links' axes
    assert proc.poll() is None


def test_bad_joint_states_are_reported_not_fatal(ros):
    proc, pub, margins, _diags, _markers = start(ros, publish_speed_scale=True)
    scales = ros.collect(Float64, "gait_speed_scale", COMMAND_QOS)
    bad = [
        joint_state(ROBOT.joint_names[:-1], REGULAR[:-1]),                  # missing joint j8
        joint_state(ROBOT.joint_names, [*REGULAR[:-1], float("nan")]),      # NaN
        joint_state(ROBOT.joint_names, REGULAR[:-2]),                       # wrong length
    ]
    def warned() -> bool:
        log = ros.log_of(proc)
        return "missing joints" in log or "non-finite" in log or "positions" in log

    # joint_states is best effort: each bad message again until the node has warned about one.
    for msg in bad:
        assert publish_until(ros, pub, msg, warned), ros.log_of(proc)
    assert proc.poll() is None, ros.log_of(proc)
    assert margins == []  # nothing computed from bad input
    log = ros.log_of(proc)
    assert "missing joints" in log or "non-finite" in log or "positions" in log
    # Still alive and working: a valid message gets a margin and a speed scale of 1.
    assert publish_until(ros, pub, joint_state(ROBOT.joint_names, REGULAR),
                         lambda: len(margins) > 0 and len(scales) > 0), ros.log_of(proc)
    assert scales[-1].data == pytest.approx(1.0)
    assert publish_until(ros, pub, joint_state(ROBOT.joint_names, STRAIGHT),
                         lambda: any(s.data == 0.0 for s in scales))
    # A bad slipping set on the topic is ignored with a warning.
    slip_pub = ros.node.create_publisher(Int32MultiArray, "slipping_links", COMMAND_QOS)
    assert ros.spin_until(lambda: slip_pub.get_subscription_count() > 0)
    slip_pub.publish(Int32MultiArray(data=[42]))
    ros.spin_for(0.5)
    assert proc.poll() is None
    assert ros.stop(proc) == 0


def test_parameters_validated_at_run_time(ros):
    from rcl_interfaces.msg import Parameter as ParameterMsg
    from rcl_interfaces.msg import ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    proc, pub, margins, _diags, _markers = start(ros)

    def set_param(name, value):
        if isinstance(value, list):
            pv = ParameterValue(type=ParameterType.PARAMETER_INTEGER_ARRAY, integer_array_value=value)
        else:
            pv = ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=value)
        request = SetParameters.Request(parameters=[ParameterMsg(name=name, value=pv)])
        answer = ros.call(SetParameters, "/singularity_monitor/set_parameters", request)
        assert answer is not None, ros.log_of(proc)
        return answer.response.results[0]

    refused = set_param("error_margin", 0.5)  # above warn_margin 0.05
    assert not refused.successful and "warn_margin" in refused.reason
    refused = set_param("slipping_links", [99])
    assert not refused.successful and "slipping" in refused.reason
    assert set_param("slipping_links", [4, 5, 6, 7, 8]).successful
    # Links 1-3 only: the regular zig-zag's margin now comes from three axes.
    expected = evaluate(PARAMS, REGULAR, [4, 5, 6, 7, 8]).margin
    assert abs(expected - evaluate(PARAMS, REGULAR).margin) > 1e-3
    assert publish_until(ros, pub, joint_state(ROBOT.joint_names, REGULAR),
                         lambda: any(abs(m.data - expected) < 1e-9 for m in margins)), ros.log_of(proc)


def test_diagnostics_go_stale_without_valid_joint_states_and_through_nan(ros):
    proc, pub, _margins, diags, _markers = start(ros, stale_after_s=0.5)
    good = joint_state(ROBOT.joint_names, REGULAR)

    def last_level():
        statuses = monitor_status(diags)
        return statuses[-1].level if statuses else None

    assert publish_until(ros, pub, good, lambda: last_level() == DiagnosticStatus.OK), ros.log_of(proc)
    # The stream stops: STALE with the age and the last margin, not the old OK.
    assert ros.spin_until(lambda: last_level() == DiagnosticStatus.STALE, 20.0)
    stale = monitor_status(diags)[-1]
    values = {kv.key: kv.value for kv in stale.values}
    assert float(values["age_s"]) > 0.5 and "no valid joint_states" in stale.message
    assert float(values["last_margin"]) == pytest.approx(evaluate(PARAMS, REGULAR).margin, rel=1e-5)
    # NaN-only messages are not valid: STALE stays.
    assert publish_until(ros, pub, good, lambda: last_level() == DiagnosticStatus.OK)
    nan = joint_state(ROBOT.joint_names, [float("nan")] * 7)
    assert publish_until(ros, pub, nan, lambda: last_level() == DiagnosticStatus.STALE)
    n = len(diags)
    while len(diags) < n + 10:                      # ten more diagnostics, NaN still flowing
        pub.publish(nan)
        ros.spin_for(0.05)
    assert all(s.level == DiagnosticStatus.STALE for arr in diags[n:] for s in arr.status)
    assert proc.poll() is None


def test_max_rate_bounds_the_evaluations_and_the_shape_in_between_is_only_checked(ros):
    """With ``max_rate`` 0.2 Hz a new shape shows only after the 5 s period; it is still checked (not STALE).

    The bound uses the host's monotonic clock, shared with the node: the node's next evaluation
    comes no sooner than 5 s after its first, which comes after the test first published
    shape A, so every diagnostic received before that instant still carries A's margin.
    """
    period = 5.0  # s, 1 / max_rate
    stale_after = 1.0  # s: a diagnostic this long into shape B is STALE unless B was checked
    proc, pub, margins, _diags, _markers = start(ros, max_rate=1.0 / period, stale_after_s=stale_after)
    received: list[tuple[float, float, DiagnosticStatus]] = []   # (received, monotonic; stamped, system s)
    ros.node.create_subscription(
        DiagnosticArray, "diagnostics",
        lambda arr: received.extend((time.monotonic(), arr.header.stamp.sec + 1e-9 * arr.header.stamp.nanosec, s)
                                    for s in arr.status if s.name == "singularity_monitor"),
        STATUS_QOS)
    names = [f"j{i}" for i in range(2, 9)]
    bent = [0.3, -0.6, 0.2, 0.4, -0.3, 0.5, -0.1]
    margin_a, margin_b = evaluate(PARAMS, REGULAR).margin, evaluate(PARAMS, bent).margin
    assert abs(margin_a - margin_b) > 1e-3
    first_a = time.monotonic()
    assert publish_until(ros, pub, joint_state(names, REGULAR),
                         lambda: any(abs(m.data - margin_a) < 1e-9 for m in margins)), ros.log_of(proc)
    n_margins = len(margins)
    bound = first_a + period
    b_started = time.monotonic()
    sent_b: list[float] = []   # system time of each publish of shape B, s

    class _Stamped:
        """The publisher, noting when each shape B went out (a loaded test process pauses between them)."""

        def publish(self, msg: JointState) -> None:
            pub.publish(msg)
            sent_b.append(time.time())

    # Shape B, until B's margin is published (after the period) or the bound has passed.
    assert publish_until(ros, _Stamped(), joint_state(names, bent),
                         lambda: any(abs(m.data - margin_b) < 1e-9 for m in margins[n_margins:]),
                         timeout=60.0), ros.log_of(proc)

    def fed(stamp: float) -> bool:
        """Shape B reached the node without a pause of half ``stale_after`` in the ``stale_after`` before ``stamp``.

        Otherwise "no valid joint_states" is the truth about a paused publisher, not a verdict on B.
        """
        times = [stamp - stale_after, *(t for t in sent_b if stamp - stale_after < t < stamp), stamp]
        return bool(sent_b) and sent_b[0] < stamp - stale_after and max(
            b - a for a, b in itertools.pairwise(times)) < stale_after / 2

    during_b = [s for t, stamp, s in received if b_started + stale_after + 0.2 < t < bound and fed(stamp)]
    if not during_b:
        pytest.skip("no diagnostic of a steadily fed shape B arrived before the period's end (machine too slow)")
    for status in during_b:
        values = {kv.key: kv.value for kv in status.values}
        assert status.level != DiagnosticStatus.STALE, status.message  # B is valid: checked
        assert float(values["margin"]) == pytest.approx(margin_a, rel=1e-5)  # ... but not evaluated
    # Every margin published is A's or B's, and A's stop once B's appear.
    data = [m.data for m in margins]
    assert all(abs(x - margin_a) < 1e-9 or abs(x - margin_b) < 1e-9 for x in data)
    first_b = next(k for k, x in enumerate(data) if abs(x - margin_b) < 1e-9)
    assert all(abs(x - margin_b) < 1e-9 for x in data[first_b:])


def test_with_the_shipped_file_on_the_tsnake_it_says_once_that_it_does_not_apply_and_stays_quiet(ros, repo_root):
    """The T-Snake has no passive wheels: one line, no subscription, no output, never "missing joints"."""
    tsnake = load_robot("tsnake")
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    margins = ros.collect(Float64, "singularity_margin", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_states", SENSOR_PUB_QOS)
    proc = ros.start("singularity_monitor", extra_args=["--params-file",
                                                         str(repo_root / "config" / "singularity_monitor.yaml")])
    assert ros.spin_until(lambda: "does not apply" in ros.log_of(proc), 60.0), ros.log_of(proc)
    msg = joint_state(tsnake.joint_names, [0.1] * len(tsnake.joint_names))
    for _ in range(20):   # T-Snake joint states for a while: nothing may come of them
        pub.publish(msg)
        ros.spin_for(0.05)
    assert ros.stop(proc) == 0
    log = ros.log_of(proc)
    assert log.count("does not apply") == 1 and "tsnake" in log, log
    assert "missing joints" not in log and "Traceback" not in log
    assert margins == [] and monitor_status(diags) == []
    assert pub.get_subscription_count() == 0
