"""MuJoCo simulated twin: MJCF and worlds generated from YAML, and the simulation core."""
