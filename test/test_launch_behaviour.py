"""Launch files run: their OpaqueFunction executed against the real snake_core and ament index.

``launch``/``launch_ros`` cannot be installed here, so the few constructors the launch files
call (``LaunchDescription``, ``DeclareLaunchArgument``, ``OpaqueFunction``, ``LogInfo``,
``LaunchConfiguration``, ``Node``) are replaced by recorders; everything else is real: the
ament index (``ament_index_python`` over a temporary install prefix with or without
robot_state_publisher), the robot and world lookup, the URDF generation. This shows what
each argument combination would start, and that a refusal happens before any Node exists.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import shutil
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
RSP = "robot_state_publisher"


@dataclass
class FakeNode:
    """What ``launch_ros.actions.Node`` was given."""

    kwargs: dict[str, Any]

    @property
    def executable(self) -> str:
        return self.kwargs["executable"]

    @property
    def overrides(self) -> dict[str, Any]:
        return self.kwargs["parameters"][-1]


@dataclass
class Recorder:
    """Every Node built while a launch file ran."""

    nodes: list[FakeNode] = field(default_factory=list)


def _stub_modules(recorder: Recorder) -> dict[str, types.ModuleType]:
    launch = types.ModuleType("launch")
    actions = types.ModuleType("launch.actions")
    event_handlers = types.ModuleType("launch.event_handlers")
    events = types.ModuleType("launch.events")
    process_events = types.ModuleType("launch.events.process")
    substitutions = types.ModuleType("launch.substitutions")
    launch_ros = types.ModuleType("launch_ros")
    ros_actions = types.ModuleType("launch_ros.actions")

    @dataclass
    class DeclareLaunchArgument:
        name: str
        default_value: str
        description: str

    @dataclass
    class OpaqueFunction:
        function: Any

    @dataclass
    class LogInfo:
        msg: str

    @dataclass
    class SetLaunchConfiguration:
        name: str
        value: str

    @dataclass
    class ExecuteProcess:
        cmd: list[str]
        name: str = ""
        output: str = ""

    @dataclass
    class RegisterEventHandler:
        event_handler: Any

    @dataclass
    class OnProcessExit:
        target_action: Any
        on_exit: list[Any]

    @dataclass
    class EmitEvent:
        event: Any

    @dataclass
    class SignalProcess:
        signal_number: str
        process_matcher: Any

    @dataclass
    class Matches:  # what launch.events.matches_action returns: a matcher of one action
        action: Any

    @dataclass
    class LaunchConfiguration:
        name: str

        def perform(self, context: dict[str, str]) -> str:
            return context[self.name]

    def node(**kwargs: Any) -> FakeNode:
        built = FakeNode(kwargs)
        recorder.nodes.append(built)
        return built

    launch.LaunchDescription = list  # type: ignore[attr-defined]
    actions.DeclareLaunchArgument = DeclareLaunchArgument  # type: ignore[attr-defined]
    actions.OpaqueFunction = OpaqueFunction  # type: ignore[attr-defined]
    actions.LogInfo = LogInfo  # type: ignore[attr-defined]
    actions.SetLaunchConfiguration = SetLaunchConfiguration  # type: ignore[attr-defined]
    actions.ExecuteProcess = ExecuteProcess  # type: ignore[attr-defined]
    actions.RegisterEventHandler = RegisterEventHandler  # type: ignore[attr-defined]
    actions.EmitEvent = EmitEvent  # type: ignore[attr-defined]
    event_handlers.OnProcessExit = OnProcessExit  # type: ignore[attr-defined]
    events.matches_action = Matches  # type: ignore[attr-defined]
    process_events.SignalProcess = SignalProcess  # type: ignore[attr-defined]
    substitutions.LaunchConfiguration = LaunchConfiguration  # type: ignore[attr-defined]
    ros_actions.Node = node  # type: ignore[attr-defined]
    return {"launch": launch, "launch.actions": actions, "launch.substitutions": substitutions,
            "launch.event_handlers": event_handlers, "launch.events": events, "launch.events.process": process_events,
            "launch_ros": launch_ros, "launch_ros.actions": ros_actions}


def _prefix(base: Path, with_rsp: bool) -> Path:
    """An install prefix holding snake_ros' params files (and robot_state_publisher if asked)."""
    prefix = base / ("with_rsp" if with_rsp else "without_rsp")
    index = prefix / "share" / "ament_index" / "resource_index" / "packages"
    index.mkdir(parents=True)
    packages = ["snake_ros", *([RSP] if with_rsp else [])]
    for pkg in packages:
        (index / pkg).write_text("")
        (prefix / "share" / pkg).mkdir(parents=True, exist_ok=True)
    (prefix / "share" / "snake_ros" / "config").mkdir()
    for params in (ROOT / "config").glob("*.yaml"):
        shutil.copy(params, prefix / "share" / "snake_ros" / "config" / params.name)
    return prefix


@pytest.fixture
def run_launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``run_launch(file, with_rsp, **arguments)`` -> (actions, recorder)."""
    recorder = Recorder()
    for name, module in _stub_modules(recorder).items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delenv("SNAKE_CONFIG_DIR", raising=False)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)

    runs = itertools.count()

    def run(launch_file: str, with_rsp: bool = False, **arguments: str) -> tuple[list[Any], Recorder]:
        recorder.nodes.clear()
        monkeypatch.setenv("AMENT_PREFIX_PATH", str(_prefix(tmp_path / f"prefix{next(runs)}", with_rsp)))
        path = ROOT / "launch" / launch_file
        spec = importlib.util.spec_from_file_location(f"launch_under_test_{path.stem.replace('.', '_')}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        description = module.generate_launch_description()
        context = {a.name: a.default_value for a in description if hasattr(a, "default_value")}
        unknown = set(arguments) - set(context)
        assert not unknown, f"not arguments of {launch_file}: {unknown}"
        context.update(arguments)
        opaque = [a for a in description if hasattr(a, "function")]
        assert len(opaque) == 1
        return opaque[0].function(context), recorder

    run.recorder = recorder  # type: ignore[attr-defined]
    return run


def _nodes(actions: list[Any]) -> dict[str, FakeNode]:
    return {a.executable: a for a in actions if isinstance(a, FakeNode)}


@pytest.mark.parametrize("launch_file", ["snake.launch.py", "sim.launch.py"])
def test_without_robot_state_publisher_the_rest_starts_and_says_so(run_launch, launch_file):
    actions, _ = run_launch(launch_file)
    assert "not installed" in actions[0].msg
    assert RSP not in _nodes(actions)
    # snake.launch.py: the bridge and the gait node in one robot_stack process by default
    assert list(_nodes(actions))[-1] == ("robot_stack" if launch_file == "snake.launch.py" else "gait_node")


@pytest.mark.parametrize("launch_file", ["snake.launch.py", "sim.launch.py"])
def test_a_required_but_missing_robot_state_publisher_starts_nothing(run_launch, launch_file):
    with pytest.raises(RuntimeError, match="robot_state_publisher:=true but the package is not installed"):
        run_launch(launch_file, robot_state_publisher="true")
    assert run_launch.recorder.nodes == []
    _, recorder = run_launch(launch_file, with_rsp=True, robot_state_publisher="false")
    assert RSP not in {n.executable for n in recorder.nodes}


@pytest.mark.parametrize(("launch_file", "bad", "message"), [
    ("snake.launch.py", {"backend": "mujoco"}, "backend:='mujoco': must be one of emulated, dynamixel"),
    ("snake.launch.py", {"use_sim_time": "maybe"}, "use_sim_time:='maybe'"),
    ("snake.launch.py", {"robot": "./nope.yaml"}, "nope.yaml: robot file not found"),
    ("sim.launch.py", {"mode": "turbo"}, "mode:='turbo': must be one of realtime, fast, lockstep"),
    ("sim.launch.py", {"speed_factor": "fast"}, "speed_factor:='fast': must be a number"),
    ("sim.launch.py", {"world": "moon"}, "world 'moon': no file"),
    ("sim.launch.py", {"robot": "nobody"}, "robot 'nobody': no file"),
])
def test_a_bad_argument_fails_before_any_node_is_built(run_launch, launch_file, bad, message):
    with pytest.raises(ValueError, match=message):
        run_launch(launch_file, with_rsp=True, **bad)
    assert run_launch.recorder.nodes == []


def test_robot_state_publisher_gets_the_urdf_first_when_installed(run_launch):
    actions, recorder = run_launch("sim.launch.py", with_rsp=True, robot="wheeled_snake", world="pegs")
    assert isinstance(actions[0], FakeNode) and actions[0].executable == RSP
    committed = (ROOT / "urdf" / "wheeled_snake.urdf").read_text()
    assert actions[0].overrides == {"robot_description": committed, "use_sim_time": True}
    assert [n.executable for n in recorder.nodes] == [RSP, "twin_node", "gait_node"]


def test_a_robot_yaml_path_reaches_every_node_and_the_urdf(run_launch):
    source = (ROOT / "config" / "robots" / "tsnake.yaml").read_text()
    assert "name: tsnake" in source
    Path("my_snake.yaml").write_text(source.replace("name: tsnake", "name: my_snake", 1))
    actions, _ = run_launch("snake.launch.py", with_rsp=True, robot="my_snake.yaml", one_process="false")
    nodes = _nodes(actions)
    expected = str(Path("my_snake.yaml").resolve())  # absolute: a node's cwd may differ
    assert nodes["gait_node"].overrides["robot"] == expected
    assert nodes["bridge_node"].overrides["robot"] == expected
    assert '<robot name="my_snake">' in nodes[RSP].overrides["robot_description"]


def test_the_bridge_never_runs_on_sim_time_and_defers_the_port_to_the_yaml(run_launch):
    nodes = _nodes(run_launch("snake.launch.py", use_sim_time="true", one_process="false")[0])
    assert nodes["gait_node"].overrides["use_sim_time"] is True
    assert nodes["bridge_node"].overrides["use_sim_time"] is False
    assert "port" not in nodes["bridge_node"].overrides  # the params file's "" = bus.port
    nodes = _nodes(run_launch("snake.launch.py", port="/dev/ttyUSB3", backend="dynamixel", one_process="false")[0])
    assert nodes["bridge_node"].overrides["port"] == "/dev/ttyUSB3"
    assert nodes["bridge_node"].overrides["backend"] == "dynamixel"


@pytest.mark.parametrize("args", [{}, {"use_sim_time": "true", "port": "/dev/ttyUSB3", "backend": "dynamixel"}])
def test_one_process_gives_each_node_what_its_own_process_would_get(run_launch, args):
    import yaml

    from snake_ros import bridge_node, gait_node
    from snake_ros.parameters import read_params_file

    separate = _nodes(run_launch("snake.launch.py", one_process="false", **args)[0])
    actions, _ = run_launch("snake.launch.py", **args)  # one process: the default
    nodes = _nodes(actions)
    assert set(nodes) == {"robot_stack"}
    stack = nodes["robot_stack"].kwargs
    assert "name" not in stack  # a name would rename every node of the process
    assert stack["arguments"] == ["--nodes", "bridge_node,gait_node", "--executor", "events"]  # the default
    *files, overrides_file = stack["parameters"]
    try:
        installed = Path(os.environ["AMENT_PREFIX_PATH"]) / "share" / "snake_ros" / "config"
        assert files == [str(installed / Path(separate[n].kwargs["parameters"][0]).name)
                         for n in ("bridge_node", "gait_node")]
        tables = {"bridge_node": bridge_node.PARAMETERS, "gait_node": gait_node.PARAMETERS}
        for name, node in separate.items():
            if name in tables:  # robot_state_publisher is its own process in both modes
                assert read_params_file(overrides_file, tables[name]) == node.overrides, name
        assert set(yaml.safe_load(Path(overrides_file).read_text())) == {"/**/bridge_node", "/**/gait_node"}
    finally:
        Path(overrides_file).unlink()
    with pytest.raises(ValueError, match="one_process:='yes'"):
        run_launch("snake.launch.py", one_process="yes")
    single = _nodes(run_launch("snake.launch.py", executor="single", **args)[0])["robot_stack"].kwargs
    assert single["arguments"] == ["--nodes", "bridge_node,gait_node", "--executor", "single"]
    Path(single["parameters"][-1]).unlink()
    with pytest.raises(ValueError, match="executor:='fast'"):
        run_launch("snake.launch.py", executor="fast")


@pytest.mark.parametrize(("mode", "primed"), [("lockstep", True), ("realtime", False), ("fast", False)])
def test_lockstep_primes_the_twin_and_the_gait_runs_on_its_clock(run_launch, mode, primed):
    nodes = _nodes(run_launch("sim.launch.py", mode=mode)[0])
    assert nodes["twin_node"].overrides["lockstep_prime"] is primed
    assert nodes["twin_node"].overrides["use_sim_time"] is False
    assert nodes["gait_node"].overrides["use_sim_time"] is True


@pytest.mark.parametrize("launch_file", ["snake.launch.py", "sim.launch.py"])
def test_each_node_gets_its_installed_params_file(run_launch, launch_file):
    # A process per node (one robot_stack process: test_one_process_gives_each_node_what_its_own_process_would_get)
    separate = {"one_process": "false"} if launch_file == "snake.launch.py" else {}
    for node in _nodes(run_launch(launch_file, **separate)[0]).values():
        params_file = Path(node.kwargs["parameters"][0])
        assert params_file.is_file()
        assert params_file.parent == Path(os.environ["AMENT_PREFIX_PATH"]) / "share" / "snake_ros" / "config"
        assert f"/**/{node.kwargs['name']}:" in params_file.read_text()


@pytest.mark.parametrize("launch_file", ["snake.launch.py", "sim.launch.py", "follow.launch.py"])
def test_the_enclave_reaches_every_node_only_when_given(run_launch, launch_file):
    _, recorder = run_launch(launch_file, with_rsp=True)
    assert recorder.nodes and all(n.kwargs["ros_arguments"] is None for n in recorder.nodes)
    _, recorder = run_launch(launch_file, with_rsp=True, enclave="/snake")
    assert recorder.nodes and all(n.kwargs["ros_arguments"] == ["--enclave", "/snake"] for n in recorder.nodes)
    with pytest.raises(ValueError, match="enclave:='snake'"):
        run_launch(launch_file, with_rsp=True, enclave="snake")
    assert run_launch.recorder.nodes == []


@pytest.mark.parametrize(("launch_file", "arguments", "tail"), [
    ("sim.launch.py", {}, []),
    ("snake.launch.py", {}, []),
    ("follow.launch.py", {"mocap_topic": "/vrpn_mocap/snake_head/pose"},
     ["--mocap-topic", "/vrpn_mocap/snake_head/pose"]),
])
def test_view_true_adds_a_read_only_snake_view_of_the_same_robot(run_launch, launch_file, arguments, tail):
    robot = str(ROOT / "config" / "robots" / "tsnake.yaml")
    actions, _ = run_launch(launch_file, robot=robot, **arguments)
    assert not [a for a in actions if hasattr(a, "cmd")]          # off by default
    actions, recorder = run_launch(launch_file, robot=robot, view="true", **arguments)
    (view,) = [a for a in actions if hasattr(a, "cmd")]
    assert view.cmd == ["snake", "view", "--robot", robot, *tail]  # never --allow-commands
    assert recorder.nodes                                            # the stack itself still starts


@pytest.mark.parametrize("one_process", ["true", "false"])
def test_the_bench_robot_gets_its_seed_world_and_lift_and_stops_after_the_bridge(run_launch, one_process):
    from snake_ros.launch_support import BENCH_ROBOT_PREFIX, BENCH_STOP_SIGNAL

    actions, _ = run_launch("snake.launch.py", bench_robot="true", bench_seed="3", world="uneven", lifted="true",
                            one_process=one_process)
    nodes = _nodes(actions)
    bench = nodes["bench_robot"]
    assert {k: bench.overrides[k] for k in ("seed", "world", "lifted")} == {"seed": 3, "world": "uneven",
                                                                            "lifted": True}
    # its own session: the terminal's Ctrl-C reaches the bridge, not the bench robot
    assert bench.kwargs["prefix"] == BENCH_ROBOT_PREFIX == "setsid"
    bridge = nodes["robot_stack" if one_process == "true" else "bridge_node"]
    (handler,) = [a.event_handler for a in actions if type(a).__name__ == "RegisterEventHandler"]
    assert handler.target_action is bridge  # the process that makes the servos safe
    (emit,) = handler.on_exit
    assert emit.event.signal_number == BENCH_STOP_SIGNAL and emit.event.process_matcher.action is bench
    # the default: seed 0, flat, on the ground; without the bench robot no handler at all
    nodes = _nodes(run_launch("snake.launch.py", bench_robot="true")[0])
    assert {k: nodes["bench_robot"].overrides[k] for k in ("seed", "world", "lifted")} == {"seed": 0, "world": "",
                                                                                           "lifted": False}
    assert not [a for a in run_launch("snake.launch.py")[0] if type(a).__name__ == "RegisterEventHandler"]


@pytest.mark.parametrize(("bad", "message"), [
    ({"bench_robot": "true", "bench_seed": "-1"}, r"bench_seed:='-1': must be an integer in \[0, 2147483647\]"),
    ({"bench_robot": "true", "bench_seed": "two"}, "bench_seed:='two'"),
    ({"bench_robot": "true", "lifted": "yes"}, "lifted:='yes'"),
    ({"bench_robot": "true", "world": "moon"}, "world 'moon': no file"),
    ({"bench_seed": "3"}, "they need bench_robot:=true"),
    ({"lifted": "true"}, "they need bench_robot:=true"),
])
def test_a_bad_bench_argument_fails_before_any_node(run_launch, bad, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        run_launch("snake.launch.py", **bad)
    assert run_launch.recorder.nodes == []
