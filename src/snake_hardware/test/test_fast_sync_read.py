"""FAST SYNC READ (instruction 0x8A): the emulator's answer bytes and the backend's use of it.

The emulator's answer is checked byte by byte against a packet built here with a
bit-by-bit CRC-16 (checked against the e-Manual's SYNC READ example), not with either
implementation's table. The backend must read exactly what plain SYNC READ reads and
keep its integrity checks: wrong segment IDs, truncated answers and stale packets.
"""

from __future__ import annotations

import math
import os
import select
import tty
from collections.abc import Iterator

import numpy as np
import pytest
from dynamixel_sdk import PacketHandler

from snake_core.robot import RobotModel, load_robot
from snake_hardware.dynamixel import control_table as ct
from snake_hardware.dynamixel.backend import DynamixelBackend, DynamixelSettings
from snake_hardware.dynamixel.port import _PacketHandler
from snake_hardware.dynamixel.transactions import _FAST_GIVE_UP
from snake_hardware.emulator import ServoBusEmulator

_LATENCY_MS = 30.0   # generous read timeouts: the emulator thread shares this process (and 2 busy cores)
_ANSWER_WAIT_S = 5.0  # s, bound on waiting for the emulator's answer bytes (not a timing check)
# e-Manual, Protocol 2.0, SYNC READ example: Present Position (132, 4 bytes) of IDs 1 and 2.
_SYNC_READ_EXAMPLE = bytes.fromhex("FFFFFD00FE0900828400040001 02CEFA".replace(" ", ""))


def _crc_bitwise(data: bytes) -> int:
    """CRC-16, polynomial 0x8005, initial 0, MSB first, one bit at a time."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def _with_crc(frame: bytes) -> bytes:
    c = _crc_bitwise(frame)
    return frame + bytes([c & 0xFF, c >> 8])


def _fast_sync_read_instruction(addr: int, size: int, ids: list[int]) -> bytes:
    length = 7 + len(ids)   # instruction + address (2) + size (2) + IDs + CRC (2)
    return _with_crc(bytes([0xFF, 0xFF, 0xFD, 0x00, 0xFE, length & 0xFF, length >> 8, 0x8A,
                            addr & 0xFF, addr >> 8, size & 0xFF, size >> 8, *ids]))


def _read_exactly(fd: int, n: int) -> bytes:
    out = b""
    while len(out) < n:
        ready, _, _ = select.select([fd], [], [], _ANSWER_WAIT_S)
        if not ready:
            break
        out += os.read(fd, 4096)
    return out


def _ticks(sid: int) -> int:
    return 2048 + 53 * sid - 400


@pytest.fixture
def robot() -> RobotModel:
    return load_robot("tsnake")


@pytest.fixture
def emu(robot: RobotModel) -> Iterator[ServoBusEmulator]:
    ids = [j.servo_id for j in robot.joints]
    e = ServoBusEmulator(ids, positions={i: _ticks(i) for i in ids}).start()
    try:
        yield e
    finally:
        e.stop()


def _backend(robot: RobotModel, emu: ServoBusEmulator, fast: bool = True) -> DynamixelBackend:
    b = DynamixelBackend(robot, DynamixelSettings(port=emu.port, latency_ms=_LATENCY_MS, watchdog_s=2.0,
                                                  fast_sync_read=fast))
    b.open()
    return b


def test_bitwise_crc_reproduces_the_emanual_sync_read_example() -> None:
    assert _with_crc(_SYNC_READ_EXAMPLE[:-2]) == _SYNC_READ_EXAMPLE


@pytest.mark.parametrize("seed", range(3))
def test_backend_crc_agrees_with_the_sdk(seed: int) -> None:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, int(rng.integers(2, 300)), dtype=np.uint8).tolist()
    ours = _PacketHandler()
    assert ours.updateCRC(0, data, len(data)) == PacketHandler(2.0).updateCRC(0, data, len(data)) \
        == _crc_bitwise(bytes(data))
    # Only the first data_blk_size bytes count, and a CRC can be continued.
    half = len(data) // 2
    assert ours.updateCRC(0, [*data, 7, 7], len(data)) == _crc_bitwise(bytes(data))
    assert ours.updateCRC(ours.updateCRC(0, data, half), data[half:], len(data) - half) == _crc_bitwise(bytes(data))


def test_emulator_answers_fast_sync_read_with_one_chained_packet(emu: ServoBusEmulator) -> None:
    ids = [2, 5, 9]
    size = 4
    fd = os.open(emu.port, os.O_RDWR | os.O_NOCTTY)
    try:
        tty.setraw(fd)
        os.write(fd, _fast_sync_read_instruction(ct.PRESENT_POSITION, size, ids))
        seg = size + 4
        total = 8 + len(ids) * seg
        got = _read_exactly(fd, total)
    finally:
        os.close(fd)
    # Expected, built here: header, ID 0xFE, LEN, 0x55, then per servo error, ID, data and
    # the CRC of everything from the header to the end of that servo's data.
    length = 1 + len(ids) * seg
    want = bytearray([0xFF, 0xFF, 0xFD, 0x00, 0xFE, length & 0xFF, length >> 8, 0x55])
    for sid in ids:
        want = bytearray(_with_crc(bytes(want) + bytes([0, sid]) + _ticks(sid).to_bytes(4, "little")))
    assert got == bytes(want)
    assert emu.instructions[0x8A] == 1


def test_emulator_fast_sync_read_stops_at_a_silent_servo(emu: ServoBusEmulator) -> None:
    emu.vanish(5)
    fd = os.open(emu.port, os.O_RDWR | os.O_NOCTTY)
    try:
        tty.setraw(fd)
        os.write(fd, _fast_sync_read_instruction(ct.PRESENT_POSITION, 4, [2, 5, 9]))
        got = _read_exactly(fd, 8 + 8)        # header and servo 2's segment
        # The first servo asked is silent: nothing answers. A ping of ID 2 afterwards shows
        # that its answer is the next (and only) thing on the line.
        os.write(fd, _fast_sync_read_instruction(ct.PRESENT_POSITION, 4, [5, 9]))
        os.write(fd, _with_crc(bytes([0xFF, 0xFF, 0xFD, 0x00, 2, 3, 0, 0x01])))
        rest = _read_exactly(fd, 14)
    finally:
        os.close(fd)
    assert got[4] == 0xFE and got[9] == 2 and len(got) == 16   # LEN still announces three servos
    assert got[5] == 1 + 3 * 8
    model = ct.model("XM430-W350").number
    assert rest == _with_crc(bytes([0xFF, 0xFF, 0xFD, 0x00, 2, 7, 0, 0x55, 0, model & 0xFF, model >> 8, 46]))


def test_fast_and_plain_sync_read_read_the_same_state(robot: RobotModel, emu: ServoBusEmulator) -> None:
    fast = _backend(robot, emu, fast=True)
    try:
        assert fast.fast_sync_read
        rf = fast.read()
        n_fast = emu.instructions.get(0x8A, 0)
    finally:
        fast.close()
    plain = _backend(robot, emu, fast=False)
    try:
        assert not plain.fast_sync_read
        rp = plain.read()
    finally:
        plain.close()
    assert n_fast >= 1 and emu.instructions.get(0x8A, 0) == n_fast   # the plain backend never sent 0x8A
    np.testing.assert_array_equal(rf.position, rp.position)
    np.testing.assert_array_equal(rf.velocity, rp.velocity)
    np.testing.assert_array_equal(rf.effort, rp.effort)
    tick = 2 * math.pi / 4096   # independent: zero offset 0, direction +1 in tsnake.yaml
    assert rf.position == pytest.approx([(_ticks(j.servo_id) - 2048) * tick for j in robot.joints], abs=1e-9)


def test_old_firmware_or_setting_keeps_plain_sync_read() -> None:
    assert ct.supports_fast_sync_read("XM430-W350", 45)
    assert not ct.supports_fast_sync_read("XM430-W350", 44)
    assert not ct.supports_fast_sync_read("AX-12A", 99)


def test_fast_read_segment_with_a_wrong_id_is_refused(robot: RobotModel, emu: ServoBusEmulator) -> None:
    """A packet of the right ID and length whose segments name other servos: corrupt, retried plainly."""
    b = _backend(robot, emu)
    try:
        b.read()
        ids = [j.servo_id for j in robot.joints]
        seg = ct.STATE_BLOCK_LEN + 4
        # Segments in the wrong order (first two IDs swapped), each with a valid layout.
        body = bytearray()
        for sid in [ids[1], ids[0], *ids[2:]]:
            body += bytes([0, sid]) + bytes(ct.STATE_BLOCK_LEN) + b"\x00\x00"
        # inject_status sends 0x55, an error byte, then the parameters: the first segment's
        # error byte is that error byte, the last CRC is the packet's.
        emu.inject_status(0xFE, bytes(body[1:-2]))
        stale = b.counters.stale_packets
        r = b.read()
        assert len(body) == len(ids) * seg
        assert b.counters.stale_packets == stale + 1
        assert b.counters.extra["fast_read_failures"] == 1
        tick = 2 * math.pi / 4096
        assert r.position == pytest.approx([(_ticks(j.servo_id) - 2048) * tick for j in robot.joints], abs=1e-9)
        b.read()
        assert b.counters.extra["fast_read_failures"] == 1   # the next read is fast again and succeeds
    finally:
        b.close()


def test_truncated_fast_answer_is_detected_and_read_again(robot: RobotModel, emu: ServoBusEmulator) -> None:
    b = _backend(robot, emu)
    try:
        b.read()
        errors = b.counters.crc_errors + b.counters.timeouts
        emu.truncate_responses(1)
        r = b.read()
        assert b.counters.crc_errors + b.counters.timeouts == errors + 1
        assert b.counters.extra["fast_read_failures"] == 1
        tick = 2 * math.pi / 4096
        assert r.position == pytest.approx([(_ticks(j.servo_id) - 2048) * tick for j in robot.joints], abs=1e-9)
    finally:
        b.close()


def test_stale_broadcast_packet_of_another_length_is_skipped(robot: RobotModel, emu: ServoBusEmulator) -> None:
    b = _backend(robot, emu)
    try:
        b.read()
        stale = b.counters.stale_packets
        emu.inject_status(0xFE, bytes(7))      # broadcast ID, wrong length
        emu.inject_status(4, bytes(ct.STATE_BLOCK_LEN))   # a late plain answer of the same block
        r = b.read()
        assert b.counters.stale_packets == stale + 2
        assert "fast_read_failures" not in b.counters.extra
        tick = 2 * math.pi / 4096
        assert r.position == pytest.approx([(_ticks(j.servo_id) - 2048) * tick for j in robot.joints], abs=1e-9)
    finally:
        b.close()


def test_stuffed_fast_answer_reads_the_same_as_plain(robot: RobotModel) -> None:
    """A state whose bytes hold a header pattern (FF FF FD) is byte-stuffed on the wire and read back intact."""
    ids = [j.servo_id for j in robot.joints]
    sid = ids[4]
    with ServoBusEmulator(ids, positions={i: _ticks(i) for i in ids}, sim_time=True) as e:
        # Present Velocity -1 (FF FF FF FF) followed by Present Position 0x7FD (FD 07 00 00):
        # the payload holds FF FF FD, which the sender stuffs with one more FD.
        servo = e.servos[sid]
        servo.position = float(0x7FD)
        servo.velocity = -ct.VELOCITY_UNIT_RAD_S * 4096 / (2 * math.pi)
        readings = []
        for fast in (True, False):
            b = _backend(robot, e, fast=fast)
            try:
                e.settle()
                tx = e.tx_bytes
                readings.append(b.read())
                e.settle()   # the emulator counts its bytes after writing them
                stuffed_bytes = e.tx_bytes - tx - (8 + len(ids) * (ct.STATE_BLOCK_LEN + 4) if fast
                                                   else len(ids) * (11 + ct.STATE_BLOCK_LEN))
            finally:
                b.close()
            assert stuffed_bytes == 1
        assert e.register(sid, ct.PRESENT_VELOCITY, 4, signed=True) == -1
    rf, rp = readings
    np.testing.assert_array_equal(rf.position, rp.position)
    np.testing.assert_array_equal(rf.velocity, rp.velocity)
    i = ids.index(sid)
    assert rf.velocity[i] == pytest.approx(-ct.VELOCITY_UNIT_RAD_S)
    assert rf.position[i] == pytest.approx((0x7FD - 2048) * 2 * math.pi / 4096)


def test_repeatedly_failing_fast_reads_fall_back_to_plain_sync_read(robot: RobotModel,
                                                                     emu: ServoBusEmulator) -> None:
    b = _backend(robot, emu)
    try:
        tick = 2 * math.pi / 4096
        want = [(_ticks(j.servo_id) - 2048) * tick for j in robot.joints]
        for k in range(_FAST_GIVE_UP):
            assert b.fast_sync_read
            emu.drop_responses(1)          # the fast answer is lost; the plain retry is answered
            assert b.read().position == pytest.approx(want, abs=1e-9)
            assert b.counters.extra["fast_read_failures"] == k + 1
        assert not b.fast_sync_read
        sent = emu.instructions[0x8A]
        assert b.read().position == pytest.approx(want, abs=1e-9)
        assert emu.instructions[0x8A] == sent    # plain SYNC READ from now on
        b.reconnect()
        assert b.fast_sync_read                  # decided again at open
    finally:
        b.close()
