"""Dynamixel Protocol 2.0 framing, written from the protocol description (not from dynamixel-sdk).

Packet: ``FF FF FD 00 | ID | LEN_L LEN_H | INST | PARAMS... | CRC_L CRC_H`` where LEN
counts INST + PARAMS (after byte stuffing) + 2 CRC bytes and the CRC-16 (polynomial
0x8005, initial value 0, no reflection: "CRC-16-IBM" as the e-Manual computes it)
covers every byte before it. Byte stuffing: inside INST..PARAMS, each ``FF FF FD``
gets an extra ``FD`` so that no header appears in the payload.
"""

from __future__ import annotations

from dataclasses import dataclass

HEADER = b"\xff\xff\xfd\x00"
BROADCAST_ID = 0xFE
STATUS = 0x55

INST_PING = 0x01
INST_READ = 0x02
INST_WRITE = 0x03
INST_REG_WRITE = 0x04
INST_ACTION = 0x05
INST_FACTORY_RESET = 0x06
INST_REBOOT = 0x08
INST_CLEAR = 0x10
INST_SYNC_READ = 0x82
INST_SYNC_WRITE = 0x83
INST_FAST_SYNC_READ = 0x8A
INST_BULK_READ = 0x92
INST_BULK_WRITE = 0x93

# Status packet error numbers (bits 0..6 of the error byte); bit 7 is the alert flag.
ERR_RESULT_FAIL = 1
ERR_INSTRUCTION = 2
ERR_CRC = 3
ERR_DATA_RANGE = 4
ERR_DATA_LENGTH = 5
ERR_DATA_LIMIT = 6
ERR_ACCESS = 7
ERR_ALERT = 0x80

_MAX_LENGTH = 1024  # bytes, larger LEN fields are treated as garbage
_POLY = 0x8005


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i << 8
        for _ in range(8):
            crc = ((crc << 1) ^ _POLY) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_TABLE = _crc_table()


def crc16(data: bytes | bytearray) -> int:
    """CRC-16 (poly 0x8005, init 0, MSB first) of ``data``."""
    crc = 0
    for b in data:
        crc = ((crc << 8) ^ _TABLE[((crc >> 8) ^ b) & 0xFF]) & 0xFFFF
    return crc


def stuff(prefix: bytes, payload: bytes) -> bytes:
    """Byte-stuff ``payload`` (INST + PARAMS) that follows ``prefix`` (header, ID, LEN)."""
    out = bytearray()
    prev2, prev1 = prefix[-2], prefix[-1]
    for b in payload:
        out.append(b)
        if b == 0xFD and prev1 == 0xFF and prev2 == 0xFF:
            out.append(0xFD)
        prev2, prev1 = prev1, b
    return bytes(out)


def unstuff(prefix: bytes, payload: bytes) -> bytes:
    """Undo :func:`stuff`: drop the ``FD`` that follows each ``FF FF FD`` in the payload."""
    out = bytearray()
    window = bytearray(prefix[-2:])  # the two bytes before the current one, as transmitted
    skip = False
    for b in payload:
        if skip:
            skip = False
            window = bytearray([window[-1], b])
            continue
        out.append(b)
        if b == 0xFD and window == b"\xff\xff":
            skip = True
        window = bytearray([window[-1], b])
    return bytes(out)


def build(packet_id: int, instruction: int, params: bytes = b"") -> bytes:
    """A complete packet (stuffed, with CRC)."""
    body = bytes([instruction]) + bytes(params)
    # LEN is computed after stuffing; stuffing looks back at LEN bytes only for the
    # first two payload bytes, which can be FF FF only if LEN_L/LEN_H are FF: never
    # for our sizes, so stuff with a placeholder LEN first.
    stuffed = stuff(HEADER + bytes([packet_id, 0, 0]), body)
    length = len(stuffed) + 2
    head = HEADER + bytes([packet_id, length & 0xFF, length >> 8])
    frame = head + stuffed
    crc = crc16(frame)
    return frame + bytes([crc & 0xFF, crc >> 8])


def build_status(servo_id: int, error: int, params: bytes = b"") -> bytes:
    """A status packet: instruction 0x55, then the error byte, then ``params``."""
    return build(servo_id, STATUS, bytes([error & 0xFF]) + bytes(params))


@dataclass(frozen=True)
class Packet:
    """A parsed (unstuffed) packet.

    Attributes:
        id: Packet ID.
        instruction: Instruction byte.
        params: Parameters after unstuffing (for a status packet the error byte first).
        raw_length: Bytes the packet took on the wire.
    """

    id: int
    instruction: int
    params: bytes
    raw_length: int


class PacketParser:
    """Incremental parser of a byte stream into packets.

    Feed bytes with :meth:`feed`; it returns complete packets. Bytes that are not part
    of a valid frame are dropped; frames with a bad CRC are counted in
    :attr:`crc_errors` and reported through :attr:`bad_crc_ids`.
    """

    def __init__(self) -> None:
        """Empty parser."""
        self._buf = bytearray()
        self.crc_errors = 0
        self.garbage_bytes = 0
        self.bad_crc_ids: list[int] = []

    def feed(self, data: bytes) -> list[Packet]:
        """Add bytes; return the packets completed by them."""
        self._buf += data
        out: list[Packet] = []
        while True:
            start = self._find_header()
            if start < 0:
                keep = 3  # a header may be split across reads
                drop = max(0, len(self._buf) - keep)
                self.garbage_bytes += drop
                del self._buf[:drop]
                return out
            if start:
                self.garbage_bytes += start
                del self._buf[:start]
            if len(self._buf) < 7:
                return out
            length = self._buf[5] | (self._buf[6] << 8)
            if length < 3 or length > _MAX_LENGTH:
                self.garbage_bytes += 1
                del self._buf[:1]
                continue
            total = 7 + length
            if len(self._buf) < total:
                return out
            frame = bytes(self._buf[:total])
            crc = frame[-2] | (frame[-1] << 8)
            if crc16(frame[:-2]) != crc:
                self.crc_errors += 1
                self.bad_crc_ids.append(frame[4])
                del self._buf[:1]  # resynchronise on the next header
                continue
            del self._buf[:total]
            payload = unstuff(frame[:7], frame[7:-2])
            out.append(Packet(id=frame[4], instruction=payload[0], params=payload[1:], raw_length=total))

    def _find_header(self) -> int:
        i = 0
        while True:
            i = self._buf.find(HEADER, i)
            if i < 0:
                return -1
            return i

    def reset(self) -> None:
        """Drop buffered bytes."""
        self._buf.clear()
