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
    "singularity_monitor": "singularity_monitor", "slippage_monitor": "slippage_monitor",
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
