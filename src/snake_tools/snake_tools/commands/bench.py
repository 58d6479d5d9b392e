"""``snake bench <name>``: benchmarks that print numbers (no timed tests anywhere)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

NESTED = True
"""``register`` takes the command line after the command's name (see :func:`snake_tools.cli.register_modules`)."""


def register(subparsers: argparse._SubParsersAction, argv: Sequence[str] | None = None) -> None:
    """Add ``snake bench`` with one sub-subcommand per module of :mod:`snake_tools.bench`."""
    from snake_tools import bench
    from snake_tools.cli import register_modules, subcommand_module
    from snake_tools.twin.target import add_calibration_target

    parser = subparsers.add_parser("bench", help="run a benchmark and print its numbers")
    sub = parser.add_subparsers(dest="bench", metavar="BENCHMARK")
    sub.required = True
    register_modules(bench, sub, only=subcommand_module(bench, argv))
    add_calibration_target(parser, sub)
