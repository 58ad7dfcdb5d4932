"""Process checks the LiveWeb tests share: is a PID alive (a zombie is not), and wait for PIDs to be gone."""

from __future__ import annotations

import time
from pathlib import Path


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    """The PIDs still alive after ``timeout`` seconds (polled every 0.1 s)."""
    deadline = time.time() + timeout
    left = [p for p in pids if alive(p)]
    while left and time.time() < deadline:
        time.sleep(0.1)
        left = [p for p in left if alive(p)]
    return left
