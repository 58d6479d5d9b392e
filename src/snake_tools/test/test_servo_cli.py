"""``snake servo`` against the Protocol 2.0 emulator over a real pty."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from snake_core.robot import load_robot, resolve_robot_path
from snake_hardware.dynamixel.backend import DynamixelBackend, DynamixelSettings
from snake_hardware.emulator import ServoBusEmulator
from snake_tools.cli import main

_LATENCY = "30"  # ms: generous read timeouts, the emulator thread shares this process
# A transaction fails only when every attempt timed out: on a loaded machine the emulator
# thread may not run for a few read timeouts, so many attempts (each 62 ms at 30 ms latency).
_RETRIES = "10"


def _ticks(sid: int) -> int:
    """A different uncalibrated horn position per servo, within the limited joints' reach."""
    return 2048 + 53 * (sid - 9)


def _expected_offset(ticks: int) -> float:
    """Independent: servo angle at the present position, 4096 ticks per turn, 2048 at 0."""
    return round((ticks - 2048) * 2 * math.pi / 4096, 4)


def test_prints_and_writes_zero_offsets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    robot = load_robot("tsnake")
    ids = [j.servo_id for j in robot.joints]
    out = tmp_path / "tsnake_calibrated.yaml"
    with ServoBusEmulator(ids, positions={i: _ticks(i) for i in ids}) as emu:
        code = main(["servo", "--robot", "tsnake", "--port", emu.port, "--latency-ms", _LATENCY, "--retries", _RETRIES,
                     "--json", "--write", str(out)])
        assert code == 0
        result = json.loads(capsys.readouterr().out)
        got = {r["joint"]: r["zero_offset"] for r in result["joints"]}
        assert got == {j.name: pytest.approx(_expected_offset(_ticks(j.servo_id)), abs=1e-9) for j in robot.joints}
        assert not any(emu.torque_enabled(i) for i in ids)
        # The copy keeps the original's comments, and with it the robot reads zero everywhere.
        text = out.read_text()
        assert text.startswith(resolve_robot_path("tsnake").read_text().splitlines()[0])
        calibrated = load_robot(out, calibrated=False)
        b = DynamixelBackend(calibrated, DynamixelSettings(port=emu.port, latency_ms=float(_LATENCY),
                                                               retries=int(_RETRIES)))
        b.open()
        try:
            assert b.read().position == pytest.approx([0.0] * len(ids), abs=math.pi / 4096)
        finally:
            b.close()


def test_refuses_to_write_when_a_limited_joint_no_longer_fits(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    robot = load_robot("tsnake")
    ids = [j.servo_id for j in robot.joints]
    positions = {i: 2048 for i in ids} | {4: 4000}   # m2_dorsal's horn a half turn off
    out = tmp_path / "copy.yaml"
    with ServoBusEmulator(ids, positions=positions) as emu:
        assert main(["servo", "--port", emu.port, "--latency-ms", _LATENCY, "--retries", _RETRIES]) == 0
        printed = capsys.readouterr().out
        assert "m2_dorsal" in printed and "outside 0..4095" in printed
        assert main(["servo", "--port", emu.port, "--latency-ms", _LATENCY, "--retries", _RETRIES,
                     "--write", str(out)]) == 2
        assert "--write: not written" in capsys.readouterr().err and "m2_dorsal" in printed
        assert not out.exists()


def test_servo_emulator_spread_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["servo-emulator", "--spread", "3000", "--duration", "0.1"]) == 2
    assert "--spread" in capsys.readouterr().err
