"""The executor's worker processes that this test process started (the executor under test runs in a
thread of it), read from /proc."""

from __future__ import annotations

import os
from pathlib import Path


def worker_children(role: bytes | None = None) -> list[int]:
    """Pids of this process's ``executor.worker`` children (spares included); only those serving
    ``role`` (b"candidate", b"reference") when given."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and b"executor.worker" in cmdline and (role is None or role in cmdline):
            found.append(int(entry.name))
    return found
