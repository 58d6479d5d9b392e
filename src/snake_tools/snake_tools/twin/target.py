"""The ``--calibration-target`` flag of command groups that build twins (``snake experiment``, ``snake bench``).

The flag selects the calibration target of every twin and robot the command builds (the
``twin:`` block's physics and the gait coefficients), by setting ``$SNAKE_CALIBRATION_TARGET``
for the command's run (worker processes inherit it; the previous value is restored after),
the variable the bridge, ``gait_node`` and ``twin_node`` read too. With the flag, or with
the variable naming another target than ``twin``, the command says on stderr, in one line,
which files it reads. A target other than ``twin`` without a file is refused, whether the
flag or the variable names it (:func:`checked_target`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from snake_core import config_files
from snake_core.config_files import CALIBRATION_TARGET_ENV, DEFAULT_CALIBRATION_TARGET, calibration_target
from snake_core.errors import RobotConfigError

_Run = Callable[[argparse.Namespace], int | None]


def add_calibration_target(parser: argparse.ArgumentParser, sub: argparse._SubParsersAction) -> None:
    """Add ``--calibration-target`` to ``parser`` and make every subcommand of ``sub`` honour it."""
    parser.add_argument("--calibration-target", default=None, metavar="TARGET",
                        help="calibration target of the twins built (config/calibration/<robot>/<target>.yaml: "
                             "twin physics and gait coefficients; default $SNAKE_CALIBRATION_TARGET, else twin)")
    for p in sub.choices.values():
        func = p.get_default("func")
        if func is not None:
            p.set_defaults(func=_with_target(func))


def add_target_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--calibration-target`` to a leaf command ``parser`` (one with a ``func``) and make it honour it."""
    parser.add_argument("--calibration-target", default=None, metavar="TARGET",
                        help="calibration target of the twins built (config/calibration/<robot>/<target>.yaml: "
                             "twin physics and gait coefficients; default $SNAKE_CALIBRATION_TARGET, else twin)")
    func = parser.get_default("func")
    if func is not None:
        parser.set_defaults(func=_with_target(func))


def checked_target(asked: str | None = None) -> str:
    """The calibration target (:func:`calibration_target`), refused when no robot has a file for it.

    The default target ``twin`` needs no file (its absence means the defaults); any other,
    from the flag or from ``$SNAKE_CALIBRATION_TARGET``, must exist: a misspelt name would
    otherwise run silently on the defaults.

    Raises:
        RobotConfigError: A target other than ``twin`` without a file (naming where it came from).
    """
    name = calibration_target(asked)
    if name != DEFAULT_CALIBRATION_TARGET and not targets_files(name):
        where = "--calibration-target" if asked is not None else f"${CALIBRATION_TARGET_ENV}"
        raise RobotConfigError(f"{where} {name}: no config/calibration/<robot>/{name}.yaml "
                               "(create it with snake twin identify --write or snake experiment calibrate --write)")
    return name


def targets_files(name: str) -> list[str]:
    """Files of calibration target ``name``, one per robot that has it."""
    base = config_files.config_dir(RobotConfigError) / config_files.SUBDIRS["calibration"]
    return sorted(str(p) for p in base.glob(f"*/{name}.yaml")) if base.is_dir() else []


def _with_target(func: _Run) -> _Run:
    def run(args: argparse.Namespace) -> int | None:
        asked = getattr(args, "calibration_target", None)
        name = checked_target(asked)
        files = targets_files(name)
        if asked is not None or name != DEFAULT_CALIBRATION_TARGET:  # the default run stays quiet
            print(f"calibration target {name!r}: {', '.join(files) if files else 'no file (defaults)'}",
                  file=sys.stderr)
        if asked is None:
            return func(args)
        before = os.environ.get(CALIBRATION_TARGET_ENV)
        os.environ[CALIBRATION_TARGET_ENV] = name
        try:
            return func(args)
        finally:
            if before is None:
                os.environ.pop(CALIBRATION_TARGET_ENV, None)
            else:
                os.environ[CALIBRATION_TARGET_ENV] = before

    return run
