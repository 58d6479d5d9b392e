"""``snake servo-model``: a servo model (``config/servos/<model>.yaml``) fitted to bench logs, or shown.

``identify`` fits the motor, the firmware's gain conversion and the friction of one servo
model to logs of one servo on a pendulum (:mod:`snake_tools.servo_model.fit`), judges it on
logs it did not see (``--validate``) and stores it (``--write``). ``show`` prints what the
twin's actuator of a model is at given registers and supply voltage
(:func:`snake_core.servo.actuator.position_actuator`). ``record`` drives one servo on a
pendulum through BAM's trajectories at several P gains and writes BAM logs or, with
``--format bag``, rosbag2 bags of standard messages (:mod:`snake_tools.servo_model.record`,
:mod:`snake_tools.servo_model.bench_bag`), which ``identify`` reads as well.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from datetime import date
from pathlib import Path
from typing import Any

from snake_tools.cli import positive_float
from snake_tools.output import print_json, print_table

TRAJECTORY_NAMES = ("lift_and_drop", "sin_time_square", "up_and_down", "sin_sin")
"""BAM's four trajectories (:data:`snake_tools.servo_model.trajectories.TRAJECTORIES`; a test keeps them equal)."""
_GAIN_FRACTIONS = (0.125, 0.25, 0.5, 0.75, 1.0)  # of the factory P gain: BAM's 50..400 for the XL330
_MAX_P_GAIN = 16383  # Position P Gain register range
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")  # what a file name in config/servos may be


class ServoModelToolError(ValueError):
    """A bad flag, or a set of logs that cannot be fitted together (one line)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake servo-model`` and its subcommands."""
    from snake_core.servo.model import FRICTION_STRUCTURES
    from snake_tools.experiment.executor import default_workers, workers_arg

    parser = subparsers.add_parser("servo-model", help="servo models: fit one to bench logs of a servo, or show one")
    sub = parser.add_subparsers(dest="servo_model_command", metavar="ACTION")
    sub.required = True
    p = sub.add_parser("identify", help="fit a servo model to logs of one servo on a pendulum bench")
    p.add_argument("logs", nargs="+", type=Path, metavar="LOG",
                   help="bench logs to fit (BAM's JSON files or bags of `snake servo-model record --format bag`)")
    p.add_argument("--format", choices=("auto", "bam", "bag"), default="auto",
                   help="log format: bam (BAM's published JSON), bag (a rosbag2 bench bag), auto (default: "
                        "a .json file is BAM, a directory with metadata.yaml a bag)")
    p.add_argument("--model", default=None,
                   help="servo model of config/servos to start from (default: the logs' motor)")
    p.add_argument("--validate", nargs="+", type=Path, default=[], metavar="LOG",
                   help="logs not fitted, to judge the fit on")
    p.add_argument("--structure", choices=("auto", *FRICTION_STRUCTURES), default="auto",
                   help="friction structure (auto: each; the least leave-one-log-out error wins, the least "
                        "information criterion with fewer than 3 logs)")
    p.add_argument("--write", default=None, metavar="MODEL",
                   help="store the fitted model as config/servos/MODEL.yaml")
    p.add_argument("--workers", type=workers_arg, default=default_workers(),
                   help="processes for the structures' fits and the held-out fits, which are independent "
                        f"(default: all cores, {default_workers()}; 1 = this process)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_identify)
    s = sub.add_parser("show", help="the twin's actuator of a servo model at given registers and voltage")
    s.add_argument("model", help="servo model name in config/servos or a YAML path")
    s.add_argument("--voltage", type=positive_float, default=None, help="supply voltage, V (default: nominal)")
    s.add_argument("--p-gain", type=int, default=None, help="Position P Gain register (default: factory)")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.set_defaults(func=_show)
    r = sub.add_parser("record", help="record one servo on a pendulum bench: BAM's trajectories at several "
                                      "P gains, one BAM log (or bag) each")
    r.add_argument("--port", required=True, help="serial device of the servo's bus (U2D2)")
    r.add_argument("--baud-rate", type=int, default=1_000_000, help="bps (the servo's Baud Rate)")
    r.add_argument("--id", type=int, default=1, help="the servo's ID (alone on the bus)")
    r.add_argument("--model", required=True, help="the servo's model, e.g. XL330-M288 (checked by its ping)")
    r.add_argument("--mass", type=positive_float, required=True, help="pendulum mass at --length, kg")
    r.add_argument("--length", type=positive_float, required=True, help="pendulum length, m")
    r.add_argument("--arm-mass", type=float, default=0.0, help="arm mass, kg (recorded in the header)")
    r.add_argument("--kp", type=int, nargs="+", default=None, metavar="P",
                   help="Position P Gain values (default: 1/8, 1/4, 1/2, 3/4 and 1 of the factory gain)")
    r.add_argument("--trajectory", nargs="+", choices=TRAJECTORY_NAMES, default=list(TRAJECTORY_NAMES),
                   metavar="NAME", help="trajectories: " + ", ".join(TRAJECTORY_NAMES))
    r.add_argument("--rate-hz", type=positive_float, default=100.0, help="samples per second")
    r.add_argument("--out", type=Path, required=True, help="directory of the logs")
    r.add_argument("--format", choices=("bam", "bag"), default="bam",
                   help="one BAM JSON file per run (bam, default) or one rosbag2 bag directory per run (bag)")
    r.set_defaults(func=_record)


def identify(logs: list[Path], model: str | None = None, validate_logs: list[Path] | None = None,
             structure: str = "auto", write: str | None = None, quiet: bool = False,
             fmt: str = "auto", workers: int = 1) -> dict[str, Any]:
    """Fit, validate and (with ``write``) store a servo model; the result as plain data.

    Raises:
        ServoModelToolError, BenchLogError, ServoModelError: Bad input (one line).
    """
    from snake_core.config_files import config_path
    from snake_core.servo.model import FRICTION_STRUCTURES, load_servo_model
    from snake_tools.servo_model.bench_bag import read_log
    from snake_tools.servo_model.fit import fit, fitted_spec, validate

    if write is not None and not _MODEL_NAME.fullmatch(write):
        raise ServoModelToolError(f"--write: {write!r} is not a model name (letters, digits, '-', '_')")
    motor = read_log(logs[0], fmt).motor
    spec = load_servo_model(model or motor)  # the log's motor, already a servo model name
    train = [read_log(p, fmt, spec.model) for p in logs]
    held = [read_log(p, fmt, spec.model) for p in validate_logs or []]
    overlap = {p.resolve() for p in logs} & {p.resolve() for p in validate_logs or []}
    if overlap:
        raise ServoModelToolError(f"--validate: {sorted(str(p) for p in overlap)[0]} is also a log to fit")

    def progress(line: str) -> None:
        if not quiet:
            print(f"servo-model identify: {line}", file=sys.stderr, flush=True)

    structures = FRICTION_STRUCTURES if structure == "auto" else (structure,)
    result = fit(train, spec, structures, progress=progress, workers=workers)
    assert result.spec is not None
    out: dict[str, Any] = {
        "model": spec.model, "fitted": True, "structure": result.chosen.structure,
        "train_logs": [p.name for p in logs], "train_mae_rad": result.chosen.train_mae_rad,
        "train_per_log_mae_rad": dict(zip([p.name for p in logs], result.chosen.per_log_mae_rad, strict=True)),
        "structures": {s: _structure_row(f, result.margins.get(s), [p.name for p in logs])
                       for s, f in result.fits.items()},
        "chosen_by": ("leave-one-log-out" if all(math.isfinite(f.cv_mae_rad) for f in result.fits.values())
                      else "information criterion"),
        "not_told_apart": result.not_told_apart,
        "rig_offset_rad": result.offset_rad,
        "servo": result.spec.to_yaml_dict(),
        "torque_constant": result.chosen.values["torque_constant"],
        "resistance": result.chosen.values["resistance"],
        "max_current_a": result.chosen.values["max_current"],
    }
    if held:
        # Every structure on the logs left out (reported, not chosen by); the chosen one's is the fit's
        # servo model (result.spec is fitted_spec of the chosen fit, with its offset).
        errors = {s: validate(held, fitted_spec(spec, f), f.values["offset"]) for s, f in result.fits.items()}
        for s, e in errors.items():
            out["structures"][s]["validate_mae_rad"] = sum(e) / len(e)
        maes = errors[result.chosen.structure]
        out["validate"] = [{"log": p.name, "mae_rad": m} for p, m in zip(validate_logs or [], maes, strict=True)]
        out["validate_mae_rad"] = sum(maes) / len(maes)
        out["datasheet_validate_mae_rad"] = sum(validate(held, spec)) / len(held)
    out["written"] = None
    if write is not None:
        from dataclasses import replace

        import yaml

        provenance = {"fitted_by": "snake servo-model identify", "date": date.today().isoformat(),
                      "from_model": spec.model, "logs": [p.name for p in logs],
                      "structure": result.chosen.structure,
                      "train_mae_rad": round(result.chosen.train_mae_rad, 5)}
        if result.not_told_apart:
            provenance["not_told_apart"] = result.not_told_apart
        if held:
            provenance["validate_logs"] = [p.name for p in validate_logs or []]
            provenance["validate_mae_rad"] = round(out["validate_mae_rad"], 5)
        stored = replace(result.spec, model=write, provenance=provenance)
        path = config_path("servo", write)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(_rounded(stored.to_yaml_dict()), sort_keys=False)
        path.write_text(f"# Servo model {write}, fitted by `snake servo-model identify` (see provenance).\n{text}")
        out["written"] = str(path)
    return out


def _structure_row(f: Any, margin: Any, names: list[str]) -> dict[str, Any]:
    """One structure's fit as plain data: errors, criterion and, where cross-validated, its margin."""
    row: dict[str, Any] = {"train_mae_rad": f.train_mae_rad, "cv_mae_rad": f.cv_mae_rad,
                           "cv_per_log_mae_rad": dict(zip(names, f.cv_per_log_mae_rad, strict=False)),
                           "bic": f.bic, "effective_samples": f.effective_samples, "seconds": f.seconds}
    if margin is not None:
        row["cv_difference_rad"] = margin.difference_rad
        row["cv_difference_se_rad"] = margin.standard_error_rad
    return row


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _identify(args: argparse.Namespace) -> int:
    out = identify(list(args.logs), args.model, list(args.validate), args.structure, args.write,
                   fmt=args.format, workers=args.workers)
    if args.json:
        print_json(out)
        return 0
    rows: list[tuple[str, Any]] = [("model", out["model"]), ("structure", out["structure"]),
                                   ("train MAE (mrad)", f"{out['train_mae_rad'] * 1e3:.1f}")]
    rows.append(("chosen by", out["chosen_by"]))
    if out["not_told_apart"]:
        rows.append(("  not told apart by the left-out logs from", ", ".join(out["not_told_apart"])))
    for s, f in out["structures"].items():
        rows.append((f"  {s}: train, leave-one-out MAE (mrad), BIC",
                     f"{f['train_mae_rad'] * 1e3:.1f}, {f['cv_mae_rad'] * 1e3:.1f}, {f['bic']:.1f}"))
    for v in out.get("validate", []):
        rows.append((f"validate {v['log']} MAE (mrad)", f"{v['mae_rad'] * 1e3:.1f}"))
    if "validate_mae_rad" in out:
        rows.append(("validate MAE (mrad)", f"{out['validate_mae_rad'] * 1e3:.1f}"))
        rows.append(("  the datasheet model's (mrad)", f"{out['datasheet_validate_mae_rad'] * 1e3:.1f}"))
    rows.append(("k_t (N m/A), R (ohm), current limit (A)",
                 f"{out['torque_constant']:.4g}, {out['resistance']:.4g}, {out['max_current_a']:.4g}"))
    rows.append(("written", out["written"] or "nothing (no --write)"))
    print_table(rows, title="servo model fit")
    return 0


def _show(args: argparse.Namespace) -> int:
    from dataclasses import asdict, replace

    from snake_core.servo.actuator import position_actuator
    from snake_core.servo.model import load_servo_model

    spec = load_servo_model(args.model)
    regs = spec.firmware.factory
    if args.p_gain is not None:
        if not 0 <= args.p_gain <= 16383:
            raise ServoModelToolError(f"--p-gain: {args.p_gain} is not a Position P Gain register value (0..16383)")
        regs = replace(regs, position_p_gain=args.p_gain)
    act = position_actuator(spec, regs, args.voltage)
    out = {"model": spec.model, "voltage": args.voltage or spec.motor.nominal_voltage,
           "position_p_gain": regs.position_p_gain, "torque_constant": spec.motor.torque_constant,
           "resistance": spec.motor.resistance, **asdict(act)}
    if args.json:
        print_json(out)
    else:
        print_table([(k, f"{v:.4g}" if isinstance(v, float) else v) for k, v in out.items()],
                    title="servo model as the twin's actuator")
    return 0


def _record(args: argparse.Namespace) -> int:
    from snake_hardware.dynamixel import control_table as ct
    from snake_tools.servo_model.record import Pendulum, ServoLink, record

    try:
        spec = ct.model(args.model)
    except KeyError:
        raise ServoModelToolError(f"--model: {args.model!r} is not a servo model the bridge knows") from None
    gains = args.kp or [round(f * spec.factory_p_gain) for f in _GAIN_FRACTIONS]
    bad = [g for g in gains if not 1 <= g <= _MAX_P_GAIN]
    if bad:
        raise ServoModelToolError(f"--kp: {bad} outside the Position P Gain range 1..{_MAX_P_GAIN}")
    if not 0 <= args.id <= 252:
        raise ServoModelToolError(f"--id: {args.id} is not a Dynamixel ID (0..252)")
    from snake_tools.servo_model.record import run_paths

    taken = [p for p in run_paths(args.out, spec.name, gains, args.trajectory, args.format) if p.exists()]
    if args.format == "bag" and taken:
        raise ServoModelToolError(f"--out: {taken[0]} exists (a bag is not overwritten)")
    link = ServoLink(args.port, args.baud_rate, args.id, spec.name)
    try:
        print(f"recording {spec.name} ID {args.id}: P gains {gains}, trajectories {args.trajectory} "
              f"({len(gains) * len(args.trajectory)} runs of 6 s); the pendulum moves", file=sys.stderr, flush=True)
        written = record(link, Pendulum(args.mass, args.length, args.arm_mass), gains, args.trajectory,
                         args.out, args.rate_hz, say=lambda line: print(line, flush=True), fmt=args.format)
    finally:
        link.close()
    pattern = "*.json" if args.format == "bam" else f"{spec.name}_kp*"
    if link.retried:
        print(f"{link.retried} writes sent again: their status packet did not come (the bus or the computer was "
              "slow)", file=sys.stderr, flush=True)
    print(f"{len(written)} logs in {args.out}: snake servo-model identify {args.out}/{pattern} --validate ...")
    return 0
