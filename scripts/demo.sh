#!/usr/bin/env bash
# Set up if needed, then run the main job on the embedded default (no robot needed).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
# shellcheck disable=SC1091
source "$ROOT/scripts/env.sh"
cd "$ROOT"
exec snake demo --out "${SNAKE_DEMO_OUT:-out/demo}" "$@"
