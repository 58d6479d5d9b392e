"""The bus's timing plan: wire bytes of the cycle's transactions and how a health poll is spread over cycles.

:func:`sync_read_bytes` and :func:`sync_write_bytes` count a sync transaction's bytes on
the wire; :func:`health_plan` sizes the health poll's steps (:class:`HealthPlan`) to the
slack a cycle leaves at the bus's baud rate and latency timer; :func:`_split` cuts the
servos into those steps.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from snake_core.robot import JointSpec
from snake_hardware.dynamixel import control_table as ct

_STATUS_OVERHEAD = 11         # bytes of a status packet without parameters
_SYNC_OVERHEAD = 14           # bytes of a sync read / sync write instruction without its per-servo part
_BITS_PER_BYTE = 10           # on the wire: start bit, 8 data bits, stop bit
_SOFTWARE_SHARE = 0.1         # share of a cycle kept for software when the health poll's bus time is planned


@dataclass(frozen=True)
class HealthPlan:
    """How one health poll is spread over cycles (see :func:`health_plan`).

    Attributes:
        mode_chunks: Servos per step of the Operating Mode sync read (1 byte each).
        status_chunks: Servos per step of the health block sync read (83 bytes each).
        cycle_bytes: Wire bytes of the loop's own traffic per cycle (sync write of the
            goals + sync read of the state block and its answers).
        budget_bytes: Wire bytes a health step may add to a cycle (inf: no limit).
    """

    mode_chunks: tuple[int, ...]
    status_chunks: tuple[int, ...]
    cycle_bytes: int
    budget_bytes: float

    @property
    def steps(self) -> int:
        """Cycles one poll (a round over every servo) takes."""
        return len(self.mode_chunks) + len(self.status_chunks)

    def step_bytes(self) -> list[int]:
        """Wire bytes of each step's sync read (instruction and answers), in order."""
        return ([sync_read_bytes(k, 1) for k in self.mode_chunks]
                + [sync_read_bytes(k, ct.HEALTH_BLOCK_LEN) for k in self.status_chunks])


def sync_read_bytes(n_servos: int, size: int) -> int:
    """Wire bytes of one sync read of ``size`` bytes from ``n_servos`` servos, answers included.

    Instruction: header 4 + ID + length 2 + instruction + address 2 + size 2 + one ID per
    servo + CRC 2 (14 + n bytes); each answer: a status packet of 11 + ``size`` bytes.
    """
    return _SYNC_OVERHEAD + n_servos + n_servos * (_STATUS_OVERHEAD + size)


def sync_write_bytes(n_servos: int, size: int) -> int:
    """Wire bytes of one sync write of ``size`` bytes to ``n_servos`` servos: 14 + n (1 + size)."""
    return _SYNC_OVERHEAD + n_servos * (1 + size)


def health_plan(n_servos: int, period_s: float, baud_rate: int, latency_ms: float) -> HealthPlan:
    """Servos per health step so that a step never overruns a cycle of ``period_s``, s.

    The cycle's slack is the period less a share kept for software (10 %), one latency
    timer per answered transaction (the state read and the health read, ``latency_ms``)
    and the wire time of the loop's own traffic (:func:`sync_write_bytes` of the goals,
    :func:`sync_read_bytes` of the state block), at 10 bits per byte (start, 8 data, stop)
    and ``baud_rate`` bps. A step reads as many servos as fit into the slack, at least
    one; the servos are split into equal chunks. ``period_s`` inf: one step per read.
    """
    cycle = sync_write_bytes(n_servos, 4) + sync_read_bytes(n_servos, ct.STATE_BLOCK_LEN)
    byte_s = _BITS_PER_BYTE / baud_rate
    slack_s = period_s * (1.0 - _SOFTWARE_SHARE) - 2.0 * latency_ms / 1000.0 - cycle * byte_s
    budget = slack_s / byte_s

    def chunks(size: int) -> tuple[int, ...]:
        if n_servos == 0:
            return ()
        if math.isfinite(budget):
            fit = max(1, int((budget - _SYNC_OVERHEAD) // (1 + _STATUS_OVERHEAD + size)))
        else:
            fit = n_servos
        steps = math.ceil(n_servos / min(fit, n_servos))
        base, extra = divmod(n_servos, steps)
        return tuple(base + (1 if k < extra else 0) for k in range(steps))

    return HealthPlan(chunks(1), chunks(ct.HEALTH_BLOCK_LEN), cycle, budget)


def _split(items: Sequence[JointSpec], sizes: Sequence[int]) -> Iterator[list[JointSpec]]:
    """Consecutive chunks of ``items`` of the given sizes."""
    pos = 0
    for k in sizes:
        yield list(items[pos:pos + k])
        pos += k
