"""How a command finds the stack that already runs on its data directory.

The running API writes ``running.json`` into its data directory at start-up and removes it at
shut-down: its pid, its URL, its Neo4j (embedded or external) and its executor. A command that would
otherwise start the embedded Neo4j on that directory a second time (``regraph graph ...``, ``regraph
keys ...``, ``regraph db ...``, ``regraph mcp``) reaches the running stack's Neo4j and executor instead
(`reach_running_stack`), and ``regraph up`` refuses to start a second stack there. A file left behind
by a process that died (its pid is gone, or its Neo4j no longer answers) is stale: it is ignored, and
removed when its process is gone.

The file holds no secret: the embedded Neo4j's password stays in its own file under the same directory.

The same description is also kept in a small per-user registry, one file per running stack under
``<cache dir>/running/`` (``REGRAPH_CACHE_DIR``, else ``~/.cache/regraph``), so that a command run
without ``REGRAPH_DATA_DIR`` can tell that a stack runs on another data directory (`running_elsewhere`)
and say so instead of starting a second Neo4j on the default one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, SecretStr, ValidationError

from api.settings import ApiSettings
from graphdb.embedded import NEO4J_USER, EmbeddedConfig, default_cache_dir

logger = logging.getLogger(__name__)

FILE_NAME = "running.json"
FORMAT = "regraph.running/v1"


class RunningStack(BaseModel):
    """What ``running.json`` says about the stack serving a data directory."""

    format: str = FORMAT
    pid: int
    api_url: str
    neo4j_uri: str
    embedded: bool  # the Neo4j is the embedded one of this data directory (password in its home)
    executor_url: str | None = None
    started_at: str
    data_dir: str | None = None  # where it runs (the registry's copies say; running.json lies in it)


def running_file(data_dir: Path) -> Path:
    """Where the running stack of `data_dir` describes itself."""
    return data_dir / FILE_NAME


_EVERYWHERE = {"", "::", "0.0.0.0"}  # noqa: S104  (compared with, not bound to)


def _api_url(settings: ApiSettings) -> str:
    host = settings.host
    if host in _EVERYWHERE:  # listening on every interface: loopback reaches it
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.port}"


def registry_dir() -> Path:
    """The per-user registry of running stacks (one file each)."""
    return default_cache_dir() / "running"


def _registry_file(data_dir: Path, pid: int) -> Path:
    key = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:12]
    return registry_dir() / f"{pid}-{key}.json"


def _write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial.write_text(text)
    partial.replace(path)


def announce(settings: ApiSettings, neo4j_uri: str, embedded: bool) -> Path | None:
    """Write this process's ``running.json`` (atomically) and its registry entry; None, with a
    warning, when ``running.json`` cannot be written."""
    stack = RunningStack(
        pid=os.getpid(),
        api_url=_api_url(settings),
        neo4j_uri=neo4j_uri,
        embedded=embedded,
        executor_url=settings.executor_url,
        started_at=datetime.now(UTC).isoformat(),
        data_dir=str(settings.data_dir.resolve()),
    )
    path = running_file(settings.data_dir)
    try:
        _write_atomically(path, stack.model_dump_json(indent=2) + "\n")
    except OSError as e:
        logger.warning(
            "running.json not written: commands will not find this stack", extra={"reason": str(e)}
        )
        return None
    try:
        _write_atomically(_registry_file(settings.data_dir, stack.pid), stack.model_dump_json() + "\n")
    except OSError as e:
        logger.warning("not listed in the registry of running stacks", extra={"reason": str(e)})
    return path


def withdraw(path: Path | None) -> None:
    """Remove the ``running.json`` that `announce` wrote (unless another process has replaced it)
    and this process's registry entry."""
    if path is None:
        return
    _registry_file(path.parent, os.getpid()).unlink(missing_ok=True)
    found = _read(path)
    if found is not None and found.pid != os.getpid():
        return
    path.unlink(missing_ok=True)


def running_elsewhere(data_dir: Path) -> list[RunningStack]:
    """The live stacks of this user's registry that run on another data directory than `data_dir`.

    Entries of processes that are gone are removed; an entry whose data directory no longer holds
    its live ``running.json`` is skipped.
    """
    here = data_dir.resolve()
    found: list[RunningStack] = []
    try:
        entries = sorted(registry_dir().glob("*.json"))
    except OSError:
        return found
    for entry in entries:
        stack = _read(entry)
        if stack is None or stack.data_dir is None:
            continue
        if not _process_alive(stack.pid):
            entry.unlink(missing_ok=True)
            continue
        there = Path(stack.data_dir)
        if there.resolve() == here:
            continue
        live = find_running(there)
        if live is not None and live.pid == stack.pid:
            found.append(live.model_copy(update={"data_dir": str(there)}))
    return found


def _read(path: Path) -> RunningStack | None:
    try:
        data: Any = json.loads(path.read_text())
        stack = RunningStack.model_validate(data)
    except (OSError, ValueError, ValidationError):
        return None
    return stack if stack.format == FORMAT else None


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def _answers(uri: str, timeout_s: float = 2.0) -> bool:
    parts = urlsplit(uri)
    if parts.hostname is None:
        return False
    try:
        with socket.create_connection((parts.hostname, parts.port or 7687), timeout=timeout_s):
            return True
    except OSError:
        return False


def find_running(data_dir: Path) -> RunningStack | None:
    """The live stack that serves `data_dir`, or None (a stale file of a dead process is removed)."""
    path = running_file(data_dir)
    if not path.exists():
        return None
    stack = _read(path)
    if stack is None:
        logger.warning("ignoring an unreadable %s", path)
        return None
    if stack.pid == os.getpid():  # this very process (an API and its commands in one test process)
        return stack
    if not _process_alive(stack.pid):
        logger.info("removing a stale running.json (pid %d is gone)", stack.pid)
        path.unlink(missing_ok=True)
        return None
    if not _answers(stack.neo4j_uri):  # starting, stopping, or the pid was reused
        return None
    return stack


@dataclass(frozen=True)
class Reached:
    """Settings that reach the running stack, and that stack (None: nothing runs on the data dir)."""

    settings: ApiSettings
    running: RunningStack | None

    def describe(self) -> str:
        """One line for the user: which stack the command works with."""
        if self.running is None:
            return ""
        return (
            f"the ReGraph API at {self.running.api_url} (pid {self.running.pid}) runs on "
            f"{self.settings.data_dir}: using its Neo4j at {self.running.neo4j_uri}"
            + (f" and its executor at {self.running.executor_url}" if self.running.executor_url else "")
        )


def reach_running_stack(settings: ApiSettings) -> Reached:
    """`settings` pointed at the stack already running on their data directory, if there is one.

    Only when the settings would start the embedded Neo4j (no REGRAPH_NEO4J_URI) and the running stack
    uses the embedded one of that directory: the command then connects to that server (same user, the
    password from its home) instead of starting a second one on the same files. The running stack's
    executor is used when the settings name none.
    """
    running = find_running(settings.data_dir)
    if running is None or settings.neo4j_uri is not None or not running.embedded:
        return Reached(settings, None)
    password_file = EmbeddedConfig(home=settings.data_dir / "neo4j").password_file
    try:
        password = password_file.read_text().strip()
    except OSError:
        return Reached(settings, None)
    update: dict[str, Any] = {
        "neo4j_uri": running.neo4j_uri,
        "neo4j_user": NEO4J_USER,
        "neo4j_password": SecretStr(password),
    }
    if settings.executor_url is None and running.executor_url is not None:
        update["executor_url"] = running.executor_url
    return Reached(settings.model_copy(update=update), running)
