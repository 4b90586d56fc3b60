"""The executor's wire contract: the real client against the real app, served on loopback.

Both sides must speak `executor.protocol`: the app's routes take and answer its models, and the
client turns every answer, error envelopes included, into those models or into the client's errors.
This machine has no GPU, so the candidates here are ones the static checks reject (no compile needed).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.routing import APIRoute

from executor import protocol
from executor.app import create_app
from executor.client import ExecutorAnswerError, ExecutorClient
from executor.fleet.pinning import descendants
from executor.protocol import DeviceInfo, ErrorKind, EvaluationOptions, FunctionTask, KernelTask, Stage
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from tests.support.buildcache import sharing_builds
from tests.support.servers import serve_in_thread

TASKS_DIR = Path(__file__).parents[2] / "unit" / "executor" / "fixtures" / "tasks"
# Rejected by the static checks (a process call; no entry point), each with its own message.
SHELL = 'void saxpy(int n, float a, const float* x, float* y) { system("id"); }\n'
NO_ENTRY = "int main() { return 0; }\n"


@pytest.fixture(scope="module")
def app_settings(tmp_path_factory: pytest.TempPathFactory) -> ExecutorSettings:
    return ExecutorSettings(cache_dir=tmp_path_factory.mktemp("cache"), max_batch=2, prewarm_workers=False)


@pytest.fixture(scope="module")
def client(app_settings: ExecutorSettings) -> Iterator[ExecutorClient]:
    with serve_in_thread(create_app(app_settings)) as url, ExecutorClient(url, timeout_s=120) as c:
        yield c


@pytest.fixture(scope="module")
def saxpy() -> FunctionTask | KernelTask:
    return load_task(TASKS_DIR / "saxpy")


def test_the_routes_take_and_answer_the_protocol_models(app_settings: ExecutorSettings) -> None:
    routes = {r.path: r for r in create_app(app_settings).routes if isinstance(r, APIRoute)}
    expected = {
        "/v1/evaluate": (protocol.EvaluateRequest, protocol.Verdict),
        "/v1/evaluate/batch": (protocol.BatchRequest, protocol.BatchResponse),
        "/v1/device": (None, protocol.DeviceInfo),
    }
    for path, (request, response) in expected.items():
        route = routes[path]
        assert route.response_model is response, path
        bodies = [p.field_info.annotation for p in route.dependant.body_params]
        assert bodies == ([request] if request else []), path


def test_evaluate_answers_a_verdict(client: ExecutorClient, saxpy: FunctionTask | KernelTask) -> None:
    verdict = client.evaluate(saxpy, SHELL, EvaluationOptions(correctness_sets=1))
    assert isinstance(verdict, protocol.Verdict)
    assert (verdict.task_id, verdict.stage, verdict.error) == (
        "saxpy",
        Stage.STATIC,
        ErrorKind.STATIC_REJECTED,
    )
    assert verdict.reward == protocol.reward_for(False, None) == -1.0
    assert any(v.rule for v in verdict.static_violations) and "system" in verdict.message


def test_batch_answers_verdicts_in_order(client: ExecutorClient, saxpy: FunctionTask | KernelTask) -> None:
    verdicts = client.evaluate_batch([(saxpy, NO_ENTRY), (saxpy, SHELL)])
    assert [v.error for v in verdicts] == [ErrorKind.STATIC_REJECTED, ErrorKind.STATIC_REJECTED]
    assert "system" not in verdicts[0].message and "system" in verdicts[1].message


# The saxpy kernel and the head of its entry, for the candidates below that add one forbidden thing.
SAXPY_ENTRY = (
    "__global__ void k(int n, float a, const float* x, float* y) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] += a * x[i]; }\n"
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
)
# A saxpy that would run Python inside the worker that checks it; the name is pasted by the
# preprocessor, so only the built library shows it.
PASTED_PYTHON = (
    "#include <cuda_runtime.h>\n#define CAT(a, b) a##b\n"
    'extern "C" int CAT(P, yRun_SimpleString)(const char*);\n'
    + SAXPY_ENTRY
    + '    if (n < 0) CAT(P, yRun_SimpleString)("pass");\n'
    "    k<<<(n + 255) / 256, 256>>>(n, a, x, y); }\n"
)


def test_a_library_that_imports_the_python_runtime_is_refused(
    client: ExecutorClient, saxpy: FunctionTask | KernelTask
) -> None:
    verdict = client.evaluate(saxpy, PASTED_PYTHON, EvaluationOptions(correctness_sets=1))
    assert (verdict.stage, verdict.error) == (Stage.STATIC, ErrorKind.STATIC_REJECTED), verdict.message
    assert "PyRun_SimpleString" in verdict.message and "Python runtime" in verdict.message
    assert verdict.compile is not None and verdict.compile.ok is False and verdict.reward == -1.0


def test_device_answers_device_info(client: ExecutorClient) -> None:
    device = client.device()
    assert isinstance(device, DeviceInfo)
    assert device.runtime == "none" and device.runtime_checks_available is False  # no GPU here
    assert device.arch.startswith("sm_")
    # no candidate of this module reached a GPU turn (static rejections), and none waits for one
    assert device.turns is not None and device.turns.waiting == 0
    assert device.turns.turns == {"candidate": 0, "baseline": 0} and device.turns.seconds > 0


@pytest.mark.parametrize(
    ("sources", "status", "kind", "text"),
    [
        ([NO_ENTRY, SHELL, NO_ENTRY], 413, "batch_too_large", "at most 2 items"),
        ([], 422, "validation_error", "items"),
    ],
)
def test_error_envelopes_become_answer_errors(
    client: ExecutorClient,
    saxpy: FunctionTask | KernelTask,
    sources: list[str],
    status: int,
    kind: str,
    text: str,
) -> None:
    with pytest.raises(ExecutorAnswerError) as info:
        client.evaluate_batch([(saxpy, s) for s in sources])
    assert (info.value.status, info.value.kind) == (status, kind)
    assert text in info.value.message


# Compiled by the real nvcc and run on the CPU (the test-only host runtime), it never returns: the
# request's limit ends the wait long before the executor's own run limit ends the candidate.
SPIN = (
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    "  volatile int spin = 1; while (spin) {}\n}\n"
    "__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
)
SPIN_BATCH = SPIN + "// batch\n"
REQUEST_LIMIT_S = 1.0
RUN_LIMIT_S = 30.0
# How soon after a batch's answer its given-up items must be stopped (far below RUN_LIMIT_S).
STOPPED_WITHIN_S = 5.0


def test_a_request_past_its_limit_answers_504_in_the_envelope(
    tmp_path: Path, shared_builds: Path, saxpy: FunctionTask | KernelTask
) -> None:
    """An evaluation past the request limit is answered 504 "timeout"; a batch answers what it judged by
    then (200), its items still running ``batch_timeout`` verdicts (not judged; before, the whole batch
    was answered 504 and the verdicts it had were lost)."""
    settings = ExecutorSettings(
        cache_dir=sharing_builds(tmp_path, shared_builds),
        runtime="host",
        request_timeout_s=REQUEST_LIMIT_S,
        # A spinning call runs until its caller's cancel stops it, not into its own limits first.
        run_timeout_s=RUN_LIMIT_S,
        run_limit_floor_s=RUN_LIMIT_S,
        run_call_floor_s=RUN_LIMIT_S,
        prewarm_workers=False,
        prepare_tasks=False,
    )
    app = create_app(settings)
    # Both spinning candidates are built before the clock starts: under a loaded machine's nvcc (CI,
    # stop 48: more than 5 s) the request limit would fall in their compiles (which a cancel kills, see
    # the next test), and this test is about stopping a given-up run.
    for spin in (SPIN, SPIN_BATCH):
        assert app.state.evaluator.compiler.compile(saxpy, spin).ok
    before = set(threading.enumerate())  # the module's other executor included
    with serve_in_thread(app) as url, ExecutorClient(url, timeout_s=60) as c:
        with pytest.raises(ExecutorAnswerError) as single:
            c.evaluate(saxpy, SPIN, EvaluationOptions(correctness_sets=1))
        judged, cut = c.evaluate_batch(
            [(saxpy, NO_ENTRY), (saxpy, SPIN_BATCH)], EvaluationOptions(correctness_sets=1)
        )
        answered = time.monotonic()
        # The evaluations given up are stopped (their workers killed) while the service runs, not left
        # to the run limit (RUN_LIMIT_S); the service's stop, below, would stop them anyway.
        while app.state.evaluator.in_flight:
            assert time.monotonic() < answered + STOPPED_WITHIN_S, "an evaluation given up was not stopped"
            time.sleep(0.1)
    assert (single.value.status, single.value.kind) == (504, "timeout")
    assert single.value.message == "evaluation took longer than 1s"
    assert judged.error is ErrorKind.STATIC_REJECTED and judged.reward == -1.0, judged
    assert cut.error is ErrorKind.BATCH_TIMEOUT and cut.error in protocol.NOT_JUDGED, cut
    assert not cut.passed and cut.reward is None and "request limit (1 s)" in cut.message, cut
    # Nothing stays behind within seconds of the answer (review 32 F4: a 60-s allowance let a batch
    # whose items were never stopped pass).
    while any(t.name.startswith("executor") for t in set(threading.enumerate()) - before):
        assert time.monotonic() < answered + STOPPED_WITHIN_S, "an evaluation's thread stayed behind"
        time.sleep(0.1)


# A saxpy whose compile takes nvcc ten seconds or more (thrust's sort), far past the request limit.
EVALUATION_ENDED_WITHIN_S = 20.0
SLOW_COMPILE = (
    "#include <thrust/sort.h>\n#include <thrust/execution_policy.h>\n"
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    "  thrust::sort(thrust::device, y, y + n);\n}\n"
)


def _compilers_below_us() -> list[str]:
    """The command lines of the nvcc builds running below this process (the executor serves in it)."""
    found = []
    for pid in descendants():
        with contextlib.suppress(OSError):
            line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if "candidate.cu" in line:
                found.append(line)
    return found


def test_a_compile_given_up_with_its_request_is_stopped(
    tmp_path: Path, shared_builds: Path, saxpy: FunctionTask | KernelTask
) -> None:
    """A request answered 504 while its candidate compiles: the compile is killed at once (its nvcc
    would otherwise hold the evaluation's slot and the CPU to its end for nobody, up to the compile
    limit), and nothing of it is kept (the next request of the same source compiles again)."""
    settings = ExecutorSettings(
        cache_dir=sharing_builds(tmp_path, shared_builds),
        runtime="host",
        request_timeout_s=REQUEST_LIMIT_S,
        compile_timeout_s=120,
        prewarm_workers=False,
        prepare_tasks=False,
    )
    app = create_app(settings)
    source = SLOW_COMPILE + f"// {tmp_path.name}\n"  # never in the shared cache
    with serve_in_thread(app) as url, ExecutorClient(url, timeout_s=60) as c:
        with pytest.raises(ExecutorAnswerError) as given_up:
            c.evaluate(saxpy, source, EvaluationOptions(correctness_sets=1))
        answered = time.monotonic()
        assert (given_up.value.status, given_up.value.kind) == (504, "timeout")
        while compilers := _compilers_below_us():
            assert time.monotonic() < answered + STOPPED_WITHIN_S, (
                "a compile given up still runs",
                compilers,
            )
            time.sleep(0.1)
        # The evaluation ends too; a process's first workers' start-up steps (its protection probe and
        # the host's peak, 4-6 s on a loaded machine, review 35 M1) do not look at the cancel, so the
        # bound here is looser: the compile it no longer waits for takes nvcc more than 10 s.
        while app.state.evaluator.in_flight:
            assert time.monotonic() < answered + EVALUATION_ENDED_WITHIN_S, "the evaluation given up went on"
            time.sleep(0.1)
    key = app.state.evaluator.compiler.build_key(source, "shared_library")
    assert app.state.evaluator.compiler.cached(key, "shared_library") is None, "a stopped compile was kept"


# A saxpy that would run a shell: popen and system taken as pointers, which the static rules (they
# match calls) do not see; review 22b ran `id -u` in the jailed worker this way.
POINTED_SHELL = (
    "#include <cstdio>\n#include <cstdlib>\n#include <cuda_runtime.h>\n"
    + SAXPY_ENTRY
    + "    FILE* (*run)(const char*, const char*) = popen; int (*shell)(const char*) = system;\n"
    '    if (n < 0) { run("id -u", "r"); shell("id -u"); }\n'
    "    k<<<(n + 255) / 256, 256>>>(n, a, x, y); }\n"
)


def test_a_library_that_imports_what_starts_a_process_is_refused(
    client: ExecutorClient, saxpy: FunctionTask | KernelTask
) -> None:
    verdict = client.evaluate(saxpy, POINTED_SHELL, EvaluationOptions(correctness_sets=1))
    assert (verdict.stage, verdict.error) == (Stage.STATIC, ErrorKind.STATIC_REJECTED), verdict.message
    assert "popen" in verdict.message and "start processes" in verdict.message
