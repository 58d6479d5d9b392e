"""Where the workspace's configuration files live, and how a name or a path becomes one.

The one place that knows the layout of the configuration directory::

    robots/<robot>.yaml           robot descriptions (the single source of truth of a robot)
    worlds/<world>.yaml           simulation worlds of the MuJoCo twin
    calibration/<robot>/<target>.yaml  measured gait coefficients per calibration target,
                                  overlaid on the robot description
    experiments/<name>.yaml       experiment and case-study settings (not ``ros__parameters`` files)
    servos/<model>.yaml           servo models: motor, firmware conversions, friction (``snake_core.servo.model``)

The node parameter files (``<node>.yaml``, one ``/**/<node>: ros__parameters:`` block
each) sit at the top of the source tree's ``config/`` but belong to ``snake_ros`` and are
installed to its share directory, where the launch files find them; nothing here reads
them.

The directory is found in this order (:func:`config_dir`):

1. ``$SNAKE_CONFIG_DIR`` when set (must exist);
2. the installed share directory ``share/snake_core/config`` of the install prefix this
   module was installed into (a plain or ``--symlink-install`` colcon build, or a
   non-editable pip install);
3. the source tree's ``config/`` (an editable install, or running from a checkout).

Which ``calibration/<robot>/<target>.yaml`` is in force is named here too
(:func:`calibration_target`: an argument, else ``$SNAKE_CALIBRATION_TARGET``, else ``twin``).

Pure Python, standard library only: no ROS import, no numpy, so the ``snake`` command reads
its flags without them and the tests use the same lookup as the nodes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from snake_core.errors import RobotConfigError, SnakeCoreError
from snake_core.names import check_name

CONFIG_DIR_ENV = "SNAKE_CONFIG_DIR"
"""Environment variable naming a configuration directory that overrides the installed one."""

ConfigKind = Literal["robot", "world", "calibration", "experiment", "servo"]
"""What a configuration file describes; each kind has its own subdirectory."""

SUBDIRS: dict[ConfigKind, str] = {
    "robot": "robots",
    "world": "worlds",
    "calibration": "calibration",
    "experiment": "experiments",
    "servo": "servos",
}
"""Subdirectory of the configuration directory holding each kind of file."""

DEFAULT_CALIBRATION_TARGET = "twin"
"""Calibration target used when none is given: the MuJoCo twin's coefficients."""

CALIBRATION_TARGET_ENV = "SNAKE_CALIBRATION_TARGET"
"""Environment variable naming the calibration target (e.g. a real robot's name)."""


def calibration_target(target: str | None = None) -> str:
    """The calibration target: ``target``, else ``$SNAKE_CALIBRATION_TARGET``, else ``twin``.

    Raises:
        RobotConfigError: The name breaks the rule of every name that becomes a path
            (:func:`snake_core.names.check_name`: letters, digits and ``_``).
    """
    name = target or os.environ.get(CALIBRATION_TARGET_ENV) or DEFAULT_CALIBRATION_TARGET
    return check_name("calibration target", name, RobotConfigError)


_PACKAGE = "snake_core"
_SUFFIXES = (".yaml", ".yml")


class ConfigLookupError(SnakeCoreError, ValueError):
    """A configuration file or directory cannot be found; the message names what was tried."""


def _is_config_dir(path: Path) -> bool:
    return (path / SUBDIRS["robot"]).is_dir()


def installed_config_dir(start: Path | None = None) -> Path | None:
    """The ``share/snake_core/config`` of the install prefix holding ``start``, if any.

    A colcon install puts this module in ``<prefix>/lib/python3.X/site-packages/snake_core``
    and the data files in ``<prefix>/share/snake_core/config``, so the prefix is one of
    the module's parent directories.

    Args:
        start: File to start from (default: this module).

    Returns:
        The directory, or None when ``start`` is not inside an install prefix that has one.
    """
    here = (start or Path(__file__)).resolve()
    for parent in here.parents:
        share = parent / "share" / _PACKAGE / "config"
        if _is_config_dir(share):
            return share
    return None


def source_config_dir(start: Path | None = None) -> Path | None:
    """The ``config/`` directory of the source tree holding ``start``, if any.

    Args:
        start: File to start from (default: this module).

    Returns:
        The directory, or None when ``start`` is not inside a checkout of the workspace.
    """
    here = (start or Path(__file__)).resolve()
    for parent in here.parents:
        if _is_config_dir(parent / "config"):
            return parent / "config"
    return None


_FOUND: dict[str, Path] = {}
"""The directory found from this module's location (steps 2 and 3 of the module docstring), by that location."""


def config_dir(error: type[Exception] = ConfigLookupError) -> Path:
    """The workspace's configuration directory (see the module docstring for the order).

    Steps 2 and 3 walk every parent of this module's resolved path; their answer is kept and
    checked (one ``is_dir``) on each later call, so that a fit which builds a twin per rollout
    does not walk the tree a hundred times per twin (it did: a third of a lifted fit's wall
    time). A kept directory that is gone is looked up again; an install prefix created around
    this module after the first call is not seen until the process restarts.

    Args:
        error: Exception class raised when there is none.

    Returns:
        An existing directory.

    Raises:
        error: ``$SNAKE_CONFIG_DIR`` names no directory, or neither an installed nor a
            source configuration directory exists.
    """
    env = os.environ.get(CONFIG_DIR_ENV)
    if env:
        path = Path(env)
        if not path.is_dir():
            raise error(f"{CONFIG_DIR_ENV}={env}: not a directory")
        return path
    found = _FOUND.get(__file__)
    if found is None or not _is_config_dir(found):
        found = installed_config_dir() or source_config_dir()
        if found is None:
            raise error(f"cannot find the configuration directory (no share/{_PACKAGE}/config installed "
                        f"and no source tree); set {CONFIG_DIR_ENV}")
        _FOUND[__file__] = found
    return found


def config_path(kind: ConfigKind, name: str, error: type[Exception] = ConfigLookupError) -> Path:
    """Where the file ``name`` of ``kind`` is kept, whether or not it exists.

    Args:
        kind: ``robot``, ``world``, ``calibration``, ``experiment`` or ``servo``.
        name: File name without ``.yaml`` (e.g. ``tsnake``).
        error: Exception class raised when there is no configuration directory.

    Returns:
        ``<config dir>/<subdir of kind>/<name>.yaml``.
    """
    return config_dir(error) / SUBDIRS[kind] / f"{name}.yaml"


def looks_like_path(name_or_path: str | Path) -> bool:
    """True when ``name_or_path`` is a file path (a YAML suffix or a directory part), not a name."""
    text = str(name_or_path)
    return Path(text).suffix in _SUFFIXES or os.sep in text or (os.altsep is not None and os.altsep in text)


def resolve(kind: ConfigKind, name_or_path: str | Path, error: type[Exception] = ConfigLookupError) -> Path:
    """Turn a name (``tsnake``) or a path (``my/robot.yaml``) into an existing file.

    A name is looked up as ``<config dir>/<subdir of kind>/<name>.yaml``; a path is taken
    as given (relative to the working directory).

    Args:
        kind: ``robot``, ``world``, ``calibration``, ``experiment`` or ``servo``.
        name_or_path: A name of the configuration directory, or a file path.
        error: Exception class raised on failure (e.g. the loader's own config error).

    Returns:
        An existing file.

    Raises:
        error: The file does not exist; the message names the path tried.
    """
    if looks_like_path(name_or_path):
        path = Path(name_or_path)
        if not path.is_file():
            raise error(f"{path}: {kind} file not found")
        return path
    if not str(name_or_path):
        raise error(f"{kind}: empty name")
    candidate = config_path(kind, str(name_or_path), error)
    if not candidate.is_file():
        raise error(f"{kind} {str(name_or_path)!r}: no file {candidate}")
    return candidate


def available(kind: ConfigKind) -> list[str]:
    """Names of the files of ``kind`` in the configuration directory, sorted (for help texts)."""
    directory = config_dir() / SUBDIRS[kind]
    return sorted(p.stem for p in directory.glob("*.yaml")) if directory.is_dir() else []
