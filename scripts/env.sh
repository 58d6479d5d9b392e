# Shell environment of the workspace: the venv, and DDS kept on this machine.
# Sourced by scripts/demo.sh and scripts/test.sh; `source scripts/env.sh` by hand too.
SNAKE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SNAKE_ROOT
# shellcheck disable=SC1091
source "$SNAKE_ROOT/.venv/bin/activate"
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
export PYTHONUNBUFFERED=1
export MPLBACKEND=Agg
