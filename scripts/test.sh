#!/usr/bin/env bash
# Set up if needed, then run the whole test suite (lint, types, unit, graph tests).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
# shellcheck disable=SC1091
source "$ROOT/scripts/env.sh"
cd "$ROOT"
echo "test: ruff"
ruff check src launch test conftest.py
echo "test: mypy (all four packages, one run so that cross-package calls are checked)"
mypy src/snake_core/snake_core src/snake_hardware/snake_hardware src/snake_ros/snake_ros src/snake_tools/snake_tools
# Two worker processes (pytest-xdist): each claims its own DDS domain (conftest.py), and half the
# suite's time is spent waiting on DDS discovery, subprocesses and the servo emulator rather than
# computing. SNAKE_TEST_WORKERS=0 runs it in this one process; a later -n in the arguments wins.
# The thirty slowest tests are listed at the end, so that a run on a slow host says where its time went.
workers="${SNAKE_TEST_WORKERS:-2}"
echo "test: pytest ($workers worker processes)"
exec python -m pytest -n "$workers" --dist worksteal --durations=30 "$@"
