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
echo "test: mypy (pure core library)"
mypy src/snake_core/snake_core
echo "test: pytest"
exec python -m pytest "$@"
