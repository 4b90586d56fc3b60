"""The local executor of `regraph up` is supervised (issue 27, item 6): killed with SIGKILL in the
middle of a compile, it is started again; the API's /readyz answers 503 naming the executor while it
is down and 200 once it is back; the killed executor's compiler processes do not outlive it."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from api.app import create_app
from api.settings import ApiSettings
from executor.client import ExecutorClient
from executor.compile import find_toolchain
from executor.errors import ExecutorClientError, ToolchainError
from executor.taskformat import load_task
from graphdb.connection import Neo4jTarget
from graphdb.embedded import free_port
from regraph_cli.supervise import ExecutorSupervisor
from tests.support.servers import serve_in_thread
from tests.support.workers import processes_working_in

TASKS_DIR = Path(__file__).parents[2] / "unit" / "executor" / "fixtures" / "tasks"
# thrust's sort keeps nvcc busy for about a minute: it is still compiling when the executor is killed.
SLOW = (
    "#include <thrust/sort.h>\n#include <thrust/execution_policy.h>\n"
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    "  thrust::sort(thrust::device, y, y + n);\n}\n"
)

try:
    find_toolchain()
except ToolchainError:
    pytest.skip("no nvcc here", allow_module_level=True)


@pytest.fixture
def supervised(tmp_path: Path) -> Iterator[ExecutorSupervisor]:
    env = {
        "REGRAPH_EXECUTOR_RUNTIME": "none",
        "REGRAPH_EXECUTOR_CACHE_DIR": str(tmp_path / "executor-cache"),
        "REGRAPH_EXECUTOR_PREPARE_TASKS": "false",
        "REGRAPH_EXECUTOR_PREWARM_WORKERS": "false",
    }
    supervisor = ExecutorSupervisor(free_port(), env=env, start_wait_s=120)
    supervisor.start()
    try:
        yield supervisor
    finally:
        supervisor.stop()


def _cmdline(proc: Path) -> bytes:
    """A process's command line; empty when it ended between being listed and read."""
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def _wait_for(what: str, check: object, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_a_killed_executor_is_restarted_reported_and_leaves_no_compiler(
    supervised: ExecutorSupervisor, neo4j_target: Neo4jTarget, tmp_path: Path
) -> None:
    settings = ApiSettings(
        neo4j_uri=neo4j_target.uri,
        neo4j_password=SecretStr(neo4j_target.password),
        data_dir=tmp_path / "api-data",
        log_format="text",
        seed_graph=None,
        executor_url=supervised.url,
    )
    cache = tmp_path / "executor-cache"
    with serve_in_thread(create_app(settings)) as api:
        ready = httpx.get(f"{api}/readyz", timeout=30)
        assert ready.status_code == 200 and ready.json()["executor"] == "up", ready.text

        def compile_slowly() -> None:
            # its executor is killed under it
            with (
                ExecutorClient(supervised.url, timeout_s=300) as client,
                contextlib.suppress(ExecutorClientError),
            ):
                client.evaluate(load_task(TASKS_DIR / "saxpy"), SLOW)

        threading.Thread(target=compile_slowly, daemon=True).start()
        _wait_for(
            "nvcc never started",
            lambda: any(b"nvcc" in _cmdline(p) for p in processes_working_in(cache)),
        )
        first = supervised.process
        assert first is not None
        compilers = {p.name for p in processes_working_in(cache)}
        os.kill(first.pid, signal.SIGKILL)  # the executor alone, not its group: as the OOM killer does
        down = httpx.get(f"{api}/readyz", timeout=30)
        assert down.status_code == 503, down.text
        assert f"the executor at {supervised.url} is down" in down.json()["error"]["message"]
        _wait_for(
            "the killed executor's compiler processes live on",
            lambda: not compilers & {p.name for p in processes_working_in(cache)},
            30,
        )
        _wait_for(
            "the executor was not restarted", lambda: supervised.restarts == 1 and supervised.state == "up"
        )
        assert supervised.process is not None and supervised.process.pid != first.pid
        _wait_for(
            "/readyz does not report the executor back",
            lambda: httpx.get(f"{api}/readyz", timeout=30).status_code == 200,
        )
