"""A GPU function candidate's const inputs are read-only in its process (session 39; not yet run on a GPU).

In a runner a set's ``in`` arrays are mapped read-only from a sealed memfd
(:class:`executor.worker.runner.SharedArrays`): review 39's H2 wrote its input and had a timer restore
it before the worker's check. What that changes for a GPU candidate, which is handed host pointers: a
``cudaMemcpy`` from them reads, as before; ``cudaHostRegister`` with the default flags asks to pin them
writable, which the driver refuses on read-only memory (where the device does not use the host's page
tables); ``cudaHostRegisterReadOnly`` (CUDA 11.1+) pins them. A write to one ends the runner
(SIGSEGV): the corpus's ``fn_input_mutation.cu``, strictly here. The host tests of the seal:
``tests/unit/executor/test_input_seal.py``, ``tests/integration/executor/test_const_input_seal.py``.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.evaluate import Evaluator
from executor.protocol import CandidateSource, EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from executor.verdict import ErrorKind
from executor.worker.runner import input_seal
from tests.support.hostcode import use_candidate_process

pytestmark = pytest.mark.gpu

if importlib.util.find_spec("pycuda") is None or shutil.which("nvidia-smi") is None:
    pytest.skip("needs pycuda and an NVIDIA GPU", allow_module_level=True)

HERE = Path(__file__).parent
TASKS = HERE.parent / "unit" / "executor" / "fixtures" / "tasks"
QUICK = EvaluationOptions(min_trials=5, max_trials=20, min_timing_ms=20, reference_repeats=1, baseline=False)

# The honest saxpy, its input x registered with the driver for the call (FLAGS) and unregistered after.
# Where what the registration returned is not what WANTED says, y[0] is spoiled (``wrong_output``).
REGISTERS = r"""
#include <cuda_runtime.h>
__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" void saxpy(int n, float a, const float* x, float* y) {
    size_t bytes = (size_t)n * sizeof(float);
    cudaError_t registered = cudaHostRegister((void*)x, bytes, FLAGS);
    if (registered != cudaSuccess) cudaGetLastError();
    float *dx, *dy;
    cudaMalloc(&dx, bytes);
    cudaMalloc(&dy, bytes);
    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice);
    saxpy_kernel<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
    cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dy);
    if (registered == cudaSuccess) cudaHostUnregister((void*)x);
    if ((registered == cudaSuccess) != WANTED) y[0] += 1.0f;
}
"""


@pytest.fixture(scope="module", autouse=True)
def _candidate_process() -> Iterator[None]:
    """Always in a runner (whatever the executor's default): what is tested is the runner's mapping."""
    if input_seal() is not None:
        pytest.skip(f"no sealed const inputs here: {input_seal()}")
    with pytest.MonkeyPatch.context() as patch:
        use_candidate_process(patch)
        yield


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evaluator]:
    settings = ExecutorSettings(
        cache_dir=tmp_path_factory.mktemp("seal-gpu"), runtime="gpu", run_timeout_s=120
    )
    built = Evaluator(settings)
    yield built
    built.close()


def test_a_read_only_registration_of_a_const_input_works(evaluator: Evaluator) -> None:
    source = REGISTERS.replace("FLAGS", "cudaHostRegisterReadOnly").replace("WANTED", "true")
    verdict = evaluator.evaluate(load_task(TASKS / "saxpy"), CandidateSource(source=source), QUICK)
    assert verdict.passed, f"cudaHostRegisterReadOnly failed on a runner's const input: {verdict.message}"
    assert "runner_roundtrip" in verdict.seconds, verdict.seconds


def test_a_registration_with_the_default_flags_is_refused(evaluator: Evaluator) -> None:
    """What docs/executor.md tells candidates (the call fails; the copies still work). Should the driver
    take it on some platform (a device that uses the host's page tables), the docs are to be corrected."""
    source = REGISTERS.replace("FLAGS", "cudaHostRegisterDefault").replace("WANTED", "false")
    verdict = evaluator.evaluate(load_task(TASKS / "saxpy"), CandidateSource(source=source), QUICK)
    assert verdict.passed, f"the default flags registered a runner's const input: {verdict.message}"


def test_a_write_to_a_const_input_ends_the_candidates_process(evaluator: Evaluator) -> None:
    source = (HERE / "adversarial" / "fn_input_mutation.cu").read_text()
    task = load_task(HERE / "adversarial" / "tasks" / "big_saxpy")
    verdict = evaluator.evaluate(task, CandidateSource(source=source), QUICK)
    assert not verdict.passed and verdict.error is ErrorKind.CRASH, verdict.message
    assert "SIGSEGV" in verdict.message, verdict.message
