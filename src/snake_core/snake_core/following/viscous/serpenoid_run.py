"""The viscous model driven by the serpenoid gait (001 Sec. II and VI): open-loop runs and peg-density sweeps."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from snake_core.following.viscous.model import Trajectory, ViscousModelError, ViscousParams, random_pegs, simulate
from snake_core.gait.serpenoid import SerpenoidGait
from snake_core.robot import RobotModel, resolve_robot_path, robot_from_dict

_DT_S = 0.05  # s, the paper's simulation step (001 Sec. II, "time steps of 0.05 seconds")
_FIELD_MARGIN_M = 1.0  # m, pegs extend this far beyond the region the snake can reach
_BASE_ROBOT = "wheeled_snake"


def equal_link_robot(n_links: int, base: str | Path = _BASE_ROBOT) -> RobotModel:
    """A planar robot with ``n_links`` equal links, joint types and gait defaults from ``base``.

    The link length is the mean link length of ``base``; joints are named ``j2..jN`` as in
    the wheeled snake YAML. Used for ``--links N`` when N differs from the YAML.

    Args:
        n_links: Number of links (>= 2).
        base: Robot name or YAML path (a ``planar_wheeled`` robot).

    Returns:
        The robot description (in memory).
    """
    if int(n_links) != n_links or n_links < 2:
        raise ViscousModelError(f"n_links: must be an integer >= 2, got {n_links!r}")
    path = resolve_robot_path(base)
    data = yaml.safe_load(path.read_text())
    body = dict(data["body"])
    length = float(np.mean(np.add(body["wheel_d"], body["wheel_l"])))
    body.update(n_links=int(n_links), wheel_d=[length / 2] * n_links, wheel_l=[length / 2] * n_links)
    joint_type = next(iter(data["joint_types"]))
    data = {**data, "name": f"{data['name']}_{n_links}", "body": body,
            "joints": [{"name": f"j{i + 2}", "type": joint_type, "servo_id": i + 1} for i in range(n_links - 1)]}
    return robot_from_dict(data)


@dataclass(frozen=True)
class SerpenoidRun:
    """Result of one open-loop run.

    Attributes:
        trajectory: The simulated trajectory.
        pegs: Peg centres used, m.
        params: Model parameters used.
    """

    trajectory: Trajectory
    pegs: np.ndarray
    params: ViscousParams


def run_serpenoid(n_links: int, duration: float, pegs: np.ndarray | None = None, *, dt: float = _DT_S,
                  head_offset: float = 0.0, omega: float | None = None, params: ViscousParams | None = None,
                  start: tuple[float, float, float] = (0.0, 0.0, 0.0), robot: RobotModel | None = None,
                  **gait_overrides: float) -> SerpenoidRun:
    """Serpenoid undulation (``SerpenoidGait``) at constant wave frequency in the viscous model.

    Args:
        n_links: Links N.
        duration: Simulated time, s.
        pegs: Peg centres, m.
        dt: Step, s (0.05 s as in the paper).
        head_offset: Constant head-angle offset, rad (it travels along the body).
        omega: Wave frequency, rad/s (default: the gait's ``temporal_frequency``).
        params: Model parameters (default: N links of the robot's mean link length).
        start: Initial head pose ``(x m, y m, yaw rad)``.
        robot: Robot description (default: :func:`equal_link_robot`).
        **gait_overrides: ``gaits.serpenoid`` overrides (amplitude, spatial_frequency).

    Returns:
        The run.
    """
    if not (math.isfinite(duration) and duration > 0):
        raise ViscousModelError(f"duration: must be a positive number of seconds, got {duration!r}")
    robot = robot or equal_link_robot(n_links)
    if params is None:
        params = ViscousParams(n_links=n_links, link_length=float(np.mean(robot.link_lengths)))
    gait = SerpenoidGait(robot, **gait_overrides)
    w = float(robot.gait("serpenoid")["temporal_frequency"]) if omega is None else float(omega)
    steps = max(1, round(duration / dt))
    if head_offset == 0.0:
        # With no offset the gait is exactly alpha sin(omega t - (i - 1) beta): evaluated for all
        # steps at once (test_viscous_model checks it against SerpenoidGait.step).
        psi = w * dt * np.arange(steps + 1)
        alpha = gait.alpha * np.sin(psi[:, None] - gait.beta * np.arange(n_links - 1))
    else:
        alpha = np.empty((steps + 1, n_links - 1))
        alpha[0] = gait.step(0.0, (0.0, head_offset))
        for k in range(steps):
            alpha[k + 1] = gait.step(dt, (w, head_offset))
    pegs_arr = np.zeros((0, 2)) if pegs is None else np.asarray(pegs, dtype=float).reshape(-1, 2)
    return SerpenoidRun(trajectory=simulate(alpha, dt, params, pegs_arr, start), pegs=pegs_arr, params=params)


def peg_field_for(n_links: int, duration: float, density: float, seed: int, *, link_length: float,
                  diameter: float, max_speed: float = 0.1) -> np.ndarray:
    """Seeded random pegs around the region a snake starting at the origin heading +x can reach.

    Args:
        n_links: Links N.
        duration: s.
        density: Pegs per m^2.
        seed: Random seed.
        link_length: m.
        diameter: Peg diameter, m.
        max_speed: Speed bound used to size the field, m/s.

    Returns:
        Peg centres, m.
    """
    body = n_links * link_length
    reach = max_speed * duration + _FIELD_MARGIN_M
    return random_pegs(density, (-body - _FIELD_MARGIN_M, reach), (-reach, reach), diameter,
                       np.random.default_rng(seed))


def density_sweep(densities: list[float], n_links: int = 9, duration: float = 30.0, seeds: int = 5,
                  params: ViscousParams | None = None) -> list[dict[str, float]]:
    """Mean speed versus peg density, averaged over seeded fields (001 Sec. VI observation).

    Args:
        densities: Pegs per m^2.
        n_links: Links N.
        duration: s per run.
        seeds: Fields per density (seeds 0..seeds-1).
        params: Model parameters (default as :func:`run_serpenoid`).

    Returns:
        One row per density: ``density``, ``mean_speed`` (m/s, mean over seeds), ``std``.
    """
    robot = equal_link_robot(n_links)
    params = params or ViscousParams(n_links=n_links, link_length=float(np.mean(robot.link_lengths)))
    rows = []
    for rho in densities:
        speeds = []
        for seed in range(seeds):
            pegs = peg_field_for(n_links, duration, rho, seed, link_length=params.link_length,
                                 diameter=params.peg_diameter)
            speeds.append(run_serpenoid(n_links, duration, pegs, params=params, robot=copy.copy(robot))
                          .trajectory.mean_speed)
        rows.append({"density": float(rho), "mean_speed": float(np.mean(speeds)), "std": float(np.std(speeds))})
    return rows
