"""What `regraph up` and the CLI's commands check before they start anything (issue 31).

`regraph up` with a port taken used to start the embedded Neo4j and fail close to a minute later in a
JSON log line; `regraph graph stats` without REGRAPH_DATA_DIR quietly started a second Neo4j on the
default data directory while `./dev up` served another one. Each case runs the real command as its own
process with a home directory of its own, against a real socket held by this test.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.discovery import announce, running_elsewhere, running_file, withdraw
from api.settings import ApiSettings

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture()
def listening() -> Iterator[socket.socket]:
    """A real listening socket on a free loopback port, held by this test process."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock


def _environment(home: Path, **extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("REGRAPH_", "NEO4J_"))}
    return {
        **keep,
        "HOME": str(home),  # the default data directory lies under it
        "REGRAPH_CACHE_DIR": str(home / ".cache" / "regraph"),
        "REGRAPH_SEED_GRAPH": "none",
        "REGRAPH_PRELOAD_RETRIEVAL": "false",
        # A command that got past its checks fails fast instead of starting a JVM on this busy machine.
        "JAVA_HOME": str(home / "no-java"),
        **extra,
    }


def _regraph(env: dict[str, str], *arguments: str, timeout: float = 60) -> tuple[int, str, float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "regraph_cli", *arguments],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def _java_started_since(before: set[int]) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in before:
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "java" in command and "neo4j" in command.lower():
                found.append(command)
    return found


def _pids() -> set[int]:
    return {int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()}


@pytest.mark.parametrize("which", ["api", "neo4j"])
def test_up_with_a_taken_port_fails_at_once_naming_the_port_and_its_holder(
    tmp_path: Path, listening: socket.socket, which: str
) -> None:
    taken = listening.getsockname()[1]
    data_dir = tmp_path / "data"
    with socket.socket() as probe:  # a free port for the other role
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    api_port, neo4j_port = (taken, free) if which == "api" else (free, taken)
    env = _environment(
        tmp_path / "home",
        REGRAPH_DATA_DIR=str(data_dir),
        REGRAPH_NEO4J_PORT=str(neo4j_port),
        PYTHONPROFILEIMPORTTIME="1",  # each module imported, on stderr: the refusal must not import the API
    )
    before = _pids()
    code, output, elapsed = _regraph(env, "up", "--port", str(api_port), "--no-with-executor")
    assert code == 2, output
    imported = {
        line.rsplit("|", 1)[-1].strip() for line in output.splitlines() if line.startswith("import time:")
    }
    assert "regraph_cli.main" in imported  # the profile is there to read
    assert "api.app" not in imported  # 2-4 s of imports at load 7, before a refusal that needs none of it
    # The interpreter's imports (a few seconds, 16-18 s with the machine loaded ~16), no Neo4j start:
    # that took close to a minute before it failed (the subprocess's limit is 60 s).
    assert elapsed < 40, elapsed
    assert f"port {taken} " in output, output
    assert f"by process {os.getpid()} " in output, output  # this test holds it
    assert "Nothing was started" in output
    assert not (data_dir / "neo4j").exists()  # the embedded Neo4j's home was never made
    assert _java_started_since(before) == []


def test_commands_refuse_when_the_stack_runs_on_another_data_directory(
    tmp_path: Path, listening: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stack (this test process, its "Neo4j" the socket above) runs on tmp/elsewhere; a command run
    without REGRAPH_DATA_DIR would use the default one: it refuses, naming the directory to set."""
    home = tmp_path / "home"
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv("REGRAPH_CACHE_DIR", str(home / ".cache" / "regraph"))
    settings = ApiSettings(data_dir=elsewhere, port=9, neo4j_uri=None)
    path = announce(settings, f"bolt://127.0.0.1:{listening.getsockname()[1]}", embedded=True)
    assert path == running_file(elsewhere)
    try:
        env = _environment(home)
        default_data_dir = home / ".local" / "share" / "regraph"
        for arguments in (("graph", "stats"), ("db", "status")):
            code, output, _ = _regraph(env, *arguments)
            assert code == 2, output
            assert f"REGRAPH_DATA_DIR={elsewhere.resolve()}" in output, output
            assert str(default_data_dir) in output, output
            assert not (default_data_dir / "neo4j").exists()
        assert [s.pid for s in running_elsewhere(default_data_dir)] == [os.getpid()]
    finally:
        withdraw(path)
    assert running_elsewhere(tmp_path / "home") == []  # `withdraw` took it off the registry
    assert not any((home / ".cache" / "regraph" / "running").iterdir())


def test_a_registry_entry_of_a_dead_process_is_dropped(
    tmp_path: Path, listening: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    path = announce(
        ApiSettings(data_dir=tmp_path / "elsewhere", port=9),
        f"bolt://127.0.0.1:{listening.getsockname()[1]}",
        embedded=True,
    )
    assert path is not None
    [entry] = list((tmp_path / "cache" / "running").iterdir())
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    entry.write_text(entry.read_text().replace(f'"pid":{os.getpid()}', f'"pid":{finished.pid}'))
    assert running_elsewhere(tmp_path / "data") == []
    assert not entry.exists()
    path.unlink()
