"""Graph tests of the slippage monitor: real node process over DDS (the ``ros`` fixture)."""

from __future__ import annotations

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticStatus
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64

from snake_core.slippage import build_system, ellipsoid_inputs, evaluate, unit_directions
from snake_core.slippage.studies import load_case_study, params_from_config
from snake_ros.qos import SENSOR_PUB_QOS, STATUS_QOS

pytestmark = pytest.mark.graph

JOINTS = ["j1", "j2", "j3"]
SHAPE = [-0.9, 0.4, 1.2]  # rad, tail to head
PARAMS = params_from_config(load_case_study("case_study_2"))


def expected(params, scenario, shape, tau=None, n_directions=32):
    system = build_system(params, np.concatenate([[0.0, 0.0, 0.0], shape]), scenario)
    inputs = ellipsoid_inputs(system, unit_directions(3, n_directions)) if tau is None else np.array([tau])
    ev = evaluate(system, inputs)
    k = int(np.argmax(ev.a_obj_norm))
    return ev.sr[k], ev.a_obj_norm[k], ev.qdd_norm[k]


def joint_state(names, positions, efforts=()):
    msg = JointState()
    msg.name = list(names)
    msg.position = [float(x) for x in positions]
    msg.effort = [float(x) for x in efforts]
    return msg


def start(ros, **params):
    base = {"joints": JOINTS, "scenario": 2, "n_directions": 32, "max_rate": 200.0}
    base.update(params)
    proc = ros.start("slippage_monitor", base)
    out = {name: ros.collect(Float64, f"slippage/{name}", STATUS_QOS)
           for name in ("ratio", "object_accel_norm", "robot_accel_norm")}
    out["status"] = ros.collect(DiagnosticStatus, "slippage/status", STATUS_QOS)
    pub = ros.node.create_publisher(JointState, "joint_states", SENSOR_PUB_QOS)
    assert ros.spin_until(lambda: pub.get_subscription_count() > 0), ros.log_of(proc)
    return proc, pub, out


def publish_until(ros, pub, msg, predicate, timeout=20.0):
    for _ in range(int(timeout / 0.1)):
        pub.publish(msg)
        if ros.spin_until(predicate, timeout=0.1):
            return True
    return False


def close(box, value):
    return any(abs(m.data - value) <= 1e-9 * max(1.0, abs(value)) for m in box)


def test_publishes_sr_and_norms_of_the_current_shape(ros):
    proc, pub, out = start(ros)
    sr, a_obj, qdd = expected(PARAMS, 2, SHAPE)
    # names shuffled and mixed with an unrelated joint: mapping is by name
    msg = joint_state(["gripper", "j3", "j1", "j2"], [5.0, SHAPE[2], SHAPE[0], SHAPE[1]])
    assert publish_until(ros, pub, msg, lambda: close(out["ratio"], sr)), ros.log_of(proc)
    # One answer per joint state on each topic, whose publishers may match the probe after the ratio's:
    # the shape again until every answer is heard.
    assert publish_until(ros, pub, msg, lambda: close(out["object_accel_norm"], a_obj)
                         and close(out["robot_accel_norm"], qdd)), ros.log_of(proc)
    assert 0.0 <= sr <= 1.0

    def status_values():
        return [{kv.key: kv.value for kv in st.values} for st in out["status"] if st.level == DiagnosticStatus.OK]

    assert publish_until(ros, pub, msg, lambda: any(abs(float(v["sr"]) - sr) < 1e-6 for v in status_values()))
    values = next(v for v in status_values() if abs(float(v["sr"]) - sr) < 1e-6)
    assert values["in_contact"] == "True"

    # bad messages: missing joint, NaN, names/positions mismatch -> warning, no crash
    # (joint_states is best-effort: repeat until the node has seen them)
    bad_messages = (joint_state(["j1", "j2"], [0.1, 0.2]), joint_state(JOINTS, [0.1, float("nan"), 0.2]),
                    joint_state(JOINTS, [0.1, 0.2]))
    for bad in bad_messages:
        assert publish_until(ros, pub, bad, lambda: "joint_states ignored" in ros.log_of(proc)), ros.log_of(proc)
    assert proc.poll() is None
    shape2 = [0.3, -1.1, 0.5]
    sr2, _, _ = expected(PARAMS, 2, shape2)
    assert publish_until(ros, pub, joint_state(JOINTS, shape2), lambda: close(out["ratio"], sr2)), ros.log_of(proc)


def test_effort_mode_and_parameter_updates(ros):
    proc, pub, out = start(ros, input_mode="effort", scenario=3)
    tau = [0.04, -0.01, 0.02]
    sr, a_obj, _ = expected(PARAMS, 3, SHAPE, tau=tau)
    assert publish_until(ros, pub, joint_state(JOINTS, SHAPE, tau), lambda: close(out["ratio"], sr)), ros.log_of(proc)
    assert publish_until(ros, pub, joint_state(JOINTS, SHAPE, tau), lambda: close(out["object_accel_norm"], a_obj))

    def status_taus():  # the diagnostic's "tau": one line, [a,b,...]
        return [[float(x) for x in kv.value.strip("[]").split(",")] for st in out["status"]
                if st.level == DiagnosticStatus.OK for kv in st.values if kv.key == "tau"]

    assert publish_until(ros, pub, joint_state(JOINTS, SHAPE, tau),
                         lambda: any(t == pytest.approx(tau, abs=1e-9) for t in status_taus()))
    no_effort = joint_state(JOINTS, SHAPE)  # no efforts in effort mode -> warning
    assert publish_until(ros, pub, no_effort, lambda: "needs efforts" in ros.log_of(proc)), ros.log_of(proc)


    def set_param(name, value):
        req = SetParameters.Request()
        if isinstance(value, int):
            pv = ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=value)
        elif isinstance(value, float):
            pv = ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=value)
        else:
            pv = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=value)
        req.parameters = [Parameter(name=name, value=pv)]
        answer = ros.call(SetParameters, "/slippage_monitor/set_parameters", req)
        assert answer is not None
        return answer.response.results[0]

    refused = set_param("contact_link", 7)  # the case study has 4 links
    assert not refused.successful and "contact_link" in refused.reason
    assert not set_param("input_mode", "guess").successful
    assert not set_param("scenario", 4).successful  # outside the descriptor's range
    assert set_param("contact_link", 3).successful
    sr3, _, _ = expected(PARAMS.with_(contact_link=3), 3, SHAPE, tau=tau)
    assert publish_until(ros, pub, joint_state(JOINTS, SHAPE, tau), lambda: close(out["ratio"], sr3)), ros.log_of(proc)


def test_status_goes_stale_without_valid_joint_states_and_through_nan(ros):
    proc, pub, out = start(ros, stale_after_s=0.5)
    status = out["status"]
    assert ros.spin_until(lambda: any(st.level == DiagnosticStatus.STALE for st in status), 20.0), ros.log_of(proc)
    assert "yet" in status[-1].message
    good = joint_state(JOINTS, SHAPE)
    assert publish_until(ros, pub, good, lambda: bool(status) and status[-1].level == DiagnosticStatus.OK)
    # The stream stops: STALE (not a repeated OK), with the age.
    n = len(status)
    assert ros.spin_until(lambda: any(st.level == DiagnosticStatus.STALE for st in status[n:]), 20.0)
    stale = next(st for st in status[n:] if st.level == DiagnosticStatus.STALE)
    # The node goes STALE only once the age exceeds stale_after_s; it reports the age rounded to
    # milliseconds, so an age just past 0.5 s may read "0.500": compare at the reported precision.
    values = {kv.key: kv.value for kv in stale.values}
    assert float(values["stale_after_s"]) == 0.5
    assert float(values["age_s"]) >= float(values["stale_after_s"])
    # A stream of NaN-only messages is not valid: still STALE, never OK.
    assert publish_until(ros, pub, good, lambda: status[-1].level == DiagnosticStatus.OK)
    n = len(status)
    nan = joint_state(JOINTS, [float("nan")] * 3)
    assert publish_until(ros, pub, nan, lambda: any(st.level == DiagnosticStatus.STALE for st in status[n:]))
    for _ in range(10):
        pub.publish(nan)
        ros.spin_for(0.05)
    assert status[-1].level == DiagnosticStatus.STALE
    assert proc.poll() is None


@pytest.mark.parametrize("msg", [
    joint_state(JOINTS, [SHAPE[0], 1e6, SHAPE[2]]),                       # an absurd angle, rad
    joint_state([*JOINTS, "j4"], SHAPE),                                  # 4 names, 3 positions
])
def test_an_absurd_or_malformed_joint_state_is_never_evaluated(ros, msg):
    """Message order (no ``joints``) as well: the length check does not depend on the names being used."""
    proc, pub, out = start(ros, joints=[], stale_after_s=0.5)
    status = out["status"]

    def rejected():
        return any(st.level == DiagnosticStatus.STALE and {kv.key: kv.value for kv in st.values}.get("last_rejected")
                   for st in status)

    assert publish_until(ros, pub, msg, rejected), ros.log_of(proc)
    assert not out["ratio"] and all(st.level != DiagnosticStatus.OK for st in status)
    reason = next({kv.key: kv.value for kv in st.values}["last_rejected"] for st in status
                  if st.level == DiagnosticStatus.STALE and {kv.key: kv.value for kv in st.values}.get("last_rejected"))
    assert ("1e+06 rad" in reason) if max(msg.position) > 1e3 else ("4 names but 3 positions" in reason), reason
    assert "joint_states ignored" in ros.log_of(proc)
    # The same shape, well formed, is evaluated: the refusal was the message's fault.
    good = joint_state(JOINTS, SHAPE)
    assert publish_until(ros, pub, good, lambda: bool(out["ratio"])), ros.log_of(proc)
    assert proc.poll() is None
