"""The serial port layer of the Dynamixel backend: dynamixel-sdk's port and packet handler, tuned.

:class:`_PacketHandler` is the SDK's Protocol 2.0 packet handler with the CRC in native
code and byte stuffing skipped where it changes nothing; :class:`_CountingPort` is the
SDK's port handler opened locked (:mod:`.port_lock`), with the real latency timer,
``select``-based waits, byte counters and a drain of late answers;
:func:`_latency_timer_ms` reads a USB serial adapter's latency timer.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import fastcrc
import serial
from dynamixel_sdk import PortHandler
from dynamixel_sdk.protocol2_packet_handler import Protocol2PacketHandler

from snake_hardware.backend import BusCounters

_READ_CHUNK = 4096            # bytes per read system call
_WRITE_WAIT_S = 0.1           # s, longest wait for room in the port's output buffer
_PKT_LEN_L = 5                # any packet: low byte of the LEN field
_PKT_INSTRUCTION = 7          # any packet: instruction byte
_HEADER = b"\xff\xff\xfd"      # the header pattern that byte stuffing breaks up in a payload


class _PacketHandler(Protocol2PacketHandler):
    """dynamixel-sdk's Protocol 2.0 packet handler with the CRC-16 computed in native code.

    The SDK's ``updateCRC`` builds its 256-entry table as a list literal and runs a
    Python loop on every call (every packet sent and every answer checked: about 45 us
    for an 18-servo FAST SYNC READ answer); fastcrc's CRC-16/UMTS is the same CRC
    (polynomial 0x8005, initial value 0, not reflected). Framing, stuffing and every
    check stay the SDK's.
    """

    def updateCRC(self, crc_accum: int, data_blk_ptr: Sequence[int], data_blk_size: int) -> int:  # noqa: N802
        """CRC-16 of the first ``data_blk_size`` bytes, continuing from ``crc_accum``."""
        return int(fastcrc.crc16.umts(bytes(data_blk_ptr[:data_blk_size]), crc_accum))

    def addStuffing(self, packet: list[int]) -> list[int]:  # noqa: N802 (SDK name)
        """The SDK's byte stuffing of an instruction packet, skipped where it would change nothing.

        The SDK stuffs (FF FF FD -> FF FF FD FD) from the LEN field to the end of the
        parameters in a Python loop over every byte of every packet sent; a packet without
        the header pattern there comes out of that loop unchanged, so it is returned as it
        is. Any other packet goes through the SDK's own stuffing.
        """
        length = packet[_PKT_LEN_L] | (packet[_PKT_LEN_L + 1] << 8)
        end = _PKT_INSTRUCTION + length - 2   # the CRC's two bytes are not stuffed
        if bytes(packet[_PKT_LEN_L:end]).find(_HEADER) < 0:
            return packet
        return super().addStuffing(packet)


class _CountingPort(PortHandler):
    """PortHandler with the real latency timer, byte counters and a drain."""

    def __init__(self, port_name: str, latency_ms: float, counters: BusCounters) -> None:
        super().__init__(port_name)
        self.ser: Any = None       # the pyserial port, opened by setupPort
        self.is_open: bool = False
        self._latency_ms = latency_ms
        self._counters = counters
        self.wait_s = 0.0          # s spent waiting for answers (see readPort)
        self._rx = bytearray()
        self._late_granted = False  # this packet's wait already got its fresh window (see readPort)

    def setPacketTimeout(self, packet_length: int) -> None:  # noqa: N802 (SDK name)
        self.packet_start_time = self.getCurrentTime()
        self.packet_timeout = self.tx_time_per_byte * packet_length + 2.0 * self._latency_ms + 2.0
        self._late_granted = False

    def writePort(self, packet: Any) -> int:  # noqa: N802
        """Write a packet with ``os.write`` on the port's descriptor; returns the bytes written.

        pyserial's ``write`` waits for writability in ``select`` after every write; a
        packet fits the driver's buffer, so the wait is only taken when the buffer is full
        (at most ``_WRITE_WAIT_S``; a short count then fails the transaction).
        """
        data = bytes(packet)
        fd = self.ser.fd
        if fd is None:
            raise OSError("port closed")
        sent = 0
        while sent < len(data):
            try:
                sent += os.write(fd, data[sent:])
            except BlockingIOError:
                _, ready, _ = select.select([], [fd], [], _WRITE_WAIT_S)
                if not ready:
                    break
        self._counters.bytes_tx += sent
        return sent

    def readPort(self, length: int) -> Any:  # noqa: N802
        """Up to ``length`` bytes; waits (in ``select``, not polling) until some arrive or the packet times out.

        One non-blocking read of everything pending feeds a buffer, so the SDK's
        few-bytes-at-a-time requests cost one system call per burst. When nothing is
        pending, the wait sleeps in ``select`` on the port until bytes arrive or the
        current packet's timeout (``setPacketTimeout``) has passed; then an empty
        answer lets the SDK see the timeout.

        A late thread is not a silent bus: when this thread finds nothing and the timeout
        passed more than one whole timeout ago (it was not running when the answer was due:
        a loaded computer), the packet gets one fresh window of its timeout, counted in
        ``late_waits``, before the SDK may see a timeout. Only a bus that stays silent
        through a window this thread was awake for fails the transaction.
        """
        rx = self._rx
        if len(rx) < length:
            fd = self.ser.fd
            chunk = self._read_pending(fd)
            while not chunk and not rx:
                remaining_s = (self.packet_timeout - self.getTimeSinceStart()) / 1000.0
                if (self.packet_timeout > 0 and not self._late_granted
                        and remaining_s <= -self.packet_timeout / 1000.0):
                    self._late_granted = True
                    self._counters.late_waits += 1
                    self.packet_start_time = self.getCurrentTime()
                    remaining_s = self.packet_timeout / 1000.0
                if remaining_s <= 0:
                    break
                t0 = time.perf_counter()
                select.select([fd], [], [], remaining_s)
                self.wait_s += time.perf_counter() - t0
                chunk = self._read_pending(fd)
            if chunk:
                rx += chunk
                self._counters.bytes_rx += len(chunk)
        data = bytes(rx[:length])
        del rx[:length]
        return data

    def _read_pending(self, fd: int) -> bytes:
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            return b""
        if not chunk and not self.ser.is_open:
            raise OSError("port closed")
        return chunk

    def setupPort(self, cflag_baud: int) -> bool:  # noqa: N802 (SDK name)
        """Open the device locked first: pyserial's ``exclusive=True`` takes the ``flock`` before it configures.

        The SDK's own ``setupPort`` opens without the lock, so a refused opener would already have
        set the baud rate, DTR/RTS and flushed the input of the holder's port. Here nothing of the
        port changes before the lock is held; a held lock raises :class:`serial.SerialException`
        with ``EWOULDBLOCK`` (see :meth:`DynamixelBackend._open_port`).
        """
        if self.is_open:
            self.closePort()
        self.ser = serial.Serial(port=self.port_name, baudrate=self.baudrate, bytesize=serial.EIGHTBITS,
                                 timeout=0, exclusive=True)
        self.is_open = True
        self.tx_time_per_byte = (1000.0 / self.baudrate) * 10.0
        return True

    def clearPort(self) -> None:  # noqa: N802
        self._rx.clear()
        super().clearPort()

    def getBytesAvailable(self) -> int:  # noqa: N802
        return len(self._rx) + int(self.ser.in_waiting)

    def drain(self, quiet_s: float, max_s: float) -> int:
        """Discard bytes until the line stayed quiet ``quiet_s`` s (at most ``max_s`` s); returns the count.

        Late answers to a timed-out request arrive after it gave up; draining them here
        keeps them away from the next request (whose ID and length checks catch the rest).
        """
        n = len(self._rx)
        self._rx.clear()
        deadline = time.monotonic() + max_s
        fd = self.ser.fd
        while True:
            wait = min(quiet_s, deadline - time.monotonic())
            if wait <= 0:
                break
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                break
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except BlockingIOError:
                continue
            if not chunk:
                break
            n += len(chunk)
        return n

    @property
    def timeout_s(self) -> float:
        """Timeout of a short answer, s."""
        return (self.tx_time_per_byte * 32 + 2.0 * self._latency_ms + 2.0) / 1000.0


def _latency_timer_ms(port: str) -> int | None:
    """The FTDI latency timer of a USB serial device, ms (None if not a USB serial device)."""
    try:
        name = Path(os.path.realpath(port)).name
        return int(Path(f"/sys/bus/usb-serial/devices/{name}/latency_timer").read_text().strip())
    except (OSError, ValueError):
        return None
