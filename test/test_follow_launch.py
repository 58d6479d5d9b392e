"""launch/follow.launch.py: structure (AST) and what it starts, executed with recording stand-ins.

``launch`` and ``launch_ros`` are not installed on the pip-only setup, so the launch file is
run with small stand-ins that record the actions it returns (the real ``snake_core`` and
``snake_ros`` resolve the robot, world and node set). Checked: the interface contract's
arguments; the processes and their parameters are exactly ``follow_nodes``'s (the set the
graph test drives to a goal); params files installed first, then the overrides; simulated
time for everything but the hardware when the backend is the twin and for nothing otherwise;
the mocap remapping; failures (bad arguments, a missing rviz2) before any Node is built;
robot_state_publisher optional; RViz with the installed ``rviz/snake.rviz``; by default the
robot's nodes in one ``robot_stack`` process that gives each node what its own process
would get (``one_process:=false``: a process per node).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml
from ament_index_python.packages import PackageNotFoundError

from snake_ros import launch_support
from snake_ros.following import STACK_NODES, follow_nodes
from snake_ros.parameters import read_params_file

ROOT = Path(__file__).resolve().parents[1]
FOLLOW = ROOT / "launch" / "follow.launch.py"


class _Recorder:
    """Stand-ins for launch / launch_ros that record what the launch file builds."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []

    def modules(self) -> dict[str, types.ModuleType]:
        rec = self

        class Node:
            def __init__(self, **kwargs: Any) -> None:
                rec.nodes.append(kwargs)
                self.kwargs = kwargs

        class LaunchConfiguration:
            def __init__(self, name: str) -> None:
                self.name = name

            def perform(self, context: dict[str, str]) -> str:
                return context[self.name]

        class _Action:
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                self.args, self.kwargs = args, kwargs

        mods = {name: types.ModuleType(name) for name in
                ("launch", "launch.actions", "launch.substitutions", "launch_ros", "launch_ros.actions",
                 "launch.event_handlers", "launch.events", "launch.events.process")}
        mods["launch"].LaunchDescription = lambda actions: actions  # type: ignore[attr-defined]
        for cls in ("DeclareLaunchArgument", "ExecuteProcess", "LogInfo", "OpaqueFunction", "SetLaunchConfiguration",
                    "EmitEvent", "RegisterEventHandler"):
            setattr(mods["launch.actions"], cls, type(cls, (_Action,), {}))
        mods["launch.event_handlers"].OnProcessExit = type("OnProcessExit", (_Action,), {})  # type: ignore[attr-defined]
        mods["launch.events"].matches_action = type("matches_action", (_Action,), {})  # type: ignore[attr-defined]
        mods["launch.events.process"].SignalProcess = type("SignalProcess", (_Action,), {})  # type: ignore[attr-defined]
        mods["launch.substitutions"].LaunchConfiguration = LaunchConfiguration  # type: ignore[attr-defined]
        mods["launch_ros.actions"].Node = Node  # type: ignore[attr-defined]
        return mods


def _load(monkeypatch: pytest.MonkeyPatch, recorder: _Recorder, share: Path, installed: set[str]) -> Any:
    for name, mod in recorder.modules().items():
        monkeypatch.setitem(sys.modules, name, mod)
    spec = importlib.util.spec_from_file_location("follow_launch", FOLLOW)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def share_of(package: str) -> str:
        if package == "snake_ros":
            return str(share)
        if package in installed:
            return str(share.parent / package)
        raise PackageNotFoundError(package)

    monkeypatch.setattr(module, "get_package_share_directory", share_of)
    monkeypatch.setattr(launch_support, "get_package_share_directory", share_of)
    return module


@pytest.fixture
def share(tmp_path: Path) -> Path:
    """An installed share/snake_ros: config/ and rviz/ as setup.py installs them."""
    root = tmp_path / "share" / "snake_ros"
    root.mkdir(parents=True)
    (root / "config").symlink_to(ROOT / "config")
    (root / "rviz").symlink_to(ROOT / "rviz")
    return root


def _arguments(module: Any) -> dict[str, str]:
    actions = module.generate_launch_description()
    return {a.args[0]: a.kwargs["default_value"] for a in actions if type(a).__name__ == "DeclareLaunchArgument"}


def _run(module: Any, **given: str) -> list[Any]:
    context = {**_arguments(module), **given}
    return module._nodes(context)


_CASES = [("tsnake", "twin", ""), ("wheeled_snake", "twin", "pegs"), ("tsnake", "dynamixel", ""),
          ("wheeled_snake", "emulated", ""), ("tsnake", "emulated", "")]  # tsnake emulated: the bench robot


@pytest.mark.parametrize(("robot", "backend", "world"), _CASES)
def test_it_starts_exactly_the_follow_nodes_with_files_then_overrides(monkeypatch, share, robot, backend, world):
    rec = _Recorder()
    module = _load(monkeypatch, rec, share, installed={"robot_state_publisher"})
    mocap = "/vrpn_mocap/snake_head/pose" if backend != "twin" else "mocap/head_pose"
    _run(module, robot=robot, backend=backend, world=world, mocap_topic=mocap, one_process="false")
    rsp, *ours = rec.nodes
    assert rsp["package"] == "robot_state_publisher"  # first: the model is there before anything moves
    assert rsp["parameters"][0]["use_sim_time"] is (backend == "twin")
    specs = follow_nodes(robot, backend, world, mocap)
    assert [n["executable"] for n in ours] == [s.executable for s in specs]
    assert ours[-1]["executable"] == "path_follower"  # what commands motion starts last
    for node, spec in zip(ours, specs, strict=True):
        *files, overrides = node["parameters"]
        assert files == [str(share / "config" / f) for f in spec.params_files]
        assert all(Path(f).is_file() for f in files)
        assert overrides == spec.params and overrides["robot"] == robot
        assert node["remappings"] == list(spec.remappings)
        hardware = node["executable"] in ("twin_node", "bridge_node")
        assert overrides.get("use_sim_time", False) is (backend == "twin" and not hardware)
    if backend != "twin":
        for node in ours[-2:]:  # planner and follower read the mocap topic given
            assert node["remappings"] == [("mocap/head_pose", mocap)]


@pytest.mark.parametrize(("robot", "backend", "world"), _CASES)
def test_one_process_gives_each_node_what_its_own_process_would_get(monkeypatch, share, robot, backend, world):
    """The default: the bridge, gait, planner and follower in one unnamed robot_stack process, built in the
    per-node layout's order after the twin or the bench robot, with that layout's files, overrides and remaps."""
    from snake_ros import bridge_node, gait_node, path_follower_node, planner_node

    tables = {t.node_name: t for t in (bridge_node.PARAMETERS, gait_node.PARAMETERS, planner_node.PARAMETERS,
                                       path_follower_node.PARAMETERS)}
    mocap = "/vrpn_mocap/snake_head/pose" if backend != "twin" else "mocap/head_pose"
    given = {"robot": robot, "backend": backend, "world": world, "mocap_topic": mocap}
    rec = _Recorder()
    module = _load(monkeypatch, rec, share, installed={"robot_state_publisher"})
    _run(module, one_process="false", **given)
    separate = {n["name"]: n for n in rec.nodes[1:]}
    rec.nodes.clear()
    assert _arguments(module)["one_process"] == "true"
    _run(module, **given)
    rsp, *ours = rec.nodes
    assert rsp["package"] == "robot_state_publisher"
    *own, stack = ours
    # the twin / bench robot stand for the robot: their own processes, as in the per-node layout, started first
    assert own == [n for name, n in separate.items() if name not in STACK_NODES]
    hosted = [name for name in separate if name in STACK_NODES]
    assert hosted[-1] == "path_follower" and len(hosted) == len(separate) - len(own)
    assert stack["executable"] == "robot_stack" and "name" not in stack  # a name would rename every node
    # built in order (the follower last), spun by the default executor
    assert stack["arguments"] == ["--nodes", ",".join(hosted), "--executor", "events"]
    assert _arguments(module)["executor"] == "events"
    assert stack["ros_arguments"] is None
    *files, overrides_file = stack["parameters"]
    try:
        assert files == list(dict.fromkeys(f for n in hosted for f in separate[n]["parameters"][:-1]))
        for name in hosted:  # each node's block: exactly what its own process gets after the files
            assert read_params_file(overrides_file, tables[name]) == separate[name]["parameters"][-1], name
        assert set(yaml.safe_load(Path(overrides_file).read_text())) == {f"/**/{n}" for n in hosted}
    finally:
        Path(overrides_file).unlink()
    # a remapping reaches only the node that had it (rcl's node:from:=to), the others keep their topics
    assert stack["remappings"] == [(f"{n}:{src}", dst) for n in hosted for src, dst in separate[n]["remappings"]]
    if backend != "twin":
        assert [r[0] for r in stack["remappings"]] == ["planner_node:mocap/head_pose",
                                                         "path_follower:mocap/head_pose"]


def test_one_process_is_checked_before_any_node(monkeypatch, share):
    rec = _Recorder()
    module = _load(monkeypatch, rec, share, installed={"robot_state_publisher"})
    with pytest.raises(ValueError, match="one_process:='yes'"):
        _run(module, one_process="yes")
    with pytest.raises(ValueError, match="executor:='fast'"):
        _run(module, executor="fast")
    assert rec.nodes == []


def test_the_interface_contract_arguments(monkeypatch, share):
    module = _load(monkeypatch, _Recorder(), share, installed=set())
    args = _arguments(module)
    assert {"robot", "backend", "mocap_topic", "world", "rviz"} <= set(args)
    assert args["rviz"] == "false" and args["backend"] == "twin"


@pytest.mark.parametrize(("given", "error", "match"), [
    ({"backend": "mujoco"}, ValueError, "backend"),
    ({"rviz": "yes"}, ValueError, "rviz"),
    ({"rviz": "true"}, RuntimeError, "rviz2 is not installed"),
    ({"mocap_topic": ""}, ValueError, "mocap_topic"),
    ({"robot": "tsnak"}, ValueError, "tsnak"),
    ({"world": "pegz"}, FileNotFoundError, "pegz"),
])
def test_bad_arguments_fail_before_any_node(monkeypatch, share, given, error, match):
    rec = _Recorder()
    module = _load(monkeypatch, rec, share, installed={"robot_state_publisher"})
    with pytest.raises(error, match=match):
        _run(module, **given)
    assert rec.nodes == []


def test_without_robot_state_publisher_it_says_so_and_runs(monkeypatch, share):
    rec = _Recorder()
    module = _load(monkeypatch, rec, share, installed=set())
    actions = _run(module)
    assert [n["executable"] for n in rec.nodes] == ["twin_node", "robot_stack"]
    assert any(type(a).__name__ == "LogInfo" and "robot_state_publisher" in a.kwargs["msg"] for a in actions)


def test_rviz_opens_the_installed_config(monkeypatch, share):
    rec = _Recorder()
    module = _load(monkeypatch, rec, share, installed={"robot_state_publisher", "rviz2"})
    _run(module, rviz="true")
    rviz = rec.nodes[-1]
    assert rviz["package"] == "rviz2" and rviz["arguments"] == ["-d", str(share / "rviz" / "snake.rviz")]
    assert rviz["parameters"] == [{"use_sim_time": True}]


def test_nodes_are_built_only_inside_the_opaque_function_after_the_checks():
    tree = ast.parse(FOLLOW.read_text())
    fns = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    gld, nodes_fn = fns["generate_launch_description"], fns["_nodes"]
    assert not [c for c in ast.walk(gld) if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "Node"]
    node_lines = [c.lineno for c in ast.walk(nodes_fn)
                  if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "Node"]
    raises = [r.lineno for r in ast.walk(nodes_fn) if isinstance(r, ast.Raise)]
    assert node_lines and raises and max(raises) < min(node_lines)
    used = {c.args[0].value for c in ast.walk(nodes_fn) if isinstance(c, ast.Call)
            and getattr(c.func, "id", "") == "LaunchConfiguration"}
    declared = {c.args[0].value for c in ast.walk(gld) if isinstance(c, ast.Call)
                and getattr(c.func, "id", "") == "DeclareLaunchArgument"}
    assert used == declared


def test_rviz_config_shows_what_the_nodes_publish_in_the_world_frame():
    config = yaml.safe_load((ROOT / "rviz" / "snake.rviz").read_text())
    manager = config["Visualization Manager"]
    assert manager["Global Options"]["Fixed Frame"] == "world"
    displays = {d["Class"].rsplit("/", 1)[-1]: d for d in manager["Displays"]}
    assert {"RobotModel", "TF", "Path", "MarkerArray", "Pose"} <= set(displays)
    topics = {d["Topic"]["Value"] for d in manager["Displays"] if "Topic" in d}
    assert topics == {"/plan", "/planner_markers", "/singularity_markers", "/mocap/head_pose"}
    sources = {"/plan": "planner_node", "/planner_markers": "planner_node",
               "/singularity_markers": "singularity_node", "/mocap/head_pose": "twin_node"}
    for topic, node in sources.items():  # each topic is really published under that name
        text = (ROOT / "src" / "snake_ros" / "snake_ros" / f"{node}.py").read_text()
        assert f'"{topic.lstrip("/")}"' in text, (topic, node)
    latched = {d["Topic"]["Value"]: d["Topic"]["Durability Policy"] for d in manager["Displays"] if "Topic" in d}
    assert latched["/plan"] == latched["/planner_markers"] == "Transient Local"
    assert "rviz/*.rviz" in (ROOT / "src" / "snake_ros" / "setup.py").read_text()  # installed with the package


def test_sim_launch_has_the_rviz_argument():
    tree = ast.parse((ROOT / "launch" / "sim.launch.py").read_text())
    declared = {c.args[0].value for c in ast.walk(tree) if isinstance(c, ast.Call)
                and getattr(c.func, "id", "") == "DeclareLaunchArgument"}
    assert "rviz" in declared
    assert "snake.rviz" in (ROOT / "launch" / "sim.launch.py").read_text()


@pytest.mark.parametrize("stacked", ["true", "false"])
def test_the_bench_robot_gets_its_seed_and_lift_and_stops_after_the_bridge(monkeypatch, share, stacked):
    from snake_ros.launch_support import BENCH_ROBOT_PREFIX, BENCH_STOP_SIGNAL

    rec = _Recorder()
    module = _load(monkeypatch, rec, share, installed={"robot_state_publisher"})
    actions = _run(module, robot="tsnake", backend="emulated", world="pegs", bench_seed="5", lifted="true",
                   one_process=stacked)
    built = {n.kwargs.get("name") or n.kwargs["executable"]: n for n in actions if hasattr(n, "kwargs")
             and "executable" in n.kwargs}
    bench = built["bench_robot"]
    overrides = bench.kwargs["parameters"][-1]
    assert {k: overrides[k] for k in ("seed", "lifted", "world")} == {"seed": 5, "lifted": True, "world": "pegs"}
    assert bench.kwargs["prefix"] == BENCH_ROBOT_PREFIX
    assert overrides == follow_nodes("tsnake", "emulated", "pegs", bench_seed=5, lifted=True)[0].params
    bridge = built["robot_stack" if stacked == "true" else "bridge_node"]
    (register,) = [a for a in actions if type(a).__name__ == "RegisterEventHandler"]
    handler = register.args[0]
    assert handler.kwargs["target_action"] is bridge
    (emit,) = handler.kwargs["on_exit"]
    signal = emit.kwargs["event"]
    assert signal.kwargs["signal_number"] == BENCH_STOP_SIGNAL and signal.kwargs["process_matcher"].args == (bench,)
    # no other node runs in its own session
    assert [n for n in built.values() if "prefix" in n.kwargs] == [bench]


@pytest.mark.parametrize("given", [{"bench_seed": "2"}, {"lifted": "true"}])
def test_bench_arguments_without_the_bench_robot_are_refused(monkeypatch, share, given):
    rec = _Recorder()
    module = _load(monkeypatch, rec, share, installed={"robot_state_publisher"})
    with pytest.raises(ValueError, match="they need backend:=emulated"):
        _run(module, robot="tsnake", backend="twin", **given)
    assert rec.nodes == []
