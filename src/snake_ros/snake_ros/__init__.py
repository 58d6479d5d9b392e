"""ROS 2 nodes: thin wrappers around snake_core and snake_hardware."""

from snake_ros.start_signals import install as _install_start_signals

_install_start_signals()   # a node process stops cleanly on a signal while it is still importing
