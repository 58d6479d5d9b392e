"""A motion-capture system watching the bench robot's head (ROS-free).

Models what a lab's optical system and its driver deliver for one rigid body: samples at a
fixed rate (:data:`RATE_HZ`, vrpn_mocap's usual 120 Hz), each pose with white noise
(:data:`POSITION_NOISE_M` per axis, :data:`ORIENTATION_NOISE_RAD` small rotation per
axis), stamped with the time of capture and handed over :data:`LATENCY_S` later (plus a
uniform jitter of up to :data:`LATENCY_JITTER_S`), as a driver stamps with the camera
frame's time and delivers after processing and the network.

:class:`MocapSystem` is fed from the body's thread (:meth:`MocapSystem.offer`) and
delivers from its own thread to a ``deliver(stamp_s, position, quaternion)`` callback (the
ROS publisher lives in ``snake_ros.bench_robot_node``).
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable

import numpy as np

RATE_HZ = 120.0
"""Samples per second."""
POSITION_NOISE_M = 0.0003
"""Position noise, standard deviation per axis, m."""
ORIENTATION_NOISE_RAD = 0.002
"""Orientation noise, standard deviation of a small rotation per axis, rad."""
LATENCY_S = 0.008
"""Delay from capture to delivery, s."""
LATENCY_JITTER_S = 0.002
"""Extra delivery delay, uniform in [0, this], s."""

Deliver = Callable[[float, np.ndarray, np.ndarray], None]
"""``deliver(stamp_s, position (3,), quaternion w x y z (4,))``; stamp in ``time.time()`` seconds."""


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of quaternions (w, x, y, z)."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw])


class MocapSystem:
    """Sampling, noise and latency of a motion-capture system (thread safe).

    Args:
        deliver: Receives every sample after its latency (from the delivery thread).
        seed: Seed of the noise and latency jitter.
        rate_hz: Sample rate.
    """

    def __init__(self, deliver: Deliver, seed: int = 0, rate_hz: float = RATE_HZ) -> None:
        """Not delivering until :meth:`start`."""
        self._deliver = deliver
        self._rng = np.random.default_rng([seed, 0x40CA])
        self._period = 1.0 / rate_hz
        self._next_sample = 0.0
        self._queue: list[tuple[float, int, float, np.ndarray, np.ndarray]] = []
        self._count = 0
        self._last_due = 0.0
        self._cond = threading.Condition()
        self._stop = False
        self._thread: threading.Thread | None = None
        self.delivered = 0

    def offer(self, capture_s: float, position: np.ndarray, quaternion: np.ndarray) -> None:
        """The body's state at ``capture_s`` (``time.time()`` seconds): captured if a sample is due."""
        if capture_s + 1e-9 < self._next_sample:
            return
        on_grid = self._next_sample and capture_s - self._next_sample < self._period
        self._next_sample = self._next_sample + self._period if on_grid else capture_s + self._period
        stamp = capture_s
        pos = position + self._rng.normal(0.0, POSITION_NOISE_M, 3)
        half = 0.5 * self._rng.normal(0.0, ORIENTATION_NOISE_RAD, 3)
        noise = np.array([1.0, *half])
        quat = _quat_mul(quaternion, noise / np.linalg.norm(noise))
        due = time.monotonic() + LATENCY_S + float(self._rng.uniform(0.0, LATENCY_JITTER_S))
        with self._cond:
            due = self._last_due = max(due, self._last_due)  # a driver delivers in capture order
            self._count += 1
            heapq.heappush(self._queue, (due, self._count, stamp, pos, quat))
            self._cond.notify()

    def start(self) -> MocapSystem:
        """Start the delivery thread; returns self."""
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="bench-mocap", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop delivering (samples still queued are dropped)."""
        with self._cond:
            self._stop = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stop and (not self._queue or self._queue[0][0] > time.monotonic()):
                    timeout = self._queue[0][0] - time.monotonic() if self._queue else None
                    self._cond.wait(timeout)
                if self._stop:
                    return
                _, _, stamp, pos, quat = heapq.heappop(self._queue)
            self._deliver(stamp, pos, quat)
            self.delivered += 1
