"""Workspace-level contracts: URDF in sync with the YAML, launch files consistent, packages well formed."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import networkx as nx
import pytest
from urdf_parser_py.urdf import URDF

from snake_core.robot import load_robot
from snake_core.urdf import robot_to_urdf

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["snake_core", "snake_hardware", "snake_ros", "snake_tools"]
ROBOTS = ["tsnake", "wheeled_snake"]


@pytest.mark.parametrize("name", ROBOTS)
def test_committed_urdf_is_generated_from_the_yaml(name):
    committed = (ROOT / "urdf" / f"{name}.urdf").read_text()
    assert committed == robot_to_urdf(load_robot(name)), f"run: snake urdf --robot {name} --out urdf/{name}.urdf"


@pytest.mark.parametrize("name", ROBOTS)
def test_urdf_parses_and_matches_the_yaml(name):
    robot = load_robot(name)
    urdf = URDF.from_xml_string((ROOT / "urdf" / f"{name}.urdf").read_text().encode())
    actuated = {j.name: j for j in urdf.joints if j.type != "fixed"}
    assert list(actuated) == robot.joint_names
    for spec in robot.joints:
        j = actuated[spec.name]
        assert list(j.axis) == pytest.approx(list(spec.axis))
        if spec.continuous:
            assert j.type == "continuous"
        else:
            assert j.type == "revolute"
            assert (j.limit.lower, j.limit.upper) == pytest.approx((spec.lower, spec.upper))
        assert j.limit.velocity == pytest.approx(spec.velocity)
    # The body is one chain whose joint offsets add up to the body length (T-Snake) or
    # to the length of all links but the last (wheeled snake).
    offsets = sum(j.origin.xyz[0] for j in urdf.joints if j.type != "fixed")
    expected = robot.joint_arc_positions()[-1] if robot.kind == "tsnake" else float(robot.link_lengths[:-1].sum())
    assert offsets == pytest.approx(expected)


def _setup_entry_points(pkg: str) -> set[str]:
    text = (ROOT / "src" / pkg / "setup.py").read_text()
    return set(re.findall(r'"(\w+) = [\w.]+:main"', text))


def test_launch_files_reference_real_executables_and_files():
    launch_files = sorted((ROOT / "launch").glob("*.launch.py"))
    assert launch_files
    executables = _setup_entry_points("snake_ros")
    for path in launch_files:
        tree = ast.parse(path.read_text(), filename=str(path))
        names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert "generate_launch_description" in names, path
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            kw = {k.arg: k.value for k in call.keywords}
            pkg, exe = kw.get("package"), kw.get("executable")
            if isinstance(pkg, ast.Constant) and pkg.value == "snake_ros" and isinstance(exe, ast.Constant):
                assert exe.value in executables, f"{path.name}: no console script {exe.value}"
        for const in (n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)):
            if const.value.endswith(".yaml") and "/" not in const.value and not const.value.startswith("."):
                assert (ROOT / "config" / const.value).is_file(), f"{path.name}: config/{const.value} missing"


@pytest.mark.parametrize("pkg", PACKAGES)
def test_packages_are_ament_python_format_3(pkg):
    root = ET.parse(ROOT / "src" / pkg / "package.xml").getroot()
    assert root.get("format") == "3"
    assert root.findtext("name") == pkg
    assert root.find("export/build_type").text == "ament_python"
    assert (ROOT / "src" / pkg / "resource" / pkg).is_file()
    cfg = (ROOT / "src" / pkg / "setup.cfg").read_text()
    assert f"install_scripts=$base/lib/{pkg}" in cfg


def test_core_library_never_imports_rclpy():
    for path in (ROOT / "src" / "snake_core" / "snake_core").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(m.split(".")[0] == "rclpy" for m in mods), path


def _core_import_graph() -> nx.DiGraph:
    """Module -> module edges of every ``import``/``from`` statement in snake_core (any depth).

    ``from pkg import name`` points at ``pkg.name`` when that is a module, else at ``pkg``;
    relative imports are resolved against the importing module's package.
    """
    base = ROOT / "src" / "snake_core"
    modules: dict[str, Path] = {}
    for path in (base / "snake_core").rglob("*.py"):
        parts = path.relative_to(base).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                origin = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    origin = ".".join([*anchor, *([origin] if origin else [])])
                targets = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin for a in node.names]
            graph.add_edges_from((name, t) for t in targets if t in modules and t != name)
    return graph


def test_core_modules_import_no_cycle():
    graph = _core_import_graph()
    assert graph.number_of_edges() > 50  # the walk saw the core's imports
    assert graph.has_edge("snake_core.gait.rolling", "snake_core.gait.base")
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, "import cycles: " + "; ".join(" -> ".join([*c, c[0]]) for c in cycles)


# Heavy scipy subpackages that only some code paths need (the gait's arc-length table, the
# slippage monitor's bounded least squares and extrema search, the mocap fit): each node must
# import them on first use, not at start-up, so that its first message is not held up.
_LAZY_AT_STARTUP = {
    "gait_node": ("scipy.integrate", "scipy.optimize"),
    "slippage_node": ("scipy.integrate", "scipy.optimize"),
    "singularity_node": ("scipy.integrate", "scipy.optimize"),
    "path_follower_node": ("scipy.integrate", "scipy.optimize", "scipy.spatial"),
    "twin_node": ("scipy.integrate", "scipy.optimize", "scipy.ndimage"),
    # The one-process entry point imports the node modules it is asked for only when it builds them.
    "robot_stack": ("scipy.integrate", "scipy.optimize", "scipy.spatial", "snake_ros.bridge_node",
                    "snake_ros.gait_node", "snake_ros.planner_node", "snake_ros.path_follower_node"),
}


@pytest.mark.parametrize("node", sorted(_LAZY_AT_STARTUP))
def test_node_module_import_leaves_heavy_scipy_unimported(node):
    """Importing a node's module (what runs before its first message) loads none of the lazy subpackages."""
    code = f"import sys, snake_ros.{node}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = set(out.stdout.split())
    assert f"snake_ros.{node}" in loaded  # the probe really imported the node
    assert "numpy" in loaded
    heavy = sorted(m for m in loaded if m.split(".")[:2] in [p.split(".") for p in _LAZY_AT_STARTUP[node]])
    assert not heavy, f"{node} imports at start-up: {heavy[:5]}"


def test_colcon_meta_names_real_packages():
    meta = json.loads((ROOT / "colcon.meta").read_text())
    assert set(meta["names"]) == set(PACKAGES)


@pytest.mark.graph
def test_gait_node_starts_with_its_parameter_file(ros):
    from sensor_msgs.msg import JointState

    from snake_ros.qos import COMMAND_QOS

    cmds = ros.collect(JointState, "joint_commands", COMMAND_QOS)
    node = ros.start("gait_node", extra_args=["--params-file", str(ROOT / "config" / "gait_node.yaml")])
    assert ros.spin_until(lambda: len(cmds) > 2), ros.log_of(node)
    assert len(cmds[-1].name) == 18
