"""Bring up the snake stack on servos: robot_state_publisher, hardware bridge, gait node.

    ros2 launch snake_ros snake.launch.py                         # emulated servos (no robot)
    ros2 launch snake_ros snake.launch.py bench_robot:=true       # the bench robot (docs/hardware.md)
    ros2 launch snake_ros snake.launch.py bench_robot:=true bench_seed:=3 world:=uneven  # another one, elsewhere
    ros2 launch snake_ros snake.launch.py bench_robot:=true lifted:=true  # held by its head
    ros2 launch snake_ros snake.launch.py backend:=dynamixel      # the robot, port from the robot YAML
    ros2 launch snake_ros snake.launch.py backend:=dynamixel port:=/dev/ttyUSB1
    ros2 launch snake_ros snake.launch.py robot:=wheeled_snake gait:=serpenoid
    ros2 launch snake_ros snake.launch.py robot:=./my_snake.yaml  # a robot YAML path
    ros2 launch snake_ros snake.launch.py backend:=dynamixel enclave:=/snake  # SROS2 (docs/security.md)
    ros2 launch snake_ros snake.launch.py one_process:=false  # bridge and gait each in its own process
    ros2 launch snake_ros snake.launch.py executor:=single    # rclpy's SingleThreadedExecutor in robot_stack
    ros2 launch snake_ros snake.launch.py view:=true  # Foxglove / Lichtblick on ws://127.0.0.1:8765

The bridge and the gait node run in one ``robot_stack`` process by default (one executor, one
DDS participant, one interpreter; docs/benchmarks.md has what that saves), spun by rclpy's
EventsExecutor (``executor:=single``: its SingleThreadedExecutor; :mod:`snake_ros.robot_stack`
says why); ``one_process:=false`` gives each its own process.

Fails safe: everything that can fail (the robot YAML and its URDF, the params files,
whether robot_state_publisher is installed, the argument values) is resolved before any
process starts, so a bad argument or a missing package never leaves the bridge powering
servos without a gait, or the reverse. The hardware bridge always runs on the wall clock
(``use_sim_time`` goes to the gait node and robot_state_publisher only); the serial port
defaults to the robot YAML's ``bus.port``.

Stopping the bench robot: on Ctrl-C the bridge makes the servos safe over the bench robot's
bus before the bench robot stops. The bench robot runs in its own session
(:data:`snake_ros.launch_support.BENCH_ROBOT_PREFIX`), so the terminal's SIGINT reaches the
bridge and not it, and an ``OnProcessExit`` handler of the bridge's process sends it SIGINT
once the bridge has exited. A bench robot that dies first still leaves the bridge's ERROR (the
bus really went away).

Drive it from another terminal (see the README for teleop_twist_keyboard and teleop_twist_joy):

    snake teleop
"""

from __future__ import annotations

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import (
    DeclareLaunchArgument,
    EmitEvent,
    ExecuteProcess,
    LogInfo,
    OpaqueFunction,
    RegisterEventHandler,
    SetLaunchConfiguration,
)
from launch.event_handlers import OnProcessExit
from launch.events import matches_action
from launch.events.process import SignalProcess
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from snake_core.config_files import resolve
from snake_core.robot import load_robot
from snake_core.urdf import robot_to_urdf
from snake_ros.following import bench_robot_models, bench_robot_nodes
from snake_ros.launch_support import (
    BENCH_ROBOT_PREFIX,
    BENCH_STOP_SIGNAL,
    SIGTERM_TIMEOUT_S,
    absolute_if_path,
    bench_seed,
    choice,
    enclave_arguments,
    node_overrides_file,
    package_installed,
)
from snake_ros.runtime import EXECUTORS

_OPTIONAL_PACKAGE = "robot_state_publisher"
_BOOLEANS = {"true": True, "false": False}
_RSP_CHOICES = ("auto", "true", "false")


def _nodes(context, *args, **kwargs):
    """Resolve every argument and file, then return the actions (nothing has started yet)."""
    share = get_package_share_directory("snake_ros")
    ros_arguments = enclave_arguments(LaunchConfiguration("enclave").perform(context))
    robot = absolute_if_path(LaunchConfiguration("robot").perform(context))
    gait = LaunchConfiguration("gait").perform(context)
    backend = choice("backend", LaunchConfiguration("backend").perform(context), ("emulated", "dynamixel"))
    port = LaunchConfiguration("port").perform(context)
    use_sim_time = _BOOLEANS[choice("use_sim_time", LaunchConfiguration("use_sim_time").perform(context).lower(),
                                     tuple(_BOOLEANS))]
    rsp = choice("robot_state_publisher", LaunchConfiguration("robot_state_publisher").perform(context),
                  _RSP_CHOICES)
    one_process = _BOOLEANS[choice("one_process", LaunchConfiguration("one_process").perform(context).lower(),
                                   tuple(_BOOLEANS))]
    view = _BOOLEANS[choice("view", LaunchConfiguration("view").perform(context).lower(), tuple(_BOOLEANS))]
    executor = choice("executor", LaunchConfiguration("executor").perform(context), EXECUTORS)
    rsp_installed = package_installed(_OPTIONAL_PACKAGE)
    if rsp == "true" and not rsp_installed:
        raise RuntimeError(f"{_OPTIONAL_PACKAGE}:=true but the package is not installed; nothing started")
    robot_description = robot_to_urdf(load_robot(robot))  # robot name or YAML path: the URDF from the YAML
    gait_params = os.path.join(share, "config", "gait_node.yaml")
    bridge_params = os.path.join(share, "config", "bridge.yaml")
    bench_params = os.path.join(share, "config", "bench_robot.yaml")
    for path in (gait_params, bridge_params, bench_params):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: params file not installed; nothing started")
    bridge_overrides = {"robot": robot, "backend": backend, "use_sim_time": False}
    if port:
        bridge_overrides["port"] = port  # else the params file's "" = the robot YAML's bus.port
    # bench_robot:=true: the bench robot (a body, its firmware and motion capture) instead of the
    # bridge's in-process emulator; the bridge drives its pty as it would the robot's U2D2
    bench = None
    seed = bench_seed(LaunchConfiguration("bench_seed").perform(context))
    world = absolute_if_path(LaunchConfiguration("world").perform(context))
    lifted = _BOOLEANS[choice("lifted", LaunchConfiguration("lifted").perform(context).lower(), tuple(_BOOLEANS))]
    if _BOOLEANS[choice("bench_robot", LaunchConfiguration("bench_robot").perform(context).lower(),
                        tuple(_BOOLEANS))]:
        if backend != "emulated" or not bench_robot_models(robot):
            raise ValueError("bench_robot:=true needs backend:=emulated and a robot the bench robot models (tsnake)")
        if world:
            resolve("world", world, FileNotFoundError)  # a missing world fails here
        bench, bench_bridge_spec = bench_robot_nodes(robot, world, seed=seed, lifted=lifted)
        bench_bridge = bench_bridge_spec.params
    elif seed or world or lifted:
        raise ValueError("bench_seed, world and lifted are the bench robot's: they need bench_robot:=true")
        bridge_overrides.update(backend="dynamixel", port=bench.params["link"], auto_arm=True,
                                latency_ms=bench_bridge["latency_ms"])
    gait_overrides = {"robot": robot, "gait": gait, "use_sim_time": use_sim_time}
    stack_overrides = node_overrides_file({"bridge_node": bridge_overrides,
                                           "gait_node": gait_overrides}) if one_process else ""

    actions = []
    if rsp != "false" and rsp_installed:
        actions.append(Node(
            package="robot_state_publisher", executable="robot_state_publisher", output="screen",
            ros_arguments=ros_arguments,
            parameters=[{"robot_description": robot_description, "use_sim_time": use_sim_time}],
        ))
    elif rsp == "auto":
        actions.append(LogInfo(msg=f"{_OPTIONAL_PACKAGE} is not installed: starting without it "
                                   "(no robot_description, no TF)"))
    bench_action = None
    if bench is not None:  # the robot first: the bridge opens its pty; its own session (module docstring)
        bench_action = Node(package="snake_ros", executable="bench_robot", name="bench_robot", output="screen",
                            ros_arguments=ros_arguments, prefix=BENCH_ROBOT_PREFIX,
                            parameters=[bench_params, {"robot": robot, "world": bench.params["world"],
                                                       "seed": bench.params["seed"],
                                                       "lifted": bench.params["lifted"],
                                                       "link": bench.params["link"]}])
        actions.append(bench_action)
    if view:  # the live view for Foxglove / Lichtblick (snake view: read-only, 127.0.0.1:8765)
        actions.append(ExecuteProcess(cmd=["snake", "view", "--robot", robot], name="snake_view", output="screen"))
    if one_process:  # the same two nodes, files and overrides, in one process on one executor
        bridge_action = Node(
            package="snake_ros", executable="robot_stack", output="screen", ros_arguments=ros_arguments,
            arguments=["--nodes", "bridge_node,gait_node", "--executor", executor],
            parameters=[bridge_params, gait_params, stack_overrides],
        )
        actions.append(bridge_action)
    else:
        bridge_action = Node(
            package="snake_ros", executable="bridge_node", name="bridge_node", output="screen",
            ros_arguments=ros_arguments,
            parameters=[bridge_params, bridge_overrides],
        )
        actions += [
            bridge_action,
            Node(
                package="snake_ros", executable="gait_node", name="gait_node", output="screen",
                ros_arguments=ros_arguments, parameters=[gait_params, gait_overrides],
            ),
        ]
    if bench_action is not None:  # stop the bench robot once the bridge has made the servos safe and exited
        actions.append(RegisterEventHandler(OnProcessExit(
            target_action=bridge_action,
            on_exit=[EmitEvent(event=SignalProcess(signal_number=BENCH_STOP_SIGNAL,
                                                   process_matcher=matches_action(bench_action)))])))
    return actions


def generate_launch_description() -> LaunchDescription:
    """Launch arguments: robot, gait, backend, port, use_sim_time, robot_state_publisher, enclave, bench_robot, ...

    ... bench_seed, world, lifted, one_process, executor and view.
    """
    return LaunchDescription([
        # Room for the nodes' safe exit before SIGTERM (see launch_support.SIGTERM_TIMEOUT_S).
        SetLaunchConfiguration("sigterm_timeout", SIGTERM_TIMEOUT_S),
        DeclareLaunchArgument("robot", default_value="tsnake",
                              description="robot name in config/robots (tsnake | wheeled_snake) or a robot YAML path"),
        DeclareLaunchArgument("gait", default_value="rolling", description="rolling | conical | serpenoid"),
        DeclareLaunchArgument("backend", default_value="emulated", description="emulated | dynamixel"),
        DeclareLaunchArgument("port", default_value="",
                              description="serial device of the U2D2; empty: the robot YAML's bus.port"),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="true | false: gait node and robot_state_publisher on /clock "
                                          "(never the bridge, which drives real time hardware)"),
        DeclareLaunchArgument("robot_state_publisher", default_value="auto",
                              description="auto (start it when installed, else log and go on) | true "
                                          "(required: refuse to start without it) | false"),
        DeclareLaunchArgument("enclave", default_value="",
                              description="SROS2 enclave of every node (e.g. /snake; needs ROS_SECURITY_KEYSTORE "
                                          "and ROS_SECURITY_ENABLE=true, see docs/security.md); '': none"),
        DeclareLaunchArgument("bench_robot", default_value="false",
                              description="true | false: with backend:=emulated, run the bench robot (a body, its "
                                          "firmware and motion capture; docs/hardware.md) and the bridge on its pty"),
        DeclareLaunchArgument("bench_seed", default_value="0",
                              description="bench_robot:=true: which bench robot, the seed of its drawn variation "
                                          "(servos, links, ground friction; an integer >= 0)"),
        DeclareLaunchArgument("world", default_value="",
                              description="bench_robot:=true: a world name in config/worlds or a YAML path for "
                                          "its ground ('': flat)"),
        DeclareLaunchArgument("lifted", default_value="false",
                              description="bench_robot:=true: true holds the bench robot by its head, body hanging "
                                          "down (contacts off; identifying its servos)"),
        DeclareLaunchArgument("one_process", default_value="true",
                              description="true | false: run the bridge and the gait node in one robot_stack "
                                          "process (one executor; saves a process's DDS participant and imports); "
                                          "false: each in its own process"),
        DeclareLaunchArgument("executor", default_value="events",
                              description="events | single: the executor of the robot_stack process "
                                          "(one_process:=true); events: rclpy's EventsExecutor, single: its "
                                          "SingleThreadedExecutor (about twice the CPU)"),
        DeclareLaunchArgument("view", default_value="false",
                              description="true: snake view, the live view for Foxglove / Lichtblick on "
                                          "ws://127.0.0.1:8765 (read-only; docs/security.md)"),
        OpaqueFunction(function=_nodes),
    ])
