"""The ``snake`` command-line tool."""

from snake_tools.cli_signals import install_early as _install_early

_install_early()   # the snake process ends cleanly on a signal while it is still importing
