"""The executor's HTTP API, served by a real uvicorn on 127.0.0.1 and driven by the real client.

This machine has no GPU, so the runtime stages report ``not_run`` (never passed); static checks,
compilation (PyPI nvcc) and the CPU reference run for real. A second server in the test-only ``host``
runtime shows that crashes and hangs in a worker leave the service serving.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from executor.app import create_app
from executor.client import AsyncExecutorClient, ExecutorAnswerError, ExecutorClient, ExecutorUnreachableError
from executor.protocol import EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, load_task
from executor.verdict import ErrorKind, Stage, Verdict

TASKS_DIR = Path(__file__).parents[2] / "unit" / "executor" / "fixtures" / "tasks"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = ExecutorSettings(
        port=_free_port(),
        cache_dir=tmp_path_factory.mktemp("cache"),
        runtime="auto",
        run_timeout_s=60,
        compile_workers=2,
    )
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=settings.port, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{settings.port}"
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    yield base
    srv.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def client(server: str) -> Iterator[ExecutorClient]:
    with ExecutorClient(server, timeout_s=300) as c:
        yield c


@pytest.fixture(scope="module")
def saxpy() -> FunctionTask | KernelTask:
    return load_task(TASKS_DIR / "saxpy")


def test_health_and_device(client: ExecutorClient) -> None:
    assert client.health()
    device = client.device()
    assert device.runtime_checks_available is False  # no GPU on this machine
    assert device.arch.startswith("sm_")
    assert device.nvcc


def test_good_candidate_compiles_but_is_not_passed_without_gpu(
    client: ExecutorClient, saxpy: FunctionTask | KernelTask
) -> None:
    assert saxpy.naive_source is not None
    verdict = client.evaluate(saxpy, saxpy.naive_source)
    assert verdict.passed is False
    assert verdict.runtime_stages == "not_run"
    assert verdict.error is ErrorKind.RUNTIME_NOT_AVAILABLE
    assert verdict.reward is None
    assert verdict.compile is not None and verdict.compile.ok
    assert any(k.name.startswith("_Z12saxpy_kernel") for k in verdict.compile.kernels)


def test_static_and_compile_failures(client: ExecutorClient, saxpy: FunctionTask | KernelTask) -> None:
    assert saxpy.naive_source is not None
    rejected = client.evaluate(
        saxpy, saxpy.naive_source.replace("cudaFree(dx);", 'system("id"); cudaFree(dx);')
    )
    assert rejected.stage is Stage.STATIC and rejected.error is ErrorKind.STATIC_REJECTED
    assert rejected.reward == -1.0 and "system" in rejected.message
    broken = client.evaluate(saxpy, saxpy.naive_source.replace("blockIdx.x", "blockIdx.q"))
    assert broken.stage is Stage.COMPILE and broken.error is ErrorKind.COMPILE_ERROR
    assert (broken.compile is not None and "blockIdx.q" in broken.compile.log) or "q" in broken.message


def test_kernel_task_compiles_to_cubin(client: ExecutorClient) -> None:
    task = load_task(TASKS_DIR / "scale_kernel")
    source = (
        "__global__ void scale_kernel(long long count, double s, const double* in, double* out) {\n"
        "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
        "  if (i < count) out[i] = s * in[i];\n}\n"
    )
    verdict = client.evaluate(task, source)
    assert verdict.compile is not None and verdict.compile.kind == "cubin" and verdict.compile.ok
    assert verdict.runtime_stages == "not_run" and not verdict.passed


def test_batch_keeps_order(client: ExecutorClient, saxpy: FunctionTask | KernelTask) -> None:
    assert saxpy.naive_source is not None
    verdicts = client.evaluate_batch([(saxpy, saxpy.naive_source), (saxpy, "int main() { return 0; }")])
    assert [v.error for v in verdicts] == [ErrorKind.RUNTIME_NOT_AVAILABLE, ErrorKind.STATIC_REJECTED]


def test_error_envelope_everywhere(server: str, saxpy: FunctionTask | KernelTask) -> None:
    with httpx.Client(base_url=server) as http:
        missing = http.get("/nope")
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == 404 and missing.json()["error"]["type"] == "not_found"
        bad = http.post("/v1/evaluate", json={"task": {"kind": "function"}, "candidate": {"source": "x"}})
        assert bad.status_code == 422
        assert set(bad.json()["error"]) == {"message", "type", "code"}
        data = saxpy.model_dump(mode="json")
        data["signature"] = "void saxpy(int n, float a, float* x, float* y)"
        invalid = http.post("/v1/evaluate", json={"task": data, "candidate": {"source": "x"}})
        assert invalid.status_code == 422 and "const" in invalid.json()["error"]["message"]


def test_client_raises_on_error_answers_without_retrying(
    server: str, saxpy: FunctionTask | KernelTask
) -> None:
    with ExecutorClient(server) as c, pytest.raises(ExecutorAnswerError) as info:
        c._request("GET", "/v1/nothing-here")
    assert info.value.status == 404


def test_client_retries_transport_errors_then_gives_up() -> None:
    start = time.monotonic()
    with (
        ExecutorClient(f"http://127.0.0.1:{_free_port()}", timeout_s=2) as c,
        pytest.raises(ExecutorUnreachableError) as info,
    ):
        c.health()
    assert time.monotonic() - start > 0.5  # waited between attempts
    assert isinstance(info.value.__cause__, httpx.ConnectError)


def test_verdict_round_trips_through_json(client: ExecutorClient, saxpy: FunctionTask | KernelTask) -> None:
    assert saxpy.naive_source is not None
    verdict = client.evaluate(saxpy, saxpy.naive_source, EvaluationOptions(correctness_sets=1))
    assert Verdict.model_validate_json(verdict.model_dump_json()) == verdict


def test_async_client_speaks_the_same_protocol(server: str, saxpy: FunctionTask | KernelTask) -> None:
    assert saxpy.naive_source is not None
    source = saxpy.naive_source

    async def scenario() -> None:
        async with AsyncExecutorClient(server, timeout_s=300) as c:
            assert await c.health()
            assert (await c.device()).runtime_checks_available is False
            verdict = await c.evaluate(saxpy, source)
            assert verdict.error is ErrorKind.RUNTIME_NOT_AVAILABLE and verdict.compile is not None
            with pytest.raises(ExecutorAnswerError) as info:
                await c._request("GET", "/v1/nothing-here")
            assert info.value.status == 404
        async with AsyncExecutorClient(f"http://127.0.0.1:{_free_port()}", timeout_s=2) as gone:
            with pytest.raises(ExecutorUnreachableError) as unreachable:
                await gone.health()
            assert isinstance(unreachable.value.__cause__, httpx.ConnectError)

    asyncio.run(scenario())
