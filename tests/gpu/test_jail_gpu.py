"""The compile jail on a GPU host (issue 27): candidates built by a jailed nvcc (a function task's
library and a kernel task's cubin) pass on the GPU, the protection in force is the namespace jail,
and a candidate that reads a host file at run time and prints it does not get it back in its verdict.

Run on the GPU machine: ``python -m pytest tests/gpu/test_jail_gpu.py -q``.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor import jail
from executor.evaluate import Evaluator
from executor.protocol import CandidateSource, EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from tests.unit.executor.test_executor_static import GOOD_KERNEL

pytestmark = pytest.mark.gpu

TASKS_DIR = Path(__file__).parent.parent / "unit" / "executor" / "fixtures" / "tasks"
SECRET = "s3cr3t-gpu-9c1d"
QUICK = EvaluationOptions(
    min_trials=5, max_trials=20, min_timing_ms=20, reference_repeats=1, correctness_sets=2
)

if importlib.util.find_spec("pycuda") is None or shutil.which("nvidia-smi") is None:
    pytest.skip("needs pycuda and an NVIDIA GPU", allow_module_level=True)


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evaluator]:
    settings = ExecutorSettings(
        cache_dir=tmp_path_factory.mktemp("jail-gpu-cache"), runtime="gpu", run_timeout_s=60, compiler="nvcc"
    )
    built = Evaluator(settings)
    try:
        yield built
    finally:
        built.close()


def test_the_namespace_jail_is_in_force_here() -> None:
    assert jail.protection() == "namespace", jail.describe(jail.protection())


def test_jailed_nvcc_builds_pass_on_the_gpu(evaluator: Evaluator) -> None:
    sources = {
        "saxpy": (TASKS_DIR / "saxpy" / "naive.cu").read_text(),
        "scale_kernel": GOOD_KERNEL,
    }
    for name, source in sources.items():
        verdict = evaluator.evaluate(load_task(TASKS_DIR / name), CandidateSource(source=source), QUICK)
        assert verdict.passed, (name, verdict.message, verdict.compile and verdict.compile.log[-2000:])
        assert verdict.compile is not None and verdict.compile.compiler == "nvcc"
        assert "mount-namespace jail" in verdict.compile.log


def test_a_file_read_at_run_time_does_not_reach_the_verdict(evaluator: Evaluator, tmp_path: Path) -> None:
    secret = tmp_path / "token.txt"
    secret.write_text(SECRET + "\n")
    task = load_task(TASKS_DIR / "saxpy")
    source = (
        "#include <cstdio>\n#define CAT(a, b) a##b\n"
        "__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
        'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
        f'  char line[128] = {{0}}; FILE* f = CAT(fo, pen)("{secret}", "r");\n'
        "  if (f) { CAT(fg, ets)(line, sizeof line, f); CAT(fp, uts)(line, stderr); CAT(ffl, ush)(stderr); }\n"
        "  volatile int* p = nullptr; *p = 1;\n}\n"
    )
    verdict = evaluator.evaluate(task, CandidateSource(source=source), QUICK)
    assert not verdict.passed
    assert SECRET not in verdict.model_dump_json(), verdict.message
