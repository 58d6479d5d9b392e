"""The paper's depth-first search that tests every branch in the kinematic simulator (001 Sec. V, Fig. 1.5).

From the current vertex the search tries the neighbouring vertices one at a time (nearest
to the goal first), simulating the snake along the branch from the state it reached at the
current vertex. A branch whose simulated speed falls under the threshold (or that the snake
does not finish in time) is discarded and the next neighbour is tried; when none is left the
search backtracks to the previous vertex, dropping the last branch of the path. It ends when
the goal is reached: the plan is the chain of vertices the snake passed successfully.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np

from snake_core.errors import PlanningError
from snake_core.following.planning.gvg import Arena, Discs
from snake_core.following.planning.planner import GOAL, START, Plan, PlannerConfig, prepare

_MAX_BRANCH_TESTS = 400  # simulated branches before the search gives up


class BranchTester(Protocol):
    """Simulates one branch (see :class:`snake_core.following.viscous.closed_loop.ViscousBranchTester`)."""

    def initial_state(self, start: np.ndarray, towards: np.ndarray) -> Any:
        """State of the robot at ``start`` facing ``towards``."""

    def try_branch(self, state: Any, a: np.ndarray, b: np.ndarray, last: bool) -> tuple[bool, Any, float]:
        """``(passed, state at b, mean speed m/s)`` for following a -> b from ``state``."""


def plan_dfs(discs: Discs, arena: Arena, start: np.ndarray, goal: np.ndarray, tester: BranchTester,
             config: PlannerConfig | None = None, blocked: Iterable[tuple[np.ndarray, np.ndarray]] = (),
             max_tests: int = _MAX_BRANCH_TESTS) -> Plan:
    """Depth-first search over the GVG with simulated branch tests (001 Sec. V).

    Args:
        discs: Obstacles.
        arena: The arena.
        start: Start (the head's position), m.
        goal: Goal, m.
        tester: Branch simulator.
        config: Planner settings.
        blocked: Edges to leave out (see :class:`~snake_core.following.planning.planner.RoadMap`).
        max_tests: Largest number of simulated branches.

    Returns:
        The plan; ``stats`` holds ``tests``, ``backtracks``, ``rejected`` and ``mean_speed``,
        the mean over the passed, simulated branches of the speed the tester reported (m/s).

    Raises:
        PlanningError: Bad start/goal, or no branch sequence passes.
    """
    config = config or PlannerConfig()
    rm = prepare(discs, arena, start, goal, config, blocked)
    if isinstance(rm, Plan):
        return rm
    g = rm.graph
    goal_pos = rm.pos(GOAL)

    def ordered(node: object, visited: set) -> list:
        nbrs = [n for n in g.neighbors(node) if n not in visited]
        return sorted(nbrs, key=lambda n: (n != GOAL, float(np.linalg.norm(rm.pos(n) - goal_pos))))

    visited = {START}
    first = ordered(START, visited)
    if not first:
        raise PlanningError("start: no branch leaves the start")
    state0 = tester.initial_state(rm.pos(START), rm.pos(first[0]))
    # Stack of (vertex, state on arrival, neighbours still to try, speed of the branch into it).
    stack: list[tuple[object, Any, list, float]] = [(START, state0, first, 0.0)]
    tests = backtracks = rejected = 0
    while stack:
        node, state, todo, _ = stack[-1]
        if node == GOAL:
            nodes = [s[0] for s in stack]
            speeds = [s[3] for s in stack[1:] if np.isfinite(s[3])]
            return rm.to_plan(nodes, "dfs", {"tests": tests, "backtracks": backtracks, "rejected": rejected,
                                             "mean_speed": float(np.mean(speeds)) if speeds else 0.0})
        if not todo:
            stack.pop()
            backtracks += 1
            continue
        nxt = todo.pop(0)
        if nxt in visited:
            continue
        if tests >= max_tests:
            break
        tests += 1
        ok, new_state, speed = tester.try_branch(state, rm.pos(node), rm.pos(nxt), last=nxt == GOAL)
        if not ok:
            rejected += 1
            continue
        visited.add(nxt)
        stack.append((nxt, new_state, ordered(nxt, visited), speed))
    raise PlanningError(f"goal: ({goal_pos[0]:.3f}, {goal_pos[1]:.3f}) m not reached: no sequence of branches "
                        f"passed the simulated speed test ({tests} branches tested, {rejected} rejected)")
