"""Whether a process sent SIGSTOP has stopped: `os.kill` returns before every thread of the process has,
so a test that asks a stopped server something waits for this first."""

from __future__ import annotations

import time
from pathlib import Path


def stopped_state(pid: int, within_s: float = 5.0) -> str:
    """The process's state letter (/proc/PID/stat) once it reads "T" (stopped), or what it read last."""
    deadline = time.monotonic() + within_s
    state = "?"
    while time.monotonic() < deadline:
        stat = Path(f"/proc/{pid}/stat").read_text()
        state = stat[stat.rindex(")") + 2]
        if state == "T":
            break
        time.sleep(0.01)
    return state
