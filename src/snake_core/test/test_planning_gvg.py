"""GVG planner: clearances by brute force, Voronoi property, errors, grids, shortest path and the DFS."""

from __future__ import annotations

import math

import numpy as np
import pytest

from snake_core.errors import PlanningError
from snake_core.following.planning.dfs import plan_dfs
from snake_core.following.planning.gvg import Arena, Discs, build_gvg, grid_to_discs, pegs_to_discs
from snake_core.following.planning.planner import PlannerConfig, plan_shortest
from snake_core.following.viscous import random_pegs

D = 0.06  # m, peg diameter


def _brute_clearance(a, b, pegs, radius, arena: Arena, samples=400):
    """Min over dense samples of the segment of the distance to every peg surface and to the walls."""
    s = np.linspace(0.0, 1.0, samples)[:, None]
    pts = a + s * (b - a)
    d_peg = np.linalg.norm(pts[:, None, :] - pegs[None], axis=2).min() - radius if len(pegs) else np.inf
    d_wall = min((pts[:, 0] - arena.xmin).min(), (arena.xmax - pts[:, 0]).min(),
                 (pts[:, 1] - arena.ymin).min(), (arena.ymax - pts[:, 1]).min())
    return min(d_peg, d_wall)


@pytest.fixture(scope="module")
def scene():
    pegs = random_pegs(8.0, (0.0, 3.0), (0.0, 2.0), D, np.random.default_rng(7), gap=0.02)
    return pegs, Arena(-0.3, 3.3, -0.3, 2.3)


def test_every_edge_clearance_matches_brute_force_and_meets_the_requirement(scene):
    pegs, arena = scene
    required = 0.05
    g = build_gvg(pegs_to_discs(pegs, D), arena, required)
    assert g.number_of_edges() > 50
    for u, v, data in g.edges(data=True):
        a, b = g.nodes[u]["pos"], g.nodes[v]["pos"]
        brute = _brute_clearance(a, b, pegs, D / 2, arena)
        assert data["clearance"] >= required
        # dense sampling overestimates the true minimum by at most (segment length / samples)
        assert brute - np.linalg.norm(b - a) / 399 - 1e-12 <= data["clearance"] <= brute + 1e-12


def test_edges_lie_midway_between_their_two_nearest_pegs(scene):
    pegs, arena = scene
    g = build_gvg(pegs_to_discs(pegs, D), arena, 0.05)
    checked = 0
    for u, v in g.edges:
        mid = 0.5 * (g.nodes[u]["pos"] + g.nodes[v]["pos"])
        d = np.sort(np.linalg.norm(pegs - mid, axis=1))
        wall = min(mid[0] - arena.xmin, arena.xmax - mid[0], mid[1] - arena.ymin, arena.ymax - mid[1])
        if wall > d[1]:  # a peg-peg edge: the two nearest peg centres are equidistant
            assert d[1] - d[0] < 1e-9
            checked += 1
    assert checked > 30


def test_shortest_plan_is_collision_free_and_joins_start_to_goal(scene):
    pegs, arena = scene
    cfg = PlannerConfig(half_width=0.03, margin=0.02)
    plan = plan_shortest(pegs_to_discs(pegs, D), arena, [-0.1, 1.0], [3.1, 1.0], cfg)
    np.testing.assert_allclose(plan.points[0], [-0.1, 1.0])
    np.testing.assert_allclose(plan.points[-1], [3.1, 1.0])
    for a, b in zip(plan.points[:-1], plan.points[1:], strict=True):
        assert _brute_clearance(a, b, pegs, D / 2, arena) >= cfg.required_clearance - 1e-9
    assert plan.min_clearance >= cfg.required_clearance
    assert plan.length >= 3.2 - 1e-9


def test_clearance_weight_prefers_the_wide_corridor():
    # Two routes from left to right: through a gap 0.14 m wide (clearance 0.07) on the straight line,
    # or around the pegs through open space (a detour).
    pegs = np.array([[1.0, 0.1], [1.0, -0.1], [1.0, 0.3], [1.0, -0.3], [1.0, 0.5], [1.0, -0.5]])
    pegs = np.array([[1.0, y] for y in np.arange(-0.5, 0.51, 0.2)])
    arena = Arena(0.0, 2.0, -1.0, 1.0)
    discs = pegs_to_discs(pegs, D)
    short = plan_shortest(discs, arena, [0.3, 0.0], [1.7, 0.0], PlannerConfig(clearance_weight=0.0))
    safe = plan_shortest(discs, arena, [0.3, 0.0], [1.7, 0.0], PlannerConfig(clearance_weight=20.0))
    assert safe.min_clearance > short.min_clearance
    assert safe.length > short.length


def test_no_pegs_gives_the_straight_line():
    plan = plan_shortest(Discs.empty(), Arena(-1, 1, -1, 1), [-0.5, 0.0], [0.5, 0.2])
    assert plan.mode == "straight"
    np.testing.assert_allclose(plan.points, [[-0.5, 0.0], [0.5, 0.2]])


def test_goal_inside_a_peg_is_refused(scene):
    pegs, arena = scene
    with pytest.raises(PlanningError, match=r"goal.*inside"):
        plan_shortest(pegs_to_discs(pegs, D), arena, [-0.1, 1.0], pegs[3] + 0.01)


def test_goal_outside_the_arena_is_refused(scene):
    pegs, arena = scene
    with pytest.raises(PlanningError, match=r"goal.*outside the arena"):
        plan_shortest(pegs_to_discs(pegs, D), arena, [-0.1, 1.0], [5.0, 1.0])


def test_goal_enclosed_by_pegs_is_unreachable():
    ang = np.linspace(0, 2 * np.pi, 24, endpoint=False)
    ring = np.stack([1.0 + 0.3 * np.cos(ang), 0.3 * np.sin(ang)], axis=1)  # gaps of 0.079 - 0.06 = 0.019 m
    arena = Arena(-1.0, 2.5, -1.0, 1.0)
    with pytest.raises(PlanningError, match=r"unreachable|cannot reach"):
        plan_shortest(pegs_to_discs(ring, D), arena, [-0.5, 0.0], [1.0, 0.0])


def _grid_with_wall_and_gap():
    grid = np.zeros((40, 60), dtype=int)  # 0.05 m cells: 3 m x 2 m
    grid[:, 30] = 100
    grid[18:24, 30] = 0  # a 0.3 m gap
    return grid


@pytest.mark.parametrize("yaw", [0.0, 0.4])
def test_occupancy_grid_plan_goes_through_the_gap_clear_of_every_cell(yaw):
    res = 0.05
    grid = _grid_with_wall_and_gap()
    origin = (-0.5, -1.0, yaw)
    discs = grid_to_discs(grid, res, origin)
    c, s = math.cos(yaw), math.sin(yaw)
    rot = np.array([[c, -s], [s, c]])

    def world(px, py):
        return rot @ np.array([px, py]) + np.array(origin[:2])

    start, goal = world(0.5, 1.0), world(2.5, 1.0)
    arena = Arena(-3.0, 3.0, -3.0, 3.0)
    cfg = PlannerConfig(half_width=0.03, margin=0.02)
    plan = plan_shortest(discs, arena, start, goal, cfg)
    # every occupied cell as a square: distance from path samples to the square >= required clearance
    rows, cols = np.nonzero(grid >= 50)
    for a, b in zip(plan.points[:-1], plan.points[1:], strict=True):
        pts = a + np.linspace(0, 1, 200)[:, None] * (b - a)
        local = (pts - np.array(origin[:2])) @ rot  # grid frame
        dx = np.maximum(np.abs(local[:, None, 0] - (cols + 0.5) * res) - res / 2, 0)
        dy = np.maximum(np.abs(local[:, None, 1] - (rows + 0.5) * res) - res / 2, 0)
        assert np.hypot(dx, dy).min() >= cfg.required_clearance - 1e-9
    crossing = [(world_pt @ rot) for world_pt in plan.points - np.array(origin[:2])]
    xs = np.array(crossing)
    k = int(np.argmax(xs[:, 0] > 1.5))
    y_cross = np.interp(1.525, xs[k - 1:k + 1, 0], xs[k - 1:k + 1, 1])
    assert 0.9 <= y_cross <= 1.2  # through the gap, rows 18..23 -> y in [0.9, 1.2] m


def test_occupancy_grid_blob_labels_split_separate_obstacles():
    grid = np.zeros((10, 10), dtype=int)
    grid[1:3, 1:3] = 100
    grid[6:9, 6:9] = 100
    grid[7, 7] = 100
    discs = grid_to_discs(grid, 0.1)
    assert len(set(discs.labels.tolist())) == 2
    assert len(discs) == 4 + 8  # interior cell (7, 7) dropped


class _MudTester:
    """Branch simulator stand-in: the snake moves at 0.1 m/s except on branches whose midpoint lies in mud."""

    def __init__(self, mud_centre, mud_radius):
        self.mud_centre, self.mud_radius = np.asarray(mud_centre), mud_radius
        self.tested = []

    def initial_state(self, start, towards):
        return tuple(start)

    def try_branch(self, state, a, b, last):
        self.tested.append((tuple(a), tuple(b)))
        in_mud = np.linalg.norm(0.5 * (a + b) - self.mud_centre) < self.mud_radius
        speed = 0.005 if in_mud else 0.1
        return speed >= 0.03, tuple(b), speed


def test_dfs_backtracks_around_branches_that_fail_the_speed_test(scene):
    pegs, arena = scene
    discs = pegs_to_discs(pegs, D)
    mud = _MudTester([1.5, 1.0], 0.5)
    plan = plan_dfs(discs, arena, [-0.1, 1.0], [3.1, 1.0], mud)
    assert plan.mode == "dfs"
    assert plan.stats["rejected"] > 0
    for a, b in zip(plan.points[:-1], plan.points[1:], strict=True):
        assert np.linalg.norm(0.5 * (a + b) - mud.mud_centre) >= 0.5
    np.testing.assert_allclose(plan.points[-1], [3.1, 1.0])
    # the plan is a chain of tested, passing branches
    tested = set(mud.tested)
    for a, b in zip(plan.points[:-1], plan.points[1:], strict=True):
        assert (tuple(a), tuple(b)) in tested


def test_dfs_reports_failure_when_every_branch_is_too_slow(scene):
    pegs, arena = scene
    with pytest.raises(PlanningError, match="not reached"):
        plan_dfs(pegs_to_discs(pegs, D), arena, [-0.1, 1.0], [3.1, 1.0], _MudTester([1.5, 1.0], 100.0))


def test_dfs_with_the_viscous_simulator_reaches_the_goal():
    from snake_core.following.viscous.closed_loop import ViscousBranchTester, ViscousClosedLoop

    pegs = random_pegs(3.0, (0.5, 3.0), (-1.0, 1.0), D, np.random.default_rng(2))
    arena = Arena(-1.2, 3.8, -1.5, 1.5)
    tester = ViscousBranchTester(ViscousClosedLoop(9, pegs), min_speed=0.03)
    plan = plan_dfs(pegs_to_discs(pegs, D), arena, [0.0, 0.0], [3.3, 0.3], tester)
    np.testing.assert_allclose(plan.points[-1], [3.3, 0.3])
    assert plan.stats["mean_speed"] >= 0.03
    assert tester.simulated_s > 0
