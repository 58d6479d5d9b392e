"""The ``snake`` umbrella command.

Subcommands are discovered, not listed: every module in :mod:`snake_tools.commands`
that defines ``register(subparsers)`` adds one subcommand, and likewise
:mod:`snake_tools.bench` for ``snake bench <name>`` and
:mod:`snake_tools.experiment` for ``snake experiment <name>``. A parser registered
this way sets ``func`` (a callable taking the parsed namespace and returning an
exit code) with ``parser.set_defaults(func=...)``.

User errors are one line on stderr and exit code 2, never a traceback:

- bad flags (unknown choice, wrong type, out of range): every parser is a
  :class:`SnakeArgumentParser`, whose ``error`` prints one line; values are checked
  while parsing by the typed checkers below (``positive_float``, ``count``, ...);
- bad files and values found later (``ValueError`` subclasses such as
  :class:`~snake_core.errors.ConfigError`, which name the file and field, and
  ``OSError``): caught in :func:`main`.

Trials of an experiment that raised (:class:`~snake_tools.experiment.executor.TrialsFailedError`)
are one line each as they fail and one summary line, exit code 1. Any other exception is a
bug and keeps its traceback. ``--help`` of every command shows
the defaults.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import pkgutil
import signal
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, NoReturn

from snake_tools import cli_signals
from snake_tools.experiment.executor import TrialsFailedError

_USAGE_ERROR = 2  # exit code of a user error (argparse's own convention)
_BROKEN_PIPE = 1  # exit code when stdout's reader closed the pipe early (Python docs, "Note on SIGPIPE")
_TRIALS_FAILED = 1  # exit code when some experiment trials raised (each already told on its own line)


class _DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Append ``(default: X)`` to an option's help unless the help already states its default.

    Nothing is appended for on/off flags or ``None`` defaults (whose help says where the
    value comes from instead, e.g. "default from the YAML").
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text.lower() or action.default is None or isinstance(action.default, bool):
            return text
        return super()._get_help_string(action)


class SnakeArgumentParser(argparse.ArgumentParser):
    """``ArgumentParser`` whose errors are one line and whose help shows every default.

    Subparsers inherit the class (``add_subparsers`` uses ``type(self)``), so every
    ``snake`` command and subcommand behaves the same.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _DefaultsFormatter)
        super().__init__(*args, **kwargs)
        self.set_defaults(prog_name=self.prog)  # the innermost command's parser sets it last

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """``add_argument`` that gives a help-less option a help line stating its default."""
        if kwargs.get("help") is None and args and str(args[0]).startswith("-"):
            default = kwargs.get("default")
            if default is not None and not isinstance(default, bool):
                kwargs["help"] = "(default: %(default)s)"
        return super().add_argument(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Print ``<prog>: error: <message>`` on one line and exit 2."""
        line = " ".join(message.split())
        self.exit(_USAGE_ERROR, f"{self.prog}: error: {line} (see {self.prog} --help)\n")


def _checker(name: str, convert: Callable[[str], Any], ok: Callable[[Any], bool],
             need: str) -> Callable[[str], Any]:
    def check(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {need}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {need}, got {text!r}")
        return value

    check.__name__ = name
    return check


finite_float = _checker("finite_float", float, math.isfinite, "a finite number")
"""A finite float (``nan``/``inf`` refused)."""
positive_float = _checker("positive_float", float, lambda v: math.isfinite(v) and v > 0, "a number > 0")
"""A finite float > 0 (durations, lengths, periods)."""
non_negative_float = _checker("non_negative_float", float, lambda v: math.isfinite(v) and v >= 0, "a number >= 0")
"""A finite float >= 0."""
count = _checker("count", int, lambda v: v >= 1, "an integer >= 1")
"""An integer >= 1 (trials, repeats, samples, workers)."""
non_negative_int = _checker("non_negative_int", int, lambda v: v >= 0, "an integer >= 0")
"""An integer >= 0 (seeds, indices)."""


def float_in(low: float, high: float) -> Callable[[str], float]:
    """A checker for a finite float in ``[low, high]``."""
    return _checker("float_in", float, lambda v: math.isfinite(v) and low <= v <= high,
                    f"a number in [{low:g}, {high:g}]")


def int_at_least(low: int) -> Callable[[str], int]:
    """A checker for an integer >= ``low``."""
    return _checker("int_at_least", int, lambda v: v >= low, f"an integer >= {low}")


def register_modules(package: ModuleType, subparsers: argparse._SubParsersAction, only: str | None = None,
                     argv: Sequence[str] | None = None) -> None:
    """Call ``register(subparsers)`` of every module in ``package`` (or of module ``only``), in name order.

    A module whose commands have subcommands of their own (``snake bench``, ``snake
    experiment``) takes ``register(subparsers, argv)``: ``argv`` is the command line after
    its command's name when ``only`` named it (None otherwise), so that it can import only
    the subcommand named there, as :func:`build_parser` does for the commands.
    """
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or (only is not None and info.name != only):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is None:
            continue
        if getattr(module, "NESTED", False):
            register(subparsers, argv if only is not None else None)
        else:
            register(subparsers)


def subcommand_module(package: ModuleType, argv: Sequence[str] | None) -> str | None:
    """The module of ``package`` that the command ``argv`` starts with, or None (an option, or no such module)."""
    if not argv or argv[0].startswith("-"):
        return None
    name = argv[0].replace("-", "_")
    return name if any(m.name == name for m in pkgutil.iter_modules(package.__path__)) else None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``snake`` parser with every discovered subcommand.

    When ``argv`` starts with a command whose module is ``snake_tools.commands.<command>``
    (dashes as underscores), only that module is imported: a command does not pay for the
    imports (MuJoCo, scipy.optimize, networkx) and memory of the others.
    """
    from snake_tools import commands

    parser = SnakeArgumentParser(
        prog="snake", description="Snake robot stack: offline tools, experiments, benchmarks."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    only = subcommand_module(commands, argv)
    register_modules(commands, sub, only=only, argv=list(argv or [])[1:] if only else None)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``snake`` console script.

    A reader that closes the pipe early (``snake --help | head -1``) ends the command
    with exit code 1 and no traceback (:func:`_stdout_closed`). Ctrl-C, SIGINT or SIGTERM
    end every command through its Ctrl-C path, with one line and exit code 130 or 143
    (:mod:`snake_tools.cli_signals`; before this runs, the package's early handlers).
    """
    replaced = cli_signals.install()
    try:
        code = _run(argv)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
    except BrokenPipeError:
        return _stdout_closed()
    finally:
        cli_signals.restore(replaced)
    return code


def _run(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser(argv)   # imports the command's module: a signal may come in here
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help (0) or a bad flag (2, its one line already printed)
        return stop.code if isinstance(stop.code, int) else _USAGE_ERROR
    except KeyboardInterrupt as stop:
        return _stopped("snake", stop)
    except ImportError as err:
        return _stopped("snake", _interrupted_import(err))
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt as stop:
        return _stopped(getattr(args, "prog_name", "snake"), stop)
    except ImportError as err:   # a command imports rclpy, MuJoCo ... when it needs them
        return _stopped(getattr(args, "prog_name", "snake"), _interrupted_import(err))
    except BrokenPipeError:  # the reader went away: not a user error (see main)
        raise
    except TrialsFailedError as err:
        # Every failing trial was told with its arguments as it failed; the others ran.
        print(f"{getattr(args, 'prog_name', 'snake')}: error: {err}", file=sys.stderr)
        return _TRIALS_FAILED
    except (ValueError, OSError) as err:
        # Bad input (ConfigError, GaitError, missing file...): a clear one-line error.
        line = " ".join(str(err).split()) or type(err).__name__
        print(f"{getattr(args, 'prog_name', 'snake')}: error: {line}", file=sys.stderr)
        return _USAGE_ERROR


def _interrupted_import(err: ImportError) -> KeyboardInterrupt:
    """The signal's KeyboardInterrupt behind an import it broke off; ``err`` itself when there is none.

    A signal that lands while a C extension initialises (rclpy's ``_rclpy_pybind11``) raises its
    KeyboardInterrupt inside the initialisation, and the import machinery reports that as
    ``ImportError: initialization failed`` with the interrupt as its cause: a stop, not a broken
    installation.

    Raises:
        ImportError: ``err``, when no KeyboardInterrupt caused it.
    """
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return seen
        seen = seen.__cause__ or seen.__context__
    raise err


def _stopped(prog: str, stop: KeyboardInterrupt) -> int:
    """One line for a command a signal stopped; its exit code (130 for SIGINT, 143 for SIGTERM)."""
    signum = signal.SIGTERM if isinstance(stop, cli_signals.Terminated) else signal.SIGINT
    print(f"{prog}: stopped ({signal.Signals(signum).name})", file=sys.stderr, flush=True)
    return cli_signals.exit_code(signum)


def _stdout_closed() -> int:
    """Exit code 1 after the stdout reader closed the pipe, with nothing more written to it.

    The recipe of the Python documentation's "Note on SIGPIPE" (``signal`` module): stdout
    is pointed at ``os.devnull`` so the interpreter's final flush of what is still
    buffered cannot fail again.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return _BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
