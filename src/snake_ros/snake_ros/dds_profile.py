"""The snake nodes' Fast DDS profile (``config/fastdds_profile.xml``), given to a process unless it has one.

Fast DDS reads its default profile from the file named by ``FASTDDS_DEFAULT_PROFILES_FILE``
(or the older ``FASTRTPS_DEFAULT_PROFILES_FILE``), else from ``DEFAULT_FASTDDS_PROFILES.xml``
in the working directory, when the process creates its first participant. The snake
profile shortens the participants' periodic announcement (``leaseAnnouncement``) from 3 s
to 0.5 s: a node that starts next to running ones is otherwise often discovered only at
their next announcement, up to 3 s later. A profile the user gave wins. No rclpy here:
the ``snake`` CLI imports this before it decides to start ROS.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path

from snake_core.config_files import source_config_dir

PROFILE_FILE = "fastdds_profile.xml"
"""The profile's file name: in ``config/`` of the source tree, installed to ``share/snake_ros/config``."""
PROFILE_ENV = "FASTDDS_DEFAULT_PROFILES_FILE"
"""Environment variable Fast DDS reads its default profile file from."""
_USER_ENVS = (PROFILE_ENV, "FASTRTPS_DEFAULT_PROFILES_FILE")  # a profile given by the user
_USER_FILES = ("DEFAULT_FASTDDS_PROFILES.xml", "DEFAULT_FASTRTPS_PROFILES.xml")  # read from the working directory


def snake_profile(start: Path | None = None) -> Path | None:
    """The snake profile: installed beside the package, else in the source tree's ``config/``; None if neither.

    Args:
        start: File to start from (default: this module): the install prefix is one of its
            parent directories (``share/snake_ros/config``, as the node params files).
    """
    here = (start or Path(__file__)).resolve()
    for parent in here.parents:
        installed = parent / "share" / "snake_ros" / "config" / PROFILE_FILE
        if installed.is_file():
            return installed
    source = source_config_dir(here)
    if source is not None and (source / PROFILE_FILE).is_file():
        return source / PROFILE_FILE
    return None


def use_snake_profile(environ: MutableMapping[str, str] | None = None) -> Path | None:
    """Point ``environ`` (default: this process's) at the snake profile unless a profile is given.

    Returns:
        The profile now in ``environ[PROFILE_ENV]``, or None when the user's profile (an
        environment variable or a default file in the working directory) stays in force or
        no snake profile is found.
    """
    env = os.environ if environ is None else environ
    if any(env.get(name) for name in _USER_ENVS) or any(Path(name).is_file() for name in _USER_FILES):
        return None
    path = snake_profile()
    if path is not None:
        env[PROFILE_ENV] = str(path)
    return path
