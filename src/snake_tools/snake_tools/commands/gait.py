"""``snake gait``: generate N seconds of a gait offline and summarise it.

Commands are constant (``--omega-h`` ...) or a time-varying profile (``--profile``: a CSV
with a header ``t`` plus the gait's command names, one row per change; each row's command
holds from its time until the next row's). For the rolling gait the summary leads with the
body-shape error (RMS distance of the discrete robot from the backbone, m, see
:func:`snake_core.gait.rolling.body_shape_error`), and ``--out`` writes per step the
joint angles plus phi_h, phi_t, the wave phase, the twist cycle counter C_twist, the
reset count and the shape error.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from snake_core.gait import make_gait
from snake_core.gait.rolling import RollingVectorGait, body_shape_error
from snake_core.robot import load_robot
from snake_tools.cli import finite_float, positive_float
from snake_tools.output import print_json, print_table

_DEFAULT_ROBOT = {"rolling": "tsnake", "conical": "tsnake", "serpenoid": "wheeled_snake"}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake gait``."""
    p = subparsers.add_parser("gait", help="generate a gait offline and summarise it")
    p.add_argument("--gait", choices=sorted(_DEFAULT_ROBOT), default="rolling", help="gait to generate")
    p.add_argument("--robot", default=None, help="robot name or YAML (default: tsnake, wheeled_snake for serpenoid)")
    p.add_argument("--omega-h", type=finite_float, default=0.0, help="rolling: head rolling speed, rad/s")
    p.add_argument("--omega-t", type=finite_float, default=0.0, help="rolling: tail rolling speed, rad/s")
    p.add_argument("--omega-c", type=finite_float, default=0.0, help="rolling: helix wave speed, rad/s")
    p.add_argument("--omega-s", type=finite_float, default=0.0, help="conical: wave speed, rad/s")
    p.add_argument("--taper", type=finite_float, default=0.0, help="conical: amplitude taper")
    p.add_argument("--omega", type=finite_float, default=0.0, help="serpenoid: wave speed, rad/s")
    p.add_argument("--head-offset", type=finite_float, default=0.0, help="serpenoid: head offset, rad")
    p.add_argument("--duration", type=positive_float, default=10.0, help="seconds of gait to generate")
    p.add_argument("--dt", type=positive_float, default=None, help="time step, s (default: the gait's, 0.02)")
    p.add_argument("--no-phase-reset", action="store_true", help="rolling: disable Algorithm 1's phase resetting")
    p.add_argument("--no-blend", action="store_true", help="rolling: paper-exact output at resets (no blending)")
    p.add_argument("--reset-threshold", type=positive_float, default=None,
                   help="rolling: |phi_h - phi_t| that triggers a reset, rad (default from the YAML: 2 pi as in 003)")
    p.add_argument("--integration", choices=["adaptive", "fixed"], default=None,
                   help="rolling: Eq. 11 quadrature (default from the YAML: adaptive, exact at any phase difference)")
    p.add_argument("--profile", type=_profile_path, default=None,
                   help="CSV command profile: header t,<command names>; each row holds until the next (s, rad/s)")
    p.add_argument("--shape-every", type=int, default=1,
                   help="rolling: body-shape error every N steps (default 1; 0 skips it)")
    p.add_argument("--out", type=Path, default=None,
                   help="write the per-step trajectory (.csv or .npz): joints, phases, twist cycles, shape error")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def _profile_path(text: str) -> Path:
    """The ``type=`` of ``--profile``: an existing file."""
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    return path


def load_profile(path: Path, names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Read a command profile: times (s, increasing, first 0) and commands ``(rows, len(names))``.

    Raises:
        ValueError: Naming the file and what is wrong with it.
    """
    try:
        with path.open() as fh:
            header = [h.strip() for h in fh.readline().split(",")]
        data = np.atleast_2d(np.loadtxt(path, delimiter=",", skiprows=1, dtype=float))
    except (OSError, ValueError) as err:
        raise ValueError(f"--profile {path}: cannot read: {err}") from err
    expected = ["t", *names]
    if header != expected:
        raise ValueError(f"--profile {path}: header must be {','.join(expected)}, got {','.join(header)}")
    if data.shape[1] != len(expected) or not np.all(np.isfinite(data)):
        raise ValueError(f"--profile {path}: every row needs {len(expected)} finite numbers")
    t = data[:, 0]
    if t[0] != 0.0 or np.any(np.diff(t) <= 0):
        raise ValueError(f"--profile {path}: column t must start at 0 and increase, got {t.tolist()}")
    return t, data[:, 1:]


def run(args: argparse.Namespace) -> int:
    """Generate the gait and print the summary."""
    if not np.isfinite(args.duration) or args.duration <= 0:
        raise ValueError(f"--duration must be positive, got {args.duration}")
    robot = load_robot(args.robot or _DEFAULT_ROBOT[args.gait])
    options: dict[str, object] = {}
    if args.gait == "rolling":
        options = {"phase_reset": not args.no_phase_reset, "ramp_time": 0.0}
        if args.no_blend:
            options["reset_blend_time"] = 0.0
        if args.reset_threshold is not None:
            options["reset_threshold"] = args.reset_threshold
        if args.integration is not None:
            options["integration"] = args.integration
    gait = make_gait(args.gait, robot, **options)
    command = {
        "rolling": (args.omega_h, args.omega_t, args.omega_c),
        "conical": (args.omega_s, args.taper),
        "serpenoid": (args.omega, args.head_offset),
    }[args.gait]
    dt = args.dt if args.dt is not None else float(robot.gaits.get("rolling", {}).get("dt", 0.02))
    if not np.isfinite(dt) or dt <= 0:
        raise ValueError(f"--dt must be positive, got {dt}")
    if args.shape_every < 0:
        raise ValueError(f"--shape-every must be >= 0, got {args.shape_every}")
    profile_t, profile_cmd = (load_profile(args.profile, gait.command_names) if args.profile is not None
                              else (np.zeros(1), np.asarray([command], dtype=float)))
    rolling = gait if isinstance(gait, RollingVectorGait) else None  # rolling-only state and shape error
    n = round(args.duration / dt)
    q = np.empty((n + 1, len(robot.joints)))
    commands = np.empty((n + 1, len(gait.command_names)))
    states = np.full((n + 1, 6), np.nan)  # phi_h, phi_t, wave phase, C_twist, resets, shape error

    def record(k: int, cmd: np.ndarray) -> None:
        commands[k] = cmd
        if rolling is not None:
            st = rolling.state
            shape = (body_shape_error(rolling, q[k], st.wave_phase)
                     if args.shape_every and k % args.shape_every == 0 else np.nan)
            states[k] = (st.phi_h, st.phi_t, st.wave_phase, st.twist_cycles, st.resets, shape)

    phase_diff = 0.0
    for k in range(n + 1):
        row = int(np.searchsorted(profile_t, k * dt + 1e-9, side="right")) - 1
        cmd = profile_cmd[row]
        q[k] = gait.step(0.0 if k == 0 else dt, tuple(float(c) for c in cmd))
        record(k, cmd)
        if rolling is not None:
            phase_diff = max(phase_diff, abs(rolling.state.phi_h - rolling.state.phi_t))
    t = dt * np.arange(n + 1)
    non_twist = np.array([j.type != "twist" for j in robot.joints])
    summary: dict[str, object] = {"gait": args.gait, "robot": robot.name}
    if rolling is not None and args.shape_every:
        shape = states[:, 5][np.isfinite(states[:, 5])]
        summary.update({"shape_error_m_mean": float(shape.mean()), "shape_error_m_max": float(shape.max()),
                        "shape_error_m_final": float(shape[-1]),
                        "integration": rolling.params.integration, "phase_reset": rolling.params.phase_reset})
    summary.update({
        "command": dict(zip(gait.command_names, command, strict=True)) if args.profile is None
        else {"profile": str(args.profile), "rows": int(profile_t.size)},
        "duration_s": float(t[-1]),
        "dt_s": dt,
        "steps": n,
        "max_phase_difference": phase_diff,
        "accumulated_phase_difference": float(states[-1, 0] - states[-1, 1] + 2 * np.pi * states[-1, 3])
        if rolling is not None else 0.0,
        "twist_cycles": int(rolling.state.twist_cycles) if rolling is not None else 0,
        "phase_resets": int(rolling.state.resets) if rolling is not None else 0,
        "max_joint_step": float(np.abs(np.diff(q, axis=0)).max()) if n else 0.0,
        "max_abs_joint": float(np.abs(q).max()),
        "max_abs_joint_non_twist": float(np.abs(q[:, non_twist]).max()) if non_twist.any() else 0.0,
        # cmd_vel -> native command coefficients (003 Eq. 9-10: k m/rad, d_prime m), calibration applied
        "reduction": dict(robot.gaits.get("reduction", {})),
    })
    if args.out is not None:
        extra = {f"cmd_{c}": commands[:, i] for i, c in enumerate(gait.command_names)}
        if rolling is not None:
            extra.update({name: states[:, i] for i, name in enumerate(
                ("phi_h", "phi_t", "wave_phase", "twist_cycles", "resets", "shape_error_m"))})
        _write(args.out, t, q, robot.joint_names, extra)
        summary["out"] = str(args.out)
    if args.json:
        print_json(summary)
    else:
        print_table([(k, v) for k, v in summary.items() if k != "command"],
                    title=f"snake gait: {args.gait} on {robot.name}, command {summary['command']}")
    return 0


def _write(path: Path, t: np.ndarray, q: np.ndarray, names: list[str], extra: dict[str, np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".npz":
        np.savez_compressed(path, allow_pickle=False, t=t, q=q, joint_names=np.array(names), **extra)
    elif path.suffix == ".csv":
        np.savetxt(path, np.column_stack([t, q, *extra.values()]), delimiter=",",
                   header=",".join(["t", *names, *extra]), comments="")
    else:
        raise ValueError(f"--out must end in .csv or .npz, got {path}")
