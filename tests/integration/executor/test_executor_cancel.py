"""A caller that goes away stops its evaluation: the executor notices the closed connection, kills the
candidate's worker and frees the GPU at once, instead of running the candidate to its limit for nobody
(an MCP evaluation cancelled, a search job stopped, a client's own timeout).

The executor is the real app under uvicorn on loopback, with the test-only host runtime (the candidate
is compiled by the real nvcc and run on the CPU); the caller is a raw socket, so that its connection is
closed at a chosen moment: while the candidate runs.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest

from executor import timingset
from executor.app import create_app
from executor.errors import EvaluationCancelled, EvaluationExpired
from executor.evaluate import Evaluator
from executor.gpulock import hold
from executor.protocol import CandidateSource, EvaluateRequest, EvaluationOptions, Verdict
from executor.reference import build_reference
from executor.server import executor_server
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, load_task
from executor.verdict import ErrorKind
from graphdb.embedded import free_port
from tests.support.buildcache import sharing_builds
from tests.support.hostcode import SAXPY_CORRECT
from tests.support.servers import post_evaluation_and_hold, serve_in_thread
from tests.support.workers import cpu_seconds_in, worker_children, worker_stages

TASKS_DIR = Path(__file__).parents[2] / "unit" / "executor" / "fixtures" / "tasks"
# Never returns; only the executor's limits (set far away here) or a kill end it.
SPIN = (
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    "  volatile int spin = 1; while (spin) {}\n}\n"
    "__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
)
LIMIT_S = 120.0  # run and call limits: a candidate left alone would hold the GPU this long
STOPPED_WITHIN_S = 10.0  # disconnect noticed at once + the worker's wait loop (50 ms) + slack


def wait_until(condition: object, deadline_s: float, what: str) -> float:
    started = time.monotonic()
    while not condition():  # type: ignore[operator]
        assert time.monotonic() - started < deadline_s, what
        time.sleep(0.1)
    return time.monotonic() - started


SPUN_CPU_S = 0.2  # CPU time a worker spends after reporting its stage: it is inside the never-ending call


def wait_inside_run(role: str, stage: str, deadline_s: float) -> None:
    """Until a worker of this process serving ``role`` has reported ``stage`` (written just before the
    never-ending call) and has spent SPUN_CPU_S of CPU since: it spins inside its run. (Before, a fixed
    sleep of 1-2 s after the run's start stood for this.)"""
    started = time.monotonic()
    at_stage: dict[Path, float] = {}
    while True:
        for directory, now in worker_stages(role).items():
            if now != stage:
                continue
            spent = cpu_seconds_in(directory)
            if at_stage.setdefault(directory, spent) + SPUN_CPU_S <= spent:
                return
        assert time.monotonic() - started < deadline_s, f"no {role} worker spins in its {stage} stage"
        time.sleep(0.05)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def app_records() -> Iterator[_Records]:
    """The executor app's log records (INFO and up) while the block runs, whatever the loggers above
    it do with them (executor.logs.configure_logging stops their propagation)."""
    logger, handler = logging.getLogger("executor.app"), _Records()
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _settings(cache_dir: Path, **extra: Any) -> ExecutorSettings:
    """A host executor whose candidates may run for LIMIT_S, with nothing prepared ahead."""
    return ExecutorSettings(
        cache_dir=cache_dir,
        runtime="host",
        run_timeout_s=LIMIT_S,
        run_call_floor_s=LIMIT_S,
        run_limit_floor_s=LIMIT_S,
        **{"prewarm_workers": False, "prepare_tasks": False, **extra},
    )


@pytest.mark.parametrize("route", ["/v1/evaluate", "/v1/evaluate/batch"])
def test_a_caller_that_goes_away_stops_its_running_candidate(
    tmp_path: Path, shared_builds: Path, route: str
) -> None:
    task: FunctionTask | KernelTask = load_task(TASKS_DIR / "saxpy")
    settings = _settings(sharing_builds(tmp_path, shared_builds))
    app = create_app(settings)
    evaluator: Evaluator = app.state.evaluator
    item = EvaluateRequest(
        task=task, candidate=CandidateSource(source=SPIN), options=EvaluationOptions(correctness_sets=1)
    ).model_dump(mode="json")
    with serve_in_thread(app) as url:
        caller = post_evaluation_and_hold(url, route, item, LIMIT_S)
        # Compiled (nvcc), then run: the candidate holds the GPU lock and spins.
        wait_until(lambda: evaluator.gpu_busy, LIMIT_S / 2, "the candidate never started")
        wait_inside_run("candidate", "correctness", LIMIT_S / 2)
        assert evaluator.in_flight == 1 and worker_children(b"candidate")
        caller.close()  # the caller goes away
        took = wait_until(
            lambda: not evaluator.gpu_busy and evaluator.in_flight == 0,
            STOPPED_WITHIN_S,
            f"the evaluation went on after its caller left (limits {LIMIT_S:.0f} s)",
        )
        wait_until(
            lambda: not worker_children(b"candidate"), STOPPED_WITHIN_S, "the candidate's worker still runs"
        )
    assert took < STOPPED_WITHIN_S


def test_evaluations_cancelled_while_queued_start_nothing(tmp_path: Path) -> None:
    """Evaluations whose callers went away while they waited for a slot (one evaluation at a time,
    behind a spinning candidate) neither compile nor start workers once the slot is theirs: an API
    that cancelled many evaluations (or stopped) must not keep the executor busy with them."""
    task: FunctionTask | KernelTask = load_task(TASKS_DIR / "saxpy")
    settings = _settings(tmp_path, compile_workers=1)
    app = create_app(settings)
    evaluator: Evaluator = app.state.evaluator
    slots = app.state.slots
    # Each its own build (a distinct source), so that a build of any of them leaves its record.
    queued_sources = [
        'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
        f"  for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];  // queued {i}\n}}\n"
        "__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
        for i in range(3)
    ]

    def item(source: str) -> dict[str, object]:
        return EvaluateRequest(
            task=task, candidate=CandidateSource(source=source), options=EvaluationOptions(correctness_sets=1)
        ).model_dump(mode="json")

    with serve_in_thread(app) as url, app_records() as logged:
        holder = post_evaluation_and_hold(url, "/v1/evaluate", item(SPIN), LIMIT_S)
        wait_until(lambda: evaluator.gpu_busy, LIMIT_S / 2, "the spinning candidate never started")
        queued = [post_evaluation_and_hold(url, "/v1/evaluate", item(s), LIMIT_S) for s in queued_sources]
        wait_until(lambda: slots.waiting == len(queued), STOPPED_WITHIN_S, "the evaluations never queued")
        for caller in queued:
            caller.close()
        wait_until(  # the executor notices each closed connection (it reads their disconnects)
            lambda: sum(r.getMessage().startswith("client gone") for r in logged.records) == len(queued),
            STOPPED_WITHIN_S,
            "the executor never saw the queued callers go",
        )
        holder.close()
        wait_until(
            lambda: slots.in_use == 0 and slots.waiting == 0 and evaluator.in_flight == 0,
            STOPPED_WITHIN_S,
            "the queued evaluations still hold the executor",
        )
    built = [
        i
        for i, source in enumerate(queued_sources)
        if evaluator.compiler.cached(evaluator.compiler.build_key(source, "shared_library"), "shared_library")
    ]
    assert built == [], f"queued evaluations {built} were compiled after their callers left"


def test_an_evaluation_past_its_deadline_is_dropped_unrun(tmp_path: Path) -> None:
    """An evaluation carries its request's deadline (its limit from when it was accepted). One whose
    deadline passed before it started compiles nothing (seen failing without the check at its start:
    it was dropped only after its compile); one whose deadline passes during its compile and reference
    is dropped right after them, though nobody set its cancel (seen failing without the check after the
    compile: the check before the GPU turn dropped it)."""
    task: FunctionTask | KernelTask = load_task(TASKS_DIR / "saxpy")
    evaluator = Evaluator(_settings(tmp_path))
    options = EvaluationOptions(correctness_sets=1)
    late = SPIN + "// its deadline passed while it waited\n"
    soon = SPIN + "// its deadline passes while it compiles\n"
    outcome: list[object] = []

    def evaluate_soon() -> None:
        try:  # the reference's build and the compile take far longer than 0.2 s
            deadline = time.monotonic() + 0.2
            outcome.append(
                evaluator.evaluate(task, CandidateSource(source=soon), options, threading.Event(), deadline)
            )
        except EvaluationCancelled as e:
            outcome.append(e)

    try:
        with pytest.raises(EvaluationExpired, match="not started"):
            evaluator.evaluate(
                task, CandidateSource(source=late), options, threading.Event(), time.monotonic()
            )
        key = evaluator.compiler.build_key(late, "shared_library")
        assert not evaluator.compiler.cached(key, "shared_library"), "compiled past its deadline"
        caller = threading.Thread(target=evaluate_soon, daemon=True)
        caller.start()
        caller.join(timeout=60.0)
        assert not caller.is_alive(), "the evaluation ran past its deadline (a spin under 120-s limits)"
        (dropped,) = outcome
        assert isinstance(dropped, EvaluationExpired), dropped
        assert "stopped after its compile" in str(dropped), dropped  # its compile outlasted the deadline
        wait_until(lambda: not worker_children(b"candidate"), STOPPED_WITHIN_S, "its worker was left running")
    finally:
        evaluator.close()


WAIT_DEADLINE_S = 6.0  # past a cached candidate's path to its GPU turn (workers, reference) under load


def test_an_evaluation_whose_deadline_passes_while_it_waits_for_the_gpu_is_dropped(
    tmp_path: Path, shared_builds: Path
) -> None:
    """The two waits after the compile: the pass through the host memory's lock (a function run's,
    `Evaluator.pass_host_gate`) and the wait for the GPU turn. A correct candidate, compiled and its
    task's reference made by a first evaluation, is sent again with a deadline WAIT_DEADLINE_S away
    while the test holds the host memory's lock alone, or the GPU turn, until the deadline has passed.
    The one is dropped before its turn, the other at its turn (given back unused), and neither runs
    (seen failing: without the check before the turn, the first was dropped at its turn; without the
    check at the turn, the second ran: a verdict). Each wait has an evaluator of its own (a host runtime's
    locks and turns are its pool's), so that the two deadlines are waited out together."""
    task: FunctionTask | KernelTask = load_task(TASKS_DIR / "saxpy")
    options = EvaluationOptions(correctness_sets=1)
    source = CandidateSource(source=SAXPY_CORRECT)
    outcomes: dict[str, list[object]] = {"gate": [], "queue": []}

    def evaluate(evaluator: Evaluator, outcome: list[object], deadline: float) -> None:
        try:
            outcome.append(evaluator.evaluate(task, source, options, threading.Event(), deadline))
        except EvaluationCancelled as e:
            outcome.append(e)

    gate = Evaluator(_settings(sharing_builds(tmp_path / "gate", shared_builds)))
    queue = Evaluator(_settings(sharing_builds(tmp_path / "queue", shared_builds)))
    try:
        for evaluator in (gate, queue):
            first = evaluator.evaluate(task, source, options)
            assert first.passed, first
        with hold(gate.pool.gpu_lock, "exclusive", "host"), queue.turns.turn("function"):
            deadline = time.monotonic() + WAIT_DEADLINE_S
            callers = [
                threading.Thread(target=evaluate, args=(gate, outcomes["gate"], deadline), daemon=True),
                threading.Thread(target=evaluate, args=(queue, outcomes["queue"], deadline), daemon=True),
            ]
            for caller in callers:
                caller.start()
            wait_until(lambda: time.monotonic() > deadline + 0.5, 2 * WAIT_DEADLINE_S, "the deadline to pass")
        for caller in callers:
            caller.join(timeout=60.0)
            assert not caller.is_alive(), "the evaluation never ended"
        (gated,) = outcomes["gate"]
        assert isinstance(gated, EvaluationExpired), gated
        assert "before its GPU turn" in str(gated), gated
        (queued,) = outcomes["queue"]
        assert isinstance(queued, EvaluationExpired), queued
        assert "at its GPU turn" in str(queued), queued
        assert not queue.gpu_busy, "the turn was kept"
    finally:
        gate.close()
        queue.close()


def test_a_stopping_executor_stops_its_running_candidate_at_once(tmp_path: Path, shared_builds: Path) -> None:
    """The service asked to stop (Ctrl-C, SIGTERM: the signal handler's call) while a never-ending
    candidate runs under 120-s limits and its caller still waits: the candidate's worker is killed, the
    caller gets 503 "shutting_down", and the service is gone long before the limit (uvicorn's graceful
    shut-down waits for the open requests)."""
    task: FunctionTask | KernelTask = load_task(TASKS_DIR / "saxpy")
    settings = _settings(
        sharing_builds(tmp_path, shared_builds), port=free_port(), request_timeout_s=LIMIT_S + 60
    )
    server = executor_server(settings)
    evaluator: Evaluator = server.app.state.evaluator
    thread = threading.Thread(target=server.run, daemon=True)  # no signal handlers off the main thread
    thread.start()
    wait_until(lambda: server.started, LIMIT_S / 2, "the executor never started")
    item = EvaluateRequest(
        task=task, candidate=CandidateSource(source=SPIN), options=EvaluationOptions(correctness_sets=1)
    ).model_dump(mode="json")
    caller = post_evaluation_and_hold(
        f"http://{settings.host}:{settings.port}", "/v1/evaluate", item, LIMIT_S
    )
    try:
        wait_until(lambda: evaluator.gpu_busy, LIMIT_S / 2, "the candidate never started")
        wait_inside_run("candidate", "correctness", LIMIT_S / 2)
        assert worker_children(b"candidate")
        began = time.monotonic()
        server.handle_exit(signal.SIGTERM, None)
        thread.join(timeout=LIMIT_S / 4)
        took = time.monotonic() - began
        assert not thread.is_alive(), f"the executor still runs {took:.0f} s after it was asked to stop"
        answer = _read_answer(caller)
    finally:
        caller.close()  # a failed check: the evaluation stops as a gone caller's
    assert answer.startswith(b"HTTP/1.1 503") and b"shutting_down" in answer, answer[:300]
    wait_until(
        lambda: not worker_children(b"candidate"), STOPPED_WITHIN_S, "the candidate's worker still runs"
    )
    assert took < STOPPED_WITHIN_S, f"stopping took {took:.1f} s (limits {LIMIT_S:.0f} s)"


def _read_answer(caller: socket.socket) -> bytes:
    """Everything the executor wrote on ``caller`` until it closed the connection."""
    caller.settimeout(STOPPED_WITHIN_S)
    answer = b""
    while chunk := caller.recv(65536):
        answer += chunk
    return answer


def test_a_stopping_executor_prepares_nothing_more(tmp_path: Path) -> None:
    """Once the service is stopping, a new evaluation is answered 503 "shutting_down" without starting
    its task's preparation (a reference build that would only hold the shut-down up), and ``/v1/prepare``
    is refused the same way (review 46): afterwards the task is still unprepared, so preparing it now
    starts the work."""
    task: FunctionTask | KernelTask = load_task(TASKS_DIR / "saxpy")
    app = create_app(_settings(tmp_path, prepare_tasks=True))
    evaluator: Evaluator = app.state.evaluator
    item = EvaluateRequest(
        task=task, candidate=CandidateSource(source=SPIN), options=EvaluationOptions(correctness_sets=1)
    ).model_dump(mode="json")
    with serve_in_thread(app) as url:
        app.state.stop_evaluations()
        for route, body in (("/v1/evaluate", item), ("/v1/prepare", {"task": item["task"], "wait_s": 0})):
            answer = httpx.post(url + route, json=body, timeout=LIMIT_S)
            assert answer.status_code == 503, (route, answer.text)
            assert answer.json()["error"]["type"] == "shutting_down", (route, answer.text)
        started = evaluator.prepare_task(task, EvaluationOptions(correctness_sets=1))
        assert started is not None, "a refused request started the task's preparation"
        started.result(timeout=LIMIT_S)


def _honest(tag: str) -> str:
    return (
        'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
        f"  for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];  // {tag}\n}}\n"
        "__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
    )


def test_a_batch_stopped_by_the_shutdown_keeps_the_verdicts_it_has(
    tmp_path: Path, shared_builds: Path
) -> None:
    """A batch of three (one slot: one item at a time) whose second item never ends, stopped by the
    service's shut-down while that item runs: the batch is answered 200 with the first item's verdict
    as it was judged, and the two others ``executor_stopped`` (not judged, nothing about the
    candidate), not 503 for the whole batch (review 46 F4: the finished verdicts were lost)."""
    task: FunctionTask | KernelTask = load_task(TASKS_DIR / "saxpy")
    settings = _settings(
        sharing_builds(tmp_path, shared_builds),
        port=free_port(),
        request_timeout_s=LIMIT_S + 60,
        compile_workers=1,
    )
    server = executor_server(settings)
    evaluator: Evaluator = server.app.state.evaluator
    slots = server.app.state.slots
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, LIMIT_S / 2, "the executor never started")
    options = EvaluationOptions(correctness_sets=1)
    batch = {
        "items": [
            EvaluateRequest(task=task, candidate=CandidateSource(source=s), options=options).model_dump(
                mode="json"
            )
            for s in (_honest("first"), SPIN, _honest("third"))
        ]
    }
    answers: list[httpx.Response] = []
    caller = threading.Thread(
        target=lambda: answers.append(
            httpx.post(
                f"http://{settings.host}:{settings.port}/v1/evaluate/batch", json=batch, timeout=LIMIT_S
            )
        ),
        daemon=True,
    )
    caller.start()
    try:
        # The first item judged, the second holding the one slot (the third waits for it) and running.
        wait_until(
            lambda: slots.in_use == 1 and slots.waiting == 1 and evaluator.gpu_busy,
            LIMIT_S / 2,
            "the spinning item never started",
        )
        wait_inside_run("candidate", "correctness", LIMIT_S / 2)
        assert worker_children(b"candidate")
        server.handle_exit(signal.SIGTERM, None)
        thread.join(timeout=LIMIT_S / 4)
        assert not thread.is_alive(), "the executor still runs after it was asked to stop"
        caller.join(timeout=STOPPED_WITHIN_S)
    finally:
        server.should_exit = True
    assert answers, "the batch got no answer"
    assert answers[0].status_code == 200, answers[0].text[:500]
    first, spinning, third = (Verdict.model_validate(v) for v in answers[0].json()["verdicts"])
    assert first.runtime_stages == "run" and first.error is not ErrorKind.EXECUTOR_STOPPED, first
    for stopped in (spinning, third):
        assert stopped.error is ErrorKind.EXECUTOR_STOPPED and not stopped.passed, stopped
        assert stopped.reward is None and "shut down" in stopped.message
    wait_until(
        lambda: not worker_children(b"candidate"), STOPPED_WITHIN_S, "the candidate's worker still runs"
    )


def test_a_stopping_executor_stops_a_running_task_preparation(tmp_path: Path) -> None:
    """A task's preparation (its reference worker storing the timing set and timing the serial
    reference: a job of up to three run limits) runs while the executor closes: the reference worker is
    killed and the close is over within seconds, not at the job's limit, and nothing half-made is in
    the store: no timing set and no reference timing of the task, so that the next start prepares it
    whole."""
    source = TASKS_DIR / "saxpy"
    task_dir = tmp_path / "saxpy"
    task_dir.mkdir()
    (task_dir / "task.json").write_text((source / "task.json").read_text())
    # The task's reference never ends at the timing size (its test size is 1,000): no naive.cu, so no
    # baseline is measured.
    (task_dir / "reference.cpp").write_text(
        'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
        "    volatile int spin = n > 100000; while (spin) {}\n"
        "    for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];\n}\n"
    )
    task: FunctionTask | KernelTask = load_task(task_dir)
    settings = _settings(tmp_path / "cache")
    evaluator = Evaluator(settings)
    options = EvaluationOptions(correctness_sets=1)
    try:
        preparing = evaluator.prepare_task(task, options)
        assert preparing is not None
        wait_until(lambda: worker_children(b"reference"), LIMIT_S / 2, "the reference worker never started")
        wait_inside_run("reference", "timing_set", LIMIT_S / 2)  # its timing-size run
        assert not preparing.done()
        began = time.monotonic()
    finally:
        evaluator.close()
    took = time.monotonic() - began
    assert took < STOPPED_WITHIN_S, (
        f"closing took {took:.1f} s (the reference's job may take {3 * LIMIT_S:.0f} s)"
    )
    assert preparing.done() and preparing.exception() is None
    wait_until(
        lambda: not worker_children(b"reference"), STOPPED_WITHIN_S, "the reference's worker still runs"
    )
    spec = timingset.timing_set_spec(
        task,
        build_reference(task, settings.cache_dir),
        settings.cache_dir / "timing-sets",
        secret=timingset.timing_secret(settings.cache_dir),
    )
    assert not timingset.stored(spec) and timingset.load_reference_timing(spec) is None
    store = settings.cache_dir / "timing-sets"
    published = [p.name for p in store.iterdir() if not p.name.startswith(".")] if store.is_dir() else []
    assert published == [], published  # names starting with a dot: locks, and writes never read


class _StoppedDuringInlinePreparation(Evaluator):
    """An evaluator whose reference worker brings no timing of the serial reference (as when another job
    of the host held the task's preparation), so that the evaluation prepares the task itself after its
    candidate passed, and whose service is stopped just then: the stop comes during that preparation."""

    def _remember(self, what: Literal["reference"], task: FunctionTask | KernelTask, stats: Any) -> None:
        pass

    def _prepare_task(self, task: FunctionTask | KernelTask, options: EvaluationOptions) -> None:
        self.stop_preparations()
        super()._prepare_task(task, options)


def test_an_evaluation_stopped_while_it_prepares_its_task_is_no_pass(
    tmp_path: Path, shared_builds: Path
) -> None:
    """Review 30 F3: the inline preparation swallowed the stop, and the evaluation went on to a verdict
    that passed with no speedup, as if judged; it is stopped instead (503 / ``executor_stopped``)."""
    task: FunctionTask | KernelTask = load_task(TASKS_DIR / "saxpy")
    evaluator = _StoppedDuringInlinePreparation(_settings(sharing_builds(tmp_path, shared_builds)))
    options = EvaluationOptions(correctness_sets=1, min_trials=3, max_trials=5, min_timing_ms=1)
    try:
        with pytest.raises(EvaluationCancelled, match="stopped before its verdict"):
            evaluator.evaluate(task, CandidateSource(source=_honest("inline")), options)
    finally:
        evaluator.close()


def test_a_preparation_stopped_while_prepare_waits_is_not_ready(tmp_path: Path) -> None:
    """Review 30 F5: ``POST /v1/prepare`` waiting for a task's preparation when the service's stop ended
    it answered ``ready: true``, and the stopped preparation stayed listed, so this process never
    prepared the task again. It is answered 503 "shutting_down" at the stop, and nothing is left listed:
    the task is not taken for prepared."""
    source = TASKS_DIR / "saxpy"
    task_dir = tmp_path / "saxpy"
    task_dir.mkdir()
    (task_dir / "task.json").write_text((source / "task.json").read_text())
    (task_dir / "reference.cpp").write_text(  # never ends at the timing size; no naive.cu: no baseline
        'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
        "    volatile int spin = n > 100000; while (spin) {}\n"
        "    for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];\n}\n"
    )
    task: FunctionTask | KernelTask = load_task(task_dir)
    app = create_app(_settings(tmp_path / "cache"))
    evaluator: Evaluator = app.state.evaluator
    options = EvaluationOptions(correctness_sets=1)
    body = {
        "task": task.model_dump(mode="json"),
        "options": options.model_dump(mode="json"),
        "wait_s": LIMIT_S,
    }
    answers: list[httpx.Response] = []
    with serve_in_thread(app) as url:
        caller = threading.Thread(
            target=lambda: answers.append(httpx.post(url + "/v1/prepare", json=body, timeout=LIMIT_S * 2)),
            daemon=True,
        )
        caller.start()
        wait_until(lambda: worker_children(b"reference"), LIMIT_S / 2, "the reference worker never started")
        wait_inside_run("reference", "timing_set", LIMIT_S / 2)  # its timing-size run
        app.state.stop_evaluations()
        caller.join(timeout=STOPPED_WITHIN_S)
        assert answers, "the waiting prepare got no answer at the stop"
        assert answers[0].status_code == 503, answers[0].text
        assert answers[0].json()["error"]["type"] == "shutting_down", answers[0].text
        assert evaluator.task_preparation(task, options)[0] is False
        wait_until(
            lambda: not evaluator._tasks_preparing, STOPPED_WITHIN_S, "the stopped preparation is listed"
        )
