"""The search's judge on the real executor service: a cancelled evaluation leaves nothing waiting.

An executor in the test-only ``host`` runtime (function candidates compiled by the real nvcc and run on
the CPU by real worker processes) is served on loopback; the candidate spins for its whole run limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from types import FrameType

from executor.app import create_app
from executor.client import ExecutorClient
from executor.protocol import EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from search.evaluation import ExecutorEvaluator
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


def test_a_cancelled_evaluation_leaves_no_thread_waiting_for_the_executor(tmp_path: Path) -> None:
    """Cancelling a search (a job cancelled, the service stopping) cancels its evaluation's request:
    no thread stays behind waiting for the executor's answer, which here would take the candidate's
    whole run limit (30 s)."""
    settings = ExecutorSettings(cache_dir=tmp_path, runtime="host", run_timeout_s=40, run_limit_floor_s=30)
    task = load_task(TASK_DIR)

    async def cancel_while_it_runs(url: str) -> None:
        with ExecutorClient(url, timeout_s=120) as client:
            judge = ExecutorEvaluator(client, task, mode="verified", options=QUICK)
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

    with serve_in_thread(create_app(settings)) as url:
        asyncio.run(cancel_while_it_runs(url))
