"""``snake experiment <name>``: reproductions of the papers' experiments."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

NESTED = True
"""``register`` takes the command line after the command's name (see :func:`snake_tools.cli.register_modules`)."""


def register(subparsers: argparse._SubParsersAction, argv: Sequence[str] | None = None) -> None:
    """Add ``snake experiment`` with one sub-subcommand per module of :mod:`snake_tools.experiment`."""
    from snake_tools import experiment
    from snake_tools.cli import register_modules, subcommand_module
    from snake_tools.twin.target import add_calibration_target

    parser = subparsers.add_parser("experiment", help="reproduce a paper's experiment (table, JSON, figures)")
    sub = parser.add_subparsers(dest="experiment", metavar="EXPERIMENT")
    sub.required = True
    register_modules(experiment, sub, only=subcommand_module(experiment, argv))
    add_calibration_target(parser, sub)
