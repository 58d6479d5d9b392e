"""Every node's parameters: one table each, enforced at start-up, shipped files and docs in sync.

Start-up errors are checked by running the real node executables: a bad value, an
unknown name or a bad params file must give exit code 2 and exactly one line that
names the parameter (or the file and field), never a traceback.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from snake_ros.parameter_docs import NODE_MODULES, markdown, tables

EXECUTABLES = {  # node name -> console script
    "gait_node": "gait_node", "bridge_node": "bridge_node", "twin_node": "twin_node",
    "planner_node": "planner_node", "path_follower": "path_follower",
    "singularity_monitor": "singularity_monitor", "slippage_monitor": "slippage_monitor", "bench_robot": "bench_robot",
}
TABLES = {t.node_name: t for t in tables()}


def _exe(name: str) -> str:
    return shutil.which(name) or str(Path(sys.executable).parent / name)


def _run(executable: str, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_exe(executable), *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, check=False)


def _lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]


def test_every_node_module_has_one_table() -> None:
    assert [t.node_name for t in tables()] == list(EXECUTABLES)
    assert len(NODE_MODULES) == len(EXECUTABLES)


@pytest.mark.parametrize("node", list(EXECUTABLES))
def test_help_prints_every_parameter_with_its_default_and_starts_nothing(node: str) -> None:
    proc = _run(EXECUTABLES[node], "--help")
    assert proc.returncode == 0, proc.stderr
    for p in TABLES[node].params:
        line = next((ln for ln in proc.stdout.splitlines() if ln.strip().startswith(p.name + " ")), None)
        assert line is not None and "default" in line, (p.name, proc.stdout)
    assert "[INFO]" not in proc.stdout + proc.stderr  # the node was not started


def _params_blocks(repo_root: Path) -> list[tuple[Path, str, dict[str, Any]]]:
    blocks = []
    for path in sorted((repo_root / "config").rglob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if not isinstance(data, dict):
            continue
        for key, block in data.items():
            if isinstance(block, dict) and "ros__parameters" in block:
                blocks.append((path, str(key), block["ros__parameters"]))
    return blocks


def test_every_shipped_params_file_matches_the_tables(repo_root: Path) -> None:
    blocks = _params_blocks(repo_root)
    assert {key.strip("/").rsplit("/", 1)[-1] for _, key, _ in blocks} == set(TABLES)  # one for every node
    for path, key, values in blocks:
        node = key.strip("/").rsplit("/", 1)[-1]
        assert node in TABLES, f"{path}: block {key} is for no node of the stack"
        assert TABLES[node].check_file_values(values) == [], f"{path}: {key}"


def test_docs_parameters_page_is_generated_from_the_tables(repo_root: Path) -> None:
    page = (repo_root / "docs" / "parameters.md").read_text()
    assert page == markdown(), "regenerate: python -m snake_ros.parameter_docs > docs/parameters.md"


BAD_PARAMETERS = [
    # node, -p override, the name the one line must contain
    ("gait_node", "rate_hz:=50.0", "rate_hz"),                  # double for an integer
    ("gait_node", "max_linear:=-1.0", "max_linear"),           # below its range
    ("gait_node", "max_linar:=0.1", "max_linear"),             # typo: suggested name
    ("gait_node", "gait:=rollin", "rolling"),                  # not a choice: suggested
    ("twin_node", "speed_factor:=fast", "speed_factor"),       # string for a double
    ("twin_node", "mode:=warp", "mode"),
    ("planner_node", "arena:=[1.0,0.0,0.0,1.0]", "arena"),     # inverted box
    ("planner_node", "dfs_links:=1", "dfs_links"),
    ("path_follower", "output:=twist", "output"),
    ("path_follower", "kp:=-1.0", "kp"),
    ("singularity_monitor", "error_margin:=0.5", "error_margin"),  # above warn_margin
    ("slippage_monitor", "scenario:=4", "scenario"),
    ("slippage_monitor", "input_mode:=guess", "input_mode"),
    ("bridge_node", "watchdog_s:=5.0", "watchdog_s"),
    ("bridge_node", "backend:=mujoco", "backend"),
]


@pytest.mark.parametrize(("node", "override", "named"), BAD_PARAMETERS)
def test_a_bad_parameter_exits_2_with_one_line_naming_it(node: str, override: str, named: str) -> None:
    proc = _run(EXECUTABLES[node], "--ros-args", "-p", override)
    lines = _lines(proc)
    assert proc.returncode == 2, lines
    assert len(lines) == 1 and named in lines[0], lines
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("overrides", [("auto_arm:=true", "auto_arm:=flase"),
                                       ("auto_arm:=yes_please", "auto_arm:=true"),
                                       ("auto_arm:=true", "auto_arm:=false", "auto_arm:=1")])
def test_every_occurrence_of_a_repeated_override_is_checked(overrides: tuple[str, ...]) -> None:
    """rcl keeps one value of a repeated ``-p``: a bad one before or after a good one still stops the node."""
    args = [arg for o in overrides for arg in ("-p", o)]
    proc = _run("bridge_node", "--ros-args", "-p", "backend:=emulated", *args)
    lines = _lines(proc)
    assert proc.returncode == 2, lines
    assert len(lines) == 1 and "auto_arm" in lines[0], lines
    assert "ARMING" not in proc.stdout + proc.stderr   # nothing was armed (nothing was built)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(text)
    return path


BAD_FILES = [
    # params-file text (None: the file does not exist), what the one line must contain
    (None, "cannot read"),
    ("/**/gait_node:\n  ros__parameters:\n    rate_hz: [1\n", "not valid YAML"),
    ("gait_nod:\n  ros__parameters:\n    rate_hz: 50\n", "gait_node"),            # misspelled node block
    ("/**/gait_node:\n  ros__parameters:\n    max_linar: 0.1\n", "max_linear"),   # typo key in the block
    ("/**/gait_node:\n  ros__parameters:\n    rate_hz: 50.0\n", "rate_hz"),        # wrong type in the block
    ("/**/gait_node:\n  max_linear: 0.1\n", "ros__parameters"),                     # not a params file
]


@pytest.mark.parametrize(("text", "named"), BAD_FILES)
def test_a_bad_params_file_exits_2_with_one_line_naming_file_and_field(tmp_path: Path, text: str | None,
                                                                        named: str) -> None:
    path = _write(tmp_path, text) if text is not None else tmp_path / "missing.yaml"
    proc = _run("gait_node", "--ros-args", "--params-file", str(path))
    lines = _lines(proc)
    assert proc.returncode == 2, lines
    assert len(lines) == 1 and str(path) in lines[0] and named in lines[0], lines
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------- one params file for the whole robot
def test_a_near_miss_of_the_own_name_is_flagged_and_a_sibling_is_not() -> None:
    from snake_ros.parameters import misnamed_block

    problem = misnamed_block("/**/gait_nod", "gait_node")
    assert problem is not None and "gait_node" in problem
    assert misnamed_block("gait-node", "gait_node") is not None
    for sibling in ("/**/bridge_node", "twin_node", "/robot1/slippage_monitor", "/**/robot_state_publisher"):
        assert misnamed_block(sibling, "gait_node") is None, sibling
    assert misnamed_block("/**", "gait_node") is None
    assert misnamed_block("/**/gait_node", "gait_node") is None
    # Closer to another node of the stack than to this one: that node reports it, this one runs.
    assert misnamed_block("/**/bridge_nod", "gait_node") is None
    assert misnamed_block("/**/bridge_nod", "bridge_node") is not None
    # A name far from every node (another lab's node) is nobody's typo.
    assert misnamed_block("/**/vrpn_client_node", "gait_node") is None


def test_the_known_node_names_are_the_stacks_nodes() -> None:
    """Every node with a table, and every node a launch file names, is a known node (and nothing else)."""
    from snake_ros.parameters import STACK_NODE_NAMES

    root = Path(__file__).resolve().parents[3]
    launched = set()
    for path in (root / "launch").glob("*.launch.py"):
        text = path.read_text()
        launched |= {name for name in STACK_NODE_NAMES | set(TABLES) if f'"{name}"' in text}
    assert set(TABLES) <= STACK_NODE_NAMES
    assert STACK_NODE_NAMES - set(TABLES) == {"robot_state_publisher"}
    assert "robot_state_publisher" in launched


def _combo(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A whole-robot params file: the shipped gait and bridge blocks, gait's limits changed, plus a wildcard."""
    root = Path(__file__).resolve().parents[3]
    data: dict[str, Any] = {"/**": {"ros__parameters": {"use_sim_time": False}}}
    for name in ("bridge", "gait_node"):
        data.update(yaml.safe_load((root / "config" / f"{name}.yaml").read_text()))
    gait = data["/**/gait_node"]["ros__parameters"]
    gait["max_linear"] = round(gait["max_linear"] / 2, 4)
    gait["max_angular"] = round(gait["max_angular"] / 4, 4)
    assert "/**/bridge_node" in data and "max_linear" not in data["/**/bridge_node"]["ros__parameters"]
    path = tmp_path / "combo.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, gait


def test_each_node_reads_its_own_block_of_a_whole_robot_file(tmp_path: Path) -> None:
    from snake_ros.parameters import read_params_file

    path, gait = _combo(tmp_path)
    data = yaml.safe_load(path.read_text())
    assert read_params_file(path, TABLES["gait_node"]) == {"use_sim_time": False, **gait}
    assert read_params_file(path, TABLES["bridge_node"]) == {
        "use_sim_time": False, **data["/**/bridge_node"]["ros__parameters"]}
    assert read_params_file(path, TABLES["slippage_monitor"]) == {"use_sim_time": False}


def test_an_unknown_key_in_the_own_block_of_a_whole_robot_file_is_still_refused(tmp_path: Path) -> None:
    from snake_ros.parameters import ParameterError, read_params_file

    path, _ = _combo(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["/**/gait_node"]["ros__parameters"]["max_linar"] = 0.1
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ParameterError, match=r"max_linar.*max_linear"):
        read_params_file(path, TABLES["gait_node"])
    read_params_file(path, TABLES["bridge_node"])  # not the bridge's block: its problem is the gait node's


@pytest.mark.graph
def test_gait_node_runs_with_its_own_block_of_a_whole_robot_file(ros: Any, tmp_path: Path) -> None:
    from rcl_interfaces.srv import GetParameters

    path, gait = _combo(tmp_path)
    node = ros.start("gait_node", extra_args=["--params-file", str(path)])
    client = ros.node.create_client(GetParameters, "/gait_node/get_parameters")
    # The bound only catches a node that never answers (start-up imports are slow on a loaded machine).
    assert ros.spin_until(lambda: client.service_is_ready() or node.poll() is not None, 60.0), ros.log_of(node)
    assert node.poll() is None, ros.log_of(node)
    names = ["max_linear", "max_angular"]
    answer = ros.call(GetParameters, "/gait_node/get_parameters", GetParameters.Request(names=names))
    assert answer is not None, ros.log_of(node)
    got = [v.double_value for v in answer.response.values]
    assert got == [pytest.approx(gait[n]) for n in names]
    assert got != [pytest.approx(TABLES["gait_node"][n].default) for n in names]


@pytest.mark.parametrize("node", ["gait_node", "slippage_monitor"])
def test_help_into_a_closed_pipe_ends_without_a_traceback(node: str) -> None:
    """``<node> --help | head -1``: stdout's reader is gone before the help is written (EPIPE every time)."""
    proc = subprocess.Popen([_exe(node), "--help"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()  # the only reader
    _, err = proc.communicate(timeout=120)
    text = err.decode(errors="replace")
    assert "Traceback" not in text and "BrokenPipe" not in text and "Broken pipe" not in text, text
    assert proc.returncode == 1, text
