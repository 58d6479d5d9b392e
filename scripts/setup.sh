#!/usr/bin/env bash
# Idempotent workspace setup: .venv/ with the pinned dependency set, the four
# packages installed editable (so `snake` and the node executables are on the venv's
# PATH), and a colcon build of the workspace. A second run with nothing changed
# returns in about a second.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
PACKAGES=(snake_core snake_hardware snake_ros snake_tools)

pick_python() {
  for py in "${PYTHON:-}" python3.11 python3; do
    [ -n "$py" ] || continue
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      echo "$py"; return 0
    fi
  done
  echo "setup: need Python 3.11 (the ros-* wheels are built for it); set PYTHON=/path/to/python3.11" >&2
  return 1
}

stamp_of() {
  cat requirements.txt constraints.txt colcon.meta \
      src/*/setup.py src/*/setup.cfg src/*/package.xml | sha256sum | cut -d' ' -f1
}

# A headless browser for the report test (snake bag analyze writes report.html):
# Chromium from the distribution, installed only when missing and we are root with apt;
# tried once per .venv (a machine without the package archive does not retry every run).
BROWSER_TRIED="$VENV/.snake-browser-tried"
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
    && [ -z "${SNAKE_NO_BROWSER:-}" ] && [ ! -e "$BROWSER_TRIED" ]; then
  echo "setup: installing chromium (headless browser for the HTML report test)"
  mkdir -p "$VENV" && touch "$BROWSER_TRIED"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
    || echo "setup: could not install chromium; the report browser test will be skipped" >&2
fi

# Node.js and npm from the distribution, likewise, for the live view's test in Foxglove Studio
# (src/snake_tools/test/test_view_browser.py fetches the app and puppeteer-core with npm into
# ~/.cache/snake-stack/npm on its first run).
NODE_TRIED="$VENV/.snake-node-tried"
if { ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; } && [ "$(id -u)" = 0 ] \
    && command -v apt-get >/dev/null 2>&1 && [ -z "${SNAKE_NO_BROWSER:-}" ] && [ ! -e "$NODE_TRIED" ]; then
  echo "setup: installing nodejs and npm (the live view's test in Foxglove Studio)"
  mkdir -p "$VENV" && touch "$NODE_TRIED"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; } \
    || echo "setup: could not install nodejs and npm; the Foxglove Studio test will be skipped" >&2
fi

STAMP_FILE="$VENV/.snake-setup-stamp"
want="$(stamp_of)"
if [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP_FILE" 2>/dev/null)" = "$want" ] && [ -d "$ROOT/install" ]; then
  exit 0
fi

PY="$(pick_python)"
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PY" -m venv "$VENV"
fi
# pip's own output, boiled down to one progress line per package resolved and one when it installs
# (a fresh .venv takes minutes: this shows it is working, and on what).
progress() {
  awk -v total="$1" '
    /^Collecting / { n++; printf "setup:   %d: %s (%d pinned, plus what they depend on)\n", n, $2, total; fflush(); next }
    /^Installing collected packages/ { printf "setup:   installing %d packages (the longest step; no output until done)\n", n; fflush() }
  '
}
phase() { echo "setup: $1 (${SECONDS}s so far)"; }
phase "installing pinned dependencies"
"$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off \
  -r requirements.txt -c constraints.txt 2> >(grep -v "is ignored: it is neither" >&2) \
  | progress "$(grep -c '^[A-Za-z]' requirements.txt)"
phase "installing workspace packages (editable)"
editable=()
for p in "${PACKAGES[@]}"; do editable+=(-e "src/$p"); done
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation \
  "${editable[@]}" 2> >(grep -v "is ignored: it is neither" >&2)
# setup.cfg sends executables to lib/<package>/ (where `ros2 run` looks on a real
# install); pip honours that too, so put them on the venv's PATH as well.
for p in "${PACKAGES[@]}"; do
  if [ -d "$VENV/lib/$p" ]; then
    for exe in "$VENV/lib/$p"/*; do ln -sf "$exe" "$VENV/bin/$(basename "$exe")"; done
  fi
done
phase "colcon build"
( source "$VENV/bin/activate" && colcon --log-base log build --symlink-install \
    --base-paths src --event-handlers console_cohesion- summary- >/dev/null ) \
  || { echo "setup: colcon build failed; see log/latest_build" >&2; exit 1; }
echo "$want" > "$STAMP_FILE"
echo "setup: done in ${SECONDS}s"
