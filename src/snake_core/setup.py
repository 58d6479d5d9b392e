import os

from setuptools import find_packages, setup

package_name = "snake_core"
_CONFIG = os.path.join("..", "..", "config")


def _config_subdirectories() -> list[tuple[str, list[str]]]:
    """data_files for every file in a subdirectory of config/, the tree kept.

    robots/, worlds/, calibration/, experiments/: everything snake_core.config_files looks
    up, installed to share/snake_core/config/ so a plain (copying) colcon build finds it.
    The node params files at the top of config/ belong to snake_ros.
    """
    entries = []
    for sub in sorted(os.listdir(_CONFIG)):
        if not os.path.isdir(os.path.join(_CONFIG, sub)):
            continue
        for dirpath, dirnames, filenames in os.walk(os.path.join(_CONFIG, sub)):
            dirnames.sort()
            files = sorted(os.path.join(dirpath, f) for f in filenames)
            if files:
                rel = os.path.relpath(dirpath, _CONFIG)
                entries.append((os.path.join("share", package_name, "config", rel), files))
    return entries

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        *_config_subdirectories(),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="Snake stack team",
    maintainer_email="snake-stack@example.org",
    description="Pure core library of the snake stack (no rclpy).",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
)
