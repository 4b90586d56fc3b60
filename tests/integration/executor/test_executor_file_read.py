"""No file on the executor's host reaches a verdict, through the executor's HTTP API (issue 27, High):
neither through the compiler (each include trick) nor through what a candidate prints at run time.

The real executor on loopback, the real nvcc (jailed), the test-only host runtime for the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.app import create_app
from executor.client import ExecutorClient
from executor.compile import find_toolchain
from executor.errors import ToolchainError
from executor.protocol import EvaluationOptions, FunctionTask, KernelTask
from executor.sandbox import describe_worker, worker_protection
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from tests.support.servers import serve_in_thread
from tests.unit.executor.test_executor_jail import LIBRARY, SECRET, tricks

TASKS_DIR = Path(__file__).parents[2] / "unit" / "executor" / "fixtures" / "tasks"

try:
    find_toolchain()
except ToolchainError:
    pytest.skip("no nvcc here", allow_module_level=True)


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A world-readable token beside the executor (its mode does not protect it)."""
    where = tmp_path_factory.mktemp("beside-the-executor")
    where.chmod(0o755)
    where.parent.chmod(0o755)
    path = where / "token.txt"
    path.write_text(f"{SECRET}\n")
    path.chmod(0o644)
    return path


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExecutorClient]:
    settings = ExecutorSettings(
        cache_dir=tmp_path_factory.mktemp("executor-cache"),
        runtime="host",
        run_timeout_s=30,
        prewarm_workers=False,
        prepare_tasks=False,
        prepare_next=False,
    )
    with serve_in_thread(create_app(settings)) as url, ExecutorClient(url, timeout_s=300) as c:
        yield c


@pytest.fixture(scope="module")
def saxpy() -> FunctionTask | KernelTask:
    return load_task(TASKS_DIR / "saxpy")


def test_no_include_trick_shows_the_secret_in_a_verdict(
    client: ExecutorClient, saxpy: FunctionTask | KernelTask, secret: Path
) -> None:
    for name, trick in tricks(secret).items():
        verdict = client.evaluate(saxpy, trick + LIBRARY, EvaluationOptions(correctness_sets=1))
        assert SECRET not in verdict.model_dump_json(), (name, verdict.message)
        assert not verdict.passed, name


# Reads the file at run time (the call's name pasted by a macro, so that no rule sees it), prints it
# to stderr, then crashes: the crash's message carries the worker's stderr.
def runtime_reader(path: Path) -> str:
    return (
        "#include <cstdio>\n#define CAT(a, b) a##b\n"
        "__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
        'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
        f'  char line[128] = {{0}}; FILE* f = CAT(fo, pen)("{path}", "r");\n'
        "  if (f) { CAT(fg, ets)(line, sizeof line, f); CAT(fp, uts)(line, stderr); CAT(ffl, ush)(stderr); }\n"
        "  volatile int* p = nullptr; *p = 1;\n}\n"
    )


def test_a_candidate_that_prints_a_host_file_at_run_time_does_not_get_it_back(
    client: ExecutorClient, saxpy: FunctionTask | KernelTask, secret: Path
) -> None:
    verdict = client.evaluate(saxpy, runtime_reader(secret), EvaluationOptions(correctness_sets=1))
    assert verdict.error is not None and verdict.error.value == "crash", verdict.message
    assert "SIGSEGV" in verdict.message
    assert SECRET not in verdict.model_dump_json(), verdict.message
    if worker_protection("host") == "namespace":  # the runtime jail: the file is not there to print
        assert describe_worker("namespace") in verdict.message
    else:  # what it printed is cut from the verdict
        assert "written after the candidate was loaded are not shown" in verdict.message
