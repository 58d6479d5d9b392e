"""Path following among pegs (paper 001: Singh, Gong & Choset).

- :mod:`~snake_core.following.viscous`: the viscous-friction kinematic model of an N-link
  snake among pegs (001 Eq. 1-10) and its closed loop.
- :mod:`~snake_core.following.planning`: the generalized Voronoi graph through the pegs, the
  shortest plan and the depth-first search that tests branches in the model (001 Sec. III, V).
- :mod:`~snake_core.following.head_pose`: the head pose from three motion-capture markers
  and its outlier/dropout filter (001 Sec. VI).
- :mod:`~snake_core.following.follower`: line-of-sight target and head-angle PD control
  (001 Sec. IV, Eq. 11).
- :mod:`~snake_core.following.loop`: the closed loop plant -> motion capture -> filter ->
  follower -> gait, with replanning when stuck.
- :mod:`~snake_core.following.synthetic_mocap`: the one measurement model of a motion-capture
  system (noise, whole-frame outliers, latency, dropouts), shared by the closed loop and the
  twin node.
"""
