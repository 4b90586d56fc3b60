"""Ports `regraph up` needs, checked before anything starts, and who holds one that is taken.

`regraph up` used to start the embedded Neo4j and the executor first and find out only when the API
could not bind its port, close to a minute later, in a JSON log line (issue 31). `check_ports` binds
each port for a moment, as the servers will, and says which one is taken and, where Linux tells (the
listening socket in ``/proc/net/tcp*`` and the process that has it open in ``/proc/<pid>/fd``), by which
process.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from dataclasses import dataclass
from pathlib import Path

_LISTEN = "0A"  # the TCP state LISTEN in /proc/net/tcp
IN_USE = "address already in use"


@dataclass(frozen=True)
class Holder:
    """A process that has a socket on the port open."""

    pid: int
    command: str


@dataclass(frozen=True)
class TakenPort:
    """A port `regraph up` needs that something else holds."""

    role: str  # "the API", "the executor", "the embedded Neo4j (Bolt)"
    host: str
    port: int
    reason: str
    holder: Holder | None

    def sentence(self) -> str:
        """One line for the user."""
        who = (
            f" by process {self.holder.pid} ({self.holder.command})"
            if self.holder is not None
            else " (the process holding it is not visible to this user)"
        )
        if self.reason != IN_USE:  # not taken: this address cannot be listened on at all
            return f"port {self.port} on {self.host}, needed by {self.role}, cannot be bound: {self.reason}"
        return f"port {self.port} on {self.host}, needed by {self.role}, is taken{who}: {self.reason}"


def port_is_free(host: str, port: int) -> str | None:
    """None when `port` can be bound on `host` (as a server will, with SO_REUSEADDR); else why not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return IN_USE
            return e.strerror or str(e)
    return None


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _command(pid: str) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    text = raw.replace(b"\0", b" ").decode(errors="replace").strip()
    return text[:200] or "?"


def port_holder(port: int) -> Holder | None:
    """The process listening on `port` on this machine, when /proc shows it to this user."""
    inodes = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    if not inodes:
        return None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return Holder(int(entry.name), _command(entry.name))
    return None


def check_ports(needed: list[tuple[str, str, int]]) -> list[TakenPort]:
    """The ports of `needed` (role, host, port) that are taken; port 0 (any free port) is skipped."""
    taken: list[TakenPort] = []
    for role, host, port in needed:
        if port == 0:
            continue
        reason = port_is_free(host, port)
        if reason is not None:
            holder = port_holder(port) if reason == IN_USE else None
            taken.append(TakenPort(role, host, port, reason, holder))
    return taken
