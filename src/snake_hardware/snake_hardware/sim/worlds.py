"""Simulation worlds from YAML files in ``config/worlds``.

A world file gives the ground (an infinite plane or a seeded random height field), optional
obstacles (a field of cylindrical pegs from a list of centres and one diameter) and where
the robot is spawned. :func:`load_world` validates the file and returns a :class:`World`;
:mod:`snake_hardware.sim.mjcf` turns it into MJCF next to the robot.

The uneven terrain follows 003 Sec. IV-A.3 ("randomly generated uneven terrain, with a
maximum height variation of 0.2 m and a standard deviation of 0.0593 m"): see
:func:`generate_terrain` for how a smooth field with exactly those two statistics is drawn.

Bad files raise :class:`~snake_core.errors.WorldConfigError`, one line naming the file and
field, e.g. ``uneven.yaml: ground.height_std: must be a positive number, got -1``. Unknown
keys are errors with the closest valid name (``spwan`` -> ``spawn``); the checks are
those of :mod:`snake_core.schema`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.config_files import resolve as resolve_config_file
from snake_core.errors import WorldConfigError
from snake_core.schema import check_keys, load_yaml, mapping, suggest

_GROUND_TYPES = ("plane", "heightfield")
# The schema of a world file: allowed keys per block (see config/worlds/*.yaml).
_TOP_KEYS = ("name", "description", "ground", "obstacles", "spawn")
_GROUND_KEYS = {
    "plane": ("type", "friction", "size"),
    "heightfield": ("type", "friction", "size", "resolution", "seed", "max_height_variation", "height_std",
                    "feature_length"),
}
_PEG_KEYS = ("diameter", "height", "friction", "centres")
_SPAWN_KEYS = ("x", "y", "yaw", "xy_jitter", "yaw_jitter")
_SPAWN_JITTER_SIGMAS = 3.0  # spawn clearance from a peg, in standard deviations of xy_jitter (dimensionless)
_MAX_GRID_SAMPLES = 1_000_000  # height samples; beyond this the collision tables get slow to build
_BISECTION_STEPS = 80  # halvings of the log-scale interval when fitting the std (ample for 1e-12 relative)
_SHAPE_SCALE_BOUNDS = (1e-3, 1e3)  # search interval of the shaping scale (dimensionless)


@dataclass(frozen=True)
class Terrain:
    """A height field sampled on a regular grid centred on the origin.

    Attributes:
        heights: Heights, m, shape ``(n_y, n_x)``; row 0 is at ``y = -size_y / 2``, column 0
            at ``x = -size_x / 2``, the last row/column on the opposite edges.
        size_x: Extent along x, m.
        size_y: Extent along y, m.
        seed: Seed the heights were drawn from.
    """

    heights: np.ndarray
    size_x: float
    size_y: float
    seed: int

    @property
    def max_height_variation(self) -> float:
        """Achieved max - min of the heights, m."""
        return float(np.ptp(self.heights))

    @property
    def height_std(self) -> float:
        """Achieved standard deviation of the heights, m."""
        return float(np.std(self.heights))

    def height_at(self, x: float | np.ndarray, y: float | np.ndarray) -> np.ndarray:
        """Bilinearly interpolated height at world ``(x, y)``, m (clamped to the grid's edge).

        This is the surface MuJoCo collides with: its height field is the same
        piecewise-linear interpolation of the samples.
        """
        n_y, n_x = self.heights.shape
        gx = np.clip((np.asarray(x, dtype=float) + self.size_x / 2) / self.size_x * (n_x - 1), 0, n_x - 1)
        gy = np.clip((np.asarray(y, dtype=float) + self.size_y / 2) / self.size_y * (n_y - 1), 0, n_y - 1)
        ix = np.minimum(np.floor(gx).astype(int), n_x - 2)
        iy = np.minimum(np.floor(gy).astype(int), n_y - 2)
        fx, fy = gx - ix, gy - iy
        h = self.heights
        low = (1 - fx) * h[iy, ix] + fx * h[iy, ix + 1]
        high = (1 - fx) * h[iy + 1, ix] + fx * h[iy + 1, ix + 1]
        return np.asarray((1 - fy) * low + fy * high)


@dataclass(frozen=True)
class Pegs:
    """Vertical cylindrical pegs.

    Attributes:
        centres: Peg axes ``(x, y)``, m, shape ``(n, 2)``.
        diameter: Peg diameter, m.
        height: Peg height above the ground, m.
        friction: Coulomb friction coefficient robot-peg.
    """

    centres: np.ndarray
    diameter: float
    height: float
    friction: float


@dataclass(frozen=True)
class Spawn:
    """Where ``reset`` places the robot's base (its head).

    Attributes:
        x: m.
        y: m.
        yaw: Yaw of the head frame, rad; the body lies from the head along (cos yaw, sin yaw).
        xy_jitter: Std of a seeded random planar offset, m.
        yaw_jitter: Std of a seeded random yaw offset, rad.
    """

    x: float = 0.0
    y: float = 0.0
    yaw: float = 0.0
    xy_jitter: float = 0.0
    yaw_jitter: float = 0.0


@dataclass(frozen=True)
class World:
    """A validated world description.

    Attributes:
        name: World name.
        description: One line of text.
        ground_type: ``plane`` or ``heightfield``.
        friction: Coulomb friction coefficient robot-ground.
        size_x: Extent of the ground along x, m.
        size_y: Extent of the ground along y, m.
        terrain: The height field (``None`` for a plane).
        pegs: The peg field (``None`` if there is none).
        spawn: The robot's spawn pose.
        source: File the world was loaded from.
    """

    name: str
    description: str
    ground_type: str
    friction: float
    size_x: float
    size_y: float
    terrain: Terrain | None
    pegs: Pegs | None
    spawn: Spawn
    source: Path | None = field(default=None, compare=False)

    def ground_height(self, x: float | np.ndarray, y: float | np.ndarray) -> np.ndarray:
        """Height of the ground at world ``(x, y)``, m (0 on a plane)."""
        if self.terrain is None:
            return np.zeros(np.broadcast(np.asarray(x), np.asarray(y)).shape)
        return self.terrain.height_at(x, y)


def generate_terrain(
    shape: tuple[int, int], resolution: float, seed: int, *, feature_length: float, max_variation: float, std: float
) -> np.ndarray:
    """A smooth random height field with a given max - min and standard deviation.

    003 Sec. IV-A.3 states only the two statistics (0.2 m and 0.0593 m). Their ratio,
    std / range = 0.30, is far above that of a gaussian random field over many samples
    (about 0.15), and close to that of a uniform distribution (1 / sqrt(12) = 0.29), so
    a plain linear rescaling cannot meet both. Method:

    1. white gaussian noise from ``numpy.random.default_rng(seed)``;
    2. ``scipy.ndimage.gaussian_filter`` with sigma ``feature_length / resolution`` samples
       (periodic boundary), then standardised to zero mean, unit std -> z;
    3. a monotone, smooth shaping u = Phi(z / s) (Phi the standard normal CDF): s = 1
       gives uniform marginals, s < 1 pushes mass to the extremes (larger std / range),
       s > 1 towards the middle (smaller);
    4. h = max_variation (u - min u) / (max u - min u), and s found by bisection so that
       std(h) = std. The shaping keeps the field's smoothness and the order of heights.

    Args:
        shape: ``(n_y, n_x)`` samples.
        resolution: Grid spacing, m.
        seed: Seed of the random field.
        feature_length: Std of the smoothing kernel, m (bump size).
        max_variation: Target max - min, m.
        std: Target standard deviation, m.

    Returns:
        Heights, m, shape ``shape``, min 0, max ``max_variation``.

    Raises:
        ValueError: The std cannot be reached with this range (std / range must lie
            strictly between that of the smoothed field and 1/2).
    """
    # Only uneven worlds need these; a flat or pegs twin starts without them.
    from scipy.ndimage import gaussian_filter
    from scipy.special import ndtr

    rng = np.random.default_rng(seed)
    white = rng.standard_normal(shape)
    smooth = gaussian_filter(white, sigma=feature_length / resolution, mode="wrap")
    z = (smooth - smooth.mean()) / smooth.std()
    target = std / max_variation

    def shaped(scale: float) -> np.ndarray:
        u = ndtr(z / scale)
        return (u - u.min()) / (u.max() - u.min())

    lo, hi = (math.log(b) for b in _SHAPE_SCALE_BOUNDS)
    ratio_lo, ratio_hi = float(shaped(math.exp(hi)).std()), float(shaped(math.exp(lo)).std())
    if not ratio_lo < target < ratio_hi:
        raise ValueError(
            f"std / max variation = {target:.3f} is not reachable for this field "
            f"(must lie in ({ratio_lo:.3f}, {ratio_hi:.3f}))"
        )
    # std(shaped(s)) decreases monotonically with s: bisection in log s.
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if shaped(math.exp(mid)).std() > target:
            lo = mid
        else:
            hi = mid
    return max_variation * shaped(math.exp(0.5 * (lo + hi)))


def resolve_world_path(path: str | Path) -> Path:
    """Turn a world name (``flat``) or a path into an existing YAML path."""
    return resolve_config_file("world", path, WorldConfigError)


def load_world(path: str | Path) -> World:
    """Load and validate a world description.

    Args:
        path: A YAML file, or a world name looked up in the workspace's ``config/worlds``.

    Returns:
        The validated world (a height field is generated here, from its seed).

    Raises:
        WorldConfigError: The file is missing, unreadable or has an invalid field.
    """
    p = resolve_world_path(path)
    return world_from_dict(load_yaml(p, WorldConfigError, "world description"), source=p)


def world_from_dict(data: Any, source: Path | None = None) -> World:
    """Validate a parsed world description (see :func:`load_world`).

    Unknown keys are errors with the closest valid name (a misspelt ``spawn`` or peg
    block must not leave the robot at the origin or the field empty).

    Raises:
        WorldConfigError: One line, ``<file>: <field path>: <problem>``.
    """
    where = str(source) if source else "<world>"

    def fail(field_name: str, msg: str) -> WorldConfigError:
        return WorldConfigError(f"{where}: {field_name}: {msg}")

    data = mapping(data, "", fail)
    check_keys(data, _TOP_KEYS, "", fail)
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise fail("name", f"must be a non-empty string, got {name!r}")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise fail("description", f"expected a string, got {type(description).__name__}")
    if "ground" not in data:
        raise fail("ground", "missing")
    ground = mapping(data["ground"], "ground", fail)
    gtype = ground.get("type")
    if gtype not in _GROUND_TYPES:
        raise fail("ground.type", f"{gtype!r} is not one of {_GROUND_TYPES}{suggest(gtype, _GROUND_TYPES, 'types')}")
    check_keys(ground, _GROUND_KEYS[gtype], "ground", fail, f" of a {gtype} ground")
    friction = _number(ground, "friction", "ground", fail, positive=True)
    size = ground.get("size")
    if (
        not isinstance(size, Sequence)
        or isinstance(size, str)
        or len(size) != 2
        or not all(_is_finite(v) and v > 0 for v in size)
    ):
        raise fail("ground.size", f"must be [size_x, size_y], two positive numbers in m, got {size!r}")
    size_x, size_y = float(size[0]), float(size[1])
    terrain = None
    if gtype == "heightfield":
        terrain = _terrain(ground, size_x, size_y, fail)
    pegs = _pegs(data.get("obstacles"), size_x, size_y, fail)
    spawn = _spawn(data.get("spawn"), size_x, size_y, fail)
    if pegs is not None and data.get("spawn") is not None:  # without one, the caller places the robot
        _check_spawn_clear(spawn, pegs, fail)
    return World(
        name=name,
        description=description,
        ground_type=gtype,
        friction=friction,
        size_x=size_x,
        size_y=size_y,
        terrain=terrain,
        pegs=pegs,
        spawn=spawn,
        source=source,
    )


def _is_finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _number(block: Mapping[str, Any], key: str, prefix: str, fail: Any, *, positive: bool = False,
            default: float | None = None) -> float:
    if key not in block:
        if default is not None:
            return default
        raise fail(f"{prefix}.{key}", "missing")
    v = block[key]
    if not _is_finite(v) or (positive and v <= 0):
        raise fail(f"{prefix}.{key}", f"must be a {'positive' if positive else 'finite'} number, got {v!r}")
    return float(v)


def _terrain(ground: Mapping[str, Any], size_x: float, size_y: float, fail: Any) -> Terrain:
    resolution = _number(ground, "resolution", "ground", fail, positive=True)
    n_x, n_y = round(size_x / resolution) + 1, round(size_y / resolution) + 1
    if n_x < 3 or n_y < 3:
        raise fail("ground.resolution", f"{resolution} m gives fewer than 3 samples across {size_x} x {size_y} m")
    if n_x * n_y > _MAX_GRID_SAMPLES:
        raise fail("ground.resolution", f"{resolution} m gives {n_x * n_y} samples, more than {_MAX_GRID_SAMPLES}")
    seed = ground.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise fail("ground.seed", f"must be an integer >= 0, got {seed!r}")
    max_var = _number(ground, "max_height_variation", "ground", fail, positive=True)
    std = _number(ground, "height_std", "ground", fail, positive=True)
    feature = _number(ground, "feature_length", "ground", fail, positive=True)
    if feature > 0.25 * min(size_x, size_y):
        raise fail("ground.feature_length", f"{feature} m is too large for a {size_x} x {size_y} m field")
    try:
        heights = generate_terrain(
            (n_y, n_x), resolution, seed, feature_length=feature, max_variation=max_var, std=std
        )
    except ValueError as err:
        raise fail("ground.height_std", str(err)) from err
    return Terrain(heights=heights, size_x=size_x, size_y=size_y, seed=seed)


def _pegs(obstacles: Any, size_x: float, size_y: float, fail: Any) -> Pegs | None:
    if obstacles is None:
        return None
    obstacles = mapping(obstacles, "obstacles", fail)
    check_keys(obstacles, ("pegs",), "obstacles", fail, " (obstacle types)")
    pegs = obstacles.get("pegs")
    if pegs is None:
        return None
    pegs = mapping(pegs, "obstacles.pegs", fail)
    check_keys(pegs, _PEG_KEYS, "obstacles.pegs", fail)
    diameter = _number(pegs, "diameter", "obstacles.pegs", fail, positive=True)
    height = _number(pegs, "height", "obstacles.pegs", fail, positive=True)
    friction = _number(pegs, "friction", "obstacles.pegs", fail, positive=True)
    centres = pegs.get("centres")
    if not isinstance(centres, list) or not centres:
        raise fail("obstacles.pegs.centres", "must be a non-empty list of [x, y]")
    out = []
    for i, c in enumerate(centres):
        if not isinstance(c, Sequence) or isinstance(c, str) or len(c) != 2 or not all(_is_finite(v) for v in c):
            raise fail(f"obstacles.pegs.centres[{i}]", f"must be [x, y] in m, got {c!r}")
        if abs(c[0]) > size_x / 2 or abs(c[1]) > size_y / 2:
            raise fail(f"obstacles.pegs.centres[{i}]", f"{c!r} lies outside the {size_x} x {size_y} m ground")
        out.append((float(c[0]), float(c[1])))
    return Pegs(centres=np.asarray(out, dtype=float), diameter=diameter, height=height, friction=friction)


def _spawn(spawn: Any, size_x: float, size_y: float, fail: Any) -> Spawn:
    if spawn is None:
        return Spawn()
    spawn = mapping(spawn, "spawn", fail)
    check_keys(spawn, _SPAWN_KEYS, "spawn", fail)
    x = _number(spawn, "x", "spawn", fail, default=0.0)
    y = _number(spawn, "y", "spawn", fail, default=0.0)
    if abs(x) > size_x / 2 or abs(y) > size_y / 2:
        raise fail("spawn.x", f"({x}, {y}) lies outside the {size_x} x {size_y} m ground")
    yaw = _number(spawn, "yaw", "spawn", fail, default=0.0)
    jitters = []
    for key in ("xy_jitter", "yaw_jitter"):
        v = _number(spawn, key, "spawn", fail, default=0.0)
        if v < 0:
            raise fail(f"spawn.{key}", f"must be >= 0, got {v!r}")
        jitters.append(v)
    return Spawn(x=x, y=y, yaw=yaw, xy_jitter=jitters[0], yaw_jitter=jitters[1])


def _check_spawn_clear(spawn: Spawn, pegs: Pegs, fail: Any) -> None:
    """Refuse a spawn point (the head frame's origin) inside a peg or closer than its clearance.

    Checked when the file has a ``spawn`` block: generated peg fields without one (``snake
    experiment follow``) reset the twin at a pose of their own.

    The clearance is the peg radius plus three standard deviations of the spawn's
    ``xy_jitter``, so that a jittered reset too lands outside every peg (the 99.9 %
    radius of a 2-D gaussian is 3.7 sigma; 3 sigma keeps 98.9 % of the draws out).
    """
    clearance = pegs.diameter / 2.0 + _SPAWN_JITTER_SIGMAS * spawn.xy_jitter
    gaps = np.hypot(pegs.centres[:, 0] - spawn.x, pegs.centres[:, 1] - spawn.y)
    i = int(np.argmin(gaps))
    if gaps[i] <= clearance:
        c = pegs.centres[i]
        raise fail("spawn", f"({spawn.x:g}, {spawn.y:g}) is {gaps[i]:.3f} m from the axis of peg "
                            f"obstacles.pegs.centres[{i}] ({c[0]:g}, {c[1]:g}): inside it or within "
                            f"{clearance:.3f} m (peg radius + {_SPAWN_JITTER_SIGMAS:g} x xy_jitter)")
