"""``snake urdf``: write the URDF generated from a robot YAML."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from snake_core.robot import load_robot
from snake_core.urdf import robot_to_urdf


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake urdf``."""
    p = subparsers.add_parser("urdf", help="generate the URDF of a robot from its YAML")
    p.add_argument("--robot", default="tsnake", help="robot name in config/robots or a YAML path")
    p.add_argument("--out", type=Path, default=None, help="output file (default: stdout)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print or write the URDF."""
    text = robot_to_urdf(load_robot(args.robot))
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text)
    return 0
