"""Bring up the snake stack: gait node, hardware bridge, robot_state_publisher.

    ros2 launch snake_ros snake.launch.py                         # emulated servos (no robot)
    ros2 launch snake_ros snake.launch.py backend:=dynamixel port:=/dev/ttyUSB0
    ros2 launch snake_ros snake.launch.py robot:=wheeled_snake gait:=serpenoid

Drive it with teleop_twist_keyboard in another terminal (publishes TwistStamped on
cmd_vel when run with stamped:=true on Jazzy and later):

    ros2 run teleop_twist_keyboard teleop_twist_keyboard --ros-args -p stamped:=true
"""

from __future__ import annotations

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def _nodes(context, *args, **kwargs):
    share = get_package_share_directory("snake_ros")
    robot = LaunchConfiguration("robot").perform(context)
    use_sim_time = LaunchConfiguration("use_sim_time").perform(context) == "true"
    with open(os.path.join(share, "urdf", f"{robot}.urdf")) as f:
        robot_description = f.read()
    common = {"robot": robot, "use_sim_time": use_sim_time}
    return [
        Node(
            package="snake_ros", executable="gait_node", name="gait_node", output="screen",
            parameters=[os.path.join(share, "config", "gait_node.yaml"),
                        {**common, "gait": LaunchConfiguration("gait").perform(context)}],
        ),
        Node(
            package="snake_ros", executable="bridge_node", name="bridge_node", output="screen",
            parameters=[os.path.join(share, "config", "bridge.yaml"),
                        {**common, "backend": LaunchConfiguration("backend").perform(context),
                         "port": LaunchConfiguration("port").perform(context)}],
        ),
        Node(
            package="robot_state_publisher", executable="robot_state_publisher", output="screen",
            parameters=[{"robot_description": robot_description, "use_sim_time": use_sim_time}],
        ),
    ]


def generate_launch_description() -> LaunchDescription:
    """Launch arguments: robot, gait, backend, port, use_sim_time."""
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value="tsnake", description="tsnake | wheeled_snake"),
        DeclareLaunchArgument("gait", default_value="rolling", description="rolling | conical | serpenoid"),
        DeclareLaunchArgument("backend", default_value="emulated", description="emulated | dynamixel"),
        DeclareLaunchArgument("port", default_value="/dev/ttyUSB0", description="serial device of the U2D2"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="true with the MuJoCo twin"),
        OpaqueFunction(function=_nodes),
    ])
