r"""Path following in one launch: motion capture -> planner -> follower -> gait -> servos or twin (001 Sec. IV).

    ros2 launch snake_ros follow.launch.py robot:=tsnake backend:=twin                 # the twin
    ros2 launch snake_ros follow.launch.py robot:=wheeled_snake backend:=twin world:=pegs
    ros2 launch snake_ros follow.launch.py robot:=tsnake backend:=dynamixel \
        mocap_topic:=/vrpn_mocap/snake_head/pose world:=lab_pegs.yaml               # the robot
    ros2 launch snake_ros follow.launch.py robot:=tsnake backend:=twin rviz:=true
    ros2 launch snake_ros follow.launch.py one_process:=false   # a process per node
    ros2 launch snake_ros follow.launch.py executor:=single     # rclpy's SingleThreadedExecutor in robot_stack
    ros2 launch snake_ros follow.launch.py view:=true    # Foxglove / Lichtblick on ws://127.0.0.1:8765
    ros2 launch snake_ros follow.launch.py backend:=emulated bench_seed:=3 world:=pegs  # the bench robot 3

Then send a goal (RViz's "2D Goal Pose" tool publishes ``/goal_pose``):

    ros2 topic pub --once /goal_pose geometry_msgs/msg/PoseStamped \
        "{header: {frame_id: world}, pose: {position: {x: 1.0, y: 0.0}}}"

The processes are those of :func:`snake_ros.following.follow_nodes` (the graph test of the
loop starts the same ones): the twin (``backend:=twin``; simulated time, synthetic motion
capture, ``world -> head`` on /tf) or the bridge (``emulated`` or ``dynamixel``; wall clock,
never simulated time; ``emulated`` runs the bench robot, with its motion capture on
``mocap_topic``, and the bridge on its pty, where the bench robot models the robot), the
gait node, the planner and the path follower. The robot's nodes (bridge, gait, planner,
follower) run in one ``robot_stack`` process by default (:func:`snake_ros.following.one_process`:
one executor, rclpy's EventsExecutor unless ``executor:=single``, one DDS participant, one
interpreter); ``one_process:=false`` gives each its own. The twin and the bench robot stand
for the robot and keep their own processes. The robot YAML's ``following:`` block gives the
gait, the follower's output, tracked point, gains and the planner's footprint:
``robot:=tsnake`` is enough. ``mocap_topic`` remaps the planner's and the follower's
``mocap/head_pose`` (vrpn_mocap: ``/vrpn_mocap/<body>/pose``; motion_capture_tracking sends
every body in one NamedPoseArray on ``/poses``: relay the head's entry to a PoseStamped
topic, see docs/path_following.md). Everything that can
fail (arguments, robot and world files, params files, whether robot_state_publisher and rviz2
are installed) is resolved before any process starts; the hardware starts first and the
follower, which commands motion, last. ``bench_seed`` and ``lifted`` reach the bench robot
(``backend:=emulated``), as ``world`` does; on Ctrl-C the bench robot stops after the bridge
has made the servos safe and exited (it runs in its own session, out of the terminal's SIGINT,
and an ``OnProcessExit`` handler of the bridge's process sends it SIGINT: see
:data:`snake_ros.launch_support.BENCH_ROBOT_PREFIX`).
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
from snake_ros.following import BACKENDS, follow_nodes, one_process
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

_OPTIONAL_PACKAGES = ("robot_state_publisher", "rviz2")
_BOOL = ("true", "false")
_TWIN_MODES = ("realtime", "fast", "lockstep")


def _nodes(context, *args, **kwargs):
    """Resolve every argument and file, then return the actions (nothing has started yet)."""
    share = get_package_share_directory("snake_ros")
    ros_arguments = enclave_arguments(LaunchConfiguration("enclave").perform(context))
    robot = absolute_if_path(LaunchConfiguration("robot").perform(context))
    world = absolute_if_path(LaunchConfiguration("world").perform(context))
    backend = choice("backend", LaunchConfiguration("backend").perform(context), BACKENDS)
    twin_mode = choice("twin_mode", LaunchConfiguration("twin_mode").perform(context), _TWIN_MODES)
    mocap_topic = LaunchConfiguration("mocap_topic").perform(context)
    if not mocap_topic:
        raise ValueError("mocap_topic:='': name the head's pose topic (e.g. /vrpn_mocap/snake_head/pose)")
    rviz = choice("rviz", LaunchConfiguration("rviz").perform(context), _BOOL) == "true"
    view = choice("view", LaunchConfiguration("view").perform(context), _BOOL) == "true"
    stacked = choice("one_process", LaunchConfiguration("one_process").perform(context).lower(), _BOOL) == "true"
    executor = choice("executor", LaunchConfiguration("executor").perform(context), EXECUTORS)
    seed = bench_seed(LaunchConfiguration("bench_seed").perform(context))
    lifted = choice("lifted", LaunchConfiguration("lifted").perform(context).lower(), _BOOL) == "true"
    rsp_installed = package_installed("robot_state_publisher")
    rviz_installed = package_installed("rviz2")
    if rviz and not rviz_installed:
        raise RuntimeError("rviz:=true but rviz2 is not installed; nothing started")
    robot_description = robot_to_urdf(load_robot(robot))  # a bad robot file fails here, as one line
    if world:
        resolve("world", world, FileNotFoundError)  # a missing world fails here
    specs = follow_nodes(robot, backend, world, mocap_topic, twin_mode, seed, lifted)
    if (seed or lifted) and not any(spec.name == "bench_robot" for spec in specs):
        raise ValueError("bench_seed and lifted are the bench robot's: they need backend:=emulated and a robot "
                         "it models (tsnake)")
    files = {}
    for spec in specs:
        files[spec.name] = [os.path.join(share, "config", f) for f in spec.params_files]
        for path in files[spec.name]:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{path}: params file not installed; nothing started")
    rviz_config = os.path.join(share, "rviz", "snake.rviz")
    if rviz and not os.path.isfile(rviz_config):
        raise FileNotFoundError(f"{rviz_config}: RViz config not installed; nothing started")
    sim_time = backend == "twin"
    own, stack = one_process(specs) if stacked else (specs, None)
    if stack is not None:  # the same nodes, files and overrides, one process on one executor
        stack_files = [os.path.join(share, "config", f) for f in stack.params_files]
        stack_overrides = node_overrides_file(stack.overrides)

    actions = []
    if rsp_installed:
        actions.append(Node(
            package="robot_state_publisher", executable="robot_state_publisher", output="screen",
            ros_arguments=ros_arguments,
            parameters=[{"robot_description": robot_description, "use_sim_time": sim_time}],
        ))
    else:
        actions.append(LogInfo(msg="robot_state_publisher is not installed: starting without it "
                                   "(no robot_description, no link frames)"))
    if view:  # the live view for Foxglove / Lichtblick (snake view: read-only, 127.0.0.1:8765)
        actions.append(ExecuteProcess(cmd=["snake", "view", "--robot", robot, "--mocap-topic", mocap_topic],
                                      name="snake_view", output="screen"))
    started = {}
    for spec in own:  # hardware, gait, planner, follower: what commands motion starts last
        started[spec.name] = Node(
            package="snake_ros", executable=spec.executable, name=spec.name, output="screen",
            ros_arguments=ros_arguments,
            parameters=[*files[spec.name], spec.params],
            remappings=list(spec.remappings),
            # the bench robot in its own session: out of the terminal's SIGINT (module docstring)
            **({"prefix": BENCH_ROBOT_PREFIX} if spec.name == "bench_robot" else {}),
        )
        actions.append(started[spec.name])
    if stack is not None:  # after the twin or bench robot; builds the follower last
        started["bridge_node"] = Node(
            package="snake_ros", executable="robot_stack", output="screen", ros_arguments=ros_arguments,
            arguments=[*stack.arguments, "--executor", executor],
            parameters=[*stack_files, stack_overrides],
            remappings=list(stack.remappings),
        )
        actions.append(started["bridge_node"])
    if "bench_robot" in started:  # stop the bench robot once the bridge has made the servos safe and exited
        actions.append(RegisterEventHandler(OnProcessExit(
            target_action=started["bridge_node"],
            on_exit=[EmitEvent(event=SignalProcess(signal_number=BENCH_STOP_SIGNAL,
                                                   process_matcher=matches_action(started["bench_robot"])))])))
    if rviz:
        actions.append(Node(
            package="rviz2", executable="rviz2", output="screen", arguments=["-d", rviz_config],
            ros_arguments=ros_arguments,
            parameters=[{"use_sim_time": sim_time}],
        ))
    return actions


def generate_launch_description() -> LaunchDescription:
    """Launch arguments: robot, backend, mocap_topic, world, bench_seed, lifted, twin_mode, rviz, view, enclave, ...

    ... one_process, executor.
    """
    return LaunchDescription([
        # Room for the nodes' safe exit before SIGTERM (see launch_support.SIGTERM_TIMEOUT_S).
        SetLaunchConfiguration("sigterm_timeout", SIGTERM_TIMEOUT_S),
        DeclareLaunchArgument("robot", default_value="tsnake",
                              description="robot name in config/robots (tsnake | wheeled_snake) or a robot YAML "
                                          "path; its following: block sets gait, follower and footprint"),
        DeclareLaunchArgument("backend", default_value="twin",
                              description="twin (MuJoCo, simulated time) | emulated | dynamixel (the bridge)"),
        DeclareLaunchArgument("mocap_topic", default_value="mocap/head_pose",
                              description="head rigid-body pose (geometry_msgs/PoseStamped), e.g. "
                                          "/vrpn_mocap/snake_head/pose"),
        DeclareLaunchArgument("world", default_value="",
                              description="pegs and arena: a world name in config/worlds or a YAML path ('': "
                                          "none; the twin then runs on flat ground)"),
        DeclareLaunchArgument("bench_seed", default_value="0",
                              description="backend emulated (the bench robot): which bench robot, the seed of its "
                                          "drawn variation (an integer >= 0)"),
        DeclareLaunchArgument("lifted", default_value="false",
                              description="backend emulated (the bench robot): true holds it by its head, body "
                                          "hanging down (contacts off)"),
        DeclareLaunchArgument("twin_mode", default_value="realtime",
                              description="backend twin: realtime | fast | lockstep"),
        DeclareLaunchArgument("rviz", default_value="false", description="true: open RViz with rviz/snake.rviz"),
        DeclareLaunchArgument("view", default_value="false",
                              description="true: snake view, the live view for Foxglove / Lichtblick on "
                                          "ws://127.0.0.1:8765 (read-only; docs/security.md)"),
        DeclareLaunchArgument("enclave", default_value="",
                              description="SROS2 enclave of every node (e.g. /snake; needs ROS_SECURITY_KEYSTORE "
                                          "and ROS_SECURITY_ENABLE=true, see docs/security.md); '': none"),
        DeclareLaunchArgument("one_process", default_value="true",
                              description="true | false: run the bridge, gait node, planner and path follower "
                                          "in one robot_stack process (one executor; the twin and the bench "
                                          "robot keep their own); false: each in its own process"),
        DeclareLaunchArgument("executor", default_value="events",
                              description="events | single: the executor of the robot_stack process "
                                          "(one_process:=true); events: rclpy's EventsExecutor, single: its "
                                          "SingleThreadedExecutor (about twice the CPU)"),
        OpaqueFunction(function=_nodes),
    ])
