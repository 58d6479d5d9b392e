"""Slippage monitor: ``joint_states`` in, slippage ratio and acceleration norms out (004).

Thin wrapper around :mod:`snake_core.slippage`: the link parameters (Table 1 of 004)
come from a block of ``config/experiments/slippage_case_studies.yaml``, the contact (link, point)
and the scenario from parameters; on each joint state (at most ``max_rate`` Hz) it
builds the constrained system for the current shape and evaluates it for an input:

- ``input_mode: best``: the input of the ellipsoid of Eq. (31) (``n_directions``
  samples of its boundary) that pushes the object hardest (largest ``||a_obj||^2``);
- ``input_mode: effort``: the measured joint efforts of the message (N m).

Topics:
    joint_states (sensor_msgs/JointState, in): the configured ``joints`` by name (rad,
        and efforts in N m for ``input_mode: effort``).
    slippage/ratio (std_msgs/Float64): slippage ratio sr in [0, 1] (Eq. 30).
    slippage/object_accel_norm (std_msgs/Float64): ||a_obj||^2 (Eq. 27), kg m^2/s^4.
    slippage/robot_accel_norm (std_msgs/Float64): ||q_s''||^2 (Eq. 26), kg m^2/s^4.
    slippage/constraint_force_norm (std_msgs/Float64): ||lambda||^2 with metric G_c.
    slippage/status (diagnostic_msgs/DiagnosticStatus): all of the above plus the
        contact state, the constraint forces, the input and the polar COM coordinates;
        level STALE instead (checked by a timer) when no valid joint state arrived within
        ``stale_after_s`` (wall-clock seconds; see below for what is not valid), with the
        reason the last bad one was ignored (``last_rejected``).

Bad joint states are reported with a throttled warning and skipped, never fatal and
never evaluated (:func:`joint_positions`): missing joints, a ``name`` list whose length
is not that of ``position`` (the message's arrays must be equal-sized or empty), a
non-finite angle, an angle beyond ``MAX_ABS_ANGLE_RAD`` (1e3 rad, about 160 turns: no
joint of a snake reaches it, so such a value is a unit or driver fault), missing or
non-finite efforts in ``effort`` mode. The status then goes STALE, never OK, and names
the last rejection. The base pose is set to zero: the
norms do not depend on it (frame invariance, tested in snake_core).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from rcl_interfaces.msg import SetParametersResult
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64

from snake_core.slippage import (
    SlippageError,
    SnakeObjectParams,
    build_system,
    ellipsoid_inputs,
    evaluate,
    polar_com,
    unit_directions,
)
from snake_core.slippage.studies import load_case_study, params_from_config
from snake_ros.parameters import Param, ParameterTable
from snake_ros.qos import SENSOR_QOS, STATUS_QOS
from snake_ros.runtime import run_node
from snake_ros.stack_node import StackNode
from snake_ros.throttled_log import log_throttled

_WARN_PERIOD_S = 2.0  # s, throttle of bad-input warnings
_STALE_CHECK_MIN_S = 0.05  # s, shortest period of the staleness check
_STALE_CHECK_MAX_S = 1.0   # s, longest period of the staleness check
MAX_ABS_ANGLE_RAD = 1e3
"""Largest |joint angle| accepted from ``joint_states``, rad (larger: a unit or driver fault)."""
_INPUT_MODES = ("best", "effort")
_MODEL_PARAMS = {"contact_link", "contact_offset", "contact_side", "kappa", "mu_s"}
_DYNAMIC = ("scenario", "contact_link", "contact_offset", "contact_side", "kappa", "mu_s", "input_mode",
            "n_directions")


PARAMETERS = ParameterTable("slippage_monitor", [
    Param("config_file", "", "case-study YAML, name or path (default: config/experiments/"
          "slippage_case_studies.yaml)", read_only=True),
    Param("case_study", "case_study_2", "block of the case-study YAML giving n_joints and the link parameters",
          read_only=True),
    Param("joints", [], "joint names, tail to head (default: the first n_joints positions of each message)",
          item=str, read_only=True),
    Param("scenario", 2, "1 no friction, 2 friction-bounded wheels, 3 ideal wheels", lo=1, hi=3),
    Param("contact_link", 0, "link touching the object, 0 = tail", lo=0, hi=1000),
    Param("contact_offset", 0.0, "contact point from the link centre, m", lo=-10.0, hi=10.0),
    Param("contact_side", 1, "+1 object on the link's left, -1 right", lo=-1, hi=1),
    Param("kappa", -1.0, "object mass / link mass (<= 0: from the case study)", lo=-1.0, hi=1e6),
    Param("mu_s", -1.0, "wheel friction coefficient (< 0: from the case study)", lo=-1.0, hi=100.0),
    Param("input_mode", "best", "best: ellipsoid input with the largest ||a_obj||^2; effort: measured efforts",
          choices=_INPUT_MODES),
    Param("n_directions", 64, "input directions on the ellipsoid (Eq. 31)", lo=2, hi=5000),
    Param("max_rate", 20.0, "largest evaluation rate, Hz; joint states in between are checked, not evaluated",
          lo=0.1, hi=1000.0),
    Param("stale_after_s", 1.0, "s without a valid joint state before slippage/status goes STALE",
          lo=0.01, hi=3600.0),
], summary="Slippage ratio sr and acceleration norms of the current shape while pushing an object (004).")


class JointStateError(ValueError):
    """A ``joint_states`` message the monitor must not use (one line: why)."""


def joint_positions(names: Sequence[str], positions: Sequence[float], joints: Sequence[str],
                    n_joints: int) -> list[float]:
    """The monitored joints' angles of one ``joint_states`` message, rad, tail to head.

    Args:
        names: the message's ``name`` (may be empty when ``joints`` is).
        positions: the message's ``position``, rad.
        joints: the monitored joint names, tail to head; empty: the first ``n_joints``
            positions in message order.
        n_joints: number of monitored joints.

    Raises:
        JointStateError: ``names`` and ``positions`` differ in length (``names`` not
            empty; sensor_msgs/JointState's arrays are equal-sized or empty), a monitored
            joint is missing, too few positions, an angle is not finite or its magnitude
            exceeds ``MAX_ABS_ANGLE_RAD``.
    """
    if (names or joints) and len(names) != len(positions):
        raise JointStateError(f"{len(names)} names but {len(positions)} positions")
    if joints:
        lookup = {name: k for k, name in enumerate(names)}
        missing = [j for j in joints if j not in lookup]
        if missing:
            raise JointStateError(f"missing joints {missing}")
        phi = [float(positions[lookup[j]]) for j in joints]
    else:
        if len(positions) < n_joints:
            raise JointStateError(f"need {n_joints} positions, got {len(positions)}")
        phi = [float(v) for v in positions[:n_joints]]
    for k, x in enumerate(phi):
        label = joints[k] if joints else f"position {k}"
        if not math.isfinite(x):
            raise JointStateError(f"non-finite angle of {label}: {x}")
        if abs(x) > MAX_ABS_ANGLE_RAD:
            raise JointStateError(f"angle of {label} is {x:g} rad, beyond +-{MAX_ABS_ANGLE_RAD:g} rad")
    return phi


def _vector_text(values: np.ndarray) -> str:
    """``[a,b,...]``, six significant digits each, on one line (a diagnostic value)."""
    return "[" + ",".join(f"{v:.6g}" for v in values.tolist()) + "]"


class SlippageNode(StackNode):
    """Computes sr and the acceleration norms of the current shape while pushing an object."""

    def __init__(self) -> None:
        super().__init__("slippage_monitor")
        params = PARAMETERS.declare(self)
        self.cfg = load_case_study(str(params["case_study"]), params["config_file"] or None)
        self.n_joints = int(self.cfg["n_joints"])
        joints = list(params["joints"])
        if joints and len(joints) != self.n_joints:
            raise SlippageError(f"joints: {self.get_parameter('case_study').value} has {self.n_joints} joints, "
                                f"got {len(joints)} names")
        self.joint_names: list[str] = joints
        if params["contact_side"] == 0:
            raise SlippageError("parameter contact_side: must be +1 or -1, got 0")
        self.params = self._make_params({})
        self.add_on_set_parameters_callback(self._check_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)

        self.pub_ratio = self.create_publisher(Float64, "slippage/ratio", STATUS_QOS)
        self.pub_obj = self.create_publisher(Float64, "slippage/object_accel_norm", STATUS_QOS)
        self.pub_robot = self.create_publisher(Float64, "slippage/robot_accel_norm", STATUS_QOS)
        self.pub_lam = self.create_publisher(Float64, "slippage/constraint_force_norm", STATUS_QOS)
        self.pub_status = self.create_publisher(DiagnosticStatus, "slippage/status", STATUS_QOS)
        self.create_subscription(JointState, "joint_states", self._on_joint_states, SENSOR_QOS)
        self._last_eval = -math.inf
        self._started = time.monotonic()
        self._last_valid: float | None = None  # time.monotonic() of the last valid joint state, s
        self.bad_messages = 0
        self.last_rejected = ""  # why the last bad joint state was ignored
        # Input directions per (actuated joints, n_directions): drawn once, not at every evaluation.
        self._directions: dict[tuple[int, int], np.ndarray] = {}
        stale_after = float(params["stale_after_s"])
        self.create_timer(min(max(stale_after / 2.0, _STALE_CHECK_MIN_S), _STALE_CHECK_MAX_S), self._check_stale)
        self.get_logger().info(
            f"slippage monitor: {self.n_joints} joints ({', '.join(joints) or 'message order'}), "
            f"scenario {self.get_parameter('scenario').value}, contact link {self.params.contact_link}")

    # ---------------------------------------------------------------- parameters
    def _make_params(self, changes: dict[str, Any]) -> SnakeObjectParams:
        def get(name: str) -> Any:
            return changes[name] if name in changes else self.get_parameter(name).value

        kappa = float(get("kappa"))
        mu = float(get("mu_s"))
        return params_from_config(
            self.cfg, contact_link=int(get("contact_link")), contact_offset=float(get("contact_offset")),
            contact_side=int(get("contact_side")), kappa=kappa if kappa > 0 else None, mu_s=mu if mu >= 0 else None)

    def _check_parameters(self, params: list[Parameter]) -> SetParametersResult:
        changes = {p.name: p.value for p in params if p.name in _DYNAMIC}
        reason = PARAMETERS.check(changes)
        if reason is None and int(changes.get("contact_side", 1)) == 0:
            reason = "contact_side: must be +1 or -1"
        if reason is None and changes.keys() & _MODEL_PARAMS:
            try:
                self._make_params(changes)
            except SlippageError as exc:
                reason = str(exc)
        return SetParametersResult(successful=reason is None, reason=reason or "")

    def _apply_parameters(self, params: list[Parameter]) -> None:
        if {p.name for p in params} & _MODEL_PARAMS:
            self.params = self._make_params({})

    # ---------------------------------------------------------------- callbacks
    def _warn(self, text: str) -> None:
        self.bad_messages += 1
        log_throttled(self.get_logger(), f"{text} ({self.bad_messages} bad messages so far)", _WARN_PERIOD_S)

    def _select(self, msg: JointState, values: Sequence[float]) -> list[float] | None:
        if self.joint_names:
            lookup = {name: k for k, name in enumerate(msg.name)}
            return [float(values[lookup[j]]) for j in self.joint_names]
        if len(values) < self.n_joints:
            self._reject(f"need {self.n_joints} efforts, got {len(values)}")
            return None
        return [float(v) for v in values[:self.n_joints]]

    def _reject(self, reason: str) -> None:
        self.last_rejected = reason
        self._warn(f"joint_states ignored: {reason}")

    def _on_joint_states(self, msg: JointState) -> None:
        # Every message is validated (and a bad one counted and reported) before the
        # rate limit decides whether a good one is evaluated.
        now = time.monotonic()
        try:
            phi = joint_positions(list(msg.name), list(msg.position), self.joint_names, self.n_joints)
        except JointStateError as err:
            self._reject(str(err))
            return
        mode = str(self.get_parameter("input_mode").value)
        tau = None
        if mode == "effort":
            if len(msg.effort) != len(msg.position):
                self._reject(f"input_mode effort needs efforts, got {len(msg.effort)}")
                return
            tau = self._select(msg, msg.effort)
            if tau is None or not all(math.isfinite(x) for x in tau):
                self._reject("missing or non-finite effort")
                return
        self._last_valid = now
        if now - self._last_eval < 1.0 / float(self.get_parameter("max_rate").value):
            return
        self._last_eval = now
        try:
            self._evaluate(phi, tau, msg)
        except (SlippageError, np.linalg.LinAlgError) as exc:
            self._warn(f"evaluation failed: {exc}")

    def _check_stale(self) -> None:
        """Publish a STALE status while no valid joint state arrived within ``stale_after_s``."""
        now = time.monotonic()
        stale_after = float(self.get_parameter("stale_after_s").value)
        since = self._started if self._last_valid is None else self._last_valid
        age = now - since
        if age <= stale_after:
            return
        message = (f"no valid joint_states for {age:.1f} s" if self._last_valid is not None
                   else f"no valid joint_states yet ({age:.1f} s)")
        self.pub_status.publish(DiagnosticStatus(
            level=DiagnosticStatus.STALE, name="slippage_monitor", message=message,
            hardware_id=f"contact link {self.params.contact_link}",
            values=[KeyValue(key="age_s", value=f"{age:.3f}"), KeyValue(key="stale_after_s", value=f"{stale_after:g}"),
                    KeyValue(key="bad_messages", value=str(self.bad_messages)),
                    KeyValue(key="last_rejected", value=self.last_rejected)]))

    def _evaluate(self, phi: list[float], tau: list[float] | None, msg: JointState) -> None:
        params = self.params
        scenario = int(self.get_parameter("scenario").value)
        q = np.concatenate([[0.0, 0.0, 0.0], phi])
        system = build_system(params, q, scenario)
        if tau is None:
            key = (params.n_a, int(self.get_parameter("n_directions").value))
            directions = self._directions.get(key)
            if directions is None:
                directions = self._directions[key] = unit_directions(*key)
                directions.flags.writeable = False
            inputs = ellipsoid_inputs(system, directions)
        else:
            inputs = np.asarray(tau, float)[None, :]
        ev = evaluate(system, inputs)
        k = int(np.argmax(ev.a_obj_norm))
        sr, a_obj, qdd, lam = (float(ev.sr[k]), float(ev.a_obj_norm[k]), float(ev.qdd_norm[k]),
                               float(ev.lam_norm[k]))
        self.pub_ratio.publish(Float64(data=sr))
        self.pub_obj.publish(Float64(data=a_obj))
        self.pub_robot.publish(Float64(data=qdd))
        self.pub_lam.publish(Float64(data=lam))
        radius, angle = polar_com(params, system.kin, system.geometry)
        values = {
            "sr": sr, "object_accel_norm": a_obj, "robot_accel_norm": qdd, "constraint_force_norm": lam,
            "in_contact": bool(ev.in_contact[k]), "scenario": scenario,
            "input_mode": self.get_parameter("input_mode").value,
            "tau": _vector_text(ev.tau[k]),
            "lambda": _vector_text(ev.lam[k]),
            "com_radius": float(radius), "com_angle_deg": float(np.rad2deg(angle)),
            "stamp": f"{msg.header.stamp.sec}.{msg.header.stamp.nanosec:09d}",
        }
        self.pub_status.publish(DiagnosticStatus(
            level=DiagnosticStatus.OK, name="slippage_monitor", message=f"sr {sr:.4f}",
            hardware_id=f"contact link {params.contact_link}",
            values=[KeyValue(key=key, value=str(v)) for key, v in values.items()]))


    def stop_safely(self) -> None:
        """Safe exit: a final STALE status, so that no tool keeps showing the last sr as live."""
        self.pub_status.publish(DiagnosticStatus(level=DiagnosticStatus.STALE, name="slippage_monitor",
                                                 message="stopped: monitor exiting"))
        self.get_logger().info("slippage monitor stopped")


def main(args: list[str] | None = None) -> int:
    """Run the slippage monitor until Ctrl-C or shutdown."""
    return run_node(SlippageNode, args, on_exit=SlippageNode.stop_safely, parameters=PARAMETERS)


if __name__ == "__main__":
    raise SystemExit(main())
