"""On a GPU, a function candidate's host memory is limited in its own process too (review 37's M5).

RLIMIT_AS breaks CUDA, so the executor watches a GPU worker's resident memory
(:func:`executor.sandbox._tree_rss_bytes`, every tick of :meth:`WorkerProcess.wait`). Under the
default a function candidate runs in a runner, its worker's child: the watch read the worker alone, and
a candidate that filled the host's memory there met no limit. Here, under the default, with a 3-GiB
limit: the naive saxpy passes in a runner (and what the watch counted, and what a read cost, are
printed: ``-rA`` shows them), and a candidate that makes 8 GiB of host memory resident in its first
call is refused ``out_of_memory``, the service (this evaluator) still answering after it.

The host test of the same: tests/integration/executor/test_worker_tree_memory.py.
"""

from __future__ import annotations

import importlib.util
import shutil
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import executor.sandbox as sandbox
from executor.evaluate import Evaluator
from executor.protocol import CandidateSource, EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from executor.verdict import ErrorKind
from tests.support.hostcode import use_default_candidate_process

pytestmark = pytest.mark.gpu

if importlib.util.find_spec("pycuda") is None or shutil.which("nvidia-smi") is None:
    pytest.skip("needs pycuda and an NVIDIA GPU", allow_module_level=True)

TASKS = Path(__file__).parents[1] / "unit" / "executor" / "fixtures" / "tasks"
QUICK = EvaluationOptions(min_trials=5, max_trials=20, min_timing_ms=20, reference_repeats=1, baseline=False)
LIMIT = 3 << 30

# The right saxpy, whose first call first makes 32 x 256 MB of host memory resident and keeps it.
HOG = """
#include <cuda_runtime.h>
#include <cstring>
__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
static bool held = false;
extern "C" void saxpy(int n, float a, const float* x, float* y) {
    if (!held) {
        held = true;
        for (int k = 0; k < 32; ++k) {
            char* volatile block = new char[256ull << 20];
            std::memset(block, 1, 256ull << 20);
        }
    }
    float *dx, *dy;
    cudaMalloc(&dx, n * sizeof(float));
    cudaMalloc(&dy, n * sizeof(float));
    cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice);
    saxpy_kernel<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
    cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dy);
}
"""


@pytest.fixture(scope="module", autouse=True)
def _default() -> Iterator[None]:
    """The executor's default for where a function candidate runs (a runner, where it can be confined)."""
    with pytest.MonkeyPatch.context() as patch:
        use_default_candidate_process(patch)
        yield


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evaluator]:
    # Generous call and run floors: the watch, not a call limit, must stop the hog while it faults its
    # pages in.
    settings = ExecutorSettings(
        cache_dir=tmp_path_factory.mktemp("runner-memory-gpu"),
        runtime="gpu",
        run_timeout_s=120,
        memory_limit_bytes=LIMIT,
        run_call_floor_s=30.0,
        run_limit_floor_s=60.0,
    )
    built = Evaluator(settings)
    yield built
    built.close()


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, int]]:
    """Each read of the watch in this test: (seconds it took, bytes it counted)."""
    reads: list[tuple[float, int]] = []
    tree = sandbox._tree_rss_bytes

    def timed(pid: int) -> int:
        began = time.perf_counter()
        counted = tree(pid)
        reads.append((time.perf_counter() - began, counted))
        return counted

    monkeypatch.setattr(sandbox, "_tree_rss_bytes", timed)
    return reads


def _summary(reads: list[tuple[float, Any]]) -> str:
    if not reads:
        return "no reads"
    micros = [s * 1e6 for s, _ in reads]
    return (
        f"{len(reads)} reads, median {statistics.median(micros):.0f} us, max {max(micros):.0f} us; "
        f"counted at most {max(c for _, c in reads) / 2**20:.0f} MiB"
    )


def test_the_naive_candidate_passes_in_a_runner_under_the_limit(
    evaluator: Evaluator, watched: list[tuple[float, int]]
) -> None:
    task = load_task(TASKS / "saxpy")
    assert task.naive_source is not None
    verdict = evaluator.evaluate(task, CandidateSource(source=task.naive_source), QUICK)
    print(f"honest saxpy: {_summary(watched)}")
    assert verdict.passed, verdict.message
    assert "runner_roundtrip" in verdict.seconds, verdict.seconds  # it ran in a runner
    assert watched, "the watch never read the worker's memory"


def test_a_candidate_that_fills_host_memory_in_its_runner_is_refused(
    evaluator: Evaluator, watched: list[tuple[float, int]]
) -> None:
    task = load_task(TASKS / "saxpy")
    verdict = evaluator.evaluate(task, CandidateSource(source=HOG), QUICK)
    print(f"hog: {_summary(watched)}")
    assert not verdict.passed and verdict.error is ErrorKind.OUT_OF_MEMORY, verdict.message
    assert f"exceeded {LIMIT} bytes" in verdict.message, verdict.message
    # the service goes on: the honest code still passes after it
    assert task.naive_source is not None
    after = evaluator.evaluate(task, CandidateSource(source=task.naive_source), QUICK)
    assert after.passed, after.message
