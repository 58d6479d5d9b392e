"""The ``snake`` umbrella command.

Subcommands are discovered, not listed: every module in :mod:`snake_tools.commands`
that defines ``register(subparsers)`` adds one subcommand, and likewise
:mod:`snake_tools.bench` for ``snake bench <name>`` and
:mod:`snake_tools.experiment` for ``snake experiment <name>``. A parser registered
this way sets ``func`` (a callable taking the parsed namespace and returning an
exit code) with ``parser.set_defaults(func=...)``.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from types import ModuleType


def register_modules(package: ModuleType, subparsers: argparse._SubParsersAction) -> None:
    """Call ``register(subparsers)`` of every module in ``package``, in name order."""
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)


def build_parser() -> argparse.ArgumentParser:
    """The full ``snake`` parser with every discovered subcommand."""
    from snake_tools import commands

    parser = argparse.ArgumentParser(
        prog="snake", description="Snake robot stack: offline tools, experiments, benchmarks."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    register_modules(commands, sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``snake`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except (ValueError, OSError) as err:
        # Bad input (RobotConfigError, GaitError, missing file...): a clear one-line error.
        print(f"snake {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
