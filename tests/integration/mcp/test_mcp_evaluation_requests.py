"""Evaluations over MCP hold nothing once cancelled, and never hold up the API's shut-down.

An evaluation waits on one executor request, possibly for minutes. Cancelling it (``cancel_evaluation``,
or the API stopping) must close that request at once: nothing of the API may stay behind waiting for a
verdict nobody will read, least of all a worker thread of the event loop's default executor, which the
rest of the API (the optimization jobs' store calls, for one) needs.

The REAL executor runs here in its test-only ``host`` runtime (function tasks run on the CPU), one
evaluation at a time (``compile_workers=1``); a candidate that deadlocks holds it for `HANG_S` seconds
(its run limit), so the evaluations started behind it wait for their verdicts, as they would behind a
long GPU evaluation.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from types import FrameType

import anyio
import pytest
from mcp import Client

from api.app import create_app
from executor.app import create_app as create_executor_app
from executor.client import AsyncExecutorClient, ExecutorClient
from executor.settings import ExecutorSettings
from graphdb.models import Role
from tests.integration.mcp.conftest import ROOT, SeededGraph
from tests.integration.mcp.http_stack import Stack, api_settings, connect
from tests.integration.mcp.scenario import data, error_text
from tests.support.servers import serve_in_thread

pytestmark = pytest.mark.neo4j

HANG_S = 15.0
"""How long the deadlocked candidate holds the executor (its run limit)."""
TASKS = ROOT / "tests" / "unit" / "executor" / "fixtures" / "tasks"
TASK_REF = "saxpy"
# The static checks want GPU work in a candidate: a launch that is never reached.
_HEAD = "__global__ void never(float* y) { y[0] = 0.0f; }\n" + (
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
)
_NEVER = "  if (n < 0) never<<<1, 1>>>(y);\n}\n"
DEADLOCKS = (
    "#include <mutex>\nstatic std::mutex held;\n" + _HEAD + "  held.lock();\n  held.lock();\n" + _NEVER
)
CORRECT = _HEAD + "  for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];\n" + _NEVER
DEFAULT_POOL = min(32, (os.cpu_count() or 1) + 4)
"""Worker threads of an event loop's default executor (`concurrent.futures.ThreadPoolExecutor`'s default)."""
PROMPT_S = 5.0
"""What "at once" means on this shared, loaded machine (the calls take ~0.1 s when nothing is wrong)."""


@pytest.fixture(scope="module")
def busy_executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real executor, one evaluation at a time, a hanging candidate stopped after `HANG_S`."""
    settings = ExecutorSettings(
        cache_dir=tmp_path_factory.mktemp("executor-cache"),
        runtime="host",
        compile_workers=1,
        run_limit_floor_s=HANG_S,
        run_call_floor_s=HANG_S,  # no call limit before the run limit
        run_timeout_s=HANG_S,
        request_timeout_s=HANG_S + 5,  # a request still queued then is dropped
    )
    with serve_in_thread(create_executor_app(settings)) as url:
        yield url


def _serving(seeded: SeededGraph, executor_url: str, data_dir: Path) -> AbstractContextManager[str]:
    return serve_in_thread(create_app(api_settings(seeded, executor_url, data_dir, tasks_dir=TASKS)))


def threads_waiting_on(executor_url: str) -> list[str]:
    """The threads of this process that are inside a call of an executor client to `executor_url`."""
    names = {t.ident: t.name for t in threading.enumerate()}
    waiting = []
    for ident, frame in sys._current_frames().items():
        at: FrameType | None = frame
        while at is not None:
            client = at.f_locals.get("self")
            if isinstance(client, ExecutorClient | AsyncExecutorClient) and str(client._http.base_url).rstrip(
                "/"
            ) == executor_url.rstrip("/"):
                waiting.append(names.get(ident, str(ident)))
                break
            at = at.f_back
    return waiting


def connections_to(executor_url: str) -> int:
    """Open TCP connections to the executor's port (from any process of this machine: only ours use it)."""
    port = int(executor_url.rsplit(":", 1)[1])
    established = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            established += remote_port == port and fields[3] == "01"  # 01: ESTABLISHED
    return established


def assert_nothing_waits_on(executor_url: str) -> None:
    """No thread and no connection of ours waits on the executor, within `PROMPT_S`."""
    deadline = time.monotonic() + PROMPT_S
    while (threads_waiting_on(executor_url) or connections_to(executor_url)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert threads_waiting_on(executor_url) == []
    assert connections_to(executor_url) == 0


async def start_evaluation(client: Client, source: str) -> str:
    """Start an evaluation and wait until its request is at the executor; returns its id."""
    evaluation_id: str = data(
        await client.call_tool("start_evaluation", {"source": source, "task_ref": TASK_REF})
    )["evaluation_id"]
    with anyio.move_on_after(PROMPT_S * 2):
        while True:
            status = data(await client.call_tool("evaluation_status", {"evaluation_id": evaluation_id}))
            assert not status["finished"], status  # the executor is busy: nothing can have finished
            if any(line.startswith("evaluating") for line in status["progress"]):
                return evaluation_id
            await anyio.sleep(0.05)
    raise AssertionError(f"evaluation {evaluation_id} never sent its request to the executor: {status}")


def test_cancelled_evaluations_leave_nothing_waiting_on_the_executor(
    seeded: SeededGraph, busy_executor: str, tmp_path: Path
) -> None:
    """More evaluations than the default executor has threads are started and cancelled while the
    executor is busy: the API still answers at once, and no request or thread is left behind."""
    with _serving(seeded, busy_executor, tmp_path) as url:
        stack = Stack(url, seeded)

        async def scenario() -> None:
            async with connect(stack, {"X-API-Key": seeded.tokens[Role.READER]}) as client:
                holder = await start_evaluation(client, DEADLOCKS)
                for _ in range(DEFAULT_POOL + 2):
                    evaluation_id = await start_evaluation(client, CORRECT)
                    cancelled = data(
                        await client.call_tool("cancel_evaluation", {"evaluation_id": evaluation_id})
                    )
                    assert cancelled["state"] == "cancelled" and cancelled["result"] is None, cancelled
                # A call that runs on the default executor's threads (the job service's store read).
                began = time.monotonic()
                unknown = await client.call_tool("job_status", {"job_id": "no-such-job"})
                took = time.monotonic() - began
                assert "no-such-job" in error_text(unknown) and took < PROMPT_S, took
                data(await client.call_tool("cancel_evaluation", {"evaluation_id": holder}))

        anyio.run(scenario)
        # The executor is still busy for seconds; the API has nothing open to it any more.
        assert_nothing_waits_on(busy_executor)


def test_the_api_stops_at_once_with_an_evaluation_in_flight(
    seeded: SeededGraph, busy_executor: str, tmp_path: Path
) -> None:
    serving = _serving(seeded, busy_executor, tmp_path)
    stack = Stack(serving.__enter__(), seeded)
    try:

        async def scenario() -> None:
            async with connect(stack, {"X-API-Key": seeded.tokens[Role.READER]}) as client:
                await start_evaluation(client, DEADLOCKS)

        anyio.run(scenario)
    finally:
        began = time.monotonic()
        serving.__exit__(None, None, None)
        took = time.monotonic() - began
    assert took < PROMPT_S, f"the API took {took:.1f} s to stop"
    assert_nothing_waits_on(busy_executor)
