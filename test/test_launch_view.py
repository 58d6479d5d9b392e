"""``view:=true`` of every launch file: the live view as a process, off by default (checked on the AST)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and (getattr(n.func, "id", None) == name or getattr(n.func, "attr", None) == name)]


@pytest.mark.parametrize("launch_file", ["sim.launch.py", "snake.launch.py", "follow.launch.py"])
def test_view_argument_starts_snake_view_only_when_true(launch_file: str) -> None:
    tree = ast.parse((ROOT / "launch" / launch_file).read_text())
    declared = {ast.literal_eval(c.args[0]): {k.arg: k.value for k in c.keywords}
                for c in _calls(tree, "DeclareLaunchArgument")}
    assert ast.literal_eval(declared["view"]["default_value"]) == "false"
    (process,) = _calls(tree, "ExecuteProcess")
    cmd = {k.arg: k.value for k in process.keywords}["cmd"]
    assert isinstance(cmd, ast.List) and [ast.literal_eval(e) for e in cmd.elts[:2]] == ["snake", "view"]
    assert "--allow-commands" not in ast.unparse(cmd)       # the launch never opens the command services
    guard = next(n for n in ast.walk(tree) if isinstance(n, ast.If | ast.IfExp)
                 and any(process in ast.walk(b) for b in (n.body if isinstance(n.body, list) else [n.body])))
    assert ast.unparse(guard.test) == "view"
