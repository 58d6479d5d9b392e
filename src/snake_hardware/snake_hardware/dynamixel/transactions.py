"""The bus's transactions: one instruction and its checked answer, retried, counted and drained.

:class:`Transactions` owns the open port and the packet handler of a
:class:`~snake_hardware.dynamixel.backend.DynamixelBackend`: ping, read and write of one
servo, SYNC WRITE, SYNC READ (with the one-by-one fallback) and FAST SYNC READ. The
framing is dynamixel-sdk's; which answer belongs to which request is checked here:
every answer must carry the awaited ID and exactly the awaited length, others are
counted as stale and skipped; after a failed transaction the port is drained until the
line goes quiet. Timeouts and CRC errors are retried and counted; serial exceptions
(device gone) close the backend and raise :class:`~snake_hardware.backend.DeviceLostError`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from dynamixel_sdk import (
    COMM_RX_CORRUPT,
    COMM_RX_TIMEOUT,
    COMM_SUCCESS,
)
from dynamixel_sdk.robotis_def import BROADCAST_ID, INST_PING, INST_READ, INST_WRITE

from snake_core.robot import JointSpec
from snake_hardware.backend import BusCounters, CommError, DeviceLostError, StartupError
from snake_hardware.dynamixel import control_table as ct
from snake_hardware.dynamixel.bus_plan import _STATUS_OVERHEAD
from snake_hardware.dynamixel.port import _CountingPort, _PacketHandler

if TYPE_CHECKING:
    from snake_hardware.dynamixel.backend import DynamixelSettings

_FALLBACK_GIVE_UP = 3         # per-servo fallback reads stop after this many silent servos in a row
_DRAIN_MAX_S = 0.05           # s, longest drain of late bytes after a failed transaction
_PKT_ID = 4                   # status packet: ID byte
_PKT_ERROR = 8                # status packet: error byte
_PKT_PARAMS = 9               # status packet: first parameter byte
_PING_PARAMS = 3              # model number (2) + firmware version (1)
_FAST_SEGMENT_OVERHEAD = 4    # fast sync read answer, per servo: error + ID + data + CRC (2)
_STUFFED = b"\xff\xff\xfd\xfd"  # a header pattern in a payload, stuffed: FF FF FD + FD
_FAST_GIVE_UP = 5             # failed FAST SYNC READs in a row after which SYNC READ is used until reopened


class Transactions:
    """The transactions of one backend on its bus (the port is set while the backend is open).

    Args:
        settings: The backend's bus settings (port name, retries).
        counters: The backend's communication counters, counted here.
        joints: The backend's joints, head to tail.
        ids: Their servo IDs, in the same order.
        lost: Closes the backend; called when the device is gone, before DeviceLostError.
    """

    def __init__(self, settings: DynamixelSettings, counters: BusCounters, joints: Sequence[JointSpec],
                 ids: list[int], lost: Callable[[], None]) -> None:
        self._settings = settings
        self._counters = counters
        self._joints = joints
        self._ids = ids
        self._lost = lost
        self.port: _CountingPort | None = None
        self.packet = _PacketHandler()
        self.firmware: dict[int, int] = {}       # servo ID -> firmware version (from its ping)
        self.fast = False                        # present state by FAST SYNC READ (set at open)
        self.fast_failures_in_row = 0            # failed FAST SYNC READs since the last good one

    def transact(self, what: str, call: Callable[[], tuple[Any, int]], attempts: int | None = None) -> Any:
        """Run a call returning (payload, comm) with retries; returns the payload."""
        c = self._counters
        last = COMM_SUCCESS
        n = self._settings.retries + 1 if attempts is None else attempts
        for attempt in range(n):
            if attempt:
                c.retries += 1
            c.transactions += 1
            try:
                payload, comm = call()
            except _StatusError:
                raise
            except Exception as err:
                self.device_lost(what, err)
            if comm == COMM_SUCCESS:
                c.consecutive_failures = 0
                return payload
            last = comm
            if comm == COMM_RX_TIMEOUT:
                c.timeouts += 1
            elif comm == COMM_RX_CORRUPT:
                c.crc_errors += 1
            self.drain(what)
        c.failures += 1
        c.consecutive_failures += 1
        raise CommError(f"{what} failed after {n} attempts: {self.packet.getTxRxResult(last)}")

    def drain(self, what: str) -> None:
        """Drain late bytes after a failed transaction (a serial exception: the device is lost)."""
        port = self.port
        if port is None:
            return
        port.is_using = False
        try:
            self._counters.drained_bytes += port.drain(port.timeout_s, _DRAIN_MAX_S)
            port.clearPort()
        except Exception as err:
            self.device_lost(what, err)

    def device_lost(self, what: str, err: BaseException) -> None:
        """Close the backend, count the failure and raise DeviceLostError naming ``what``."""
        self._lost()
        self._counters.failures += 1
        self._counters.consecutive_failures += 1
        raise DeviceLostError(f"{self._settings.port} lost during {what}: {err}") from err

    def rx_status(self, port: _CountingPort, sid: int, n_params: int) -> tuple[list[int] | None, int]:
        """The awaited status packet: ID ``sid`` with exactly ``n_params`` parameters.

        Packets with another ID or length (late answers to earlier requests) are counted
        in ``stale_packets`` and skipped; the wait goes on until the request's timeout.
        """
        while True:
            port.is_using = True
            rx, comm = self.packet.rxPacket(port, False)
            if comm != COMM_SUCCESS:
                return None, comm
            if rx[_PKT_ID] == sid and _param_count(rx) == n_params:
                return rx, COMM_SUCCESS
            self._counters.stale_packets += 1

    def txrx(self, port: _CountingPort, sid: int, instruction: int, params: list[int],
              n_answer: int) -> tuple[list[int] | None, int]:
        """One instruction to one servo and its checked status packet (rx, comm)."""
        tx = [0] * (10 + len(params))
        tx[_PKT_ID] = sid
        length = len(params) + 3
        tx[5], tx[6] = length & 0xFF, length >> 8
        tx[7] = instruction
        tx[8:8 + len(params)] = params
        comm = self.packet.txPacket(port, tx)
        if comm != COMM_SUCCESS:
            return None, comm
        port.setPacketTimeout(_STATUS_OVERHEAD + n_answer)
        return self.rx_status(port, sid, n_answer)

    def ping(self, sid: int) -> int:
        """Model number of a servo (retried)."""
        port = self.require(self.port)
        rx = self.transact(f"ping of ID {sid}", partial(self.txrx, port, sid, INST_PING, [], _PING_PARAMS))
        self.firmware[sid] = int(rx[_PKT_PARAMS + 2])
        return int(rx[_PKT_PARAMS] | (rx[_PKT_PARAMS + 1] << 8))

    def ping_once(self, sid: int) -> bool:
        """One ping, not retried nor counted as a timeout (a booting servo is silent)."""
        port = self.require(self.port)
        try:
            _, comm = self.txrx(port, sid, INST_PING, [], _PING_PARAMS)
        except Exception as err:
            self.device_lost(f"ping of ID {sid}", err)
        port.is_using = False
        return bool(comm == COMM_SUCCESS)

    def write(self, sid: int, addr: int, size: int, value: int) -> None:
        """WRITE of ``size`` bytes to one servo (retried); an error status raises StartupError."""
        port = self.require(self.port)
        value &= (1 << (8 * size)) - 1
        params = [addr & 0xFF, addr >> 8, *value.to_bytes(size, "little")]

        def call() -> tuple[Any, int]:
            rx, comm = self.txrx(port, sid, INST_WRITE, params, 0)
            if comm == COMM_SUCCESS and rx is not None and rx[_PKT_ERROR] & 0x7F:
                raise _StatusError(rx[_PKT_ERROR])
            return rx, comm

        try:
            self.transact(f"write of {value} to address {addr} of ID {sid}", call)
        except _StatusError as err:
            raise StartupError(f"ID {sid} refused {value} at address {addr}: "
                               f"{self.packet.getRxPacketError(err.error)}") from None

    def read(self, sid: int, addr: int, size: int, as_int: bool = False) -> Any:
        """Bytes of a block of one servo (as an unsigned little-endian int when ``as_int``)."""
        port = self.require(self.port)
        params = [addr & 0xFF, addr >> 8, size & 0xFF, size >> 8]
        rx = self.transact(f"read of address {addr} of ID {sid}", partial(
            self.txrx, port, sid, INST_READ, params, size))
        data = bytes(rx[_PKT_PARAMS:_PKT_PARAMS + size])
        return int.from_bytes(data, "little") if as_int else data

    def sync_write_byte(self, addr: int, value: int, joints: Sequence[JointSpec]) -> None:
        """One SYNC WRITE of the same byte to ``joints`` (none: nothing sent)."""
        if not joints:
            return
        port = self.require(self.port)
        params = [b for j in joints for b in (j.servo_id, value)]
        self.transact(f"sync write of {value} to address {addr}", lambda: (
            None, self.packet.syncWriteTxOnly(port, addr, 1, params, len(params))))

    def sync_read(self, addr: int, size: int, joints: Sequence[JointSpec]) -> tuple[dict[int, bytes], int]:
        """One sync read: (answers by ID, comm of the first missing answer or success).

        Answers arrive in ID order; one of a group member not yet answered is kept even
        when it arrives while another ID is awaited (a silent servo then costs only its
        own answer); everything else of the wrong ID or length is stale.
        """
        port = self.require(self.port)
        ids = [j.servo_id for j in joints]
        comm = self.packet.syncReadTx(port, addr, size, ids, len(ids), False)
        if comm != COMM_SUCCESS:
            return {}, comm
        out: dict[int, bytes] = {}
        first_fail = COMM_SUCCESS
        for sid in ids:
            while sid not in out:
                port.is_using = True
                rx, c = self.packet.rxPacket(port, False)
                if c != COMM_SUCCESS:
                    first_fail = first_fail or c
                    break
                got = rx[_PKT_ID]
                if got in ids and got not in out and _param_count(rx) == size:
                    out[got] = bytes(rx[_PKT_PARAMS:_PKT_PARAMS + size])
                else:
                    self._counters.stale_packets += 1
        port.is_using = False
        if first_fail == COMM_SUCCESS and len(out) < len(ids):
            first_fail = COMM_RX_TIMEOUT
        return out, first_fail

    def sync_read_complete(self, addr: int, size: int, joints: Sequence[JointSpec]) -> tuple[Any, int]:
        """:meth:`sync_read` as (answers by ID or None unless every servo answered, comm)."""
        out, comm = self.sync_read(addr, size, joints)
        return (out if comm == COMM_SUCCESS else None), comm

    def state_read(self, joints: Sequence[JointSpec], fast: list[bool]) -> tuple[Any, int]:
        """One attempt at the present-state block of ``joints``: (answers by ID or None, comm).

        FAST SYNC READ while ``fast[0]``; a failed fast attempt clears it, so the retries
        of the same read are plain SYNC READs (which tell a silent servo from the rest).
        After five failed fast reads in a row (each costs a timeout) the backend uses SYNC
        READ until it is opened again.
        """
        if fast[0]:
            out, comm = self.fast_sync_read(ct.STATE_BLOCK_ADDR, ct.STATE_BLOCK_LEN, joints)
            if comm != COMM_SUCCESS:
                fast[0] = False
                extra = self._counters.extra
                extra["fast_read_failures"] = extra.get("fast_read_failures", 0) + 1
                self.fast_failures_in_row += 1
                if self.fast_failures_in_row >= _FAST_GIVE_UP:
                    self.fast = False   # until the next open: each failed fast read costs a timeout
            else:
                self.fast_failures_in_row = 0
            return out, comm
        return self.sync_read_complete(ct.STATE_BLOCK_ADDR, ct.STATE_BLOCK_LEN, joints)

    def fast_sync_read(self, addr: int, size: int,
                        joints: Sequence[JointSpec]) -> tuple[dict[int, bytes] | None, int]:
        """One FAST SYNC READ (instruction 0x8A): (answers by ID or None, comm).

        The answer is ONE status packet with the broadcast ID whose parameters are, per
        servo in the order asked, error, ID, ``size`` data bytes and a CRC (the last
        servo's CRC is the packet's, which the SDK checks). Checked here: broadcast ID,
        exactly the awaited length after unstuffing and every segment's ID in its
        place; other packets (late answers of another ID or length) are stale and
        skipped, a packet of the right ID and length with a wrong segment ID is corrupt.
        """
        port = self.require(self.port)
        ids = self._ids if joints is self._joints else [j.servo_id for j in joints]
        seg = size + _FAST_SEGMENT_OVERHEAD
        length = 1 + len(ids) * seg      # LEN field: instruction + segments (the last CRC is the packet's)
        comm = self.packet.syncReadTx(port, addr, size, ids, len(ids), True)
        if comm != COMM_SUCCESS:
            return None, comm
        while True:
            port.is_using = True
            rx, comm = self.packet.rxPacket(port, True)
            if comm != COMM_SUCCESS:
                return None, comm
            if rx[_PKT_ID] == BROADCAST_ID:
                raw = bytes(rx)
                if raw.find(_STUFFED, _PKT_ERROR) >= 0:   # (the SDK's unstuffing is a Python loop)
                    raw = bytes(self.packet.removeStuffing(rx))
                if raw[5] | (raw[6] << 8) == length:
                    break
            self._counters.stale_packets += 1
        port.is_using = False
        out: dict[int, bytes] = {}
        k = _PKT_ERROR   # first segment: its error byte sits where a status packet's error does
        for sid in ids:
            if raw[k + 1] != sid:
                self._counters.stale_packets += 1
                return None, COMM_RX_CORRUPT
            out[sid] = raw[k + 2:k + 2 + size]
            k += seg
        return out, COMM_SUCCESS

    def sync_read_block(self, addr: int, size: int, joints: Sequence[JointSpec]) -> dict[int, bytes]:
        """Sync read of one block; the servos that did not answer are then asked one by one.

        The one-by-one reads are single attempts and stop after three silent servos in a
        row with none answering (the bus, not a servo, is down).
        """
        if not joints:
            return {}
        got: dict[int, bytes] = {}

        def call() -> tuple[Any, int]:
            out, comm = self.sync_read(addr, size, joints)
            got.update(out)
            return out, comm

        try:
            self.transact(f"sync read of address {addr}", call)
            return got
        except CommError:
            pass
        port = self.require(self.port)
        silent = 0
        params = [addr & 0xFF, addr >> 8, size & 0xFF, size >> 8]
        for j in joints:
            if j.servo_id in got:
                continue
            try:
                rx = self.transact(f"read of address {addr} of ID {j.servo_id}", partial(
                    self.txrx, port, j.servo_id, INST_READ, params, size), attempts=1)
            except CommError:
                silent += 1
                if silent >= _FALLBACK_GIVE_UP and not got:
                    break
                continue
            silent = 0
            got[j.servo_id] = bytes(rx[_PKT_PARAMS:_PKT_PARAMS + size])
        return got

    def require(self, obj: Any) -> Any:
        """``obj``, or DeviceLostError when it is None or the port is not open."""
        if obj is None or self.port is None:
            raise DeviceLostError(f"{self._settings.port} is not open")
        return obj


def _param_count(rx: list[int]) -> int:
    """Parameters of an unstuffed status packet.

    Its LEN field (which the SDK corrects when it unstuffs, leaving the list itself
    longer) minus instruction, error and CRC.
    """
    return (rx[5] | (rx[6] << 8)) - 4


class _StatusError(Exception):
    """A servo answered with an error in its status packet (not retried)."""

    def __init__(self, error: int) -> None:
        super().__init__(error)
        self.error = error
