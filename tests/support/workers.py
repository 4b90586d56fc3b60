"""The executor's worker processes, read from /proc: those that this test process started (the executor
under test runs in a thread of it), or any on the machine."""

from __future__ import annotations

import os
import re
from pathlib import Path

from executor.sandbox import workers_dir


def worker_children(role: bytes | None = None) -> list[int]:
    """Pids of this process's ``executor.worker`` children (spares included); only those serving
    ``role`` (b"candidate", b"reference") when given."""
    return worker_processes(role, parent=os.getpid())


def _parent(stat: str) -> int:
    """The parent pid in a /proc/PID/stat line (the field after the command's name and state)."""
    return int(stat.rsplit(")", 1)[1].split()[1])


def child_processes() -> set[int]:
    """Pids of every child of this process, whatever it runs. A worker just started may not show its
    command line yet: the kernel fills it in after the exec has closed the pipe that ``Popen`` waits
    on, so `worker_children` can miss a worker started a moment ago (and see it later as a new one)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if _parent(stat) == os.getpid():
            found.add(int(entry.name))
    return found


def worker_processes(role: bytes | None = None, parent: int | None = None) -> list[int]:
    """Pids of the ``executor.worker`` processes on this machine serving ``role`` (every role when
    None), only the children of ``parent`` when given (a fleet's replicas start theirs from Ray's
    worker processes, not from the test's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if parent is not None and _parent(stat) != parent:
            continue
        if b"executor.worker" in cmdline and (role is None or role in cmdline):
            found.append(int(entry.name))
    return found


def processes_working_in(directory: Path) -> list[Path]:
    """The /proc entries of the processes whose working directory lies in ``directory`` (a compile's
    nvcc and the stages it starts run in the compile's own directory). A jailed compiler's directory
    reads as the jail's root (``/tmp/regraph-jail-*``, see executor.jail) followed by it."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = re.sub(r"^.*/regraph-jail-[^/]+(?=/)", "", os.readlink(entry / "cwd"))
            if cwd.startswith(str(directory)):
                found.append(entry)
        except OSError:
            continue
    return found


def worker_stages(role: str) -> dict[Path, str]:
    """The stage each live worker of this process serving ``role`` ("candidate", "reference") last
    reported, by its directory (its progress file; executor.sandbox.WorkerProcess.stage_text). A
    worker's directory is removed when it is closed."""
    stages = {}
    for directory in workers_dir().glob(f"regraph-{role}-*"):
        try:
            stages[directory] = (directory / "progress").read_text()
        except OSError:
            continue
    return stages


def cpu_seconds_in(directory: Path) -> float:
    """The CPU time (user + system) that the processes working in ``directory`` have spent so far."""
    ticks = 0
    for entry in processes_working_in(directory):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of the whole line
    return ticks / os.sysconf("SC_CLK_TCK")


def describe_processes(entries: list[Path]) -> list[str]:
    """One line per /proc entry for a failure message: its command line (cut), state, parent and pids
    in each PID namespace (``NSpid``: one pid means it runs in the host's namespace, not a jail's)."""
    lines = []
    for entry in entries:
        try:
            cmdline = (entry / "cmdline").read_bytes()[:80].replace(b"\0", b" ").decode(errors="replace")
            status = dict(
                line.split(":", 1) for line in (entry / "status").read_text().splitlines() if ":" in line
            )
        except OSError:
            lines.append(f"{entry.name}: gone")
            continue
        fields = ", ".join(f"{k} {status.get(k, '?').strip()}" for k in ("State", "PPid", "NSpid"))
        lines.append(f"{entry.name} {cmdline!r}: {fields}")
    return lines
