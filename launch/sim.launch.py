"""Run the stack on the MuJoCo twin: twin node, gait node, robot_state_publisher (all on sim time).

    ros2 launch snake_ros sim.launch.py                                   # T-Snake on flat ground
    ros2 launch snake_ros sim.launch.py world:=uneven mode:=fast speed_factor:=5.0
    ros2 launch snake_ros sim.launch.py robot:=wheeled_snake gait:=serpenoid world:=pegs
    ros2 launch snake_ros sim.launch.py rviz:=true                        # RViz with rviz/snake.rviz

The twin publishes /clock; every other node runs with use_sim_time. Drive it with
teleop_twist_keyboard in another terminal:

    ros2 run teleop_twist_keyboard teleop_twist_keyboard --ros-args -p stamped:=true
"""

from __future__ import annotations

import os

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def _nodes(context, *args, **kwargs):
    share = get_package_share_directory("snake_ros")
    robot = LaunchConfiguration("robot").perform(context)
    rviz = LaunchConfiguration("rviz").perform(context) == "true"
    if rviz:
        try:
            get_package_share_directory("rviz2")
        except PackageNotFoundError:
            raise RuntimeError("rviz:=true but rviz2 is not installed; nothing started") from None
    with open(os.path.join(share, "urdf", f"{robot}.urdf")) as f:
        robot_description = f.read()
    rviz_nodes = [Node(package="rviz2", executable="rviz2", output="screen",
                       arguments=["-d", os.path.join(share, "rviz", "snake.rviz")],
                       parameters=[{"use_sim_time": True}])] if rviz else []
    return [
        Node(
            package="snake_ros", executable="twin_node", name="twin_node", output="screen",
            parameters=[os.path.join(share, "config", "twin_node.yaml"),
                        {"robot": robot,
                         "world": LaunchConfiguration("world").perform(context),
                         "mode": LaunchConfiguration("mode").perform(context),
                         "speed_factor": float(LaunchConfiguration("speed_factor").perform(context))}],
        ),
        Node(
            package="snake_ros", executable="gait_node", name="gait_node", output="screen",
            parameters=[os.path.join(share, "config", "gait_node.yaml"),
                        {"robot": robot, "use_sim_time": True,
                         "gait": LaunchConfiguration("gait").perform(context)}],
        ),
        Node(
            package="robot_state_publisher", executable="robot_state_publisher", output="screen",
            parameters=[{"robot_description": robot_description, "use_sim_time": True}],
        ),
        *rviz_nodes,
    ]


def generate_launch_description() -> LaunchDescription:
    """Launch arguments: robot, gait, world, mode, speed_factor, rviz."""
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value="tsnake", description="tsnake | wheeled_snake"),
        DeclareLaunchArgument("gait", default_value="rolling", description="rolling | conical | serpenoid"),
        DeclareLaunchArgument("world", default_value="flat", description="flat | uneven | pegs | a YAML path"),
        DeclareLaunchArgument("mode", default_value="realtime", description="realtime | fast (lockstep: tests)"),
        DeclareLaunchArgument("speed_factor", default_value="5.0", description="fast mode: x real time"),
        DeclareLaunchArgument("rviz", default_value="false", description="true: open RViz with rviz/snake.rviz"),
        OpaqueFunction(function=_nodes),
    ])
