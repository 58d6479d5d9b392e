"""A robot YAML for another number of the same modules (``snake robot new``).

Everything that depends on the number of modules is rewritten from the source robot's
module: the joint list (names ``m<k>_<type>``, servo IDs 1, 2, ... head to tail), the
rolling gait's buffer boundaries, and the path-following values derived from the body
length. Per-module values (module length, joint types and limits, gait coefficients per
rad or per module) are kept; per-joint overrides (a measured ``zero_offset``) are not, since
they belong to one servo: measure the new robot's with ``snake servo --write``.

Rolling gait segments (003 Sec. III-D): the buffer runs between the twist joints of the two
middle modules, as in the 6-module T-Snake (``L_h = 2 L0 + 0.132``, ``L_t = 3 L0 + 0.132``),
so the head segment ``[0, L_h]`` and the tail segment ``[L_t, L]`` differ by less than one
module (half a module more in the tail for an odd count).
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

_DECIMALS = 4  # m: 0.1 mm


class RobotScalingError(ValueError):
    """The source robot cannot be scaled (not a T-Snake body, or a bad count); names the field."""


def scaled_robot(data: dict[str, Any], where: str, name: str, n_modules: int) -> dict[str, Any]:
    """The parsed robot ``data`` (read from ``where``) rewritten for ``n_modules`` modules.

    Raises:
        RobotScalingError: ``data`` is not a T-Snake robot, or ``n_modules`` < 2.
    """
    if data.get("kind") != "tsnake":
        raise RobotScalingError(f"{where}: kind: {data.get('kind')!r}: only tsnake robots are scaled by module")
    if n_modules < 2:
        raise RobotScalingError(f"--modules: {n_modules}: a head and a tail segment need at least 2 modules")
    out = copy.deepcopy(data)
    body = out["body"]
    old_n, l0 = int(body["n_modules"]), float(body["module_length"])
    order = list(body["joint_order"])
    positions = [float(p) for p in body["joint_positions"]]
    out["name"] = name
    out["description"] = f"{name}: {n_modules} modules of {data.get('name')} (written by snake robot new)"
    body["n_modules"] = n_modules
    joints = []
    for m in range(1, n_modules + 1):
        for t_i, jtype in enumerate(order):
            joints.append({"name": f"m{m}_{jtype}", "type": jtype, "servo_id": (m - 1) * len(order) + t_i + 1})
    out["joints"] = joints
    length = n_modules * l0
    old_length = old_n * l0
    roll = (out.get("gaits") or {}).get("rolling")
    if roll is not None:
        # The twist joint (the middle joint of a module) of the two middle modules.
        mid = positions[len(positions) // 2]
        m_h = n_modules // 2
        roll["head_end"] = round((m_h - 1) * l0 + mid, _DECIMALS)
        roll["tail_start"] = round(m_h * l0 + mid, _DECIMALS)
        _scale_following(out.get("following"), data, roll, length, old_length)
    return out


def _scale_following(following: dict[str, Any] | None, data: dict[str, Any], roll: dict[str, Any],
                     length: float, old_length: float) -> None:
    """Following values of the reduced drive (003 Eq. 9-10) for the new body, in place.

    ``reference_offset`` is the drive's centre ``(s_h + s_t) / 2`` with ``s_h = L_h / 2`` and
    ``s_t = (L_t + L) / 2``; ``half_width`` keeps its margin over ``L / 2``; the angular speed
    limit ``2 k omega_max / d'`` scales with the old over the new track ``d' = s_t - s_h``.
    """
    if not following:
        return
    s_h, s_t = roll["head_end"] / 2, (roll["tail_start"] + length) / 2
    old = data["gaits"]["rolling"]
    old_track = (float(old["tail_start"]) + old_length) / 2 - float(old["head_end"]) / 2
    if "reference_offset" in following:
        following["reference_offset"] = round((s_h + s_t) / 2, _DECIMALS)
    if "half_width" in following:
        following["half_width"] = round(float(following["half_width"]) + (length - old_length) / 2, _DECIMALS)
    follower = following.get("follower") or {}
    if "max_angular" in follower:
        follower["max_angular"] = round(float(follower["max_angular"]) * old_track / (s_t - s_h), _DECIMALS)


def scaled_robot_yaml(text: str, where: str, name: str, n_modules: int) -> str:
    """:func:`scaled_robot` of the YAML ``text``, as YAML text with a header comment."""
    data = yaml.safe_load(text)
    out = scaled_robot(data, where, name, n_modules)
    header = (f"# {name}: {n_modules} modules, written by `snake robot new --from {data.get('name')} "
              f"--modules {n_modules} {name}` from {where}.\n"
              "# Units: metres, radians, kilograms, seconds. Field meanings: docs/robots.md; the source's\n"
              "# comments explain each value. Check: snake urdf, snake sim-model, snake gait.\n")
    return header + yaml.safe_dump(out, sort_keys=False, default_flow_style=None, width=110)
