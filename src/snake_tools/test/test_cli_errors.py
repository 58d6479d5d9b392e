"""User errors of every ``snake`` command: one line on stderr, exit 2, never a traceback.

Also: the follow experiment's settings file is strict, every command's ``--help`` shows
the defaults, and a real bug still raises (its traceback is not hidden).
"""

from __future__ import annotations

import argparse
import copy
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from snake_core.config_files import config_dir
from snake_core.errors import ConfigError
from snake_core.robot import resolve_robot_path
from snake_tools.cli import build_parser, main
from snake_tools.command import snake_command
from snake_tools.experiment import follow


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """Bad files of each kind, each one fault away from a shipped file."""
    robot = yaml.safe_load(resolve_robot_path("tsnake").read_text())
    robot["joints"][3]["directon"] = -1
    (tmp_path / "typo_robot.yaml").write_text(yaml.safe_dump(robot, sort_keys=False))
    robot = yaml.safe_load(resolve_robot_path("tsnake").read_text())
    robot["joints"][2]["registers"] = {"position_p_gain": -5}
    (tmp_path / "register_robot.yaml").write_text(yaml.safe_dump(robot, sort_keys=False))
    (tmp_path / "syntax.yaml").write_text("name: x\n  kind: [\n")
    world = yaml.safe_load((config_dir() / "worlds" / "flat.yaml").read_text())
    world["spwan"] = world.pop("spawn")
    (tmp_path / "spwan_world.yaml").write_text(yaml.safe_dump(world))
    studies = (config_dir() / "experiments" / "slippage_case_studies.yaml").read_text()
    studies = studies.replace("  kappa: 100.0", "  kapa: 100.0")
    (tmp_path / "studies.yaml").write_text(studies)
    settings = yaml.safe_load((config_dir() / "experiments" / "follow_experiment.yaml").read_text())
    settings["robots"]["tsnake"]["time_limt"] = settings["robots"]["tsnake"].pop("time_limit")
    (tmp_path / "follow.yaml").write_text(yaml.safe_dump(settings))
    return {p.stem: p for p in tmp_path.glob("*.yaml")} | {"dir": tmp_path, "absent": tmp_path / "absent.yaml"}


# argv (with {placeholders} filled from ``files``) and a fragment the one line must contain.
_BAD_INVOCATIONS: list[tuple[list[str], str]] = [
    ([], "required: COMMAND"),
    (["nosuchcommand"], "invalid choice"),
    (["experiment"], "required: EXPERIMENT"),
    (["experiment", "motion-modes", "--duration", "0"], "--duration"),
    (["experiment", "motion-modes", "--duration", "-1"], "--duration"),
    (["experiment", "motion-modes", "--duration", "nan"], "--duration"),
    (["experiment", "phase-reset", "--duration", "ten"], "--duration"),
    (["experiment", "calibrate", "--duration", "-5"], "--duration"),
    (["experiment", "tsnake-benchmark", "--terrains", "moon"], "--terrains"),
    (["experiment", "tsnake-benchmark", "--repeats", "0"], "--repeats"),
    (["experiment", "follow", "--config", "{typo_robot}"], "name: unknown key"),
    (["experiment", "follow", "--config", "{follow}"], "did you mean `time_limit`?"),
    (["experiment", "follow", "--config", "{absent}"], "absent.yaml"),
    (["experiment", "follow", "--config", "{syntax}"], "YAML error"),
    (["experiment", "follow", "--trials", "0"], "--trials"),
    (["experiment", "follow", "--seed", "-1"], "--seed"),
    (["experiment", "follow", "--robot", "hexapod"], "--robot"),
    (["gait", "--gait", "hopping"], "--gait"),
    (["gait", "--duration", "0"], "--duration"),
    (["gait", "--dt", "inf"], "--dt"),
    (["gait", "--omega-h", "fast"], "--omega-h"),
    (["gait", "--robot", "{typo_robot}"], "did you mean `direction`?"),
    (["urdf", "--robot", "{register_robot}"], "joints[2].registers.position_p_gain: must be an integer in [0, 16383]"),
    (["gait", "--robot", "nosuchrobot"], "nosuchrobot"),
    (["urdf", "--robot", "{syntax}"], "line 2"),
    (["urdf", "--robot", "{dir}"], "robot"),
    (["urdf", "--out", "{absent}/sub/tsnake.urdf"], "tsnake.urdf"),
    (["sim-model", "--world", "{spwan_world}"], "did you mean `spawn`?"),
    (["sim-model", "--rtf", "-1"], "--rtf"),
    (["simulate-viscous", "--links", "1"], "--links"),
    (["simulate-viscous", "--seeds", "0"], "--seeds"),
    (["simulate-viscous", "--sweep", "1,x"], "--sweep"),
    (["singularity", "evaluate", "--angles", "0.1", "--d", "-0.1", "--l", "0.1"], "--d"),
    (["singularity", "evaluate", "--angles", "0.1", "0.2"], "required"),
    (["singularity", "sweep", "--out", "{dir}", "--points", "1"], "--points"),
    (["slippage", "evaluate", "--q-deg", "10", "20", "--config", "{studies}"], "did you mean `kappa`?"),
    (["slippage", "evaluate", "--q-deg", "10", "20", "--case-study", "case_study_9"], "case_study_9"),
    (["slippage", "evaluate", "--q-deg", "10", "20", "--scenario", "4"], "--scenario"),
    (["slippage", "case-study-1", "--workers", "0"], "--workers"),
    (["slippage", "case-study-2", "--step-deg", "0"], "--step-deg"),
    (["servo-emulator", "--model", "XM999"], "--model"),
    (["servo-emulator", "--ids", "1-x"], "--ids"),
    (["servo-emulator", "--duration", "-1"], "--duration"),
    (["demo", "--speed-factor", "50"], "--speed-factor"),
    (["demo", "--world", "{spwan_world}"], "did you mean `spawn`?"),
    (["experiment", "phase-reset", "--world", "{syntax}"], "YAML error"),
    (["experiment", "tsnake-benchmark", "--feature-length", "0"], "--feature-length"),
    (["bench", "sim", "--repeats", "0"], "--repeats"),
    (["bench", "gait", "--steps", "-3"], "--steps"),
    (["bench", "bridge", "--cycles", "5"], "--cycles"),
    (["bench", "plan", "--sim-seconds", "0"], "--sim-seconds"),
    (["bench", "singularity", "--evals", "0"], "--evals"),
    (["bench", "slippage", "--workers", "0"], "--workers"),
]


def _fill(argv: list[str], files: dict[str, Path]) -> list[str]:
    return [a.format(**files) for a in argv]


@pytest.mark.parametrize(("argv", "fragment"), _BAD_INVOCATIONS, ids=[" ".join(a) or "<none>" for a, _ in
                                                                       _BAD_INVOCATIONS])
def test_bad_invocation_is_one_line_and_exit_2(argv: list[str], fragment: str, files: dict[str, Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_fill(argv, files)) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("snake") and ": error: " in lines[0], lines[0]
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in captured.err + captured.out


def _snake(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(snake_command(*argv), capture_output=True, text=True, timeout=300, env=os.environ.copy(),
                          check=False)


def test_contract_unknown_robot_key_makes_snake_urdf_exit_2_with_key_and_suggestion(files: dict[str, Path]) -> None:
    """Interface contract, through the real ``snake`` executable."""
    proc = _snake("urdf", "--robot", str(files["typo_robot"]))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "directon" in lines[0] and "direction" in lines[0] and "typo_robot.yaml" in lines[0]
    assert "joints[3]" in lines[0] and "m2_dorsal" in lines[0]
    assert proc.stdout == ""


@pytest.mark.parametrize(("argv", "fragment"), [
    (["experiment", "motion-modes", "--duration", "0"], "--duration"),
    (["experiment", "follow", "--config", "{follow}"], "time_limt"),
    (["sim-model", "--world", "{spwan_world}"], "spwan"),
    ([], "COMMAND"),
])
def test_real_executable_prints_one_line_no_traceback(argv: list[str], fragment: str, files: dict[str, Path]) -> None:
    proc = _snake(*_fill(argv, files))
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1 and fragment in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_real_bug_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only user errors are turned into one line; anything else propagates."""
    from snake_tools.commands import urdf

    def broken(*_: Any) -> str:
        raise RuntimeError("bug in URDF generation")

    monkeypatch.setattr(urdf, "robot_to_urdf", broken)
    with pytest.raises(RuntimeError, match="bug in URDF generation"):
        main(["urdf"])


def _inverse(x: float) -> float:
    return 1.0 / x


def test_trials_that_raised_end_the_command_with_one_summary_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A command whose executor saw trials raise exits 1 with one line per failed trial and one summary."""
    from snake_tools.commands import urdf
    from snake_tools.experiment.executor import map_trials

    def trials(*_: Any) -> str:
        map_trials(_inverse, [(2.0,), (0.0,), (4.0,)], 1, progress=False)
        return ""

    monkeypatch.setattr(urdf, "robot_to_urdf", trials)
    assert main(["urdf"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert [line for line in err.splitlines() if line] == [
        "trial 1 (0.0,) raised ZeroDivisionError('float division by zero')",
        "snake urdf: error: 1 of 3 trials raised: trial 1 (0.0,): ZeroDivisionError('float division by zero')",
    ]


# --- --help of every command shows its defaults -------------------------------------------
def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[
        tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


_ALL_COMMANDS = list(_commands(build_parser()))


@pytest.mark.parametrize(("path", "parser"), _ALL_COMMANDS, ids=[" ".join(p) or "snake" for p, _ in _ALL_COMMANDS])
def test_help_of_every_command_shows_the_defaults(path: tuple[str, ...], parser: argparse.ArgumentParser,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*path, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert text.startswith("usage: snake")
    for action in parser._actions:
        default = action.default
        if not action.option_strings or default in (None, argparse.SUPPRESS) or isinstance(default, bool):
            continue
        assert action.help, f"{' '.join(path)} {action.option_strings[0]} has no help"
        assert str(default) in text, f"default {default!r} of {action.option_strings[0]} not in the help"


# --- the follow experiment's settings ---------------------------------------------------
def _shipped_settings() -> dict[str, Any]:
    return yaml.safe_load((config_dir() / "experiments" / "follow_experiment.yaml").read_text())


def _rename(keys: tuple[str, ...], new: str) -> Callable[[dict[str, Any]], None]:
    def mutate(d: dict[str, Any]) -> None:
        target = d
        for k in keys[:-1]:
            target = target[k]
        target[new] = target.pop(keys[-1])
    return mutate


def _put(keys: tuple[str, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(d: dict[str, Any]) -> None:
        target = d
        for k in keys[:-1]:
            target = target[k]
        target[keys[-1]] = value
    return mutate


_FOLLOW_CASES: list[tuple[str, Callable[[dict[str, Any]], None], tuple[str, ...]]] = [
    ("time limit typo", _rename(("robots", "tsnake", "time_limit"), "time_limt"),
     ("robots.tsnake.time_limt", "did you mean `time_limit`?")),
    ("preset repeated", _put(("robots", "tsnake", "follower"), {"max_linear": 0.1}),
     ("robots.tsnake.follower: unknown key", "config/robots/tsnake.yaml")),
    ("field typo", _rename(("field", "density"), "densty"), ("field.densty", "did you mean `density`?")),
    ("robot field typo", _rename(("robots", "tsnake", "field", "gap"), "gapp"),
     ("robots.tsnake.field.gapp", "did you mean `gap`?")),
    ("robot name typo", _rename(("robots", "tsnake"), "tsnak"), ("robots.tsnak", "did you mean `tsnake`?")),
    ("top typo", _rename(("robots",), "robot"), ("robot: unknown key", "did you mean `robots`?")),
    ("negative replans", _put(("robots", "tsnake", "max_replans"), -1), ("robots.tsnake.max_replans", ">= 0")),
    ("negative margin", _put(("planner", "margin"), -1.0), ("planner.margin", ">= 0")),
    ("probability above 1", _put(("mocap", "dropout_probability"), 2.0), ("mocap.dropout_probability", "[0, 1)")),
    ("mocap key renamed", _rename(("mocap", "dropout_probability"), "dropout_prob"),
     ("mocap.dropout_prob: unknown key", "did you mean `dropout_probability`?")),
    ("negative jump", _put(("mocap", "outlier_jump_m"), -0.5), ("mocap.outlier_jump_m", ">= 0")),
    ("inverted arena", _put(("field", "arena"), [2.5, -2.5, -1.5, 1.5]), ("field.arena", "increasing")),
    ("short start", _put(("field", "start"), [0.0]), ("field.start", "2 numbers")),
    ("string time limit", _put(("robots", "wheeled_snake", "time_limit"), "long"),
     ("robots.wheeled_snake.time_limit", "'long'")),
    ("zero time limit", _put(("robots", "tsnake", "time_limit"), 0.0), ("robots.tsnake.time_limit", "> 0")),
    ("missing goal", lambda d: d["field"].pop("goal"), ("field.goal: missing",)),
    ("missing time limit", lambda d: d["robots"]["tsnake"].pop("time_limit"), ("robots.tsnake.time_limit: missing",)),
    ("NaN density", _put(("field", "density"), float("nan")), ("field.density", "finite")),
]


@pytest.mark.parametrize(("mutate", "fragments"), [c[1:] for c in _FOLLOW_CASES], ids=[c[0] for c in _FOLLOW_CASES])
def test_bad_follow_settings_fail_in_one_line(tmp_path: Path, mutate: Callable[[dict[str, Any]], None],
                                              fragments: tuple[str, ...]) -> None:
    data = copy.deepcopy(_shipped_settings())
    mutate(data)
    path = tmp_path / "follow.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        follow.load_settings(path)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"{path}: "), msg
    for fragment in fragments:
        assert fragment in msg, f"{fragment!r} not in {msg!r}"


def test_shipped_follow_settings_load_unchanged() -> None:
    loaded, shipped = follow.load_settings(), _shipped_settings()
    assert {k: v for k, v in loaded.items() if k != "robots"} == {k: v for k, v in shipped.items() if k != "robots"}
    presets = {"gait", "drive", "yaw_offset", "reference_offset", "half_width", "follower"}  # from the robot YAMLs
    assert {name: {k: v for k, v in r.items() if k not in presets} for name, r in loaded["robots"].items()} == \
        shipped["robots"]


# --- a reader that closes the pipe early (snake --help | head -1) ---------------------------
@pytest.mark.parametrize("args", [["--help"], ["gait", "--help"], ["gait", "--duration", "0.1", "--json"]])
def test_a_closed_stdout_pipe_ends_the_command_without_a_traceback(args: list[str]) -> None:
    """stdout's reader is gone before anything is written, so every write hits EPIPE (deterministically)."""
    proc = subprocess.Popen(snake_command(*args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()  # the only reader: the process now writes into a pipe nobody reads
    _, err = proc.communicate(timeout=120)
    text = err.decode(errors="replace")
    assert "Traceback" not in text and "BrokenPipe" not in text and "Broken pipe" not in text, text
    # 1: the Python documentation's recipe; 0: argparse's help already swallowed the error. Never 120
    # (the interpreter's own failed final flush).
    assert proc.returncode in (0, 1), text
