"""The local executor of `regraph mcp`: started as its own process (as in production) beside the
server, and stopped with it; and how long a local executor may take to start (`regraph up` too).

`regraph up` supervises its executor (`regraph_cli.supervise`); both commands import from here, so
neither imports the other.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import httpx

from regraph_cli.supervise import ExecutorStartError


def executor_start_wait_s() -> float:
    """How long a local executor may take to answer after it starts."""
    # A fleet (REGRAPH_EXECUTOR_RAY) answers once Ray is up and every replica has started.
    return 300 if os.environ.get("REGRAPH_EXECUTOR_RAY") else 60


def start_local_executor(
    port: int,
    *,
    quiet_stdout: bool = False,
    on_started: Callable[[subprocess.Popen[bytes]], None] | None = None,
) -> tuple[subprocess.Popen[bytes], str]:
    """Start the executor as its own process (as in production) and wait until it answers.

    `quiet_stdout` sends its standard output to our standard error (`regraph mcp` speaks on stdout);
    `on_started` is given the process as soon as it exists (before it answers). Raises
    `ExecutorStartError` when it exits during start-up or does not answer in time.
    """
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "REGRAPH_EXECUTOR_HOST": "127.0.0.1", "REGRAPH_EXECUTOR_PORT": str(port)}
    process = subprocess.Popen(
        [sys.executable, "-m", "regraph_cli", "executor", "serve"],
        env=env,
        start_new_session=True,
        stdout=sys.stderr if quiet_stdout else None,
    )
    if on_started is not None:
        on_started(process)
    wait_s = executor_start_wait_s()
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ExecutorStartError(f"the executor exited with code {process.returncode} during start-up")
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.3)
    process.terminate()
    raise ExecutorStartError(f"the executor did not answer on {url} within {wait_s} s")


def stop_local_executor(process: subprocess.Popen[bytes]) -> None:
    """Stop an executor `start_local_executor` started (its whole process group)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
