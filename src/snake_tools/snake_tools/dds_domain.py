"""DDS domain IDs claimed per run, so concurrent test and benchmark runs on one host never share one.

Fast DDS maps domain d to UDP ports 7400 + 250 d + ...; 232 is the largest that fits. Each ID
is an exclusive ``flock`` on a file in the temporary directory, held open while the run uses
the domain (the kernel releases it on any exit, ``kill -9`` included), so two runs never hold
the same ID, whatever their pids. No rclpy here: the test suite claims its domain before
anything imports rclpy.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path
from typing import IO

DOMAIN_IDS = range(1, 233)
"""DDS domain IDs a run may claim."""
LOCK_DIR = Path(tempfile.gettempdir()) / "snake-stack-ros-domains"
"""Directory of the per-ID lock files."""


def claim_domain_id() -> tuple[int, IO[str]]:
    """Claim a domain ID no other run on this host holds; keep the returned file open while using it.

    Raises:
        RuntimeError: Every ID is held.
    """
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    first = os.getpid() % len(DOMAIN_IDS)
    for i in range(len(DOMAIN_IDS)):
        domain = DOMAIN_IDS[(first + i) % len(DOMAIN_IDS)]
        handle = (LOCK_DIR / f"{domain}.lock").open("w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        return domain, handle
    raise RuntimeError(f"every DDS domain ID in {DOMAIN_IDS} is held by another run")
