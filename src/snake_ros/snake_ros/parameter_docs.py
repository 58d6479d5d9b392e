"""Every node's parameter table, and ``docs/parameters.md`` generated from them.

``python -m snake_ros.parameter_docs > docs/parameters.md`` regenerates the page; a
test checks the committed page against the tables.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator

from snake_ros.parameters import ParameterTable

NODE_MODULES = ("gait_node", "bridge_node", "twin_node", "planner_node", "path_follower_node",
                "singularity_node", "slippage_node", "bench_robot_node")
"""Modules of ``snake_ros`` that hold one node each (and its ``PARAMETERS`` table)."""


def tables() -> Iterator[ParameterTable]:
    """The parameter table of every node, in ``NODE_MODULES`` order."""
    for name in NODE_MODULES:
        yield importlib.import_module(f"snake_ros.{name}").PARAMETERS


def markdown() -> str:
    """``docs/parameters.md``: one table per node."""
    parts = ["# Node parameters", "",
             "Generated from the nodes' parameter tables (`python -m snake_ros.parameter_docs > docs/parameters.md`;",
             "a test keeps this page in sync). Every node also prints these with `--help`. Ranges and choices are",
             "enforced at start-up (exit code 2 with one line naming the parameter) and on every run-time change;",
             "an override that names no parameter of the node is refused with the closest valid name.", ""]
    for table in tables():
        parts += [table.markdown(), ""]
    return "\n".join(parts)


def main() -> None:
    """Print ``docs/parameters.md``."""
    print(markdown(), end="")


if __name__ == "__main__":
    main()
