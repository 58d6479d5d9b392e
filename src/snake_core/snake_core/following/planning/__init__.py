"""Path planning among pegs and mapped obstacles (001 Sec. III and V).

- :mod:`~snake_core.following.planning.gvg`: the generalized Voronoi graph through round pegs
  and occupancy-grid obstacles, with each edge's clearance (001 Sec. III).
- :mod:`~snake_core.following.planning.planner`: start and goal joined to the graph, the
  clearance-aware shortest path (A*), branches left out after the robot got stuck.
- :mod:`~snake_core.following.planning.dfs`: the paper's depth-first search that tests every
  branch in the viscous model before taking it (001 Sec. V, Fig. 1.5).
- :mod:`~snake_core.following.planning.fields`: seeded random peg fields for closed-loop trials
  (001 Sec. VI).
"""
