"""A bus of emulated Dynamixel X-series servos served on a pseudo-terminal.

:class:`ServoBusEmulator` opens a pty, serves Protocol 2.0 on its master side in a
background thread and lets any Dynamixel tool (dynamixel-sdk's ``PortHandler``, the
bridge) open the slave path like a U2D2. Instructions: PING (unicast and
broadcast), READ, WRITE, REBOOT, CLEAR (multi-turn), SYNC READ, FAST SYNC READ, SYNC WRITE.
Other unicast instructions get an Instruction Error status; other broadcast ones (BULK READ)
no answer.

Time: by default the servos' physics and the Bus Watchdog run on the wall clock. With
``sim_time=True`` they run on a simulated clock that only :meth:`ServoBusEmulator.advance`
moves, so a test can run 30 minutes of servo time in seconds, independent of CPU load;
the protocol is still served on the pty in real time.

Fault injection (thread safe, from tests or the CLI): drop, truncate or corrupt the
next status packets, spray garbage bytes, delay every answer, make an ID vanish, raise
hardware error bits, send a spurious (stale) status packet, ``unplug()`` (the pty closes: the client's reads and writes
fail like a removed USB adapter) and ``replug()`` (a new pty; the stable
``link`` symlink is repointed so the client reopens the same path).
"""

from __future__ import annotations

import contextlib
import os
import pty
import select
import sys
import threading
import time
import tty
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np

from snake_hardware.dynamixel import control_table as ct
from snake_hardware.emulator import protocol as p
from snake_hardware.emulator.servo import EmulatedServo

_POLL_S = 0.001          # s, select timeout of the serving loop
_IDLE_STEP_S = 0.005     # s, physics/watchdog step period while the bus is idle
_FIRMWARE_VERSION = 46
_SWITCH_INTERVAL_S = 0.0002  # s, GIL switch interval while an in-process client polls
_BOOT_S = 0.4                # s, a rebooted X-series servo is silent this long
_CLEAR_MULTI_TURN = bytes([0x01, 0x44, 0x58, 0x4C, 0x22])  # CLEAR instruction parameters


class ServoBusEmulator:
    """N emulated servos on one pty.

    Args:
        ids: Servo IDs on the bus.
        models: Model name per ID (default ``XM430-W350``).
        positions: Initial present position per ID, ticks (default 2048, horn centred).
        link: Optional path of a symlink to the pty slave, kept across unplug/replug.
        seed: Seed of the garbage-byte generator and of the drop/corrupt draws.
        sim_time: Run physics and watchdogs on a simulated clock moved by :meth:`advance`.
        servo_class: Class of the servos (``EmulatedServo`` or a subclass that moves its
            shaft otherwise, e.g. one attached to a body).
    """

    def __init__(self, ids: Iterable[int], models: Mapping[int, str] | None = None,
                 positions: Mapping[int, int] | None = None, link: str | Path | None = None,
                 seed: int = 0, sim_time: bool = False,
                 servo_class: type[EmulatedServo] = EmulatedServo) -> None:
        """Create the servos; :meth:`start` opens the pty and serves."""
        self._lock = threading.RLock()
        self.servos: dict[int, EmulatedServo] = {}
        for sid in ids:
            name = (models or {}).get(sid, "XM430-W350")
            self.servos[sid] = servo_class(sid, ct.model(name).number,
                                           (positions or {}).get(sid, ct.TICKS_CENTER))
        self._link = Path(link) if link else None
        self._rng = np.random.default_rng(seed)
        self._master: int | None = None
        self._slave: int | None = None
        self._slave_name = ""
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._parser = p.PacketParser()
        self._sim_time = sim_time
        self._sim_now = 0.0
        self._last_instruction = self.now()
        self._last_step = self.now()
        # Fault injection state.
        self._drop = 0
        self._corrupt = 0
        self._truncate = 0
        self._garbage = 0
        self._delay = 0.0
        self._drop_p = 0.0     # probability that a status packet is not sent
        self._corrupt_p = 0.0  # probability that a status packet's CRC is corrupted
        self._vanished: set[int] = set()
        self._spurious: list[bytes] = []
        # Statistics.
        self.instructions: dict[int, int] = {}
        self.rx_bytes = 0
        self.tx_bytes = 0
        self.dropped = 0          # status packets not sent (drop faults)
        self.corrupted = 0        # status packets sent with a corrupted CRC
        self.delayed_answers = 0  # answers sent after the injected delay
        self._iterations = 0

    # --- lifecycle -------------------------------------------------------------------
    @property
    def port(self) -> str:
        """Path a client should open: the symlink if one was asked for, else the pty slave."""
        return str(self._link) if self._link else self._slave_name

    @property
    def slave_name(self) -> str:
        """The current pty slave device (changes on replug)."""
        return self._slave_name

    def now(self) -> float:
        """Emulator time, s: the simulated clock, or ``time.monotonic()``."""
        return self._sim_now if self._sim_time else time.monotonic()

    @property
    def sim_time(self) -> bool:
        """Whether physics runs on the simulated clock."""
        return self._sim_time

    def advance(self, dt: float) -> None:
        """Simulated time only: handle every byte the client has written, then step ``dt`` s.

        Raises:
            RuntimeError: The emulator runs on the wall clock.
        """
        if not self._sim_time:
            raise RuntimeError("advance() needs ServoBusEmulator(sim_time=True)")
        with self._lock:
            self._pump_locked()
            self._sim_now += dt
            silent = self._sim_now - self._last_instruction
            for s in self.servos.values():
                s.step(dt, silent)
            self._last_step = self._sim_now

    @property
    def lock(self) -> threading.RLock:
        """The lock that guards every servo (hold it to read or move them from another thread)."""
        return self._lock

    def _pump_locked(self) -> None:
        """Read and handle whatever the client wrote (lock held); answers go out at once."""
        master = self._master
        while master is not None:
            try:
                data = os.read(master, 4096)
            except (BlockingIOError, InterruptedError, OSError):
                return
            if not data:
                return
            out = self._handle_bytes_locked(data)
            if out:
                self._send(out)

    def start(self) -> ServoBusEmulator:
        """Open the pty and start serving in a daemon thread; returns self."""
        with self._lock:
            self._open_pty()
        # A client in this same process that polls the port (dynamixel-sdk's own
        # PortHandler does; the bridge's backend sleeps in select) holds the GIL; with the
        # default 5 ms switch interval the serving thread would answer after the
        # client's ~4 ms read timeout (1 ms latency timer). Switch more often.
        if sys.getswitchinterval() > _SWITCH_INTERVAL_S:
            sys.setswitchinterval(_SWITCH_INTERVAL_S)
        self._stop.clear()
        self._thread = threading.Thread(target=self._serve, name="servo-bus-emulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the pty."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        with self._lock:
            self._close_pty()

    def __enter__(self) -> ServoBusEmulator:
        """Start."""
        return self.start()

    def __exit__(self, *exc: object) -> None:
        """Stop."""
        self.stop()

    def _open_pty(self) -> None:
        master, slave = pty.openpty()
        tty.setraw(slave)
        os.set_blocking(master, False)
        self._master, self._slave = master, slave
        self._slave_name = os.ttyname(slave)
        self._parser.reset()
        if self._link is not None:
            tmp = self._link.with_name(self._link.name + ".tmp")
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            tmp.symlink_to(self._slave_name)
            tmp.replace(self._link)

    def _close_pty(self) -> None:
        # The link goes first, as udev removes a device's node and links when it is unplugged: a
        # client retrying the link never opens the pty number the kernel may give to another program.
        if self._link is not None:
            with contextlib.suppress(OSError):
                self._link.unlink()
        for fd in (self._master, self._slave):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._master = self._slave = None

    # --- fault injection -----------------------------------------------------------------
    def unplug(self) -> None:
        """Close the pty and remove the link, like pulling the USB adapter: the client's I/O fails."""
        with self._lock:
            self._close_pty()

    def replug(self) -> None:
        """Open a fresh pty (and repoint the symlink), like plugging the adapter back."""
        with self._lock:
            if self._master is None:
                self._open_pty()

    @property
    def plugged(self) -> bool:
        """Whether the pty is open."""
        return self._master is not None

    def drop_responses(self, n: int) -> None:
        """Do not send the next ``n`` status packets."""
        with self._lock:
            self._drop += n

    def truncate_responses(self, n: int) -> None:
        """Lose the last 3 bytes of the next ``n`` status packets (bytes dropped on the wire)."""
        with self._lock:
            self._truncate += n

    def corrupt_responses(self, n: int) -> None:
        """Flip a CRC bit in the next ``n`` status packets."""
        with self._lock:
            self._corrupt += n

    def set_fault_rates(self, drop: float = 0.0, corrupt: float = 0.0) -> None:
        """Drop / corrupt the CRC of each status packet with these probabilities (seeded by ``seed``).

        Raises:
            ValueError: A probability outside [0, 1].
        """
        for name, prob in (("drop", drop), ("corrupt", corrupt)):
            if not 0.0 <= prob <= 1.0:
                raise ValueError(f"{name} probability {prob} is outside [0, 1]")
        with self._lock:
            self._drop_p, self._corrupt_p = float(drop), float(corrupt)

    def inject_garbage(self, n_bytes: int) -> None:
        """Send ``n_bytes`` random bytes before the next answer."""
        with self._lock:
            self._garbage += n_bytes

    def set_delay(self, seconds: float) -> None:
        """Delay every answer by ``seconds`` (0 to stop)."""
        with self._lock:
            self._delay = max(0.0, seconds)

    def vanish(self, servo_id: int) -> None:
        """Make a servo stop answering (as if its cable came off)."""
        with self._lock:
            self._vanished.add(servo_id)

    def restore(self, servo_id: int) -> None:
        """Undo :meth:`vanish`."""
        with self._lock:
            self._vanished.discard(servo_id)

    def inject_status(self, servo_id: int, params: bytes = b"", error: int = 0) -> None:
        """Send a spurious status packet from ``servo_id`` before the next answer.

        Models a late answer to an earlier instruction (a USB latency spike delivers it
        while the host already waits for another one): valid framing and CRC, so only
        the host's ID and length checks can tell it from the awaited answer.
        """
        with self._lock:
            self._spurious.append(p.build_status(servo_id, error, params))

    def refuse_goals(self, servo_id: int, refuse: bool = True) -> None:
        """Make a servo refuse every Goal Position write (Data Limit Error), as a misconfigured one does."""
        with self._lock:
            self.servos[servo_id].refuse_all_goals = refuse

    def booting(self, servo_id: int) -> bool:
        """Whether a servo is still silent after a REBOOT."""
        with self._lock:
            return self.now() < self.servos[servo_id].boot_until

    def refused_goals(self, servo_id: int) -> int:
        """Goal Position writes this servo refused (out of range or watchdog tripped)."""
        with self._lock:
            return self.servos[servo_id].refused_goals

    def physical_position(self, servo_id: int) -> float:
        """The shaft's continuous physical angle, ticks in the frame of power-on (never reset)."""
        with self._lock:
            return self.servos[servo_id].position

    def raise_hardware_error(self, servo_id: int, bits: int) -> None:
        """Set hardware error bits on a servo (see ``snake_hardware.dynamixel.hardware_errors.HW_*``)."""
        with self._lock:
            self.servos[servo_id].raise_hardware_error(bits)

    def set_load(self, servo_id: int, effort: float) -> None:
        """External load on a servo, N m (adds to its present current)."""
        with self._lock:
            self.servos[servo_id].external_load = effort

    def set_voltage(self, volts: float, servo_id: int | None = None) -> None:
        """Input voltage of one servo (``servo_id``) or of every servo, V (Present Input Voltage).

        Each servo starts at its model's recommended supply (12 V for the X430 series).
        """
        with self._lock:
            for sid, s in self.servos.items():
                if servo_id is None or sid == servo_id:
                    s.voltage = volts

    def stick_register(self, servo_id: int, addr: int, stuck: bool = True) -> None:
        """Make a register acknowledge every write and keep its value (a write that does not take)."""
        with self._lock:
            if stuck:
                self.servos[servo_id].stuck.add(addr)
            else:
                self.servos[servo_id].stuck.discard(addr)

    def eeprom_writes(self, servo_id: int, addr: int) -> int:
        """Writes a servo accepted into the EEPROM register at ``addr`` since it was created."""
        with self._lock:
            return self.servos[servo_id].eeprom_writes.get(addr, 0)

    def settle(self, timeout: float = 2.0) -> None:
        """Return once every byte already written by the client has been processed.

        Sync writes get no answer, so a test reading registers right after one calls
        this first. Waits for two full serving iterations (bounded by ``timeout``, s).
        """
        start = self._iterations
        deadline = time.monotonic() + timeout
        while self._iterations < start + 2 and time.monotonic() < deadline:
            time.sleep(_POLL_S / 4)

    # --- inspection ------------------------------------------------------------------------
    def register(self, servo_id: int, addr: int, size: int, signed: bool = False) -> int:
        """A register value of one servo."""
        with self._lock:
            return self.servos[servo_id].get(addr, size, signed=signed)

    def goal_position(self, servo_id: int) -> int:
        """Goal Position register, ticks."""
        return self.register(servo_id, ct.GOAL_POSITION, 4, signed=True)

    def present_position(self, servo_id: int) -> int:
        """Present Position register, ticks (turns counted since the last reset, plus Homing Offset)."""
        with self._lock:
            return self.servos[servo_id].present_ticks

    def torque_enabled(self, servo_id: int) -> bool:
        """Torque Enable register."""
        return bool(self.register(servo_id, ct.TORQUE_ENABLE, 1))

    def write_register(self, servo_id: int, addr: int, size: int, value: int) -> int:
        """Write a register as another program on the bus would (the servo's write rules apply).

        Returns:
            The status error the servo would answer (0: accepted).
        """
        with self._lock:
            data = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
            return self.servos[servo_id].write(addr, data)

    def goal_log(self, servo_id: int) -> list[int]:
        """Every Goal Position the servo accepted, ticks (a copy)."""
        with self._lock:
            return list(self.servos[servo_id].goal_log)

    # --- serving ------------------------------------------------------------------------------
    def _serve(self) -> None:
        while not self._stop.is_set():
            self._iterations += 1
            master = self._master
            if master is None:
                time.sleep(_POLL_S)
                self._step()
                continue
            try:
                ready, _, _ = select.select([master], [], [], _POLL_S)
            except (OSError, ValueError):
                time.sleep(_POLL_S)
                continue
            if ready:
                self._on_ready()
            # A physics step after the answers went out (they are not delayed by it), and
            # while the bus is idle every _IDLE_STEP_S only: the steps are exact for any
            # length (servo._approach), so the idle loop costs a wake-up, not 18 servo steps.
            if ready or time.monotonic() - self._last_step >= _IDLE_STEP_S:
                self._step()

    def _step(self) -> None:
        if self._sim_time:
            return
        with self._lock:
            now = time.monotonic()
            dt = min(now - self._last_step, 0.1)
            self._last_step = now
            silent = now - self._last_instruction
            for s in self.servos.values():
                s.step(dt, silent)

    def _on_ready(self) -> None:
        with self._lock:
            master = self._master
            if master is None:
                return
            try:
                data = os.read(master, 4096)
            except (BlockingIOError, InterruptedError, OSError):
                data = b""
            if not data:
                return
            out = self._handle_bytes_locked(data)
            delay = self._delay
        if out:
            if delay:
                time.sleep(delay)
                with self._lock:
                    self.delayed_answers += 1
            self._send(out)

    def _handle_bytes_locked(self, data: bytes) -> bytes:
        """Parse and execute instructions (lock held); returns the answers to send."""
        self.rx_bytes += len(data)
        before = self._parser.crc_errors
        packets = self._parser.feed(data)
        bad_ids = self._parser.bad_crc_ids[:]
        self._parser.bad_crc_ids.clear()
        out = bytearray()
        if self._parser.crc_errors != before:
            for sid in bad_ids:
                if self._present(sid) is not None:
                    out += self._status(sid, p.ERR_CRC)
        for pkt in packets:
            self._last_instruction = self.now()
            self.instructions[pkt.instruction] = self.instructions.get(pkt.instruction, 0) + 1
            out += self._handle(pkt)
        if out and self._spurious:
            out[:0] = b"".join(self._spurious)
            self._spurious.clear()
        return bytes(out)

    def _send(self, data: bytes) -> None:
        with self._lock:
            if self._garbage:
                data = self._rng.integers(0, 256, self._garbage, dtype=np.uint8).tobytes() + data
                self._garbage = 0
            master = self._master
            if master is None:
                return
            try:
                os.write(master, data)
                self.tx_bytes += len(data)
            except OSError:
                pass

    def _status(self, sid: int, error: int, params: bytes = b"") -> bytes:
        """One status packet, subject to the drop/corrupt/truncate faults."""
        return self._faulted(lambda: p.build_status(sid, self.servos[sid].error_byte(error), params))

    def _fast_sync_read(self, addr: int, size: int, ids: bytes) -> bytes:
        """The one status packet answering FAST SYNC READ of ``size`` bytes at ``addr`` from ``ids``.

        e-Manual (Protocol 2.0, Fast Sync Read): ID 0xFE, instruction 0x55, then per servo
        in the order asked: error, ID, data, CRC-16; each servo's CRC covers the packet
        from its header to the end of that servo's data, so the last one is the
        packet's CRC. The first servo sends the header (LEN for every servo asked); a
        servo that does not answer ends the chain: the servos before it are sent, the
        packet stays short (nothing at all if the first is silent).
        """
        seg = size + 4
        length = 1 + len(ids) * seg
        frame = bytearray(p.HEADER + bytes([p.BROADCAST_ID, length & 0xFF, length >> 8, p.STATUS]))
        complete = True
        for sid in ids:
            s = self._present(sid)
            if s is None:
                complete = False
                break
            err, data = s.read(addr, size)
            frame += bytes([s.error_byte(err), sid]) + data
            crc = p.crc16(frame)
            frame += bytes([crc & 0xFF, crc >> 8])
        if len(frame) == 8:
            return b""
        if complete:
            # Every servo answered: the whole packet, stuffed as one (its last CRC recomputed).
            whole = p.build(p.BROADCAST_ID, p.STATUS, bytes(frame[8:-2]))
            return self._faulted(lambda: whole)
        short = bytes(frame)
        return self._faulted(lambda: short)

    def _faulted(self, build: Callable[[], bytes]) -> bytes:
        """A status packet from ``build``, subject to the drop/corrupt/truncate faults."""
        if self._drop or (self._drop_p and self._rng.random() < self._drop_p):
            self._drop = max(0, self._drop - 1)
            self.dropped += 1
            return b""
        pkt = bytearray(build())
        if self._corrupt or (self._corrupt_p and self._rng.random() < self._corrupt_p):
            self._corrupt = max(0, self._corrupt - 1)
            self.corrupted += 1
            pkt[-1] ^= 0x5A
        if self._truncate:
            self._truncate -= 1
            del pkt[-3:]
        return bytes(pkt)

    def _present(self, sid: int) -> EmulatedServo | None:
        if sid in self._vanished:
            return None
        s = self.servos.get(sid)
        if s is not None and self.now() < s.boot_until:
            return None  # booting after a REBOOT: silent
        return s

    def _handle(self, pkt: p.Packet) -> bytes:
        inst, prm, pid = pkt.instruction, pkt.params, pkt.id
        if inst == p.INST_PING:
            targets = list(self.servos) if pid == p.BROADCAST_ID else [pid]
            out = b""
            for sid in targets:
                s = self._present(sid)
                if s is not None:
                    out += self._status(sid, 0, s.get(ct.MODEL_NUMBER, 2).to_bytes(2, "little")
                                        + bytes([_FIRMWARE_VERSION]))
            return out
        if inst in (p.INST_SYNC_WRITE,):
            if len(prm) < 4:
                return b""
            addr = int.from_bytes(prm[0:2], "little")
            size = int.from_bytes(prm[2:4], "little")
            body = prm[4:]
            for i in range(0, len(body) - size, size + 1):
                s = self._present(body[i])
                if s is not None:
                    s.write(addr, body[i + 1:i + 1 + size])
            return b""
        if inst == p.INST_SYNC_READ:
            if len(prm) < 4:
                return b""
            addr = int.from_bytes(prm[0:2], "little")
            size = int.from_bytes(prm[2:4], "little")
            out = b""
            for sid in prm[4:]:
                s = self._present(sid)
                if s is not None:
                    err, data = s.read(addr, size)
                    out += self._status(sid, err, data)
            return out
        if inst == p.INST_FAST_SYNC_READ:
            if len(prm) < 5:
                return b""
            return self._fast_sync_read(int.from_bytes(prm[0:2], "little"), int.from_bytes(prm[2:4], "little"),
                                        prm[4:])
        if pid == p.BROADCAST_ID:
            return b""  # broadcast instructions we do not model (BULK READ/WRITE...) get no answer
        s = self._present(pid)
        if s is None:
            return b""
        if inst == p.INST_READ:
            if len(prm) != 4:
                return self._status(pid, p.ERR_DATA_LENGTH)
            err, data = s.read(int.from_bytes(prm[0:2], "little"), int.from_bytes(prm[2:4], "little"))
            return self._status(pid, err, data)
        if inst == p.INST_WRITE:
            if len(prm) < 3:
                return self._status(pid, p.ERR_DATA_LENGTH)
            err = s.write(int.from_bytes(prm[0:2], "little"), prm[2:])
            return self._status(pid, err)
        if inst == p.INST_REBOOT:
            out = self._status(pid, 0)
            s.reboot(boot_until=self.now() + _BOOT_S)
            return out
        if inst == p.INST_CLEAR:
            if prm != _CLEAR_MULTI_TURN:
                return self._status(pid, p.ERR_DATA_RANGE)
            return self._status(pid, s.clear_multi_turn())
        return self._status(pid, p.ERR_INSTRUCTION)
