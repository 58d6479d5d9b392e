"""``snake robot``: the bridge's services without a ``ros2`` install, and a robot YAML for a new robot.

``snake robot status | arm | disarm | estop | clear-estop | reboot`` are rclpy clients of the
bridge node's services (:mod:`snake_ros.bridge_node`): ``~/status``, ``~/arm``, ``~/disarm``,
``~/emergency_stop``, ``~/clear_estop`` and ``~/reboot``. Each prints the service's own answer
(success and message) and the bridge's state right after it (from ``~/status``). The same call
with ``ros2`` is ``ros2 service call /bridge_node/arm std_srvs/srv/Trigger``. When more than
one node answers to the bridge's name (two bridges started at once under one name), every
verb says so on stderr with their count (``bridges`` in ``--json``): the answer came from one
of them.

``snake robot reboot IDS`` names the servos the user means to reboot. The bridge's ``~/reboot``
reboots every servo that needs it (hardware error, or settings the bridge did not write) and
only those, at once; so the IDs are checked against the bridge's ``~/status`` first, and the
reboot is refused (exit 1) when one of them needs no reboot or when another servo needs one
too (it would be rebooted, and lose torque, unnamed).

Exit codes, for scripts: 0 the bridge carried the request out; 1 the bridge refused it (the
message says why); 2 no bridge answered within ``--timeout`` seconds (one line), or a bad flag.

``snake robot new --from tsnake --modules 8 NAME`` writes a robot YAML for a robot built of the
same modules as ``--from`` but with another number of them (:mod:`snake_core.robot_scaling`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from snake_tools.cli import count, non_negative_int, positive_float

_REFUSED = 1   # exit code: the bridge answered and refused the request
_NO_BRIDGE = 2  # exit code: no bridge answered in time (a usage error by the CLI's convention)
_DEFAULT_TIMEOUT_S = 10.0  # s: DDS discovery of a bridge on a loaded computer takes a few seconds
_SETTLE_S = 0.5  # s without a new server of ~/status before the count of bridges answering to the name is taken

# verb -> (bridge service, what it does)
VERBS: dict[str, tuple[str, str]] = {
    "status": ("status", "print the bridge's state (DISARMED, ARMING, ARMED, HOLDING, ESTOPPED, FAULT)"),
    "arm": ("arm", "torque on from the present positions and ramp to the commanded pose"),
    "disarm": ("disarm", "torque off (the robot goes limp)"),
    "estop": ("emergency_stop", "emergency stop: torque off on every servo, latched until clear-estop"),
    "clear-estop": ("clear_estop", "leave a latched e-stop (to DISARMED, still limp; arm is a second request)"),
    "reboot": ("reboot", "reboot the servos in hardware error or with settings the bridge did not write"),
}


class NoBridgeError(Exception):
    """No bridge answered the service call within the timeout."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake robot`` and its verbs."""
    p = subparsers.add_parser("robot", help="arm / disarm / e-stop the robot through the bridge (no ros2 needed); "
                                            "write a robot YAML for a new robot")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    for verb, (service, text) in VERBS.items():
        v = verbs.add_parser(verb, help=text, description=f"{text}. Calls the bridge's ~/{service} service "
                                                          f"(ros2 service call /bridge_node/{service} "
                                                          "std_srvs/srv/Trigger).")
        v.add_argument("--bridge", default="/bridge_node", help="the bridge node's fully qualified name")
        v.add_argument("--timeout", type=positive_float, default=_DEFAULT_TIMEOUT_S,
                       help="s to wait for the bridge to answer before exit code 2")
        v.add_argument("--json", action="store_true", help="print one JSON object")
        if verb == "reboot":
            v.add_argument("ids", metavar="ID", nargs="*", type=non_negative_int,
                           help="servo IDs expected to need the reboot: refused unless they are exactly the "
                                "servos the bridge would reboot (default: every servo that needs one)")
        v.set_defaults(func=run_verb, service=service)
    n = verbs.add_parser("new", help="write a robot YAML: --from ROBOT with --modules N modules",
                         description="Write a consistent robot YAML (joints, servo IDs, gait head/tail "
                                     "segments, limits) for a robot of N modules of the same kind as --from.")
    n.add_argument("name", metavar="NAME", help="the new robot's name (letters, digits, _)")
    n.add_argument("--from", dest="source", default="tsnake", help="robot name or YAML path to start from")
    n.add_argument("--modules", type=count, required=True, help="number of modules of the new robot")
    n.add_argument("--out", type=Path, default=None,
                   help="YAML to write (default: config/robots/NAME.yaml in the config directory)")
    n.add_argument("--force", action="store_true", help="overwrite an existing file")
    n.set_defaults(func=run_new)


def call_bridge(bridge: str, service: str, timeout: float,
                precheck: Callable[[dict[str, Any]], str | None] | None = None) -> dict[str, Any]:
    """Call ``<bridge>/<service>`` (std_srvs/Trigger), then ``<bridge>/status``.

    With ``precheck``, ``<bridge>/status`` is asked first and its answer (the JSON object)
    given to it: a reason it returns refuses the request without calling the service.

    Returns:
        ``success``, ``message`` (the service's answer), ``state`` and ``reason`` (the
        bridge's state after the call), ``service`` (the full name), ``bridges`` (how many
        servers answer to ``<bridge>/status``: more than one is two bridges of one name, and
        the answer came from one of them), ``sent`` (copies of the request sent: an
        unanswered request is sent again, :mod:`snake_ros.service_call`).

    Raises:
        NoBridgeError: No such service answered within ``timeout`` seconds.
    """
    import rclpy
    from rclpy.signals import SignalHandlerOptions
    from std_srvs.srv import Trigger

    deadline = time.monotonic() + timeout
    prefix = bridge.rstrip("/")
    context = rclpy.Context()
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node(f"snake_robot_{os.getpid()}", context=context)
    try:
        from rclpy.executors import SingleThreadedExecutor

        from snake_ros import service_call

        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)

        def call(name: str) -> Any:
            client: Any = node.create_client(Trigger, f"{prefix}/{name}")
            if not client.wait_for_service(timeout_sec=max(0.0, deadline - time.monotonic())):
                raise NoBridgeError(f"no bridge answered on {client.srv_name} within {timeout:g} s "
                                    "(is bridge_node running, on this ROS_DOMAIN_ID? --bridge names another)")
            answer = service_call.call(client, Trigger.Request(), service_call.spinning(executor), deadline)
            if answer is None:
                raise NoBridgeError(f"{client.srv_name} did not answer within {timeout:g} s")
            return answer

        def answer_of(success: bool, message: str, state: dict[str, Any]) -> dict[str, Any]:
            return {"success": success, "message": message, "state": state["state"], "reason": state["reason"],
                    "service": f"{prefix}/{service}"}

        if precheck is not None:
            before = json.loads(call("status").response.message)
            why = precheck(before)
            if why is not None:
                return answer_of(False, why, before)
        sent = call(service)
        answer = sent.response
        status = answer if service == "status" else call("status").response
        state = json.loads(status.message)
        bridges = _servers(node, executor, f"{prefix}/status", deadline)
        if service == "status":
            return {"success": True, "service": f"{prefix}/status", **state, "bridges": bridges}
        # A copy sent after a lost answer meets what the first did: "already armed" is its success.
        success = bool(answer.success) or (sent.resent and service == "arm"
                                           and str(answer.message).startswith("already armed"))
        return {**answer_of(success, answer.message, state), "bridges": bridges, "sent": sent.sent}
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)


def _servers(node: Any, executor: Any, service: str, deadline: float) -> int:
    """Servers of ``service`` on the graph, once discovery has settled (bounded by ``deadline``).

    The count is taken again until it has not grown for ``_SETTLE_S`` (a second server
    can be discovered a little after the first answered).
    """
    count = node.count_services(service)
    since = time.monotonic()
    while time.monotonic() - since < _SETTLE_S and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=_SETTLE_S / 10)
        now = node.count_services(service)
        if now > count:
            count, since = now, time.monotonic()
    return max(count, 1)


def several_bridges(bridge: str, count: int) -> str:
    """The warning line for ``count`` > 1 bridges answering to one name."""
    return (f"warning: {count} bridges answer to {bridge.rstrip('/')} (one name, {count} nodes): this answer is "
            "from one of them, and the others command their own servos; stop all but one, or start each under its "
            "own name (-r __node:=NAME) and give it to --bridge")


def check_reboot_ids(ids: list[int], status: dict[str, Any]) -> str | None:
    """Why ``reboot IDS`` must be refused given the bridge's ``~/status`` answer, or None.

    The bridge reboots every servo in ``needs_reboot`` at once: ``ids`` must be exactly those.
    """
    needing = {int(i): name for name, i in status.get("needs_reboot", {}).items()}
    listed = ", ".join(f"ID {i} ({needing[i]})" for i in sorted(needing)) or "none"
    extra = sorted(set(ids) - set(needing))
    if extra:
        return (f"{', '.join(f'ID {i}' for i in extra)} need{'s' if len(extra) == 1 else ''} no reboot "
                f"(servos needing one: {listed}); nothing rebooted")
    if set(ids) != set(needing):
        return (f"the bridge reboots every servo that needs it at once, and {listed} need one: name them all "
                "or none; nothing rebooted")
    return None


def run_verb(args: argparse.Namespace) -> int:
    """Call the verb's service and print the answer; the exit code says what happened."""
    ids = getattr(args, "ids", None)
    try:
        result = call_bridge(args.bridge, args.service, args.timeout,
                             (lambda status: check_reboot_ids(ids, status)) if ids else None)
    except NoBridgeError as err:
        print(f"{args.prog_name}: error: {err}", file=sys.stderr)
        return _NO_BRIDGE
    if result.get("bridges", 1) > 1:
        print(f"{args.prog_name}: {several_bridges(args.bridge, result['bridges'])}", file=sys.stderr)
    if args.json:
        print(json.dumps(result))
    elif args.service == "status":
        faults = ", ".join(result["faulted"] + result["foreign"])
        print(f"{result['state']}: {result['reason']} (torque {'on' if result['torque'] else 'off'}, "
              f"bus {'connected' if result['connected'] else 'disconnected'}"
              f"{', servos needing reboot: ' + faults if faults else ''})")
    else:
        verdict = "done" if result["success"] else "refused"
        print(f"{result['service']}: {verdict}: {result['message']} (state now {result['state']})")
    return 0 if result["success"] else _REFUSED


def run_new(args: argparse.Namespace) -> int:
    """Write the new robot's YAML and say where."""
    from snake_core import config_files
    from snake_core.names import check_name
    from snake_core.robot import RobotConfigError, load_robot, resolve_robot_path
    from snake_core.robot_scaling import scaled_robot_yaml

    check_name("robot name", args.name)   # it becomes config/robots/NAME.yaml and config/calibration/NAME/
    source = resolve_robot_path(args.source)
    out = args.out
    if out is None:
        out = config_files.config_dir(RobotConfigError) / config_files.SUBDIRS["robot"] / f"{args.name}.yaml"
    if out.exists() and not args.force:
        raise FileExistsError(f"--out {out}: exists (--force overwrites it)")
    if not out.parent.is_dir():
        raise FileNotFoundError(f"--out {out}: folder {out.parent} does not exist")
    text = scaled_robot_yaml(source.read_text(), str(source), args.name, args.modules)
    out.write_text(text)
    robot = load_robot(out, calibrated=False)  # the loader's own checks, on what was written
    print(f"wrote {out}: robot {robot.name!r}, {args.modules} modules, {len(robot.joints)} joints "
          f"(servo IDs {robot.joints[0].servo_id}..{robot.joints[-1].servo_id}); "
          f"check it: snake urdf --robot {out}; snake sim-model --robot {out}")
    return 0
