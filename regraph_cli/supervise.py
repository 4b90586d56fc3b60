"""The local executor of `regraph up`, supervised: started as its own process, restarted when it dies.

A killed executor used to stay dead while the API answered ready and every evaluation failed (issue
27). :class:`ExecutorSupervisor` watches the process and starts a new one after it exits (waiting
longer after each quick death, at most :data:`MAX_BACKOFF_S`); the API's ``/readyz`` reports the
executor down meanwhile (it asks the executor's ``/healthz``). The compiles of a killed executor die
with it: each runs in a jail whose first process gets SIGKILL when its parent goes (see
:mod:`executor.jail`), and the executor's own process group is killed before a restart.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO

import httpx

logger = logging.getLogger(__name__)

POLL_S = 0.5
START_POLL_S = 0.1
"""How often a starting executor's /healthz is asked."""
MAX_BACKOFF_S = 30.0
# A process that lived this long is taken as having started well: the wait before a restart starts over.
STABLE_S = 60.0


class ExecutorStartError(RuntimeError):
    """The executor did not come up."""


class ExecutorSupervisor:
    """One local executor process on ``port``, restarted whenever it exits until :meth:`stop`."""

    def __init__(
        self,
        port: int,
        *,
        stdout: IO[bytes] | IO[str] | None = None,
        env: dict[str, str] | None = None,
        start_wait_s: float = 60.0,
    ) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self._stdout = stdout
        self._env = env
        self.start_wait_s = start_wait_s
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self.last_exit: int | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._watcher: threading.Thread | None = None

    def _spawn(self) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            **(self._env or {}),
            "REGRAPH_EXECUTOR_HOST": "127.0.0.1",
            "REGRAPH_EXECUTOR_PORT": str(self.port),
        }
        return subprocess.Popen(
            [sys.executable, "-m", "regraph_cli", "executor", "serve"],
            env=env,
            start_new_session=True,
            stdout=self._stdout,
        )

    def _wait_until_answering(self, process: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.start_wait_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise ExecutorStartError(
                    f"the executor exited with code {process.returncode} during start-up"
                )
            if self._stopping.is_set():  # `up` stops while the executor starts (it starts in a thread)
                _kill_group(process)
                raise ExecutorStartError("the executor was stopped during its start-up")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200:
                    logger.info("executor answers", extra={"url": self.url})
                    return
            time.sleep(START_POLL_S)
        _kill_group(process)
        raise ExecutorStartError(
            f"the executor did not answer on {self.url} within {self.start_wait_s:.0f} s"
        )

    def start(self) -> str:
        """Start the executor, wait until it answers, and watch it from then on; its URL."""
        with self._lock:
            if self._stopping.is_set():
                raise ExecutorStartError("the executor was stopped before it started")
            self.process = self._spawn()
        self._wait_until_answering(self.process)
        self._watcher = threading.Thread(target=self._watch, name="executor-supervisor", daemon=True)
        self._watcher.start()
        return self.url

    @property
    def state(self) -> str:
        """``up``, ``restarting (...)`` or ``stopped``, for messages."""
        if self._stopping.is_set():
            return "stopped"
        process = self.process
        if process is not None and process.poll() is None:
            return "up"
        return f"restarting (it exited with code {self.last_exit})"

    def _watch(self) -> None:
        backoff = 1.0
        while not self._stopping.is_set():
            process = self.process
            assert process is not None
            started = time.monotonic()
            while process.poll() is None:
                if self._stopping.wait(POLL_S):
                    return
            self.last_exit = process.returncode
            _kill_group(process)  # whatever it started and left behind goes with it
            if self._stopping.is_set():
                return
            lived = time.monotonic() - started
            backoff = 1.0 if lived > STABLE_S else min(MAX_BACKOFF_S, backoff * 2)
            logger.warning(
                "the executor exited with code %s; restarting it in %.0f s", process.returncode, backoff
            )
            if self._stopping.wait(backoff):
                return
            with self._lock:
                if self._stopping.is_set():
                    return
                self.process = self._spawn()
            self.restarts += 1
            try:
                self._wait_until_answering(self.process)
                logger.warning("the executor is back on %s (restart %d)", self.url, self.restarts)
            except ExecutorStartError as e:
                if not self._stopping.is_set():
                    logger.error("%s", e)

    def request_stop(self) -> None:
        """Stop watching and ask the executor to stop (SIGTERM to its process group); return at once.

        `regraph up` calls this as soon as its own shut-down begins, so that the executor stops while
        the API stops its jobs and the embedded Neo4j, rather than after them.
        """
        self._stopping.set()
        with self._lock:
            process = self.process
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)

    def stop(self) -> None:
        """Stop watching and stop the executor (its whole process group); wait until it is gone."""
        self.request_stop()
        with self._lock:
            process = self.process
        if process is not None and process.poll() is None:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                _kill_group(process)
                process.wait()
        if self._watcher is not None:
            self._watcher.join(timeout=10)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
