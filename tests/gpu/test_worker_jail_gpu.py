"""The runtime jail of candidate workers on a GPU host (issue 27): the jailed worker passes its
start-up probe (CUDA context in the jail), a function task's and a kernel task's candidates pass
under it, and a function candidate's host code cannot read a secret file beside the executor or write
outside its directory; with the jail turned off the same candidate can (what the jail stops).

Run on the GPU machine: ``python -m pytest tests/gpu/test_worker_jail_gpu.py -q -m gpu`` (about a
minute: one nvcc build per candidate, a few worker starts).
"""

from __future__ import annotations

import importlib.util
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor import jail
from executor.evaluate import Evaluator
from executor.protocol import CandidateSource, EvaluationOptions
from executor.reference import build_reference
from executor.sandbox import JAIL_WORKERS_ENV, describe_worker, run_job, worker_protection
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from executor.verdict import ErrorKind
from executor.worker.messages import CandidateRun, WorkerJob
from tests.support.hostcode import use_worker_process
from tests.unit.executor.test_executor_static import GOOD_KERNEL

pytestmark = pytest.mark.gpu

TASKS_DIR = Path(__file__).parent.parent / "unit" / "executor" / "fixtures" / "tasks"
PROJECT = Path(__file__).resolve().parents[2]
QUICK = EvaluationOptions(
    min_trials=5, max_trials=20, min_timing_ms=20, reference_repeats=1, correctness_sets=2
)

if importlib.util.find_spec("pycuda") is None or shutil.which("nvidia-smi") is None:
    pytest.skip("needs pycuda and an NVIDIA GPU", allow_module_level=True)


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evaluator]:
    settings = ExecutorSettings(
        cache_dir=tmp_path_factory.mktemp("worker-jail-gpu-cache"), runtime="gpu", run_timeout_s=60
    )
    built = Evaluator(settings)
    try:
        yield built
    finally:
        built.close()


@pytest.fixture
def secret() -> Iterator[Path]:
    path = PROJECT / f".jail-secret-{uuid.uuid4().hex[:8]}"
    path.write_text("the executor's secret\n")
    path.chmod(0o644)
    yield path
    path.unlink(missing_ok=True)


def test_the_gpu_worker_runs_in_the_namespace_jail() -> None:
    """The jailed worker made its CUDA context in the jail (the probe): no fallback on this host."""
    if jail.protection() != "namespace":
        pytest.skip(f"no namespaces here: {jail.describe(jail.protection())}")
    kind = worker_protection("gpu")
    assert kind == "namespace", describe_worker(kind)


def test_function_and_kernel_candidates_pass_in_the_jail(evaluator: Evaluator) -> None:
    sources = {
        "saxpy": (TASKS_DIR / "saxpy" / "naive.cu").read_text(),
        "scale_kernel": GOOD_KERNEL,
    }
    for name, source in sources.items():
        verdict = evaluator.evaluate(load_task(TASKS_DIR / name), CandidateSource(source=source), QUICK)
        assert verdict.passed, (name, verdict.message)
    worker = evaluator.pool.take("candidate")
    try:
        assert worker.protection == worker_protection("gpu")
    finally:
        evaluator.pool.discard(worker)


def _nosy(secret: Path, outside: Path) -> str:
    """The naive saxpy, whose answer is right only when the secret cannot be opened and the file
    outside cannot be written (ENOENT / EACCES / EROFS)."""
    naive = (TASKS_DIR / "saxpy" / "naive.cu").read_text()
    inner = naive.replace('extern "C" void saxpy(', "static void saxpy_inner(")
    return f"""#include <cerrno>
#include <cstdio>
{inner}
static bool refused(const char* path, const char* mode) {{
    FILE* f = std::fopen(path, mode);
    if (f != nullptr) {{ std::fclose(f); return false; }}
    return errno == ENOENT || errno == EACCES || errno == EROFS;
}}
extern "C" void saxpy(int n, float a, const float* x, float* y) {{
    bool jailed = refused("{secret}", "r");
    jailed = refused("{outside}", "w") && jailed;
    saxpy_inner(n, a, x, y);
    if (!jailed) for (int i = 0; i < n; ++i) y[i] = -1.0f;
}}
"""


@pytest.mark.parametrize("jailed", [True, False])
def test_a_gpu_function_candidate_cannot_read_the_secret(
    evaluator: Evaluator, tmp_path: Path, secret: Path, jailed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In its worker's process (REGRAPH_EXECUTOR_CANDIDATE_PROCESS=0): what is tested is the worker's jail
    # (a candidate in a process of its own, the executor's default where it can be confined, is kept
    # from both files by Landlock too, jailed or not).
    use_worker_process(monkeypatch)
    if not jailed:
        monkeypatch.setenv(JAIL_WORKERS_ENV, "off")
    elif worker_protection("gpu") != "namespace":
        pytest.skip("the namespace jail is not in force here")
    outside = tmp_path / "outside"
    outside.mkdir()
    outside.chmod(0o777)
    marker = outside / "written"
    task = load_task(TASKS_DIR / "saxpy")
    built = evaluator.compiler.compile(task, _nosy(secret, marker))
    assert built.product is not None, built.log[-2000:]
    job = WorkerJob(
        task=task,
        runtime="gpu",
        reference_library=str(build_reference(task, evaluator.settings.cache_dir)),
        seeds=[5, 6, 7, 8],
        options=QUICK.model_copy(update={"run_timing": False}),
    )
    outcome = run_job(job, CandidateRun(candidate_product=built.product, candidate_symbol="saxpy"), 120)
    if jailed:
        assert outcome.passed, outcome.message
        assert not marker.exists()
    else:  # the same candidate outside the jail reads the secret and writes the file
        assert outcome.error is ErrorKind.WRONG_OUTPUT, outcome.message
        assert marker.exists()
