"""`regraph up` stops its executor as soon as its own shut-down begins, not after the API and the
embedded Neo4j have stopped (issue 31: stopping took 9-14 s)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
import uvicorn

from regraph_cli.main import _Server
from regraph_cli.supervise import ExecutorStartError, ExecutorSupervisor


def test_a_stop_signal_reaches_the_executor_at_once() -> None:
    told: list[str] = []
    server = _Server(uvicorn.Config(app=lambda: None), on_exit=lambda: told.append("stop"))
    server.handle_exit(signal.SIGINT, None)
    assert server.should_exit
    assert told == ["stop"]


def test_request_stop_signals_the_process_group_without_waiting() -> None:
    supervisor = ExecutorSupervisor(9)
    # A stand-in executor in its own session, as the supervisor starts it, that exits on SIGTERM.
    supervisor.process = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    started = time.monotonic()
    supervisor.request_stop()
    assert time.monotonic() - started < 1  # it did not wait for the process
    assert supervisor.process.wait(timeout=10) == -signal.SIGTERM
    assert supervisor.state == "stopped"
    supervisor.stop()  # reaps nothing more, returns


def test_a_stop_before_the_executor_started_starts_nothing() -> None:
    # `up` starts its executor in a thread: a Ctrl-C that comes first must not leave one running.
    supervisor = ExecutorSupervisor(9)
    supervisor.request_stop()
    with pytest.raises(ExecutorStartError, match="stopped before it started"):
        supervisor.start()
    assert supervisor.process is None
