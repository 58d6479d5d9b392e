from glob import glob

from setuptools import find_packages, setup

package_name = "snake_ros"

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        # Launch files, the node params files and the Fast DDS profile (the top of config/; its
        # subdirectories are snake_core's), the URDFs and the RViz config, where the launch files look for them.
        ("share/" + package_name + "/launch", sorted(glob("../../launch/*.launch.py"))),
        ("share/" + package_name + "/config", sorted(glob("../../config/*.yaml") + glob("../../config/*.xml")
                                                     + glob("../../config/*.json"))),
        ("share/" + package_name + "/urdf", sorted(glob("../../urdf/*.urdf"))),
        ("share/" + package_name + "/rviz", sorted(glob("../../rviz/*.rviz"))),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="Snake stack team",
    maintainer_email="snake-stack@example.org",
    description="ROS 2 nodes of the snake stack.",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
    entry_points={
        "console_scripts": [
            # One entry per node (ros2 run snake_ros <name>).
            "gait_node = snake_ros.gait_node:main",
            "bridge_node = snake_ros.bridge_node:main",
            "singularity_monitor = snake_ros.singularity_node:main",
            "slippage_monitor = snake_ros.slippage_node:main",
            "planner_node = snake_ros.planner_node:main",
            "path_follower = snake_ros.path_follower_node:main",
            "twin_node = snake_ros.twin_node:main",
            "bench_robot = snake_ros.bench_robot_node:main",
            # The robot's nodes in one process (bridge, gait, monitors on one executor).
            "robot_stack = snake_ros.robot_stack:main",
        ],
    },
)
