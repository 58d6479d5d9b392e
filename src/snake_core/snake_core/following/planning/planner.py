"""Plans on the generalized Voronoi graph: start/goal connection, clearance-aware shortest path (001 Sec. III).

The depth-first search that tests branches in the viscous model is in
:mod:`snake_core.following.planning.dfs`; both searches share :class:`RoadMap`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
from scipy.spatial import cKDTree

from snake_core.errors import PlanningError
from snake_core.following.planning.gvg import Arena, ClearanceIndex, Discs, build_gvg

START = "start"
"""Node name of the start in a :class:`RoadMap` graph."""
GOAL = "goal"
"""Node name of the goal in a :class:`RoadMap` graph."""

_CONNECT_K = 8  # nearest graph vertices tried when connecting the start or the goal


@dataclass(frozen=True)
class PlannerConfig:
    """Planner settings.

    Attributes:
        half_width: Robot half-width, m.
        margin: Extra clearance, m; edges closer than ``half_width + margin`` to an obstacle are removed.
        clearance_weight: Weight of the clearance term in the shortest-path cost (dimensionless,
            0: plain shortest path).
        connect_k: Nearest vertices tried when connecting start and goal.
    """

    half_width: float = 0.03
    margin: float = 0.02
    clearance_weight: float = 1.0
    connect_k: int = _CONNECT_K

    def __post_init__(self) -> None:
        for name in ("half_width", "margin", "clearance_weight"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise PlanningError(f"{name}: must be a number >= 0, got {v!r}")
        if self.connect_k < 1:
            raise PlanningError(f"connect_k: must be >= 1, got {self.connect_k}")

    @property
    def required_clearance(self) -> float:
        """Smallest clearance of a usable edge, m."""
        return self.half_width + self.margin


@dataclass
class Plan:
    """A planned path.

    Attributes:
        points: Waypoints from start to goal, m, ``(K, 2)``; consecutive waypoints are the
            branches the follower tracks.
        nodes: Graph nodes along the path (``"start"``, vertex ids..., ``"goal"``).
        length: Path length, m.
        min_clearance: Smallest clearance along the path, m (inf without obstacles).
        mode: ``straight``, ``shortest`` or ``dfs``.
        stats: Search statistics (``expanded``, ``backtracks``...).
    """

    points: np.ndarray
    nodes: list
    length: float
    min_clearance: float
    mode: str
    stats: dict[str, float] = field(default_factory=dict)


class RoadMap:
    """The GVG of a scene with the start and goal connected.

    Args:
        discs: Obstacles.
        arena: The arena.
        config: Planner settings.
        blocked: Edges ``(pos_a, pos_b)`` to leave out (branches found impassable), m;
            an edge is left out when both ends lie within 1 mm of a blocked pair.
    """

    def __init__(self, discs: Discs, arena: Arena, config: PlannerConfig,
                 blocked: Iterable[tuple[np.ndarray, np.ndarray]] = ()) -> None:
        self.discs, self.arena, self.config = discs, arena, config
        self.index = ClearanceIndex(discs, arena)
        self.graph = build_gvg(discs, arena, config.required_clearance)
        for pa, pb in blocked:
            self._block(np.asarray(pa, dtype=float), np.asarray(pb, dtype=float))
        nodes = [n for n in self.graph.nodes]
        self._ids = nodes
        self._tree = cKDTree(np.array([self.graph.nodes[n]["pos"] for n in nodes])) if nodes else None

    def _block(self, pa: np.ndarray, pb: np.ndarray) -> None:
        tol = 1e-3
        for u, v in list(self.graph.edges):
            a, b = self.graph.nodes[u]["pos"], self.graph.nodes[v]["pos"]
            if ((np.linalg.norm(a - pa) < tol and np.linalg.norm(b - pb) < tol) or
                    (np.linalg.norm(a - pb) < tol and np.linalg.norm(b - pa) < tol)):
                self.graph.remove_edge(u, v)

    def check_point(self, p: np.ndarray, what: str) -> None:
        """Raise PlanningError if ``p`` is outside the arena or inside / too close to an obstacle.

        Args:
            p: Point, m.
            what: ``start`` or ``goal`` (named in the message).
        """
        p = np.asarray(p, dtype=float)
        if p.shape != (2,) or not np.isfinite(p).all():
            raise PlanningError(f"{what}: need a finite (x, y) in m, got {p!r}")
        if not self.arena.contains(p):
            a = self.arena
            raise PlanningError(f"{what}: ({p[0]:.3f}, {p[1]:.3f}) m lies outside the arena "
                                f"x [{a.xmin:.3f}, {a.xmax:.3f}], y [{a.ymin:.3f}, {a.ymax:.3f}]")
        clearance, k = self.index.point(p)
        if k >= 0 and clearance < 0:
            c = self.discs.centres[k]
            raise PlanningError(f"{what}: ({p[0]:.3f}, {p[1]:.3f}) m lies inside the obstacle at "
                                f"({c[0]:.3f}, {c[1]:.3f}) m")
        if clearance < self.config.required_clearance:
            where = "a wall" if k < 0 else "an obstacle"
            raise PlanningError(f"{what}: ({p[0]:.3f}, {p[1]:.3f}) m is {clearance:.3f} m from {where}, "
                                f"closer than the required {self.config.required_clearance:.3f} m")

    def connect(self, name: str, p: np.ndarray) -> int:
        """Add ``name`` at ``p`` and join it to the nearest vertices it can reach with clearance.

        Returns:
            Number of edges added.
        """
        self.graph.add_node(name, pos=np.asarray(p, dtype=float))
        if self._tree is None:
            return 0
        k = min(self.config.connect_k, len(self._ids))
        _, idx = self._tree.query(p, k=k)
        cand = [self._ids[i] for i in np.atleast_1d(idx)]
        pos = np.array([self.graph.nodes[c]["pos"] for c in cand])
        clear = self.index.segments(np.repeat(np.asarray(p, dtype=float)[None], len(cand), axis=0), pos)
        added = 0
        for c, q, cl in zip(cand, pos, clear, strict=True):
            if cl >= self.config.required_clearance:
                self.graph.add_edge(name, c, length=float(np.linalg.norm(q - p)), clearance=float(cl))
                added += 1
        return added

    def cost(self, u: object, v: object, data: dict) -> float:
        """Clearance-aware edge cost: ``length (1 + w required / clearance)`` (m)."""
        w = self.config.clearance_weight
        return float(data["length"] * (1.0 + w * self.config.required_clearance / max(data["clearance"], 1e-9)))

    def pos(self, node: object) -> np.ndarray:
        """Position of a node, m."""
        return np.asarray(self.graph.nodes[node]["pos"])

    def to_plan(self, nodes: list, mode: str, stats: dict[str, float] | None = None) -> Plan:
        """Turn a node path into a :class:`Plan`."""
        pts = np.array([self.pos(n) for n in nodes])
        clear = [self.graph.edges[u, v]["clearance"] for u, v in itertools.pairwise(nodes)]
        return Plan(points=pts, nodes=list(nodes), length=float(np.linalg.norm(np.diff(pts, axis=0), axis=1).sum()),
                    min_clearance=float(min(clear, default=math.inf)), mode=mode, stats=dict(stats or {}))


def prepare(discs: Discs, arena: Arena, start: np.ndarray, goal: np.ndarray, config: PlannerConfig,
            blocked: Iterable[tuple[np.ndarray, np.ndarray]] = ()) -> RoadMap | Plan:
    """Validate start and goal; return the straight line when there are no obstacles, else the road map.

    Raises:
        PlanningError: Start or goal outside the arena or inside / too close to an obstacle,
            or not connectable to the graph.
    """
    start, goal = np.asarray(start, dtype=float), np.asarray(goal, dtype=float)
    rm = RoadMap(discs, arena, config, blocked)
    rm.check_point(start, "start")
    rm.check_point(goal, "goal")
    if len(discs) == 0:
        seg = float(rm.index.segments(start[None], goal[None])[0])
        return Plan(points=np.array([start, goal]), nodes=[START, GOAL], length=float(np.linalg.norm(goal - start)),
                    min_clearance=seg, mode="straight")
    for name, p in ((START, start), (GOAL, goal)):
        if rm.connect(name, p) == 0:
            raise PlanningError(f"{name}: ({p[0]:.3f}, {p[1]:.3f}) m cannot reach the Voronoi graph with "
                                f"{config.required_clearance:.3f} m clearance")
    return rm


def plan_shortest(discs: Discs, arena: Arena, start: np.ndarray, goal: np.ndarray,
                  config: PlannerConfig | None = None,
                  blocked: Iterable[tuple[np.ndarray, np.ndarray]] = ()) -> Plan:
    """Shortest path on the GVG with clearance-aware costs (A*, Euclidean heuristic).

    Args:
        discs: Obstacles.
        arena: The arena.
        start: Start point, m.
        goal: Goal point, m.
        config: Planner settings.
        blocked: Edges to leave out (see :class:`RoadMap`).

    Returns:
        The plan.

    Raises:
        PlanningError: Bad start/goal (see :func:`prepare`) or no path between them.
    """
    config = config or PlannerConfig()
    rm = prepare(discs, arena, start, goal, config, blocked)
    if isinstance(rm, Plan):
        return rm
    goal_pos = rm.pos(GOAL)
    try:
        nodes = nx.astar_path(rm.graph, START, GOAL, weight=rm.cost,
                              heuristic=lambda n, _g: float(np.linalg.norm(rm.pos(n) - goal_pos)))
    except nx.NetworkXNoPath as err:
        raise PlanningError(f"goal: ({goal_pos[0]:.3f}, {goal_pos[1]:.3f}) m is unreachable from the start with "
                            f"{config.required_clearance:.3f} m clearance") from err
    return rm.to_plan(nodes, "shortest")
