"""Generalized Voronoi graph (GVG) among round pegs and occupancy-grid obstacles (001 Sec. III).

Obstacles are discs (:class:`Discs`): pegs with their true radius, and occupied grid cells as
discs that circumscribe the cell (so clearances measured to them are conservative). Every
disc carries the label of the obstacle it belongs to (one label per peg, one per
8-connected blob of occupied cells).

Construction (:func:`build_gvg`):

1. Sites for ``scipy.spatial.Voronoi``: the peg centres when all obstacles are discs of one
   radius (then the ordinary Voronoi diagram of the centres is exactly the generalized
   one), otherwise points spread on each peg's circle (so the edges keep their distance from
   the peg surface, not from its centre) and the centres of occupied cells; plus points
   along the arena's walls.
2. Ridges between sites of *different* obstacles are the GVG's edges (a ridge between two
   sites of the same peg runs inside the peg); ridges with a vertex at infinity or outside
   the arena are dropped.
3. The clearance of each edge is computed exactly as the smallest distance from the
   segment to any disc surface or wall (candidates from a k-d tree, so the cost does not
   grow with the number of discs per edge); edges below the robot's half-width plus a
   margin are removed.
4. The result is a ``networkx.Graph`` whose nodes carry ``pos`` (m) and whose edges carry
   ``length`` (m) and ``clearance`` (m).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx
import numpy as np
from scipy import ndimage
from scipy.spatial import Voronoi, cKDTree

from snake_core.errors import PlanningError

_PEG_SAMPLES = 8  # sites per peg circle; more gives smoother edges at a higher cost
_WALL_LABEL = -1  # obstacle label of the arena walls
_OCCUPIED_THRESHOLD = 50  # nav_msgs/OccupancyGrid: cells >= this value (0..100) are occupied
_DEFAULT_ARENA_MARGIN_M = 0.5  # m, arena around the obstacles, start and goal when none is given


@dataclass(frozen=True)
class Arena:
    """The rectangle the robot must stay in, m."""

    xmin: float
    xmax: float
    ymin: float
    ymax: float

    def __post_init__(self) -> None:
        if not (self.xmax > self.xmin and self.ymax > self.ymin):
            raise PlanningError(f"arena: need xmin < xmax and ymin < ymax, got {self}")

    def contains(self, p: np.ndarray, inset: float = 0.0) -> bool:
        """True if the point lies inside the arena shrunk by ``inset`` m."""
        return bool(self.xmin + inset <= p[0] <= self.xmax - inset and self.ymin + inset <= p[1] <= self.ymax - inset)

    def wall_distance(self, p: np.ndarray) -> np.ndarray:
        """Distance from points ``(..., 2)`` to the nearest wall, m (negative outside)."""
        p = np.asarray(p, dtype=float)
        return np.minimum(np.minimum(p[..., 0] - self.xmin, self.xmax - p[..., 0]),
                          np.minimum(p[..., 1] - self.ymin, self.ymax - p[..., 1]))


@dataclass(frozen=True)
class Discs:
    """Obstacles as discs.

    Attributes:
        centres: m, ``(M, 2)``.
        radii: m, ``(M,)``.
        labels: Obstacle label of each disc (>= 0), ``(M,)``.
        rings: Sites placed on each disc's circle (1: its centre only, for grid cells).
    """

    centres: np.ndarray
    radii: np.ndarray
    labels: np.ndarray
    rings: np.ndarray

    def __len__(self) -> int:
        return len(self.radii)

    @staticmethod
    def empty() -> Discs:
        """No obstacles."""
        return Discs(np.zeros((0, 2)), np.zeros(0), np.zeros(0, dtype=int), np.zeros(0, dtype=int))

    def __add__(self, other: Discs) -> Discs:
        shift = int(self.labels.max()) + 1 if len(self) else 0
        return Discs(np.concatenate([self.centres, other.centres]), np.concatenate([self.radii, other.radii]),
                     np.concatenate([self.labels, other.labels + shift]), np.concatenate([self.rings, other.rings]))


def pegs_to_discs(centres: np.ndarray, diameter: float, samples: int = _PEG_SAMPLES) -> Discs:
    """Round pegs as discs, one obstacle label each.

    Args:
        centres: Peg centres, m, ``(P, 2)``.
        diameter: Peg diameter, m.
        samples: Sites per peg circle (>= 3).
    """
    c = np.asarray(centres, dtype=float).reshape(-1, 2)
    if not np.isfinite(c).all():
        raise PlanningError("pegs: centres must be finite numbers")
    if not (math.isfinite(diameter) and diameter > 0):
        raise PlanningError(f"pegs: diameter must be a positive number of metres, got {diameter!r}")
    if samples < 3:
        raise PlanningError(f"samples_per_peg: need >= 3, got {samples}")
    n = len(c)
    return Discs(c, np.full(n, diameter / 2), np.arange(n), np.full(n, samples))


def grid_to_discs(occupancy: np.ndarray, resolution: float, origin: tuple[float, float, float] = (0.0, 0.0, 0.0),
                  threshold: int = _OCCUPIED_THRESHOLD, unknown_occupied: bool = False) -> Discs:
    """Occupied cells of a ``nav_msgs/OccupancyGrid``-style array as discs.

    Only cells on the boundary of an obstacle blob are kept (interior cells cannot be the
    nearest obstacle of a free point); each blob (8-connected) gets one label.

    Args:
        occupancy: Cell values ``(height, width)``, row 0 at the origin's y, values 0..100,
            -1 unknown (the message's ``data`` reshaped row-major).
        resolution: Cell size, m.
        origin: Pose ``(x m, y m, yaw rad)`` of the grid's cell (0, 0) corner.
        threshold: Cells with a value >= this are occupied.
        unknown_occupied: Treat unknown (-1) cells as occupied.
    """
    grid = np.asarray(occupancy)
    if grid.ndim != 2:
        raise PlanningError(f"occupancy: need a 2-D array (height, width), got shape {grid.shape}")
    if not (math.isfinite(resolution) and resolution > 0):
        raise PlanningError(f"resolution: must be a positive number of metres, got {resolution!r}")
    occ = grid >= threshold
    if unknown_occupied:
        occ |= grid < 0
    boundary = occ & ~ndimage.binary_erosion(occ, structure=np.ones((3, 3)), border_value=0)
    labels, _ = ndimage.label(occ, structure=np.ones((3, 3)))
    rows, cols = np.nonzero(boundary)
    local = np.stack([(cols + 0.5) * resolution, (rows + 0.5) * resolution], axis=1)
    c, s = math.cos(origin[2]), math.sin(origin[2])
    centres = local @ np.array([[c, s], [-s, c]]) + np.array(origin[:2])
    n = len(rows)
    return Discs(centres, np.full(n, resolution * math.sqrt(0.5)), labels[rows, cols] - 1, np.ones(n, dtype=int))


def default_arena(discs: Discs, *points: np.ndarray, margin: float = _DEFAULT_ARENA_MARGIN_M) -> Arena:
    """The bounding box of the obstacles and the given points, grown by ``margin`` m."""
    pts = [np.asarray(p, dtype=float).reshape(-1, 2) for p in points] + [discs.centres]
    allp = np.concatenate(pts) if pts else np.zeros((1, 2))
    r = float(discs.radii.max()) if len(discs) else 0.0
    lo, hi = allp.min(axis=0) - margin - r, allp.max(axis=0) + margin + r
    return Arena(float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1]))


def segment_point_distance(a: np.ndarray, b: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Distance from points ``p`` to segments ``a``-``b`` (all ``(..., 2)``, broadcast), m."""
    ab = b - a
    den = np.einsum("...k,...k->...", ab, ab)
    t = np.clip(np.einsum("...k,...k->...", p - a, ab) / np.where(den > 0, den, 1.0), 0.0, 1.0)
    d = a + t[..., None] * ab - p
    return np.sqrt(np.einsum("...k,...k->...", d, d))


class ClearanceIndex:
    """Exact clearance of segments from a set of discs and the arena walls.

    Args:
        discs: The obstacles.
        arena: The arena (its walls count as obstacles).
    """

    def __init__(self, discs: Discs, arena: Arena) -> None:
        self.discs, self.arena = discs, arena
        self.tree = cKDTree(discs.centres) if len(discs) else None
        self.rmax = float(discs.radii.max()) if len(discs) else 0.0

    def segments(self, a: np.ndarray, b: np.ndarray, bound: np.ndarray | None = None) -> np.ndarray:
        """Smallest distance from each segment ``a[k]``-``b[k]`` to a disc surface or wall, m.

        Args:
            a: Segment starts, m, ``(E, 2)``.
            b: Segment ends, m, ``(E, 2)``.
            bound: An upper bound of each segment's disc clearance, m (speeds up the search;
                default: the wall clearance).

        Returns:
            Clearance per segment, m (negative when a segment enters a disc or leaves the arena).
        """
        a, b = np.atleast_2d(a).astype(float), np.atleast_2d(b).astype(float)
        wall = np.minimum(self.arena.wall_distance(a), self.arena.wall_distance(b))
        if self.tree is None:
            return wall
        mid = 0.5 * (a + b)
        half = 0.5 * np.linalg.norm(b - a, axis=1)
        ub = wall if bound is None else np.minimum(bound, wall)
        radius = half + np.maximum(ub, 0.0) + self.rmax + 1e-9
        lists = self.tree.query_ball_point(mid, r=radius)
        counts = np.fromiter((len(x) for x in lists), dtype=int, count=len(lists))
        out = ub.copy()
        if counts.sum() == 0:
            return out
        idx = np.concatenate([np.asarray(x, dtype=int) for x in lists if x])
        edge = np.repeat(np.arange(len(lists)), counts)
        d = segment_point_distance(a[edge], b[edge], self.discs.centres[idx]) - self.discs.radii[idx]
        np.minimum.at(out, edge, d)
        return out

    def point(self, p: np.ndarray) -> tuple[float, int]:
        """Clearance of one point, m, and the index of the nearest disc (-1: a wall is nearer)."""
        p = np.asarray(p, dtype=float)
        wall = float(self.arena.wall_distance(p))
        if self.tree is None:
            return wall, -1
        k = min(len(self.discs), 16)
        _, idx = self.tree.query(p, k=k)
        idx = np.atleast_1d(idx)
        d = np.linalg.norm(self.discs.centres[idx] - p, axis=1) - self.discs.radii[idx]
        j = int(np.argmin(d))
        return (float(d[j]), int(idx[j])) if d[j] < wall else (wall, -1)


def _sites(discs: Discs, arena: Arena, wall_spacing: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Voronoi sites, their obstacle labels and their disc index (-1 for walls).

    When every disc has the same radius the centres alone are the sites: the bisector of
    two equal circles is the bisector of their centres, so the ordinary Voronoi diagram of
    the centres *is* the generalized one, exactly and with a fraction of the sites.
    Otherwise each disc with ``rings > 1`` contributes points on its circle.
    """
    pts, labels, owner = [], [], []
    equal = float(np.ptp(discs.radii)) == 0.0
    for k in np.unique(discs.rings):
        sel = np.nonzero(discs.rings == k)[0]
        if k == 1 or equal:
            pts.append(discs.centres[sel])
            labels.append(discs.labels[sel])
            owner.append(sel)
            continue
        ang = 2 * np.pi * np.arange(k) / k
        ring = np.stack([np.cos(ang), np.sin(ang)], axis=1)
        pts.append((discs.centres[sel, None, :] + discs.radii[sel, None, None] * ring).reshape(-1, 2))
        labels.append(np.repeat(discs.labels[sel], k))
        owner.append(np.repeat(sel, k))
    w, h = arena.xmax - arena.xmin, arena.ymax - arena.ymin
    nx_, ny_ = max(2, math.ceil(w / wall_spacing)), max(2, math.ceil(h / wall_spacing))
    xs = np.linspace(arena.xmin, arena.xmax, nx_ + 1)
    ys = np.linspace(arena.ymin, arena.ymax, ny_ + 1)[1:-1]
    walls = np.concatenate([
        np.stack([xs, np.full_like(xs, arena.ymin)], 1), np.stack([xs, np.full_like(xs, arena.ymax)], 1),
        np.stack([np.full_like(ys, arena.xmin), ys], 1), np.stack([np.full_like(ys, arena.xmax), ys], 1)])
    pts.append(walls)
    labels.append(np.full(len(walls), _WALL_LABEL))
    owner.append(np.full(len(walls), -1))
    return np.concatenate(pts), np.concatenate(labels), np.concatenate(owner)


def build_gvg(discs: Discs, arena: Arena, required_clearance: float, wall_spacing: float | None = None) -> nx.Graph:
    """The generalized Voronoi graph of the obstacles, pruned to ``required_clearance`` (001 Sec. III).

    Args:
        discs: Obstacles.
        arena: The arena; its walls bound the graph.
        required_clearance: Smallest distance kept between an edge and any obstacle, m
            (robot half-width plus a margin).
        wall_spacing: Spacing of the wall sites, m (default: a quarter of the median
            obstacle spacing, at least 1/200 of the arena's perimeter).

    Returns:
        Graph with node attribute ``pos`` (``np.ndarray`` (2,), m) and edge attributes
        ``length`` and ``clearance`` (m). Empty when there are no obstacles.
    """
    g = nx.Graph()
    if len(discs) == 0:
        return g
    if wall_spacing is None:
        perim = 2 * (arena.xmax - arena.xmin + arena.ymax - arena.ymin)
        wall_spacing = max(perim / 200.0, 0.25 * required_clearance, 1e-3)
    sites, labels, _ = _sites(discs, arena, wall_spacing)
    vor = Voronoi(sites)
    rp = vor.ridge_points
    rv = np.asarray(vor.ridge_vertices, dtype=int)
    verts = vor.vertices
    keep = (labels[rp[:, 0]] != labels[rp[:, 1]]) & (rv >= 0).all(axis=1)
    inside = ((verts[:, 0] > arena.xmin) & (verts[:, 0] < arena.xmax) &
              (verts[:, 1] > arena.ymin) & (verts[:, 1] < arena.ymax))
    rv = rv[keep]
    rp = rp[keep]
    ok = inside[rv].all(axis=1)
    rv, rp = rv[ok], rp[ok]
    if len(rv) == 0:
        return g
    a, b = verts[rv[:, 0]], verts[rv[:, 1]]
    # Distance from the edge to its own site: an upper bound of the disc clearance.
    site = sites[rp[:, 0]]
    bound = segment_point_distance(a, b, site)
    clearance = ClearanceIndex(discs, arena).segments(a, b, bound)
    good = clearance >= required_clearance
    rv, clearance = rv[good], clearance[good]
    lengths = np.linalg.norm(verts[rv[:, 0]] - verts[rv[:, 1]], axis=1)
    used = np.unique(rv)
    g.add_nodes_from((int(v), {"pos": verts[v]}) for v in used)
    g.add_edges_from((int(u), int(v), {"length": float(ln), "clearance": float(c)})
                     for (u, v), ln, c in zip(rv, lengths, clearance, strict=True))
    return g
