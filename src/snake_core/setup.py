from glob import glob

from setuptools import find_packages, setup

package_name = "snake_core"

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        # The robot descriptions are the single source of truth; installed so that
        # snake_core.robot.config_dir() finds them on a colcon install.
        ("share/" + package_name + "/config/robots", glob("../../config/robots/*.yaml")),
        ("share/" + package_name + "/config/worlds", glob("../../config/worlds/*.yaml")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="Snake stack team",
    maintainer_email="snake-stack@example.org",
    description="Pure core library of the snake stack (no rclpy).",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
)
