"""Run the stack on the MuJoCo twin: robot_state_publisher, twin node, gait node.

    ros2 launch snake_ros sim.launch.py                                   # T-Snake on flat ground
    ros2 launch snake_ros sim.launch.py world:=uneven mode:=fast speed_factor:=5.0
    ros2 launch snake_ros sim.launch.py mode:=lockstep                    # one period per gait tick
    ros2 launch snake_ros sim.launch.py robot:=wheeled_snake gait:=serpenoid world:=pegs
    ros2 launch snake_ros sim.launch.py robot:=./my_snake.yaml world:=./my_world.yaml
    ros2 launch snake_ros sim.launch.py rviz:=true                        # RViz with rviz/snake.rviz
    ros2 launch snake_ros sim.launch.py view:=true                        # Foxglove / Lichtblick on ws://127.0.0.1:8765

The twin publishes /clock and runs on its own (wall-clock) loop; the gait node and
robot_state_publisher run with use_sim_time. In ``lockstep`` mode the twin is primed
(``lockstep_prime``): it runs one period at start-up so that the gait node's first tick
on /clock happens, then the two alternate one period per command. Everything that can
fail (robot and world files, the URDF, whether robot_state_publisher is installed, the
argument values) is resolved before any process starts.

Drive it from another terminal (see the README for teleop_twist_keyboard and teleop_twist_joy):

    snake teleop
"""

from __future__ import annotations

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess, LogInfo, OpaqueFunction, SetLaunchConfiguration
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from snake_core.config_files import resolve
from snake_core.robot import load_robot
from snake_core.urdf import robot_to_urdf
from snake_ros.launch_support import SIGTERM_TIMEOUT_S, absolute_if_path, choice, enclave_arguments, package_installed

_OPTIONAL_PACKAGE = "robot_state_publisher"
_MODES = ("realtime", "fast", "lockstep")
_RSP_CHOICES = ("auto", "true", "false")


def _nodes(context, *args, **kwargs):
    """Resolve every argument and file, then return the actions (nothing has started yet)."""
    share = get_package_share_directory("snake_ros")
    ros_arguments = enclave_arguments(LaunchConfiguration("enclave").perform(context))
    robot = absolute_if_path(LaunchConfiguration("robot").perform(context))
    world = absolute_if_path(LaunchConfiguration("world").perform(context))
    gait = LaunchConfiguration("gait").perform(context)
    mode = choice("mode", LaunchConfiguration("mode").perform(context), _MODES)
    speed_factor_text = LaunchConfiguration("speed_factor").perform(context)
    try:
        speed_factor = float(speed_factor_text)
    except ValueError:
        raise ValueError(f"speed_factor:={speed_factor_text!r}: must be a number") from None
    rsp = choice("robot_state_publisher", LaunchConfiguration("robot_state_publisher").perform(context),
                  _RSP_CHOICES)
    rsp_installed = package_installed(_OPTIONAL_PACKAGE)
    if rsp == "true" and not rsp_installed:
        raise RuntimeError(f"{_OPTIONAL_PACKAGE}:=true but the package is not installed; nothing started")
    robot_description = robot_to_urdf(load_robot(robot))  # robot name or YAML path: the URDF from the YAML
    resolve("world", world)  # a missing world fails here, not in the twin after the others started
    twin_params = os.path.join(share, "config", "twin_node.yaml")
    gait_params = os.path.join(share, "config", "gait_node.yaml")
    for path in (twin_params, gait_params):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: params file not installed; nothing started")

    rviz = choice("rviz", LaunchConfiguration("rviz").perform(context), ("true", "false")) == "true"
    view = choice("view", LaunchConfiguration("view").perform(context), ("true", "false")) == "true"
    if rviz and not package_installed("rviz2"):
        raise RuntimeError("rviz:=true but rviz2 is not installed; nothing started")

    actions = []
    if rsp != "false" and rsp_installed:
        actions.append(Node(
            package="robot_state_publisher", executable="robot_state_publisher", output="screen",
            ros_arguments=ros_arguments,
            parameters=[{"robot_description": robot_description, "use_sim_time": True}],
        ))
    elif rsp == "auto":
        actions.append(LogInfo(msg=f"{_OPTIONAL_PACKAGE} is not installed: starting without it "
                                   "(no robot_description, no TF)"))
    rviz_nodes = [Node(package="rviz2", executable="rviz2", output="screen", ros_arguments=ros_arguments,
                       arguments=["-d", os.path.join(share, "rviz", "snake.rviz")],
                       parameters=[{"use_sim_time": True}])] if rviz else []
    actions += [
        Node(
            package="snake_ros", executable="twin_node", name="twin_node", output="screen", ros_arguments=ros_arguments,
            # The twin is the clock: it publishes /clock and never runs on it.
            parameters=[twin_params,
                        {"robot": robot, "world": world, "mode": mode, "speed_factor": speed_factor,
                         "lockstep_prime": mode == "lockstep", "use_sim_time": False}],
        ),
        *rviz_nodes,
        # The live view for Foxglove / Lichtblick (snake view: read-only, 127.0.0.1:8765).
        *([ExecuteProcess(cmd=["snake", "view", "--robot", robot], name="snake_view", output="screen")]
          if view else []),
        # Last: what drives the robot starts when everything else is up.
        Node(
            package="snake_ros", executable="gait_node", name="gait_node", output="screen", ros_arguments=ros_arguments,
            parameters=[gait_params, {"robot": robot, "gait": gait, "use_sim_time": True}],
        ),
    ]
    return actions


def generate_launch_description() -> LaunchDescription:
    """Launch arguments: robot, gait, world, mode, speed_factor, robot_state_publisher, rviz, view, enclave."""
    return LaunchDescription([
        # Room for the nodes' safe exit before SIGTERM (see launch_support.SIGTERM_TIMEOUT_S).
        SetLaunchConfiguration("sigterm_timeout", SIGTERM_TIMEOUT_S),
        DeclareLaunchArgument("robot", default_value="tsnake",
                              description="robot name in config/robots (tsnake | wheeled_snake) or a robot YAML path"),
        DeclareLaunchArgument("gait", default_value="rolling", description="rolling | conical | serpenoid"),
        DeclareLaunchArgument("world", default_value="flat",
                              description="world name in config/worlds (flat | uneven | pegs) or a world YAML path"),
        DeclareLaunchArgument("mode", default_value="realtime",
                              description="realtime | fast (speed_factor x real time) | lockstep (one period per "
                                          "gait tick, twin primed)"),
        DeclareLaunchArgument("speed_factor", default_value="5.0", description="fast mode: x real time"),
        DeclareLaunchArgument("robot_state_publisher", default_value="auto",
                              description="auto (start it when installed, else log and go on) | true "
                                          "(required: refuse to start without it) | false"),
        DeclareLaunchArgument("rviz", default_value="false", description="true: open RViz with rviz/snake.rviz"),
        DeclareLaunchArgument("view", default_value="false",
                              description="true: snake view, the live view for Foxglove / Lichtblick on "
                                          "ws://127.0.0.1:8765 (read-only; docs/security.md)"),
        DeclareLaunchArgument("enclave", default_value="",
                              description="SROS2 enclave of every node (e.g. /snake; needs ROS_SECURITY_KEYSTORE "
                                          "and ROS_SECURITY_ENABLE=true, see docs/security.md); '': none"),
        OpaqueFunction(function=_nodes),
    ])
