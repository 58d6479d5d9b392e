"""URDF generated from a robot description (the YAML is the single source of truth).

Frame convention (shared with the gait and the MuJoCo model): every link frame has x
along the backbone from head to tail (the arc-length direction s of 003), z dorsal
(up when the snake lies flat, the rolling vector's zero direction) and y = z x x.
Joint axes are taken from the YAML as written in that frame. The chain starts at
``head`` (s = 0) and each joint sits at its arc-length position along the body.

The planar wheeled snake's passive wheels are drawn as fixed child links at d_i
from each link's front joint (robot_state_publisher publishes only actuated
joints); the MuJoCo model gives them real free-spinning axles.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np

from snake_core.robot import JointSpec, RobotModel
from snake_core.twin_params import link_names as twin_link_names

_MIN_LINK = 1e-4  # m, shortest link length written (joints at the same place)


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def _inertial(link: ET.Element, mass: float, length: float, radius: float) -> None:
    """Solid cylinder along x, centred on the link's middle."""
    inertial = ET.SubElement(link, "inertial")
    ET.SubElement(inertial, "origin", xyz=f"{_fmt(length / 2)} 0 0", rpy="0 0 0")
    ET.SubElement(inertial, "mass", value=_fmt(mass))
    ixx = 0.5 * mass * radius**2
    iyy = mass * (3 * radius**2 + length**2) / 12.0
    ET.SubElement(inertial, "inertia", ixx=_fmt(ixx), ixy="0", ixz="0", iyy=_fmt(iyy), iyz="0", izz=_fmt(iyy))


def _cylinder_link(robot_el: ET.Element, name: str, length: float, radius: float, mass: float) -> None:
    link = ET.SubElement(robot_el, "link", name=name)
    for tag in ("visual", "collision"):
        el = ET.SubElement(link, tag)
        ET.SubElement(el, "origin", xyz=f"{_fmt(length / 2)} 0 0", rpy=f"0 {_fmt(math.pi / 2)} 0")
        geom = ET.SubElement(el, "geometry")
        ET.SubElement(geom, "cylinder", radius=_fmt(radius), length=_fmt(length))
    _inertial(link, mass, length, radius)


def _joint(robot_el: ET.Element, j: JointSpec, parent: str, child: str, offset: float) -> None:
    kind = "continuous" if j.continuous else "revolute"
    el = ET.SubElement(robot_el, "joint", name=j.name, type=kind)
    ET.SubElement(el, "parent", link=parent)
    ET.SubElement(el, "child", link=child)
    ET.SubElement(el, "origin", xyz=f"{_fmt(offset)} 0 0", rpy="0 0 0")
    ET.SubElement(el, "axis", xyz=" ".join(_fmt(a) for a in j.axis))
    attrs = {"effort": _fmt(j.effort), "velocity": _fmt(j.velocity)}
    if not j.continuous:
        attrs.update(lower=_fmt(j.lower), upper=_fmt(j.upper))
    ET.SubElement(el, "limit", attrib=attrs)


def link_names(robot: RobotModel) -> list[str]:
    """Names of the body links, head to tail (``head``, then the link after each joint).

    The twin's too, which a ``twin.link`` block names (:func:`snake_core.twin_params.link_names`).
    """
    return twin_link_names(robot.joint_names)


def robot_to_urdf(robot: RobotModel) -> str:
    """URDF text of ``robot`` (see the module docstring for frames)."""
    root = ET.Element("robot", name=robot.name)
    root.append(ET.Comment(f" Generated from config/robots/{robot.name}.yaml by `snake urdf`; do not edit. "))
    names = link_names(robot)
    if robot.kind == "tsnake":
        s = robot.joint_arc_positions()
        ends = np.concatenate([[0.0], s, [robot.length]])
        body = robot.tsnake_body
        radius = body.radius
        density = body.module_mass / body.module_length  # kg/m
        for k, name in enumerate(names):
            length = max(ends[k + 1] - ends[k], _MIN_LINK)
            _cylinder_link(root, name, length, radius, density * length)
        for k, j in enumerate(robot.joints):
            _joint(root, j, names[k], names[k + 1], ends[k + 1] - ends[k])
    else:
        lengths = robot.link_lengths
        wheeled = robot.wheeled_body
        half_width = 0.5 * wheeled.width
        wheel_r = wheeled.wheel_radius
        mass = wheeled.link_mass
        for k, name in enumerate(names):
            _cylinder_link(root, name, float(lengths[k]), half_width, mass)
            wheel = ET.SubElement(root, "link", name=f"wheel_{k + 1}")
            vis = ET.SubElement(wheel, "visual")
            ET.SubElement(vis, "origin", xyz="0 0 0", rpy=f"{_fmt(math.pi / 2)} 0 0")
            ET.SubElement(ET.SubElement(vis, "geometry"), "cylinder", radius=_fmt(wheel_r), length=_fmt(0.01))
            fixed = ET.SubElement(root, "joint", name=f"wheel_{k + 1}_mount", type="fixed")
            ET.SubElement(fixed, "parent", link=name)
            ET.SubElement(fixed, "child", link=f"wheel_{k + 1}")
            ET.SubElement(fixed, "origin", xyz=f"{_fmt(float(robot.wheel_d[k]))} 0 0", rpy="0 0 0")
        for k, j in enumerate(robot.joints):
            _joint(root, j, names[k], names[k + 1], float(lengths[k]))
    ET.indent(root, space="  ")
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
