"""Through the executor's HTTP API: one caller's long evaluations leave a slot for another caller
(issue 27). Two evaluations of caller A whose compiles run into the compile limit (thrust's sort
takes nvcc about a minute) and then one of caller B, on an executor with two slots: B's verdict
comes while A's still compile. (Runs do not count here: they take the executor's one GPU lock in
turn whatever the slots.)"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from executor.app import create_app
from executor.client import ExecutorClient
from executor.compile import find_toolchain
from executor.errors import ToolchainError
from executor.protocol import EvaluationOptions, Verdict
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from tests.support.servers import serve_in_thread

TASKS_DIR = Path(__file__).parents[2] / "unit" / "executor" / "fixtures" / "tasks"
STUB = "__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
SLOW = (
    "#include <thrust/sort.h>\n#include <thrust/execution_policy.h>\n"
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    "  thrust::sort(thrust::device, y, y + n);\n}\n"
)
QUICK = 'extern "C" void saxpy(int n, float a, const float* x, float* y) { for (int i = 0; i < n; ++i) y[i] += a * x[i]; }\n'
COMPILE_LIMIT_S = 8.0  # thrust's sort compiles in 12 s or more even on an idle machine

try:
    find_toolchain()
except ToolchainError:
    pytest.skip("no nvcc here", allow_module_level=True)


def test_one_callers_long_evaluations_leave_a_slot_for_another(tmp_path: Path) -> None:
    saxpy = load_task(TASKS_DIR / "saxpy")
    settings = ExecutorSettings(
        cache_dir=tmp_path,
        runtime="host",
        compile_workers=2,
        compile_timeout_s=COMPILE_LIMIT_S,
        prewarm_workers=False,
        prepare_tasks=False,
        prepare_next=False,
    )
    options = EvaluationOptions(correctness_sets=1)
    ended: dict[str, float] = {}
    verdicts: dict[str, Verdict] = {}

    def evaluate(url: str, name: str, source: str, caller: str) -> None:
        with ExecutorClient(url, timeout_s=300) as client:
            verdicts[name] = client.evaluate(saxpy, source, options, caller=caller)
        ended[name] = time.monotonic()

    with serve_in_thread(create_app(settings)) as url:
        started = time.monotonic()
        spinners = [
            threading.Thread(target=evaluate, args=(url, f"a{i}", SLOW + f"// {i}\n", "reader-a"))
            for i in range(2)
        ]
        for thread in spinners:
            thread.start()
        time.sleep(1.0)  # A's two are in (or waiting for) the slots before B comes
        evaluate(url, "b", STUB + QUICK, "reader-b")
        b_took = ended["b"] - started
        for thread in spinners:
            thread.join(300)
    assert verdicts["b"].error is None or verdicts["b"].error.value != "timeout", verdicts["b"].message
    # B did not wait for one of A's compiles to run into its limit
    assert b_took < COMPILE_LIMIT_S, b_took
    assert all(ended[f"a{i}"] > ended["b"] for i in range(2)), (
        {k: v - started for k, v in ended.items()},
        {k: v.message for k, v in verdicts.items()},
    )
    assert {verdicts[f"a{i}"].error.value for i in range(2) if verdicts[f"a{i}"].error} == {
        "compile_timeout"
    }, {k: (v.stage, v.message[:400]) for k, v in verdicts.items()}
