"""Launch files fail safe, checked on their syntax tree (``launch``/``launch_ros`` are not installed here).

Each launch file declares its arguments and hands one ``OpaqueFunction`` the job of
resolving everything (arguments, the robot YAML and its URDF, params files, whether
robot_state_publisher is installed) and only then building the ``Node`` actions, so
that a failure stops the launch before any process starts. The properties checked:
where and in which order the Nodes are built, which nodes get ``use_sim_time``, the
parameter sources (installed params file first, then overrides that the params file
declares), the port and lockstep arguments, and a robot given as a YAML path.
"""

from __future__ import annotations

import ast
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_FILES = sorted((ROOT / "launch").glob("*.launch.py"))
# The launch files that list their Nodes one by one (follow.launch.py builds its Nodes from
# snake_ros.following.follow_nodes and has its own checks in test_follow_launch.py).
LAUNCH_SUPPORT = ROOT / "src" / "snake_ros" / "snake_ros" / "launch_support.py"
NODE_LAUNCH_FILES = [p for p in LAUNCH_FILES if p.name != "follow.launch.py"]
VIEWER = "rviz2"  # the other optional package a launch file may start (rviz:=true)
OPTIONAL_PACKAGE = "robot_state_publisher"
ONE_PROCESS = "robot_stack"  # the executable running several of the stack's nodes in one process
# Calls that resolve something and may fail: all of them come before the first Node.
_RESOLVING_CALLS = {"get_package_share_directory", "package_installed", "load_robot", "robot_to_urdf", "resolve",
                    "perform", "choice", "isfile", "float", "absolute_if_path", "enclave_arguments",
                    "node_overrides_file"}


@dataclass(frozen=True)
class NodeCall:
    """One ``Node(...)`` of a launch file."""

    package: str
    executable: str
    name: str | None
    lineno: int
    parameters: list[ast.expr]  # the elements of parameters=[...]
    guards: list[ast.expr]  # tests of the if statements around the call


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    assert found, f"no function {name}"
    return found[0]


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _constants(tree: ast.Module) -> dict[str, object]:
    """Module-level ``NAME = <literal>`` assignments."""
    out: dict[str, object] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            try:
                out[stmt.targets[0].id] = ast.literal_eval(stmt.value)
            except ValueError:
                pass
    return out


def _value(node: ast.expr, constants: dict[str, object]) -> object:
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    return ast.literal_eval(node)


def _opaque_function(tree: ast.Module) -> ast.FunctionDef:
    """The function that generate_launch_description hands to OpaqueFunction."""
    gld = _function(tree, "generate_launch_description")
    opaque = [c for c in ast.walk(gld) if isinstance(c, ast.Call) and _call_name(c) == "OpaqueFunction"]
    assert len(opaque) == 1, "one OpaqueFunction resolves everything"
    target = {k.arg: k.value for k in opaque[0].keywords}["function"]
    assert isinstance(target, ast.Name)
    return _function(tree, target.id)


def _node_calls(fn: ast.AST, constants: dict[str, object]) -> list[NodeCall]:
    calls: list[NodeCall] = []

    def visit(node: ast.AST, guards: list[ast.expr]) -> None:
        if isinstance(node, ast.Call) and _call_name(node) == "Node":
            kw = {k.arg: k.value for k in node.keywords}
            params = kw.get("parameters")
            assert isinstance(params, ast.List), "parameters=[...] written out"
            name = kw.get("name")
            calls.append(NodeCall(str(_value(kw["package"], constants)), str(_value(kw["executable"], constants)),
                                  None if name is None else str(_value(name, constants)), node.lineno,
                                  list(params.elts), list(guards)))
        if isinstance(node, ast.If):
            for child in node.body:
                visit(child, [*guards, node.test])
            for child in node.orelse:
                visit(child, [*guards, ast.UnaryOp(op=ast.Not(), operand=node.test)])
            return
        for child in ast.iter_child_nodes(node):
            visit(child, guards)

    visit(fn, [])
    return sorted(calls, key=lambda c: c.lineno)


@dataclass(frozen=True)
class Launch:
    """A parsed launch file: its tree, the OpaqueFunction, its Nodes and names."""

    tree: ast.Module
    fn: ast.FunctionDef  # the OpaqueFunction's function
    calls: list[NodeCall]  # Node(...) in source order
    constants: dict[str, object]  # module-level literals
    assignments: dict[str, ast.expr]  # NAME = <expr> inside fn

    def overrides(self, call: NodeCall) -> ast.Dict:
        """The dict of parameter overrides of a Node (last parameters entry, literal or named)."""
        last = call.parameters[-1]
        if isinstance(last, ast.Name):
            last = self.assignments[last.id]
        assert isinstance(last, ast.Dict), f"{call.executable}: overrides are a dict"
        return last

    def override_items(self, call: NodeCall) -> dict[str, ast.expr]:
        d = self.overrides(call)
        return {ast.literal_eval(k): v for k, v in zip(d.keys, d.values, strict=True) if k is not None}

    def conditional_overrides(self, call: NodeCall) -> set[str]:
        """Keys set later with ``overrides_name["key"] = ...``."""
        target = self.overrides(call)
        return {ast.literal_eval(s.targets[0].slice) for s in ast.walk(self.fn)
                if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Subscript)
                and isinstance(s.targets[0].value, ast.Name) and self.assignments.get(s.targets[0].value.id) is target}

    def node(self, executable: str) -> NodeCall:
        return next(c for c in self.calls if c.executable == executable)

    def arguments(self) -> dict[str, ast.Call]:
        """DeclareLaunchArgument calls by argument name."""
        gld = _function(self.tree, "generate_launch_description")
        return {ast.literal_eval(c.args[0]): c for c in ast.walk(gld)
                if isinstance(c, ast.Call) and _call_name(c) == "DeclareLaunchArgument"}

    def default(self, argument: str) -> str:
        return ast.literal_eval({k.arg: k.value for k in self.arguments()[argument].keywords}["default_value"])


def _launch(path: Path) -> Launch:
    tree = _tree(path)
    constants = _constants(tree)
    fn = _opaque_function(tree)
    assignments = {s.targets[0].id: s.value for s in ast.walk(fn)
                   if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)}
    return Launch(tree, fn, _node_calls(fn, constants), constants, assignments)


@pytest.fixture(params=NODE_LAUNCH_FILES, ids=lambda p: p.name)
def launch_file(request: pytest.FixtureRequest) -> Path:
    return request.param


def test_the_launch_files_are_the_documented_three():
    assert [p.name for p in LAUNCH_FILES] == ["follow.launch.py", "sim.launch.py", "snake.launch.py"]


def test_nodes_are_built_only_after_everything_is_resolved(launch_file):
    launch = _launch(launch_file)
    gld = _function(launch.tree, "generate_launch_description")
    assert not [c for c in ast.walk(gld) if isinstance(c, ast.Call) and _call_name(c) == "Node"], (
        "Nodes only inside the OpaqueFunction")
    assert launch.calls
    first_node = launch.calls[0].lineno
    resolving = [n for n in ast.walk(launch.fn) if isinstance(n, ast.Call) and _call_name(n) in _RESOLVING_CALLS]
    assert {"load_robot", "robot_to_urdf", "package_installed", "get_package_share_directory"} <= {
        _call_name(c) for c in resolving}
    for call in resolving:
        assert call.lineno < first_node, f"{launch_file.name}:{call.lineno}: {_call_name(call)}() after a Node"
    for stmt in ast.walk(launch.fn):
        if isinstance(stmt, ast.Raise):
            assert stmt.lineno < first_node, f"{launch_file.name}:{stmt.lineno}: can fail after a Node was built"
    # Nothing is read from share/urdf: the URDF is generated from the robot YAML.
    assert not [c for c in ast.walk(launch.tree) if isinstance(c, ast.Call) and _call_name(c) == "open"]


def test_robot_state_publisher_is_optional_and_checked_before_any_node(launch_file):
    launch = _launch(launch_file)
    checks = [c for c in ast.walk(launch.fn) if isinstance(c, ast.Call) and _call_name(c) == "package_installed"]
    checked_packages = [_value(c.args[0], launch.constants) for c in checks]
    assert checked_packages[0] == OPTIONAL_PACKAGE and set(checked_packages[1:]) <= {VIEWER}
    # The check (shared by the launch files) tells an absent package from any other failure.
    checker = _function(_tree(LAUNCH_SUPPORT), "package_installed")
    handlers = [h for h in ast.walk(checker) if isinstance(h, ast.ExceptHandler)]
    assert [ast.unparse(h.type) for h in handlers if h.type] == ["PackageNotFoundError"]
    rsp = [c for c in launch.calls if c.package == OPTIONAL_PACKAGE]
    assert len(rsp) == 1
    # Started only when installed: the call sits under an `if` naming the check's result.
    checked = next(name for name, value in launch.assignments.items()
                   if isinstance(value, ast.Call) and _call_name(value) == "package_installed"
                   and _value(value.args[0], launch.constants) == OPTIONAL_PACKAGE)
    assert any(checked in ast.unparse(g) for g in rsp[0].guards)
    # It comes first and the gait last: what drives the robot is the last thing started.
    assert launch.calls[0].package == OPTIONAL_PACKAGE
    assert launch.calls[-1].executable == "gait_node"
    # robot_state_publisher:=true turns a missing package into a refusal before any Node.
    assert launch.default("robot_state_publisher") == "auto"
    refusals = [s for s in ast.walk(launch.fn) if isinstance(s, ast.If) and checked in ast.unparse(s.test)
                and any(isinstance(b, ast.Raise) for b in s.body)]
    assert refusals and all(r.lineno < launch.calls[0].lineno for r in refusals)


def test_every_launch_configuration_is_a_declared_argument(launch_file):
    launch = _launch(launch_file)
    used = {ast.literal_eval(c.args[0]) for c in ast.walk(launch.fn)
            if isinstance(c, ast.Call) and _call_name(c) == "LaunchConfiguration"}
    declared = launch.arguments()
    assert used == set(declared)
    for name, call in declared.items():
        assert {k.arg for k in call.keywords} >= {"default_value", "description"}, name


def test_params_come_from_the_installed_node_file_then_declared_overrides(launch_file):
    launch = _launch(launch_file)
    for call in launch.calls:
        if call.package != "snake_ros" or call.executable == ONE_PROCESS:
            continue  # the one-process entry point has its own check
        assert call.name == call.executable, f"{call.executable}: node name = executable (its params block key)"
        assert len(call.parameters) == 2, f"{call.executable}: params file, then overrides"
        source = call.parameters[0]
        assert isinstance(source, ast.Name)
        join = launch.assignments[source.id]
        assert isinstance(join, ast.Call) and ast.unparse(join.func) == "os.path.join"
        assert ast.unparse(join.args[0]) == "share" and ast.literal_eval(join.args[1]) == "config"
        shipped = ROOT / "config" / ast.literal_eval(join.args[2])
        data = yaml.safe_load(shipped.read_text())
        key = f"/**/{call.name}"
        assert key in data, f"{shipped.name}: no {key} block"
        declared = set(data[key]["ros__parameters"]) | {"use_sim_time"}
        overrides = set(launch.override_items(call)) | launch.conditional_overrides(call)
        unknown = overrides - declared
        assert not unknown, f"{call.executable}: overrides {sorted(unknown)} are not in {shipped.name}"
        assert "robot" in overrides


def _use_sim_time(launch: Launch, executable: str) -> str:
    """``use_sim_time`` of a Node as source text (every Node states it)."""
    items = launch.override_items(launch.node(executable))
    assert "use_sim_time" in items, f"{executable}: use_sim_time not stated"
    return ast.unparse(items["use_sim_time"])


def test_use_sim_time_goes_only_to_nodes_that_run_on_the_clock():
    snake = _launch(ROOT / "launch" / "snake.launch.py")
    assert _use_sim_time(snake, "bridge_node") == "False"  # hardware runs on the wall clock, always
    assert _use_sim_time(snake, "gait_node") == "use_sim_time"
    assert _use_sim_time(snake, OPTIONAL_PACKAGE) == "use_sim_time"
    assert snake.default("use_sim_time") == "false"

    sim = _launch(ROOT / "launch" / "sim.launch.py")
    assert _use_sim_time(sim, "twin_node") == "False"  # the twin publishes /clock
    assert _use_sim_time(sim, "gait_node") == "True"
    assert _use_sim_time(sim, OPTIONAL_PACKAGE) == "True"


def test_one_process_runs_the_same_nodes_with_the_same_files_and_overrides():
    """``one_process:=true`` (the default; false: a process per node): one robot_stack Node, unnamed (a name
    would rename every node of the process), given each separate Node's params file and, per node, that
    Node's own overrides."""
    launch = _launch(ROOT / "launch" / "snake.launch.py")
    assert launch.default("one_process") == "true"
    stacks = [c for c in launch.calls if c.executable == ONE_PROCESS]
    assert len(stacks) == 1 and stacks[0].name is None
    stack = stacks[0]
    assert any(ast.unparse(g) == "one_process" for g in stack.guards)
    # the bench robot stands in for the hardware: always a process of its own, never in the stack
    separate = [c for c in launch.calls
                if c.package == "snake_ros" and c.executable not in (ONE_PROCESS, "bench_robot")]
    assert [ast.unparse(c.parameters[0]) for c in separate] == [ast.unparse(p) for p in stack.parameters[:-1]]
    per_node = launch.assignments[ast.unparse(stack.parameters[-1])]
    assert isinstance(per_node, ast.IfExp) and ast.unparse(per_node.test) == "one_process"
    call = per_node.body
    assert isinstance(call, ast.Call) and _call_name(call) == "node_overrides_file"
    blocks = call.args[0]
    assert isinstance(blocks, ast.Dict)
    given = {ast.literal_eval(k): ast.unparse(v) for k, v in zip(blocks.keys, blocks.values, strict=True) if k}
    assert given == {c.executable: ast.unparse(c.parameters[-1]) for c in separate}
    node = next(n for n in ast.walk(launch.fn) if isinstance(n, ast.Call) and _call_name(n) == "Node"
                and ast.unparse(n).count(ONE_PROCESS))
    arguments = {k.arg: k.value for k in node.keywords}["arguments"]
    nodes_flag = repr(["--nodes", ",".join(c.executable for c in separate)])[1:-1]
    assert ast.unparse(arguments) == f"[{nodes_flag}, '--executor', executor]"
    assert launch.default("executor") == "events"


def test_follow_launch_runs_the_robot_nodes_in_one_process_by_default_after_every_check():
    """follow.launch.py: ``one_process`` (default true) is checked, the stack split off and its overrides file
    written before the first Node; one unnamed robot_stack Node, built from the split, after the other nodes'."""
    path = ROOT / "launch" / "follow.launch.py"
    tree = _tree(path)
    fn = _opaque_function(tree)  # its Nodes are built from specs: walk the calls themselves
    assignments = {ast.unparse(s.targets[0]): s.value for s in ast.walk(fn)
                   if isinstance(s, ast.Assign) and len(s.targets) == 1}
    gld = _function(tree, "generate_launch_description")
    declared = {ast.literal_eval(c.args[0]): {k.arg: k.value for k in c.keywords} for c in ast.walk(gld)
                if isinstance(c, ast.Call) and _call_name(c) == "DeclareLaunchArgument"}
    assert ast.literal_eval(declared["one_process"]["default_value"]) == "true"
    stacked = assignments["stacked"]
    assert isinstance(stacked, ast.Compare) and isinstance(stacked.left, ast.Call)
    assert _call_name(stacked.left) == "choice" and ast.literal_eval(stacked.left.args[0]) == "one_process"
    assert ast.unparse(assignments["(own, stack)"]) == "one_process(specs) if stacked else (specs, None)"
    nodes = sorted((c for c in ast.walk(fn) if isinstance(c, ast.Call) and _call_name(c) == "Node"),
                   key=lambda c: c.lineno)
    kws = [{k.arg: ast.unparse(k.value) for k in c.keywords} for c in nodes]
    stacks = [(c, kw) for c, kw in zip(nodes, kws, strict=True) if kw["executable"] == repr(ONE_PROCESS)]
    assert len(stacks) == 1
    stack, kw = stacks[0]
    assert "name" not in kw  # a name would rename every node of the process
    guards = [s.test for s in ast.walk(fn) if isinstance(s, ast.If) and stack in list(ast.walk(s))]
    assert [ast.unparse(g) for g in guards] == ["stack is not None"]
    own = [k for k in kws if k["package"] == "'snake_ros'" and k is not kw]
    assert len(own) == 1 and own[0]["executable"] == "spec.executable"  # the loop over the processes of their own
    assert all(c.lineno < stack.lineno for c, k in zip(nodes, kws, strict=True) if k in own)  # the stack last
    assert kw["arguments"] == "[*stack.arguments, '--executor', executor]"
    assert kw["remappings"] == "list(stack.remappings)"
    assert kw["parameters"] == "[*stack_files, stack_overrides]" and kw["ros_arguments"] == "ros_arguments"
    assert ast.unparse(assignments["stack_overrides"]) == "node_overrides_file(stack.overrides)"
    # everything that resolves or can fail comes before the first Node, as in the other launch files
    first_node = nodes[0].lineno
    for call in ast.walk(fn):
        if isinstance(call, ast.Call) and _call_name(call) in _RESOLVING_CALLS | {"one_process", "follow_nodes"}:
            assert call.lineno < first_node, f"{path.name}:{call.lineno}: {_call_name(call)}() after a Node"
        if isinstance(call, ast.Raise):
            assert call.lineno < first_node, f"{path.name}:{call.lineno}: can fail after a Node was built"


def test_port_defaults_to_the_robot_yaml():
    launch = _launch(ROOT / "launch" / "snake.launch.py")
    assert launch.default("port") == ""
    bridge = launch.node("bridge_node")
    assert "port" not in launch.override_items(bridge), "an unconditional port overrides the YAML"
    assert launch.conditional_overrides(bridge) == {"port"}
    sets_port = [s for s in ast.walk(launch.fn) if isinstance(s, ast.If) and ast.unparse(s.test) == "port"
                 and "['port'] = port" in ast.unparse(s)]
    assert sets_port, "the port is passed only when given"
    shipped = yaml.safe_load((ROOT / "config" / "bridge.yaml").read_text())
    assert shipped["/**/bridge_node"]["ros__parameters"]["port"] == ""  # "" = the robot YAML's bus.port


def test_lockstep_mode_primes_the_twin():
    launch = _launch(ROOT / "launch" / "sim.launch.py")
    assert "lockstep" in launch.constants["_MODES"]
    twin = launch.override_items(launch.node("twin_node"))
    assert ast.unparse(twin["lockstep_prime"]) == "mode == 'lockstep'"
    assert ast.unparse(twin["mode"]) == "mode"
    mode = launch.assignments["mode"]  # checked against the choices before use
    assert isinstance(mode, ast.Call) and _call_name(mode) == "choice" and ast.unparse(mode.args[2]) == "_MODES"


def test_robot_argument_is_a_name_or_a_yaml_path(launch_file):
    launch = _launch(launch_file)
    robot = launch.assignments["robot"]
    assert isinstance(robot, ast.Call) and _call_name(robot) == "absolute_if_path"
    assert ast.unparse(launch.assignments["robot_description"]) == "robot_to_urdf(load_robot(robot))"
    for call in launch.calls:
        if call.package == VIEWER or call.executable == ONE_PROCESS:
            continue  # the one-process Node passes on the separate Nodes' overrides (checked on its own)
        key = "robot_description" if call.package == OPTIONAL_PACKAGE else "robot"
        assert ast.unparse(launch.override_items(call)[key]) == key


def test_params_files_are_ros_parameters_files_keyed_for_any_namespace():
    params_files = sorted((ROOT / "config").glob("*.yaml"))
    assert params_files
    for path in params_files:
        data = yaml.safe_load(path.read_text())
        assert isinstance(data, dict) and data, path.name
        for key, block in data.items():
            assert key.startswith("/**/") and key.count("/") == 2, f"{path.name}: {key}: use /**/<node>:"
            assert list(block) == ["ros__parameters"], f"{path.name}: {key}"
    # Everything else (robots, worlds, calibration, experiments) is not a params file.
    def keys(node: object) -> set[str]:
        if isinstance(node, dict):
            return set(map(str, node)).union(*(keys(v) for v in node.values()))
        if isinstance(node, list):
            return set().union(*(keys(v) for v in node))
        return set()

    for path in sorted((ROOT / "config").rglob("*.yaml")):
        if path.parent != ROOT / "config":
            assert "ros__parameters" not in keys(yaml.safe_load(path.read_text())), path.relative_to(ROOT)


@pytest.mark.graph
def test_a_params_file_reaches_a_node_in_a_namespace(ros, tmp_path):
    """rcl applies the ``/**/gait_node`` block to ``/robot1/gait_node`` (a bare key would be dropped)."""
    from rcl_interfaces.srv import GetParameters

    data = yaml.safe_load((ROOT / "config" / "gait_node.yaml").read_text())
    block = data["/**/gait_node"]["ros__parameters"]
    changed = round(block["max_linear"] / 2, 4)
    block["max_linear"] = changed
    params = tmp_path / "gait_node.yaml"
    params.write_text(yaml.safe_dump(data))
    node = ros.start("gait_node", extra_args=["-r", "__ns:=/robot1", "--params-file", str(params)])
    client = ros.node.create_client(GetParameters, "/robot1/gait_node/get_parameters")
    # The bounds only catch a node that never answers (start-up imports are slow on a loaded machine).
    assert ros.spin_until(lambda: client.service_is_ready() or node.poll() is not None, 60.0), ros.log_of(node)
    assert node.poll() is None, ros.log_of(node)
    # A ready service may still drop its first answer: its response writer can match the client's
    # reader after the request arrived (rmw: "failed to send response"). The read is asked again
    # until answered; it changes nothing, so asking twice is harmless.
    futures = []

    def answered() -> bool:
        if not futures or not ros.spin_until(futures[-1].done, 5.0):
            futures.append(client.call_async(GetParameters.Request(names=["max_linear"])))
        return any(f.done() for f in futures)

    assert ros.spin_until(answered, 120.0), ros.log_of(node)
    result = next(f for f in futures if f.done()).result()
    assert result.values[0].double_value == pytest.approx(changed)


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_every_node_takes_the_enclave_argument(path):
    """``enclave`` (default '') reaches every Node as ``ros_arguments``, resolved and checked before any Node."""
    tree = _tree(path)
    fn = _opaque_function(tree)  # follow.launch.py builds its Nodes from specs: walk the calls themselves
    gld = _function(tree, "generate_launch_description")
    declared = {ast.literal_eval(c.args[0]): {k.arg: k.value for k in c.keywords} for c in ast.walk(gld)
                if isinstance(c, ast.Call) and _call_name(c) == "DeclareLaunchArgument"}
    assert ast.literal_eval(declared["enclave"]["default_value"]) == ""
    sources = [s.value for s in ast.walk(fn) if isinstance(s, ast.Assign) and len(s.targets) == 1
               and isinstance(s.targets[0], ast.Name) and s.targets[0].id == "ros_arguments"]
    assert len(sources) == 1 and ast.unparse(sources[0]) == (
        "enclave_arguments(LaunchConfiguration('enclave').perform(context))")
    source = sources[0]
    nodes = [c for c in ast.walk(fn) if isinstance(c, ast.Call) and _call_name(c) == "Node"]
    assert nodes
    for node in nodes:
        kw = {k.arg: k.value for k in node.keywords}
        assert "ros_arguments" in kw, f"{path.name}:{node.lineno}: a Node without the enclave"
        assert ast.unparse(kw["ros_arguments"]) == "ros_arguments", f"{path.name}:{node.lineno}"
        assert source.lineno < node.lineno


def test_enclave_arguments_only_when_given_and_only_a_fully_qualified_name():
    from snake_ros.launch_support import enclave_arguments

    assert enclave_arguments("") is None  # no --ros-args at all
    assert enclave_arguments("/snake") == ["--enclave", "/snake"]
    assert enclave_arguments("/lab/snake_1") == ["--enclave", "/lab/snake_1"]
    for bad in ("snake", "/snake/", "//snake", "/1snake", "/sna ke", "/snake-1"):
        with pytest.raises(ValueError, match=f"enclave:={bad!r}"):
            enclave_arguments(bad)


def test_launch_files_import_only_declared_dependencies():
    """Every package a launch file imports (but the standard library) is an exec_depend of snake_ros."""
    root = ET.parse(ROOT / "src" / "snake_ros" / "package.xml").getroot()
    declared = {e.text for e in root.findall("exec_depend")}
    assert {"launch", "launch_ros", "ament_index_python", "snake_core"} <= declared
    allowed = declared | {"__future__", "os", "snake_ros"}  # snake_ros: the package the launch files belong to
    for path in LAUNCH_FILES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] in allowed, f"{path.name}: {node.module}"
            elif isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] in allowed for a in node.names), path.name


_LAUNCH_SIGTERM_DEFAULT_S = 5.0  # launch's own sigterm_timeout when nothing sets it


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_sigterm_timeout_leaves_room_for_the_safe_exit(path):
    from snake_hardware.dynamixel import transactions
    from snake_ros import launch_support, runtime

    gld = _function(_tree(path), "generate_launch_description")
    sets = [c for c in ast.walk(gld) if isinstance(c, ast.Call) and _call_name(c) == "SetLaunchConfiguration"]
    assert [ast.unparse(c) for c in sets] == ["SetLaunchConfiguration('sigterm_timeout', SIGTERM_TIMEOUT_S)"]
    # The parts of a safe exit that have a bound: the next signal check, the bridge's torque
    # off read back (retries + 1) times with (retries + 1) attempts each on a failing bus (read
    # timeout at the shipped 1 ms latency: 2 * 1 + 2 ms, plus the longest drain), and the wait
    # for acknowledgements. The rest (teardown) is load: at least 3 x the bounded part.
    shipped = yaml.safe_load((ROOT / "config" / "bridge.yaml").read_text())["/**/bridge_node"]["ros__parameters"]
    attempts = shipped["retries"] + 1
    torque_off_s = attempts * attempts * ((2 * shipped["latency_ms"] + 2) / 1000 + transactions._DRAIN_MAX_S)
    bounded_s = runtime._SIGNAL_POLL_S + torque_off_s + runtime._EXIT_ACK_S
    timeout_s = float(launch_support.SIGTERM_TIMEOUT_S)
    assert timeout_s > _LAUNCH_SIGTERM_DEFAULT_S and timeout_s >= 3 * bounded_s
