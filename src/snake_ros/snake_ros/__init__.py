"""ROS 2 nodes: thin wrappers around snake_core and snake_hardware."""
