"""The ``snake`` CLI imports only the module of the command it runs (start-up time and memory)."""

from __future__ import annotations

import json
import subprocess
import sys

_HEAVY = ("mujoco", "scipy.optimize", "networkx", "optuna", "dask")


def _modules_after(argv: list[str]) -> dict[str, bool]:
    code = ("import json, sys\nfrom snake_tools.cli import main\n"
            f"code = main({argv!r})\n"
            f"print(json.dumps({{'code': code, **{{m: m in sys.modules for m in {_HEAVY!r}}}}}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_light_command_imports_no_simulator_solver_or_cluster():
    got = _modules_after(["reduction", "forward", "--omega-h", "1.0", "--omega-t", "1.0", "--json"])
    assert got.pop("code") == 0
    assert not any(got.values()), got


def test_the_top_level_help_still_lists_every_command(capsys):
    from snake_tools.cli import main

    assert main(["--help"]) == 0
    listed = capsys.readouterr().out
    for command in ("bag", "bench", "experiment", "optimize", "servo-emulator", "sim-model", "twin", "urdf"):
        assert command in listed, command


def _code_and_bench_modules(argv: list[str]) -> tuple[int, list[str]]:
    code = ("import json, sys\nfrom snake_tools.cli import main\n"
            f"code = main({argv!r})\n"
            "print(json.dumps([code, sorted(m for m in sys.modules if m.startswith('snake_tools.bench.'))]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    code_, modules = json.loads(out.stdout.strip().splitlines()[-1])
    return code_, modules


def test_a_benchmark_imports_only_its_own_module_and_the_list_still_shows_them_all():
    import pkgutil

    from snake_tools import bench

    every = sorted(f"snake_tools.bench.{m.name}" for m in pkgutil.iter_modules(bench.__path__)
                   if not m.name.startswith("_"))
    assert _code_and_bench_modules(["bench", "gait", "--help"]) == (0, ["snake_tools.bench.gait"])
    assert _code_and_bench_modules(["bench", "--help"]) == (0, every)
    assert _code_and_bench_modules(["bench", "no-such-bench"])[1] == every   # the error lists the choices



def test_the_trials_benchmark_reaches_its_fork_server_without_numpy():
    # ``snake bench trials --workers ...`` starts the workers' fork server first thing; what the
    # command imports before it (the calibration-target flag, the output helpers) delays every
    # worker's start. Its ``--help`` runs the same imports, and none of them needs numpy or YAML.
    code = ("import contextlib, io, json, sys\nfrom snake_tools.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    code = main(['bench', 'trials', '--help'])\n"
            "print(json.dumps([code, 'numpy' in sys.modules, 'yaml' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [0, False, False]


def test_json_output_without_numpy_keeps_non_finite_floats_as_null():
    code = ("import sys\nfrom snake_tools.output import print_json\n"
            "print_json({'a': float('nan'), 'b': [1.5, float('inf')], 'c': 'x', 'd': 2})\n"
            "print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    *text, imported = out.stdout.strip().splitlines()
    assert imported == "False"
    assert json.loads("\n".join(text)) == {"a": None, "b": [1.5, None], "c": "x", "d": 2}
