"""The search's judge on the real executor service: a cancelled evaluation leaves nothing waiting, and
an evaluator's evaluations share one connection, closed with the evaluator.

An executor in the test-only ``host`` runtime (function candidates compiled by the real nvcc and run on
the CPU by real worker processes) is served on loopback; the candidate spins for its whole run limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from executor.app import create_app
from executor.client import ExecutorClient
from executor.protocol import EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from search.evaluation import ExecutorEvaluator
from tests.support.buildcache import sharing_builds
from tests.support.servers import serve_in_thread

TASK_DIR = Path(__file__).parents[2] / "unit" / "executor" / "fixtures" / "tasks" / "saxpy"
SPIN = (
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    "  volatile int spin = 1; while (spin) {}\n}\n"
    "__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
)
QUICK = EvaluationOptions(min_trials=3, max_trials=10, min_timing_ms=5, reference_repeats=1, baseline=False)
CLIENT_FILE = str(Path(sys.modules[ExecutorClient.__module__].__file__ or "").resolve())


def _threads_in_the_client() -> list[str]:
    """The threads whose stack is inside the executor client's module now."""
    inside = []
    for ident, frame in sys._current_frames().items():
        walker: FrameType | None = frame
        while walker is not None:
            if str(Path(walker.f_code.co_filename).resolve()) == CLIENT_FILE:
                inside.append(str(ident))
                break
            walker = walker.f_back
    return inside


def test_a_cancelled_evaluation_leaves_no_thread_waiting_for_the_executor(
    tmp_path: Path, shared_builds: Path
) -> None:
    """Cancelling a search (a job cancelled, the service stopping) cancels its evaluation's request:
    no thread stays behind waiting for the executor's answer, which here would take the candidate's
    whole run limit (30 s)."""
    settings = ExecutorSettings(
        cache_dir=sharing_builds(tmp_path, shared_builds),
        runtime="host",
        run_timeout_s=40,
        run_limit_floor_s=30,
        run_call_floor_s=30,
        prewarm_workers=False,  # one evaluation: no spare or prepared workers, killed unused at the close
    )
    task = load_task(TASK_DIR)

    async def cancel_while_it_runs(url: str) -> None:
        with ExecutorClient(url, timeout_s=120) as client:
            judge = ExecutorEvaluator(client, task, mode="verified", options=QUICK)
            await judge.__aenter__()
            running = asyncio.create_task(judge.evaluate(SPIN))
            await asyncio.sleep(3)  # the request is at the executor (compiling or running)
            assert not running.done()
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
            for _ in range(50):  # 5 s for a thread to notice
                if not _threads_in_the_client():
                    break
                await asyncio.sleep(0.1)
            assert not _threads_in_the_client(), "a thread still waits for the executor's answer"
            await judge.aclose()

    with serve_in_thread(create_app(settings)) as url:
        asyncio.run(cancel_while_it_runs(url))


# Rejected by the executor's static checks (no kernel, main() defined): an answer in milliseconds.
REJECTED = "int main() {}"
# TCP states in /proc/net/tcp: open, and those of a side that closed its connection first.
ESTABLISHED = "01"
CLOSED_FIRST = {"04": "FIN_WAIT1", "05": "FIN_WAIT2", "06": "TIME_WAIT", "0B": "CLOSING"}
CLOSE_WAIT = "08"  # the other side closed first (the server's keep-alive timeout ends an idle one)


def _connections_to(port: int) -> dict[int, str]:
    """The TCP connections to `port` on loopback seen from the client's side: local port -> state."""
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    fields = [line.split() for line in lines]
    return {int(f[1].split(":")[1], 16): f[3] for f in fields if int(f[2].split(":")[1], 16) == port}


def _established_to(port: int) -> int:
    """How many TCP connections to `port` on loopback are open from the client's side now."""
    return sum(1 for state in _connections_to(port).values() if state == ESTABLISHED)


def _after_the_close(port: int, ours: int) -> str:
    """The state of our connection (client port `ours`) once no connection to `port` is open any more.

    Closing a socket is not always instant: a process forked meanwhile by any thread of this one (the
    executor's workers, a compiler) holds a copy of the descriptor until its exec, and the connection
    stays open until then. So this waits, at most 30 s; a connection that the client never closed is
    closed by the server's keep-alive timeout (5 s) instead, which leaves it in CLOSE_WAIT here."""
    deadline = time.monotonic() + 30
    while _established_to(port) and time.monotonic() < deadline:
        time.sleep(0.02)
    return _connections_to(port).get(ours, "gone")


def test_an_evaluators_evaluations_share_one_connection_closed_with_it(tmp_path: Path) -> None:
    """A search evaluates many candidates: they reuse one connection to the executor (not one each),
    and the connection is closed when the evaluator is (the end of the search), by the evaluator."""
    # No task preparation and no spare workers: the candidates never get past the static checks.
    executor = create_app(
        ExecutorSettings(cache_dir=tmp_path, runtime="host", prepare_tasks=False, prewarm_workers=False)
    )
    clients: set[tuple[str, int]] = set()  # the client address of every request the executor got

    async def recording(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            clients.add(tuple(scope["client"]))
        await executor(scope, receive, send)

    async def evaluate_many(url: str, port: int) -> None:
        clients.clear()  # not serve_in_thread's readiness checks
        with ExecutorClient(url, timeout_s=60) as client:
            async with ExecutorEvaluator(client, load_task(TASK_DIR), mode="compile-only") as judge:
                for _ in range(8):
                    evaluation = await judge.evaluate(REJECTED)
                    assert evaluation.error_kind == "static_rejected", evaluation
                assert len(clients) == 1, clients
                (ours,) = (client_port for _, client_port in clients)
                assert _connections_to(port).get(ours) == ESTABLISHED  # kept open between evaluations
            state = _after_the_close(port, ours)
            assert _established_to(port) == 0
            assert state in CLOSED_FIRST, f"our connection is {state}, not closed by the evaluator"

    with serve_in_thread(recording) as url:
        port = int(url.rsplit(":", 1)[1])
        asyncio.run(evaluate_many(url, port))
    assert len(clients) == 1, clients
