"""Robot descriptions: one YAML per robot is the single source of truth.

A description gives the body dimensions, the joints (names, types, limits, servo
IDs, zero offsets, directions), the servo bus and the gait defaults. The URDF, the
MuJoCo model, the bridge's servo table and the gait geometry are all derived from
the :class:`RobotModel` loaded here, so no dimension is written twice.

This module is the import path the rest of the stack uses (``from snake_core.robot
import load_robot, RobotModel``); the code lives in three modules, one per stage, and is
re-exported here:

- :mod:`snake_core.robot_model`: the data types (:class:`RobotModel`, its body, joints,
  servo registers and following presets) and the servos' ranges.
- :mod:`snake_core.robot_yaml`: the strict schema and checks of a robot YAML
  (:func:`robot_from_dict`; bad files raise :class:`~snake_core.errors.RobotConfigError`,
  one line naming the file and the offending field).
- :mod:`snake_core.robot_calibration`: finding and loading a robot (:func:`load_robot`)
  and its calibration files (:func:`calibration_path`, :func:`apply_calibration`,
  :func:`load_twin_params`).
"""

from __future__ import annotations

from snake_core.config_files import CALIBRATION_TARGET_ENV, DEFAULT_CALIBRATION_TARGET, calibration_target
from snake_core.errors import RobotConfigError
from snake_core.robot_calibration import (
    apply_calibration,
    calibration_path,
    calibration_targets,
    describe_calibration,
    load_robot,
    load_twin_params,
    resolve_robot_path,
)
from snake_core.robot_model import (
    BAUD_RATES,
    EXTENDED_MODE_TICKS,
    POSITION_MODE_TICKS,
    SERVO_MODELS,
    SERVO_RANGES,
    SERVO_REGISTERS,
    TICKS_CENTER,
    TICKS_PER_REV,
    ZERO_OFFSET_RANGE,
    FollowingPresets,
    JointSpec,
    RobotBody,
    RobotModel,
    ServoRange,
    ServoRegisters,
    TSnakeBody,
    WheeledBody,
    joint_actuator,
    servo_ticks,
)
from snake_core.robot_yaml import robot_from_dict

__all__ = [
    "BAUD_RATES",
    "CALIBRATION_TARGET_ENV",
    "DEFAULT_CALIBRATION_TARGET",
    "EXTENDED_MODE_TICKS",
    "POSITION_MODE_TICKS",
    "SERVO_MODELS",
    "SERVO_RANGES",
    "SERVO_REGISTERS",
    "TICKS_CENTER",
    "TICKS_PER_REV",
    "ZERO_OFFSET_RANGE",
    "FollowingPresets",
    "JointSpec",
    "RobotBody",
    "RobotConfigError",
    "RobotModel",
    "ServoRange",
    "ServoRegisters",
    "TSnakeBody",
    "WheeledBody",
    "apply_calibration",
    "calibration_path",
    "calibration_target",
    "calibration_targets",
    "describe_calibration",
    "joint_actuator",
    "load_robot",
    "load_twin_params",
    "resolve_robot_path",
    "robot_from_dict",
    "servo_ticks",
]
