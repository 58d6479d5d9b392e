"""The emulator's own Protocol 2.0 framing against the e-Manual example and dynamixel-sdk."""

from __future__ import annotations

import numpy as np
import pytest
from dynamixel_sdk import PacketHandler

from snake_hardware.emulator import protocol as p

# e-Manual, Protocol 2.0, PING example: instruction packet to ID 1.
_PING_ID1 = bytes.fromhex("FFFFFD0001030001194E")


def test_ping_packet_matches_the_emanual_example() -> None:
    assert p.build(1, p.INST_PING) == _PING_ID1


@pytest.mark.parametrize("seed", range(5))
def test_crc_agrees_with_dynamixel_sdk(seed: int) -> None:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, int(rng.integers(1, 200)), dtype=np.uint8).tobytes()
    assert p.crc16(data) == PacketHandler(2.0).updateCRC(0, list(data), len(data))


def test_stuffing_round_trip_and_agrees_with_sdk() -> None:
    params = bytes([0x74, 0x00, 0xFF, 0xFF, 0xFD, 0x01, 0xFF, 0xFF, 0xFD])
    pkt = p.build(3, p.INST_WRITE, params)
    # Two FF FF FD triples in the payload -> two stuffed FD bytes.
    assert len(pkt) == 10 + len(params) + 2
    sdk = PacketHandler(2.0)
    tx = [0xFF, 0xFF, 0xFD, 0x00, 3, 0, 0, p.INST_WRITE, *params, 0, 0]
    n = len(params) + 3
    tx[5], tx[6] = n & 0xFF, n >> 8
    stuffed = sdk.addStuffing(tx)
    assert bytes(stuffed[:len(pkt) - 2]) == pkt[:-2]
    parsed = p.PacketParser().feed(pkt)
    assert len(parsed) == 1 and parsed[0].params == params and parsed[0].id == 3


def test_parser_survives_garbage_split_reads_and_bad_crc() -> None:
    good = p.build(7, p.INST_READ, bytes([132, 0, 4, 0]))
    bad = bytearray(p.build(8, p.INST_READ, bytes([132, 0, 4, 0])))
    bad[-1] ^= 0xFF
    stream = b"\x00\xff\x13" + bytes(bad) + good + good
    parser = p.PacketParser()
    got = []
    for i in range(0, len(stream), 5):
        got += parser.feed(stream[i:i + 5])
    assert [(g.id, g.params) for g in got] == [(7, bytes([132, 0, 4, 0]))] * 2
    assert parser.crc_errors == 1 and parser.bad_crc_ids == [8]
