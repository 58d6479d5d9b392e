"""``snake bench all``: every benchmark, three runs each, into one file with the commit and the load.

Each ``snake bench <name> --json`` (every other module of :mod:`snake_tools.bench`, or those
named by ``--only``) runs ``--runs`` times, each in a fresh process, one after the other.
Every numeric figure of its JSON (nested keys joined with dots; booleans left out) is
reported as the median of the runs with their min and max and the runs themselves, beside
the 1-minute load average read before each run. The file also holds the git commit of the
working tree (and whether it had uncommitted changes), so the history of a figure is a
series of these files; ``--compare OLD.json`` prints (and stores under ``compared_with``),
per figure present in both, the new median over the old one. A benchmark that fails is
recorded with its error line, the others still run, and the exit code is 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import pkgutil
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from snake_tools.cli import count
from snake_tools.output import print_json, print_table

_DEFAULT_OUT = "out/bench/all.json"
_GIT_TIMEOUT_S = 10.0  # s, for the commit look-up


class BenchAllArgumentError(ValueError):
    """A bad ``snake bench all`` flag; the message names it."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake bench all``."""
    p = subparsers.add_parser("all", help="every benchmark, median of three runs, into one file with commit and load")
    p.add_argument("--runs", type=count, default=3, help="runs of each benchmark (median, min, max reported)")
    p.add_argument("--only", nargs="+", metavar="NAME", help="benchmarks to run (default: all)")
    p.add_argument("--bench-args", action="append", default=[], metavar="NAME=ARGS",
                   help="extra flags for one benchmark, e.g. gait='--steps 2000 --no-dds' (repeatable)")
    p.add_argument("--out", type=Path, default=Path(_DEFAULT_OUT), help="file written with every figure")
    p.add_argument("--compare", type=Path, metavar="OLD.json", help="print new/old ratios against an earlier file")
    p.add_argument("--json", action="store_true", help="also print the file's JSON")
    p.set_defaults(func=run)


def bench_names() -> list[str]:
    """Names of the other ``snake bench`` subcommands (the modules of :mod:`snake_tools.bench`)."""
    from snake_tools import bench

    skip = {Path(__file__).stem, "compare"}  # compare runs the others itself, against a revision
    return sorted(m.name for m in pkgutil.iter_modules(bench.__path__)
                  if not m.name.startswith("_") and m.name not in skip)


def flatten(data: Any, prefix: str = "") -> dict[str, float]:
    """Numeric leaves of a JSON value, keyed by their dotted path (booleans and non-finite left out)."""
    out: dict[str, float] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}{key}."))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out.update(flatten(value, f"{prefix}{i}."))
    elif isinstance(data, (int, float)) and not isinstance(data, bool) and math.isfinite(data):
        out[prefix[:-1]] = float(data)
    return out


def summarise(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Median, min, max and the values of every numeric figure over the runs (figures in every run)."""
    flat = [flatten(r) for r in runs]
    keys = [k for k in flat[0] if all(k in f for f in flat[1:])] if flat else []
    return {k: {"median": float(np.median(v)), "min": min(v), "max": max(v), "runs": v}
            for k in keys for v in [[f[k] for f in flat]]}


def git_commit(cwd: Path) -> tuple[str | None, bool | None]:
    """(commit hash, working tree has uncommitted changes) of ``cwd``'s repository, or (None, None)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                              timeout=_GIT_TIMEOUT_S, check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                                capture_output=True, text=True, timeout=_GIT_TIMEOUT_S, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return head, bool(status.strip())


def _parse_bench_args(items: list[str], names: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in items:
        name, sep, flags = item.partition("=")
        if not sep or name not in names:
            raise BenchAllArgumentError(f"--bench-args: need NAME=ARGS with NAME one of {names}, got {item!r}")
        out.setdefault(name, []).extend(shlex.split(flags))
    return out


def run_bench(name: str, flags: list[str], cwd: Path | None = None,
              env: dict[str, str] | None = None) -> tuple[dict[str, Any] | None, str]:
    """One ``snake bench NAME --json FLAGS`` in a fresh process: (its JSON or None, error line).

    ``cwd`` and ``env`` run it in another tree (:mod:`snake_tools.bench.compare`).
    """
    cmd = [sys.executable, "-m", "snake_tools.cli", "bench", name, "--json", *flags]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return None, f"exit {proc.returncode}: {lines[-1] if lines else ''}"
    start = proc.stdout.find("{")  # the JSON object is the output's last part
    try:
        return json.loads(proc.stdout[start:]), ""
    except ValueError:
        return None, "output is not JSON"


def compare(new: dict[str, Any], old: dict[str, Any]) -> list[tuple[str, float, float, float | None]]:
    """(bench.figure, old median, new median, new/old) for every figure in both files."""
    rows = []
    for name, entry in new.get("benches", {}).items():
        old_figures = old.get("benches", {}).get(name, {}).get("figures", {})
        for key, fig in entry.get("figures", {}).items():
            if key in old_figures:
                o, n = old_figures[key]["median"], fig["median"]
                rows.append((f"{name}.{key}", o, n, n / o if o != 0 else None))
    return rows


def run(args: argparse.Namespace) -> int:
    """Run the benchmarks, write the file, print the summary (and the comparison)."""
    names = bench_names()
    selected = args.only or names
    unknown = [n for n in selected if n not in names]
    if unknown:
        raise BenchAllArgumentError(f"--only: unknown benchmark(s) {unknown}; known: {names}")
    extra = _parse_bench_args(args.bench_args, names)
    old = None
    if args.compare is not None:
        try:
            old = json.loads(args.compare.read_text())
        except (OSError, ValueError) as err:
            raise BenchAllArgumentError(f"--compare: cannot read {args.compare}: {err}") from None
    commit, dirty = git_commit(Path.cwd())
    result: dict[str, Any] = {
        "commit": commit,
        "uncommitted_changes": dirty,
        "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "runs": args.runs,
        "cpu_count": os.cpu_count(),
        "load_average_start": list(os.getloadavg()),
        "benches": {},
    }
    failed = False
    for name in selected:
        flags = extra.get(name, [])
        outputs, loads, errors = [], [], []
        for _ in range(args.runs):
            loads.append(os.getloadavg()[0])
            data, error = run_bench(name, flags)
            if data is None:
                errors.append(error)
            else:
                outputs.append(data)
        failed = failed or bool(errors)
        result["benches"][name] = {
            "args": flags,
            "load_average_1min": {"median": float(np.median(loads)), "min": min(loads), "max": max(loads),
                                  "runs": loads},
            "errors": errors,
            "figures": summarise(outputs),
        }
    result["load_average_end"] = list(os.getloadavg())
    rows_compared = compare(result, old) if old is not None else []
    if old is not None:
        result["compared_with"] = {"file": str(args.compare), "commit": old.get("commit"),
                                   "ratios": {key: r for key, _, _, r in rows_compared}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print_json(result)
        return 1 if failed else 0
    rows: list[tuple[str, Any]] = [("commit", commit or "unknown"), ("file", str(args.out))]
    for name, entry in result["benches"].items():
        rows.append((f"{name} load average (1 min)", entry["load_average_1min"]["median"]))
        rows += [(f"{name}.{k}", f"{f['median']:.6g} [{f['min']:.6g}, {f['max']:.6g}]")
                 for k, f in entry["figures"].items()]
        rows += [(f"{name} error", e) for e in entry["errors"]]
    print_table(rows, title=f"snake bench all (median [min, max] of {args.runs} runs)")
    if old is not None:
        table = [(key, f"{o:.6g} -> {n:.6g}" + (f"  x{r:.3g}" if r is not None else ""))
                 for key, o, n, r in rows_compared]
        print_table(table or [("figures in common", 0)],
                    title=f"new / old against {args.compare} (commit {old.get('commit')})")
    return 1 if failed else 0
