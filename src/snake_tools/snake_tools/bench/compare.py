"""``snake bench compare REV``: every figure beside the same figure of an earlier revision, run alternately.

REV (a commit, tag or branch: the previous release) is checked out into a temporary
``git worktree`` beside the working tree (removed afterwards). Both trees run in this
environment (the same interpreter and installed packages), each in fresh processes whose
``PYTHONPATH`` puts that tree's ``src/<package>`` directories first and whose
``SNAKE_CONFIG_DIR`` is that tree's ``config/``. Each benchmark then runs alternately on
the new tree (A) and the old one (B), A B A B ..., ``--pairs`` times, so that a change of
the machine's load during the run weighs on both sides alike.

Per figure (``BENCH.KEY`` of that benchmark's ``--json`` output) it reports the median over
the runs of each side, ``ratio`` = new median / old median, and ``ratio_min`` /
``ratio_max`` over the pairs (new / old of each pair), with ``better`` saying which way is
an improvement (``lower``: a time or a size; ``higher``: a rate) and ``speedup`` the
factor of improvement (old / new for ``lower``, new / old for ``higher``). The 1-minute
load average is read before every run. A benchmark that fails on either side is reported
with its error line; the others still run, and the exit code is 1. A benchmark that REV does
not have (no module of that name in its ``snake_tools.bench``) is not an error: it runs on the
new tree alone, its figures have ``old`` null, and ``not_available`` names it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snake_tools.bench.all import BenchAllArgumentError, flatten, git_commit
from snake_tools.cli import int_at_least
from snake_tools.output import print_json, print_table

_PACKAGES = ("snake_core", "snake_hardware", "snake_ros", "snake_tools")
_GIT_TIMEOUT_S = 120.0  # s, failure bound on a worktree add or remove


@dataclass(frozen=True)
class Figures:
    """What one benchmark is run with and which of its figures are compared (key -> better)."""

    flags: tuple[str, ...]
    figures: dict[str, str]


BENCHES: dict[str, Figures] = {
    "gait": Figures(("--no-dds", "--steps", "3000"), {"step_us_median": "lower", "step_us_p99": "lower"}),
    "sim": Figures(("--duration", "5", "--repeats", "1", "--follow-trials", "0"),
                   {"realtime_factor_flat": "higher", "realtime_factor_uneven": "higher"}),
    "bridge": Figures(("--cycles", "500"), {"software_ms_per_cycle": "lower", "software_ms_p99": "lower"}),
    "stack": Figures(("--duration", "20"), {"cpu_percent_total": "lower", "rss_mb_total": "lower",
                                            "latency_ms_p99": "lower", "startup_s_max": "lower"}),
    "view": Figures(("--clients", "1,5", "--duration", "10", "--runs", "1"),
                    {"cpu_percent_idle": "lower", "cpu_percent_max_clients": "lower",
                     "cpu_percent_per_client_max": "lower", "rss_mb_max_clients": "lower"}),
}
"""The benchmarks compared by default, their flags (short runs: several pairs fit) and figures."""


class CompareError(ValueError):
    """REV is not a revision of this repository, or could not be checked out; the message says why."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake bench compare``."""
    p = subparsers.add_parser("compare", help="every figure beside an earlier revision's, run alternately A B A B")
    p.add_argument("rev", metavar="REV", help="the revision to compare with (commit, tag, branch), e.g. main")
    p.add_argument("--pairs", type=int_at_least(1), default=3, help="A/B pairs per benchmark (3 or more advised)")
    p.add_argument("--only", nargs="+", metavar="NAME", help=f"benchmarks to compare (default: all of {list(BENCHES)})")
    p.add_argument("--bench-args", action="append", default=[], metavar="NAME=ARGS",
                   help="flags replacing a benchmark's own, e.g. stack='--duration 60' (repeatable)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def tree_env(root: Path) -> dict[str, str]:
    """The environment of a process that runs the packages and config files of the tree at ``root``."""
    env = os.environ.copy()
    paths = [str(root / "src" / pkg) for pkg in _PACKAGES]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["SNAKE_CONFIG_DIR"] = str(root / "config")
    return env


def run_in_tree(root: Path, name: str, flags: list[str]) -> tuple[dict[str, Any] | None, str]:
    """``snake bench NAME --json FLAGS`` with the tree at ``root``: (its JSON or None, error line)."""
    from snake_tools.bench.all import run_bench

    return run_bench(name, flags, cwd=root, env=tree_env(root))


def _git(root: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=_GIT_TIMEOUT_S,
                          check=False)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        raise CompareError(f"git {' '.join(args)}: {lines[-1] if lines else f'exit {proc.returncode}'}")
    return proc.stdout.strip()


def has_bench(root: Path, name: str) -> bool:
    """Whether the tree at ``root`` has the benchmark ``name`` (a module of its ``snake_tools.bench``)."""
    return (root / "src" / "snake_tools" / "snake_tools" / "bench" / f"{name}.py").is_file()


def figure_summary(new: list[float], old: list[float], better: str) -> dict[str, Any]:
    """Medians of both sides, new/old ratio of the medians and its min-max over the pairs, the speed-up."""
    n, o = float(np.median(new)), float(np.median(old))
    pair_ratios = [a / b for a, b in zip(new, old, strict=True) if b != 0]
    ratio = n / o if o != 0 else None
    speedup = None
    if ratio is not None and ratio != 0:
        speedup = 1.0 / ratio if better == "lower" else ratio
    return {"new": n, "old": o, "ratio": ratio,
            "ratio_min": min(pair_ratios) if pair_ratios else None,
            "ratio_max": max(pair_ratios) if pair_ratios else None,
            "better": better, "speedup": speedup, "new_runs": new, "old_runs": old}


def new_only_summary(new: list[float], better: str) -> dict[str, Any]:
    """A figure the old revision does not have: the new median and runs, every old and ratio field null."""
    return {"new": float(np.median(new)), "old": None, "ratio": None, "ratio_min": None, "ratio_max": None,
            "better": better, "speedup": None, "new_runs": new, "old_runs": []}


def _parse_bench_args(items: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in items:
        name, sep, flags = item.partition("=")
        if not sep or name not in BENCHES:
            raise BenchAllArgumentError(f"--bench-args: need NAME=ARGS with NAME one of {list(BENCHES)}, got {item!r}")
        out.setdefault(name, []).extend(shlex.split(flags))
    return out


def compare_trees(new_root: Path, old_root: Path, names: list[str], pairs: int,
                  flags: dict[str, list[str]]) -> dict[str, Any]:
    """Run each benchmark A B A B on both trees; the figures, load averages and errors."""
    result: dict[str, Any] = {}
    loads: dict[str, list[float]] = {}
    errors: list[str] = []
    not_available: list[str] = []
    for name in names:
        spec = BENCHES[name]
        args = flags.get(name, list(spec.flags))
        values: dict[str, dict[str, list[float]]] = {k: {"new": [], "old": []} for k in spec.figures}
        if not has_bench(old_root, name):
            not_available.append(f"{name}: not a benchmark of the old revision (new tree only)")
            for _ in range(pairs):
                loads.setdefault(name, []).append(os.getloadavg()[0])
                data, error = run_in_tree(new_root, name, args)
                if data is None:
                    errors.append(f"{name} (new): {error}")
                    continue
                flat = flatten(data)
                for key in spec.figures:
                    if key in flat:
                        values[key]["new"].append(flat[key])
            for key, better in spec.figures.items():
                if values[key]["new"]:
                    result[f"{name}.{key}"] = new_only_summary(values[key]["new"], better)
            continue
        for _ in range(pairs):
            outs = {}
            for side, root in (("new", new_root), ("old", old_root)):
                loads.setdefault(name, []).append(os.getloadavg()[0])
                data, error = run_in_tree(root, name, args)
                if data is None:
                    errors.append(f"{name} ({side}): {error}")
                outs[side] = flatten(data) if data is not None else None
            new, old = outs["new"], outs["old"]
            if new is None or old is None:
                continue
            for key in spec.figures:
                if key in new and key in old:
                    values[key]["new"].append(new[key])
                    values[key]["old"].append(old[key])
        for key, better in spec.figures.items():
            if values[key]["new"]:
                result[f"{name}.{key}"] = figure_summary(values[key]["new"], values[key]["old"], better)
    result["load"] = {"per_bench_1min": {n: {"median": float(np.median(v)), "min": min(v), "max": max(v)}
                                         for n, v in loads.items()},
                      "end": list(os.getloadavg())}
    result["errors"] = errors
    result["not_available"] = not_available
    return result


def run(args: argparse.Namespace) -> int:
    """Check REV out beside the working tree, compare, remove it, print the figures."""
    names = args.only or list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        raise BenchAllArgumentError(f"--only: unknown benchmark(s) {unknown}; known: {list(BENCHES)}")
    flags = _parse_bench_args(args.bench_args)
    new_root = Path(_git(Path.cwd(), "rev-parse", "--show-toplevel"))
    old_commit = _git(new_root, "rev-parse", "--verify", f"{args.rev}^{{commit}}")
    new_commit, dirty = git_commit(new_root)
    load_start = list(os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="snake-compare-") as tmp:
        old_root = Path(tmp) / "old"
        _git(new_root, "worktree", "add", "--detach", str(old_root), old_commit)
        try:
            result = compare_trees(new_root, old_root, names, args.pairs, flags)
        finally:
            _git(new_root, "worktree", "remove", "--force", str(old_root))
    result["load"]["start"] = load_start
    result["compared"] = {"rev": args.rev, "old_commit": old_commit, "new_commit": new_commit,
                          "new_uncommitted_changes": dirty, "pairs": args.pairs, "host": socket.gethostname(),
                          "cpu_count": os.cpu_count(),
                          "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    if args.json:
        print_json(result)
    else:
        rows: list[tuple[str, Any]] = []
        for key, fig in result.items():
            if isinstance(fig, dict) and "ratio" in fig and fig["old"] is None:
                rows.append((key, f"new {fig['new']:.4g}  old n/a (not at {args.rev})  ({fig['better']} is better)"))
            elif isinstance(fig, dict) and "ratio" in fig:
                rows.append((key, f"new {fig['new']:.4g}  old {fig['old']:.4g}  new/old {fig['ratio']:.3g} "
                                  f"[{fig['ratio_min']:.3g}, {fig['ratio_max']:.3g}]  ({fig['better']} is better)"))
        rows += [("load average (1 min) start / end", f"{load_start[0]:.2f} / {result['load']['end'][0]:.2f}")]
        rows += [("not available", n) for n in result["not_available"]]
        rows += [("error", e) for e in result["errors"]]
        print_table(rows, title=f"snake bench compare {args.rev} ({old_commit[:7]}), {args.pairs} A/B pairs")
    return 1 if result["errors"] else 0
