"""``snake bench bridge``: software time per bridge cycle vs the bus's wire time.

One cycle is what the bridge does at ``rate_hz``: one sync write of goal positions,
one (FAST, where the servos support it; ``--plain-sync-read`` for SYNC READ) sync read
of the state block (Goal Position .. Present Position: the goal read back, current,
velocity, position), and one ``joint_states`` publish (a real rclpy
publisher). It is timed against the servo emulator running in a separate process on a
pty, so the measured time is this code plus the emulator's answer time; the time spent
waiting for the emulator's answers is measured and subtracted to give the software
share (``software_ms_per_cycle``, median, and ``software_ms_p99``). The CPU time of the
cycle's thread (``software_cpu_ms_per_cycle``) is the same software without the time the
process was not scheduled, so it holds up on a loaded machine. The wire time is computed
from the bytes the cycle put on and expected from the bus (counted by the backend's
port, checked against the Protocol 2.0 packet sizes) at 10 bits per byte (8N1), plus the
servos' Return Delay Time; its inverse is the wire-bound loop rate.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from snake_core.robot import RobotModel, resolve_robot_path, robot_from_dict
from snake_tools.cli import count, int_at_least, non_negative_int
from snake_tools.output import print_json, print_table

_BITS_PER_BYTE = 10          # 8N1 framing
_START_TIMEOUT_S = 20.0      # s, waiting for the emulator process
_LATENCY_MS = 10.0           # ms, read timeout margin: the emulator process shares 2 busy cores


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake bench bridge``."""
    p = subparsers.add_parser("bridge", help="bridge software time per cycle vs wire time (emulated servos)")
    p.add_argument("--servos", type=count, default=18, help="number of servos (multiple of 3, default 18)")
    p.add_argument("--cycles", type=int_at_least(10), default=1000, help="cycles to time")
    p.add_argument("--return-delay-us", type=non_negative_int, default=0, help="servo Return Delay Time, us")
    p.add_argument("--plain-sync-read", action="store_true",
                   help="read the state with SYNC READ (one status packet per servo), not FAST SYNC READ")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def wire_bytes(n: int, fast: bool = True) -> dict[str, int]:
    """Bytes of one cycle from the Protocol 2.0 packet layout (no byte stuffing).

    Sync write: 10-byte header/INST/CRC + 4 (address, length) + n x (ID + 4 data).
    Sync read (either instruction): 10 + 4 + n IDs. Answers to SYNC READ: n status
    packets of 11 + 20 data bytes (the state block); to FAST SYNC READ: one packet, 8 bytes
    of header, ID, LEN and instruction, then n x (error + ID + 20 data + CRC 2).
    """
    from snake_hardware.dynamixel import control_table as ct

    sync_write = 10 + 4 + n * 5
    sync_read = 10 + 4 + n
    answers = 8 + n * (4 + ct.STATE_BLOCK_LEN) if fast else n * (11 + ct.STATE_BLOCK_LEN)
    return {"sync_write": sync_write, "sync_read": sync_read, "answers": answers,
            "total": sync_write + sync_read + answers}


def _robot(servos: int) -> RobotModel:
    if servos < 3 or servos % 3:
        raise ValueError(f"--servos: must be a positive multiple of 3 (T-Snake modules), got {servos}")
    data = yaml.safe_load(resolve_robot_path("tsnake").read_text())
    modules = servos // 3
    data["body"]["n_modules"] = modules
    data["joints"] = [{"name": f"m{m + 1}_{t}", "type": t, "servo_id": 3 * m + k + 1}
                      for m in range(modules) for k, t in enumerate(data["body"]["joint_order"])]
    for block in ("gaits", "following"):  # only the servo table is timed; tsnake's gaits need its 6 modules
        data.pop(block, None)
    return robot_from_dict(data, source=Path(f"tsnake_{servos}.yaml"))


def run(args: argparse.Namespace) -> int:
    """Time the cycle and print the numbers."""
    import rclpy
    from sensor_msgs.msg import JointState

    from snake_hardware.backend import BackendError
    from snake_hardware.dynamixel.backend import DynamixelBackend, DynamixelSettings
    from snake_ros.qos import SENSOR_PUB_QOS

    if args.cycles < 10:
        raise ValueError("--cycles: need at least 10")
    robot = _robot(args.servos)
    with tempfile.TemporaryDirectory() as tmp:
        link = Path(tmp) / "ttyDXL"
        emu = subprocess.Popen([sys.executable, "-m", "snake_tools.cli", "servo-emulator", "--ids",
                                f"1-{args.servos}", "--link", str(link)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + _START_TIMEOUT_S
            while not link.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            if not link.exists():
                raise OSError("the servo emulator did not start")
            backend = DynamixelBackend(robot, DynamixelSettings(
                port=str(link), baud_rate=4_000_000, latency_ms=_LATENCY_MS, return_delay_us=args.return_delay_us,
                watchdog_s=1.0, fast_sync_read=not args.plain_sync_read))
            os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 80))
            context = rclpy.Context()
            rclpy.init(context=context)
            node = rclpy.create_node("bench_bridge", context=context)
            pub = node.create_publisher(JointState, "joint_states", SENSOR_PUB_QOS)
            try:
                try:
                    backend.open()
                except BackendError as err:
                    raise OSError(f"emulated bus: {err}") from err
                backend.read()
                backend.set_torque(True)
                goals = dict.fromkeys(backend.joint_names, 0.1)
                times = np.empty(args.cycles)
                waits = np.empty(args.cycles)
                cpu = np.empty(args.cycles)
                fast = backend.fast_sync_read
                c = backend.counters
                warm = 50
                for k in range(args.cycles + warm):
                    if k == warm:
                        tx0, rx0, timeouts0 = c.bytes_tx, c.bytes_rx, c.timeouts
                    w0 = backend.bus_wait_s
                    c0 = time.thread_time()
                    t0 = time.perf_counter()
                    backend.write_goals(goals)
                    r = backend.read()
                    msg = JointState()
                    msg.header.stamp = node.get_clock().now().to_msg()
                    msg.name = list(r.names)
                    msg.position = r.position.tolist()
                    msg.velocity = r.velocity.tolist()
                    msg.effort = r.effort.tolist()
                    pub.publish(msg)
                    if k >= warm:
                        times[k - warm] = time.perf_counter() - t0
                        cpu[k - warm] = time.thread_time() - c0
                        waits[k - warm] = backend.bus_wait_s - w0
                tx = (c.bytes_tx - tx0) / args.cycles
                rx = (c.bytes_rx - rx0) / args.cycles
                timeouts = c.timeouts - timeouts0
                backend.set_torque(False)
            finally:
                backend.close()
                node.destroy_node()
                rclpy.shutdown(context=context)
        finally:
            emu.terminate()
            emu.wait(timeout=10)
    counted = tx + rx
    delay_s = args.servos * args.return_delay_us * 1e-6

    def wire_ms(baud: float) -> float:
        return (counted * _BITS_PER_BYTE / baud + delay_s) * 1e3

    formula = wire_bytes(args.servos, fast)
    out = {
        "servos": args.servos,
        "cycles": args.cycles,
        "sync_read": "fast" if fast else "plain",
        "software_ms_per_cycle": float(np.median(times - waits) * 1e3),
        "software_ms_p99": float(np.percentile(times - waits, 99) * 1e3),
        "software_cpu_ms_per_cycle": float(np.median(cpu) * 1e3),
        "software_cpu_ms_p99": float(np.percentile(cpu, 99) * 1e3),
        "cycle_ms_with_emulator": float(np.median(times) * 1e3),
        "emulator_wait_ms": float(np.median(waits) * 1e3),
        "wire_ms_1mbps": wire_ms(1e6),
        "wire_ms_4mbps": wire_ms(4e6),
        "max_rate_hz_1mbps_wire": 1e3 / wire_ms(1e6),
        "max_rate_hz_4mbps_wire": 1e3 / wire_ms(4e6),
        "bytes_per_cycle": counted,
        "bytes_per_cycle_formula": formula["total"],
        "bytes_per_cycle_answers": formula["answers"],
        "bytes_per_cycle_plain_sync_read": wire_bytes(args.servos, False)["total"],
        "return_delay_us": args.return_delay_us,
        "timeouts_during_run": timeouts,
    }
    if args.json:
        print_json(out)
    else:
        print_table(list(out.items()),
                    title=f"bridge cycle: sync write + {out['sync_read']} sync read + joint_states publish")
    return 0
