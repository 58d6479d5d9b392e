"""Pure core library of the snake control stack: the papers' math, no ROS.

Everything here depends only on numpy, scipy, networkx and PyYAML, so it can be
tested, benchmarked and reused offline. ROS nodes (package ``snake_ros``) and
hardware/simulation backends (package ``snake_hardware``) call into it.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
