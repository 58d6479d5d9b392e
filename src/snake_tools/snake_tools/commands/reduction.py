"""``snake reduction``: 003's locomotive reduction (Eq. 9-10) both ways, from the robot YAML.

- ``snake reduction forward --omega-h 2 --omega-t 1``: rolling speeds (rad/s) -> the
  differential-drive twist (v m/s, omega rad/s) of Eq. 10, turning radius R' = v / omega
  and the motion mode.
- ``snake reduction inverse --v 0.05 --omega 0.1``: twist -> (omega_h, omega_t) of the
  inverted Eq. 10, and the gait's saturated native command (omega_h, omega_t, omega_c) as
  ``gait_node`` sends it.

Coefficients k, d' and omega_max come from ``gaits.reduction`` of the robot YAML
(``--k`` / ``--d-prime`` / ``--omega-max`` override them).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from snake_core.gait.reduction import ReductionParams, motion_mode, rates_from_twist, twist_from_rates
from snake_core.robot import load_robot
from snake_tools.output import print_json, print_table


def _finite(text: str) -> float:
    """The ``type=`` of a finite number."""
    try:
        value = float(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from err
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text!r}")
    return value


def _positive(text: str) -> float:
    """The ``type=`` of a positive finite number."""
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake reduction forward|inverse``."""
    parser = subparsers.add_parser("reduction", help="003 Eq. 9-10: rolling speeds <-> differential-drive twist")
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--robot", default="tsnake", help="robot name or YAML (default tsnake)")
        p.add_argument("--k", type=_positive, default=None, help="transmission coefficient k, m/rad (default: YAML)")
        p.add_argument("--d-prime", type=_positive, default=None, help="wheel separation d', m (default: YAML)")
        p.add_argument("--omega-max", type=_positive, default=None, help="rolling speed limit, rad/s (default: YAML)")
        p.add_argument("--json", action="store_true", help="print JSON")

    fwd = sub.add_parser("forward", help="(omega_h, omega_t) rad/s -> (v m/s, omega rad/s)")
    common(fwd)
    fwd.add_argument("--omega-h", type=_finite, required=True, help="head rolling speed, rad/s")
    fwd.add_argument("--omega-t", type=_finite, required=True, help="tail rolling speed, rad/s")
    fwd.set_defaults(func=run_forward)
    inv = sub.add_parser("inverse", help="(v m/s, omega rad/s) -> (omega_h, omega_t) and the saturated command")
    common(inv)
    inv.add_argument("--v", type=_finite, required=True, help="linear speed, m/s")
    inv.add_argument("--omega", type=_finite, required=True, help="angular speed, rad/s")
    inv.set_defaults(func=run_inverse)


def _params(args: argparse.Namespace) -> ReductionParams:
    return ReductionParams.from_robot(load_robot(args.robot), k=args.k, d_prime=args.d_prime,
                                      omega_max=args.omega_max)


def _show(args: argparse.Namespace, out: dict[str, Any], title: str) -> int:
    if args.json:
        print_json(out)
    else:
        print_table(list(out.items()), title=title)
    return 0


def run_forward(args: argparse.Namespace) -> int:
    """``snake reduction forward``."""
    p = _params(args)
    v, omega = twist_from_rates(args.omega_h, args.omega_t, p.k, p.d_prime)
    out = {"omega_h": args.omega_h, "omega_t": args.omega_t, "v": v, "omega": omega,
           "turning_radius_m": v / omega if omega != 0 else math.inf,
           "motion_mode": motion_mode(args.omega_h, args.omega_t), "k": p.k, "d_prime": p.d_prime}
    return _show(args, out, "003 Eq. 10: rolling speeds -> twist")


def run_inverse(args: argparse.Namespace) -> int:
    """``snake reduction inverse``."""
    p = _params(args)
    omega_h, omega_t = rates_from_twist(args.v, args.omega, p.k, p.d_prime)
    cmd = p.mapping().to_command(args.v, args.omega)
    v_sat, omega_sat = twist_from_rates(cmd[0], cmd[1], p.k, p.d_prime)
    out = {"v": args.v, "omega": args.omega, "omega_h": omega_h, "omega_t": omega_t,
           "command": {"omega_h": cmd[0], "omega_t": cmd[1], "omega_c": cmd[2]},
           "saturated": max(abs(omega_h), abs(omega_t)) > p.omega_max, "v_achieved": v_sat,
           "omega_achieved": omega_sat, "motion_mode": motion_mode(omega_h, omega_t), "k": p.k,
           "d_prime": p.d_prime, "omega_max": p.omega_max}
    return _show(args, out, "003 Eq. 10 inverted: twist -> rolling speeds")
