"""Actuator backends behind one interface (no rclpy)."""
