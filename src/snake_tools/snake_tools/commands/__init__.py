"""Top-level ``snake`` subcommands: one module each, discovered by :mod:`snake_tools.cli`."""
