"""The ``snake`` command-line tool."""
