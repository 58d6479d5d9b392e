"""Exceptions of the core library."""

from __future__ import annotations


class SnakeCoreError(Exception):
    """Base class of the core library's errors."""


class ConfigError(SnakeCoreError, ValueError):
    """A configuration file is invalid; the message is one line: ``<file>: <field path>: <problem>``."""


class RobotConfigError(ConfigError):
    """A robot description (or calibration) file is invalid; the message names the file and field."""


class GaitError(SnakeCoreError, ValueError):
    """A gait was asked for something it cannot do (bad parameter or command)."""


class WorldConfigError(ConfigError):
    """A simulation world file is invalid; the message names the file and field."""


class PlanningError(SnakeCoreError, ValueError):
    """A path cannot be planned (goal inside an obstacle, outside the arena, unreachable, bad input)."""
