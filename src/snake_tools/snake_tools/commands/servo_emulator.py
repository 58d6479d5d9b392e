"""``snake servo-emulator``: emulated Dynamixel X-series servos on a pseudo-terminal.

Prints the pty path (point the bridge's ``port`` parameter, or any Dynamixel tool, at
it) and serves Protocol 2.0 until Ctrl-C. ``--spread`` starts the servos at random
positions around the centre (a robot not yet calibrated: try ``snake servo`` on it).

Fault injection: ``--delay`` holds every answer back, ``--drop`` / ``--corrupt`` lose or
corrupt the CRC of each status packet with a probability (seeded by ``--seed``),
``--vanish`` makes servos stop answering. The faults in force are printed after the pty
path, and on exit one line counts the answers dropped, corrupted and delayed. ``--voltage``
sets every servo's Present Input Voltage (default: the model's recommended supply).

``--body ROBOT`` attaches the servos to the bench robot (a rigid-body model of ROBOT
stepped in real time, servos run as the X-series firmware runs them; see docs/hardware.md,
"Rehearse on the bench robot"): ``--seed`` draws how this robot differs from its nominal
YAML, ``--truth FILE`` writes what was drawn, ``--world`` and ``--lifted`` set where it
stands, ``--mocap-topic TOPIC`` publishes its head's pose as a motion-capture driver does
(ROS 2 is imported only with that flag). ``--spread`` does not apply to a body.

``--link PATH`` makes a symlink to the pty (a stable name, as udev gives a U2D2). It is
refused where PATH already exists and leads to a live device (another emulator, a real
adapter, or a pty number the kernel gave to another program since), replaced where it is a
link left dangling, and removed on exit: Ctrl-C, SIGTERM and SIGHUP all stop the emulator
the same way, with its exit line.

``--goal-log FILE`` is a hook for latency measurements (``snake bench stack``): every
accepted Goal Position write that changes a servo's goal appends one line
``<time.monotonic() s> <servo ID> <goal ticks>`` to FILE. The monotonic clock is the
host's, so another process can compare it with its own time stamps.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import IO, Any

from snake_core.robot import SERVO_MODELS
from snake_tools.cli import float_in, non_negative_float, non_negative_int

_MAX_VOLTAGE_V = 30.0  # V, largest --voltage (beyond every X-series servo's Max Voltage Limit)

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # stop as Ctrl-C does: link removed, exit line printed


class IdSpecError(ValueError):
    """A bad ``--ids`` value."""


@contextmanager
def _stop_on_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into KeyboardInterrupt for the life of the block (the exit path runs).

    After the first, every stop signal (SIGINT included) is ignored, so a second one does not
    cut the exit path short.
    """

    def handler(signum: int, frame: FrameType | None) -> None:
        for s in (*_STOP_SIGNALS, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {s: signal.signal(s, handler) for s in _STOP_SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def check_link(link: str | None) -> None:
    """``--link``: refuse a path that exists and leads to a live device, or is no link at all.

    A link whose target is gone (left by an emulator that was killed) is replaced.

    Raises:
        ValueError: One line naming the path and what it leads to.
    """
    if not link:
        return
    path = Path(link)
    if path.is_symlink():
        target = os.readlink(path)
        if path.exists():
            raise ValueError(f"--link {link}: already a link to {target}, a live device (another emulator, "
                             "an adapter, or a pty now used by another program); choose another path or remove it")
        return
    if path.exists():
        raise ValueError(f"--link {link}: exists and is not a link; choose another path")


def parse_ids(spec: str, flag: str = "--ids") -> list[int]:
    """IDs from ``1-18`` or ``1,2,5-7``; raises IdSpecError naming ``flag``."""
    ids: list[int] = []
    try:
        for raw in spec.split(","):
            part = raw.strip()
            if "-" in part:
                a, b = (int(x) for x in part.split("-", 1))
                if b < a:
                    raise IdSpecError(f"{flag}: range {part!r} runs backwards")
                ids.extend(range(a, b + 1))
            elif part:
                ids.append(int(part))
    except ValueError as err:
        if isinstance(err, IdSpecError):
            raise
        raise IdSpecError(f"{flag}: cannot parse {spec!r} (use e.g. 1-18 or 1,2,5-7)") from err
    if not ids or any(not 0 <= i <= 252 for i in ids) or len(set(ids)) != len(ids):
        raise IdSpecError(f"{flag}: need distinct IDs in 0..252, got {spec!r}")
    return ids


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake servo-emulator``."""
    p = subparsers.add_parser("servo-emulator", help="emulate Dynamixel servos on a pty (Protocol 2.0)")
    p.add_argument("--ids", default="1-18", help="servo IDs, e.g. 1-18 or 1,2,5-7 (default 1-18)")
    p.add_argument("--model", default="XM430-W350", choices=SERVO_MODELS, help="servo model of every ID")
    p.add_argument("--link", default=None, help="also make this symlink to the pty (stable across replug)")
    p.add_argument("--duration", type=non_negative_float, default=0.0, help="stop after this many seconds (0: Ctrl-C)")
    p.add_argument("--spread", type=non_negative_int, default=0,
                   help="start each servo at a random position within +- this many ticks of 2048")
    p.add_argument("--seed", type=non_negative_int, default=0,
                   help="seed of --spread, --drop and --corrupt, and with --body of the robot's variation")
    p.add_argument("--delay", type=non_negative_float, default=0.0, help="hold every answer back this long, s")
    p.add_argument("--drop", type=float_in(0.0, 1.0), default=0.0,
                   help="probability that a status packet is not sent (0..1)")
    p.add_argument("--corrupt", type=float_in(0.0, 1.0), default=0.0,
                   help="probability that a status packet has a corrupted CRC (0..1)")
    p.add_argument("--vanish", default="", help="IDs of --ids that never answer, e.g. 3 or 3,7")
    p.add_argument("--voltage", type=float_in(0.1, _MAX_VOLTAGE_V), default=None, metavar="V",
                   help="Present Input Voltage of every servo, V (default: the model's recommended supply, "
                        "12 V for the X430 series, 5 V for the XL330)")
    p.add_argument("--goal-log", type=Path, default=None, metavar="FILE",
                   help="append '<monotonic s> <id> <ticks>' to FILE for every write that changes a goal")
    p.add_argument("--body", default=None, metavar="ROBOT",
                   help="attach the servos to the bench robot: rigid body of ROBOT (name in config/robots or YAML, "
                        "kind tsnake) stepped in real time; --ids and --model come from its YAML")
    p.add_argument("--truth", type=Path, default=None, metavar="FILE",
                   help="with --body: write what --seed drew (servo gains, motors, friction, backlash, links) as YAML")
    p.add_argument("--world", default=None,
                   help="with --body: world name in config/worlds or a YAML path (plane ground; default flat)")
    p.add_argument("--lifted", action="store_true",
                   help="with --body: hold the robot by its head, body hanging down (contacts off)")
    p.add_argument("--mocap-topic", default=None, metavar="TOPIC",
                   help="with --body: publish the head's pose (geometry_msgs/PoseStamped, frame world, 120 Hz, "
                        "stamped at capture, 8-10 ms latency) on TOPIC, e.g. /vrpn_mocap/snake_head/pose")
    p.set_defaults(func=run)


def open_goal_log(path: Path | None, servos: dict[int, Any]) -> IO[str] | None:
    """``--goal-log``: open ``path`` for appending and log every Goal Position change (None: no log).

    Raises:
        ValueError: The file cannot be opened (one line naming it).
    """
    if path is None:
        return None
    from snake_hardware.dynamixel import control_table as ct

    try:
        log = path.open("a", encoding="utf-8")
    except OSError as err:
        raise ValueError(f"--goal-log: cannot open {path}: {err.strerror or err}") from None
    record_goal_changes(servos, log, ct.GOAL_POSITION)
    return log


def record_goal_changes(servos: dict[int, Any], out: IO[str], goal_address: int) -> None:
    """Make every servo append ``<time.monotonic() s> <id> <ticks>`` to ``out`` when a write changes its goal.

    Args:
        servos: the emulator's servos by ID (objects with ``write(addr, data) -> error`` and
            ``get(addr, size, signed)``); their ``write`` is wrapped on the instance.
        out: text stream the lines go to (written from the emulator's serving thread).
        goal_address: control table address of Goal Position (4 bytes, signed ticks).
    """
    for sid, servo in servos.items():
        original: Callable[[int, bytes], int] = servo.write

        def write(addr: int, data: bytes, _write: Callable[[int, bytes], int] = original,
                  _servo: Any = servo, _sid: int = sid) -> int:
            before = _servo.get(goal_address, 4, signed=True)
            error = _write(addr, data)
            if error == 0 and addr <= goal_address < addr + len(data):
                after = _servo.get(goal_address, 4, signed=True)
                if after != before:
                    out.write(f"{time.monotonic():.6f} {_sid} {after}\n")
            return error

        servo.write = write


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C, SIGTERM or SIGHUP (or ``--duration``)."""
    with _stop_on_signals():
        if args.body is not None:
            return run_body(args)
        return run_plain(args)


def run_plain(args: argparse.Namespace) -> int:
    """The servos alone on a pty."""
    for flag, value in (("--truth", args.truth), ("--world", args.world), ("--mocap-topic", args.mocap_topic)):
        if value is not None:
            raise ValueError(f"{flag}: needs --body ROBOT")
    if args.lifted:
        raise ValueError("--lifted: needs --body ROBOT")
    if args.voltage is not None and not 0.1 <= args.voltage <= _MAX_VOLTAGE_V:
        raise ValueError(f"--voltage: must be in [0.1, {_MAX_VOLTAGE_V:g}] V, got {args.voltage}")
    import numpy as np

    from snake_hardware.dynamixel import control_table as ct
    from snake_hardware.emulator import ServoBusEmulator

    ids = parse_ids(args.ids)
    if args.model not in ct.MODELS:
        raise ValueError(f"--model: {args.model!r} is not one of {sorted(ct.MODELS)}")
    if args.duration < 0:
        raise ValueError("--duration: must be >= 0")
    if not 0 <= args.spread <= 2047:
        raise ValueError("--spread: must be in [0, 2047] ticks")
    vanished = parse_ids(args.vanish, "--vanish") if args.vanish else []
    unknown = sorted(set(vanished) - set(ids))
    if unknown:
        raise IdSpecError(f"--vanish: IDs {unknown} are not on the bus (--ids {args.ids})")
    if args.delay < 0:
        raise ValueError("--delay: must be >= 0 s")
    for flag, prob in (("--drop", args.drop), ("--corrupt", args.corrupt)):
        if not 0.0 <= prob <= 1.0:
            raise ValueError(f"{flag}: must be a probability in [0, 1]")
    check_link(args.link)
    rng = np.random.default_rng(args.seed)
    positions = {i: ct.TICKS_CENTER + int(rng.integers(-args.spread, args.spread + 1)) for i in ids}
    emu = ServoBusEmulator(ids, models=dict.fromkeys(ids, args.model), positions=positions,
                           link=args.link, seed=args.seed)
    emu.set_delay(args.delay)
    emu.set_fault_rates(drop=args.drop, corrupt=args.corrupt)
    if args.voltage is not None:
        emu.set_voltage(args.voltage)
    for sid in vanished:
        emu.vanish(sid)
    goal_log = open_goal_log(args.goal_log, emu.servos)
    try:
        emu.start()
        print(emu.port, flush=True)
        print(f"# {len(ids)} x {args.model}, IDs {args.ids}; Ctrl-C to stop", flush=True)
        print(f"# faults: delay {args.delay:g} s, drop {args.drop:g}, corrupt {args.corrupt:g}, "
              f"vanished {','.join(map(str, vanished)) or 'none'}", flush=True)
        deadline = time.monotonic() + args.duration if args.duration else None
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        emu.stop()
        if goal_log is not None:
            goal_log.close()
        print(f"# answers dropped {emu.dropped}, corrupted {emu.corrupted}, delayed {emu.delayed_answers}",
              flush=True)
    return 0


def run_body(args: argparse.Namespace) -> int:
    """``--body``: the bench robot on a pty, with its motion capture if asked; until Ctrl-C or ``--duration``."""
    from snake_hardware.emulator.body import BenchRobot, write_truth
    from snake_hardware.emulator.mocap import MocapSystem

    if args.spread:
        raise ValueError("--spread: does not apply to --body (the body starts straight)")
    if args.voltage is not None:
        raise ValueError("--voltage: does not apply to --body (the bench robot's supply sags with its current)")
    if args.duration < 0:
        raise ValueError("--duration: must be >= 0")
    check_link(args.link)
    ros = None
    mocap = None
    if args.mocap_topic is not None:
        if not args.mocap_topic:
            raise ValueError("--mocap-topic: give a topic name, e.g. /vrpn_mocap/snake_head/pose")
        ros = _MocapNode(args.mocap_topic)
        mocap = MocapSystem(ros.deliver, seed=args.seed)
    bench = BenchRobot(args.body, seed=args.seed, world=args.world, lifted=args.lifted, link=args.link,
                       on_pose=mocap.offer if mocap is not None else None)
    ids = [j.servo_id for j in bench.robot.joints]
    if args.ids != "1-18" and parse_ids(args.ids) != ids:
        raise IdSpecError(f"--ids: the body's servos are {ids} (from its YAML), not {args.ids}")
    emu = bench.bus
    emu.set_delay(args.delay)
    emu.set_fault_rates(drop=args.drop, corrupt=args.corrupt)
    vanished = parse_ids(args.vanish, "--vanish") if args.vanish else []
    unknown = sorted(set(vanished) - set(ids))
    if unknown:
        raise IdSpecError(f"--vanish: IDs {unknown} are not on the bus")
    for sid in vanished:
        emu.vanish(sid)
    if args.truth is not None:
        try:
            write_truth(args.truth, bench)
        except OSError as err:
            raise ValueError(f"--truth: cannot write {args.truth}: {err.strerror or err}") from None
    goal_log = open_goal_log(args.goal_log, emu.servos)
    try:
        if mocap is not None:
            mocap.start()
        bench.start()
        print(bench.port, flush=True)
        print(f"# bench robot {bench.robot.name}, seed {args.seed}, world {bench.world.name}"
              f"{', lifted' if args.lifted else ''}; {len(ids)} servos; Ctrl-C to stop", flush=True)
        if args.mocap_topic:
            print(f"# mocap: {args.mocap_topic}", flush=True)
        deadline = time.monotonic() + args.duration if args.duration else None
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        bench.stop()
        if mocap is not None:
            mocap.stop()
        if ros is not None:
            ros.close()
        if goal_log is not None:
            goal_log.close()
        s = bench.stats
        print(f"# simulated {s.sim_time_s:.1f} s, realtime factor {s.realtime_factor:.2f}, "
              f"fell behind {s.lag_events} times; answers dropped {emu.dropped}, corrupted {emu.corrupted}",
              flush=True)
    return 0


class _MocapNode:
    """A small rclpy node publishing the motion capture (imported only for ``--mocap-topic``)."""

    def __init__(self, topic: str) -> None:
        import rclpy
        from rclpy.context import Context

        from snake_ros.bench_robot_node import MocapPublisher

        self._context = Context()
        rclpy.init(context=self._context)
        self._node = rclpy.create_node("bench_robot_mocap", context=self._context)
        self._publisher = MocapPublisher(self._node, topic)
        self.deliver = self._publisher.deliver

    def close(self) -> None:
        self._node.destroy_node()
        self._context.try_shutdown()
