"""The executor's HTTP API (FastAPI): evaluate candidates, describe the device, health probes.

Every non-2xx answer, validation errors and 404s included, has the same envelope:
``{"error": {"message": str, "type": str, "code": int}}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from executor import floor
from executor.errors import (
    EvaluationCancelled,
    EvaluationExpired,
    ExecutorError,
    TaskFormatError,
    ToolchainError,
)
from executor.evaluate import Evaluator, evaluate_safely
from executor.fairslots import FairSlots
from executor.gpuquery import gpus_or_none
from executor.protocol import (
    BaselineState,
    BatchRequest,
    BatchResponse,
    DeviceInfo,
    ErrorBody,
    ErrorEnvelope,
    ErrorKind,
    EvaluateRequest,
    PrepareRequest,
    PrepareResponse,
    Stage,
    TurnUsage,
    Verdict,
)
from executor.settings import ExecutorSettings

logger = logging.getLogger(__name__)
T = TypeVar("T")


def error_response(status: int, kind: str, message: str) -> JSONResponse:
    """An answer with the error envelope (every non-2xx answer of the executor, and of its fleet)."""
    return JSONResponse(
        status_code=status,
        content=ErrorEnvelope(error=ErrorBody(message=message, type=kind, code=status)).model_dump(),
    )


def request_deadline(settings: ExecutorSettings) -> float:
    """The deadline (``time.monotonic()``) of a request accepted now: its limit, ``request_timeout_s``.
    Its evaluations carry it, and one still waiting (for a slot, in a replica's queue, for the GPU)
    when it passes is dropped instead of run (`executor.errors.EvaluationExpired`)."""
    return time.monotonic() + settings.request_timeout_s


async def within_request_limit(
    work: Awaitable[T], settings: ExecutorSettings, what: str, cancelled: threading.Event | None = None
) -> T | JSONResponse:
    """`work`'s result, or 504 "timeout" once it has run `request_timeout_s`; then it is cancelled,
    and so are the evaluations that `cancelled` stops (nobody will read their verdicts). An evaluation
    dropped because its deadline passed (:class:`EvaluationExpired`, which may come a moment before
    this wait's own limit: a replica's clock) is answered the same 504."""
    limited = f"{what} took longer than {settings.request_timeout_s:.0f}s"
    try:
        return await asyncio.wait_for(work, timeout=settings.request_timeout_s)
    except TimeoutError:
        if cancelled is not None:
            cancelled.set()
        return error_response(504, "timeout", limited)
    except EvaluationExpired as e:
        logger.info("evaluation dropped: %s", e)
        return error_response(504, "timeout", f"{limited}: {e}")


# How often a ``POST /v1/prepare`` with ``wait_s`` looks again how far its task's preparation is.
PREPARE_POLL_S = 0.2


async def wait_prepared(
    look: Callable[[], Awaitable[tuple[bool, BaselineState]]],
    wait_s: float,
    stopping: threading.Event | None = None,
) -> tuple[bool, BaselineState, float]:
    """Ask ``look`` how far a task's preparation is (done, and its naive baseline's state:
    `Evaluator.task_preparation`) until it is done with no baseline being measured, ``wait_s`` has
    passed, or ``stopping`` is set (the service's stop ends the preparations): whether it was ready, the
    baseline's state then, and the seconds waited."""
    began = time.monotonic()
    while True:
        done, baseline = await look()
        ready = done and baseline != "measuring"
        waited = time.monotonic() - began
        if ready or waited >= wait_s or (stopping is not None and stopping.is_set()):
            return ready, baseline, round(waited, 3)
        await asyncio.sleep(min(PREPARE_POLL_S, wait_s - waited))


@contextlib.asynccontextmanager
async def cancelled_when_gone(request: Request) -> AsyncIterator[threading.Event]:
    """An event set once `request`'s client has gone away (its connection closed: a cancelled call, a
    caller's own timeout) while the block runs. Evaluations given it stop and kill their workers
    instead of running to their limits for nobody.

    The body has been read by then, so the next ASGI message of the request is its disconnect; it is
    awaited here (Starlette's `is_disconnected()` never sees it behind an `http` middleware: its
    instant check is cancelled inside the middleware's task group before the message is read)."""
    cancelled = threading.Event()

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
        logger.info("client gone: stopping its evaluations", extra={"path": request.url.path})
        cancelled.set()

    watcher = asyncio.create_task(watch())
    try:
        yield cancelled
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


class ServiceStop:
    """The stop of a service's evaluations when it is asked to shut down (Ctrl-C, SIGTERM: see
    `executor.server.ExecutorServer.shutdown`), shared by the executor's app and its fleet's.

    Every evaluation runs under :meth:`stoppable`, an event set when its caller goes away or, once
    :meth:`stop` is called, at once: the evaluations in flight or still waiting for a slot stop at
    their next step (their workers killed), as if their callers had gone. uvicorn's graceful shut-down
    waits for the requests open when the signal came, and a hung candidate would otherwise hold it
    until its run limit (minutes with the defaults)."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self._in_flight: set[threading.Event] = set()
        self._lock = threading.Lock()

    def stop(self) -> None:
        """Stop every evaluation in flight or waiting, and every one that starts from now on."""
        with self._lock:
            self.stopping.set()
            events = list(self._in_flight)
        for event in events:
            event.set()

    @contextlib.asynccontextmanager
    async def stoppable(self, http: Request) -> AsyncIterator[threading.Event]:
        """`cancelled_when_gone`, also set when the service stops."""
        async with cancelled_when_gone(http) as cancelled:
            with self._lock:
                self._in_flight.add(cancelled)
                if self.stopping.is_set():
                    cancelled.set()
            try:
                yield cancelled
            finally:
                with self._lock:
                    self._in_flight.discard(cancelled)


def stopped_answer() -> JSONResponse:
    """503 "shutting_down": the answer to an evaluation that the service's stop ended."""
    logger.info("evaluation stopped: the service is shutting down")
    return error_response(503, "shutting_down", "the executor is shutting down: the evaluation was stopped")


def unjudged_verdict(request: EvaluateRequest, error: ErrorKind, why: str) -> Verdict:
    """The verdict of a batch's item that was not judged (``error``, one of `NOT_JUDGED`): it says
    nothing about the candidate, which is to be evaluated again."""
    return Verdict(
        task_id=request.task.id,
        stage=Stage.STATIC,
        passed=False,
        error=error,
        message=f"not judged: {why} before this evaluation finished; it says nothing about the candidate, "
        "evaluate it again",
    )


def stopped_verdict(request: EvaluateRequest) -> Verdict:
    """The verdict of a batch's item that the service's stop ended before it had one: not run
    (``executor_stopped``)."""
    return unjudged_verdict(request, ErrorKind.EXECUTOR_STOPPED, "the executor shut down")


async def batch_verdicts(
    items: list[EvaluateRequest],
    evaluate_one: Callable[[EvaluateRequest], Awaitable[Verdict]],
    stopping: threading.Event,
    cancelled: threading.Event,
    timeout_s: float,
) -> list[Verdict]:
    """The verdicts of a batch's items, evaluated concurrently, in request order.

    An item that the service's stop (``stopping``) ended is an ``executor_stopped`` verdict, so that the
    items finished before the stop keep theirs (review 46 F4: the whole batch was answered 503 and they
    were lost). Likewise, once the batch has run ``timeout_s`` (the request limit), the items still
    running or waiting are stopped (``cancelled`` set: their workers killed; a fleet tells their
    replicas) and are ``batch_timeout`` verdicts, while the items judged by then keep theirs (the whole
    batch was answered 504 and they were lost); so is an item dropped unrun because the batch's
    deadline passed first (:class:`EvaluationExpired`). An item stopped because its caller went away still
    raises :class:`EvaluationCancelled` (as does any other error of an item: the batch fails)."""

    why = f"its batch ran past the executor's request limit ({timeout_s:.0f} s)"

    async def one(item: EvaluateRequest) -> Verdict:
        try:
            return await evaluate_one(item)
        except EvaluationExpired:  # dropped unrun at its deadline, the batch's limit: as one cut there
            return unjudged_verdict(item, ErrorKind.BATCH_TIMEOUT, why)
        except EvaluationCancelled:
            if stopping.is_set():
                return stopped_verdict(item)
            raise

    running = [asyncio.ensure_future(one(item)) for item in items]
    for task in running:  # every item's error retrieved, the first raised: none logged as never retrieved
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
    try:
        done, pending = await asyncio.wait(running, timeout=timeout_s, return_when=asyncio.FIRST_EXCEPTION)
    except asyncio.CancelledError:  # the request itself given up: nothing is left running for it
        cancelled.set()  # before the tasks' cancel: what runs in a thread stops on it (review 32 F3)
        for task in running:
            task.cancel()
        raise
    error = next((e for t in done if (e := t.exception()) is not None), None)
    if pending:
        # Past the limit (or the batch failed): what runs in a thread stops on `cancelled` at its next
        # step, workers killed; a fleet's evaluation, cancelled, tells its replica to stop it.
        cancelled.set()
        if error is None:
            logger.info("batch past its limit: %d of %d items not judged", len(pending), len(items))
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=5.0)
    if error is not None:
        raise error
    return [
        task.result() if task in done else unjudged_verdict(item, ErrorKind.BATCH_TIMEOUT, why)
        for item, task in zip(items, running, strict=True)
    ]


def batch_refused(batch: BatchRequest, settings: ExecutorSettings) -> JSONResponse | None:
    """413 "batch_too_large" for a batch of more than `max_batch` items, else None."""
    if len(batch.items) > settings.max_batch:
        return error_response(413, "batch_too_large", f"at most {settings.max_batch} items per batch")
    return None


def query_gpu(gpu_id: str | None = None) -> dict[str, Any]:
    """Name, compute capability, driver and memory of the first GPU, or of ``gpu_id`` (nvidia-smi
    ignores ``CUDA_VISIBLE_DEVICES``, so a fleet's replica names its own), from nvidia-smi
    (:mod:`executor.gpuquery`); empty without one, or when it does not answer (logged)."""
    rows = gpus_or_none(["name", "compute_cap", "driver_version", "memory.total"], gpu_id)
    if not rows:
        return {}
    name, capability, driver, memory = rows[0]
    return {
        "name": name,
        "compute_capability": capability,
        "driver": driver,
        "memory_total_mib": int(memory) if memory.isdigit() else None,
    }


def install_error_handlers(app: FastAPI) -> None:
    """The error envelope for every failure (HTTP errors, validation, the executor's own errors,
    anything unexpected) and the access log: shared by the executor's app and its fleet's."""

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error_response(exc.status_code, kind, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:20])
        return error_response(422, "validation_error", problems)

    @app.exception_handler(TaskFormatError)
    async def task_error(_: Request, exc: TaskFormatError) -> JSONResponse:
        return error_response(422, "task_format_error", str(exc))

    @app.exception_handler(ToolchainError)
    async def toolchain_error(_: Request, exc: ToolchainError) -> JSONResponse:
        return error_response(503, "toolchain_unavailable", str(exc))

    @app.exception_handler(EvaluationCancelled)
    async def cancelled_error(_: Request, exc: EvaluationCancelled) -> JSONResponse:
        # The client is gone: nobody reads this answer, but the log says what happened.
        logger.info("evaluation stopped: %s", exc)
        return error_response(499, "cancelled", str(exc))

    @app.exception_handler(ExecutorError)
    async def executor_error(_: Request, exc: ExecutorError) -> JSONResponse:
        logger.exception("executor error")
        return error_response(500, "executor_error", str(exc))

    @app.exception_handler(Exception)
    async def unexpected_error(_: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error")
        return error_response(500, "internal_error", f"{type(exc).__name__}: {exc}")

    @app.middleware("http")
    async def access_log(request: Request, call_next: Any) -> Any:
        start = time.perf_counter()
        response = await call_next(request)
        logger.info(
            "request",
            extra={
                "method": request.method,
                "path": request.url.path,
                "status": response.status_code,
                "ms": round((time.perf_counter() - start) * 1e3, 1),
            },
        )
        return response


def create_app(settings: ExecutorSettings | None = None) -> FastAPI:
    """Build the executor app. Compiles run on a thread pool; GPU runs are serialised by the evaluator."""
    settings = settings or ExecutorSettings()
    evaluator = Evaluator(settings)
    pool = ThreadPoolExecutor(max_workers=settings.compile_workers, thread_name_prefix="executor")
    # Who runs next in the pool: one caller holds at most half of it (see executor.fairslots).
    slots = FairSlots(settings.compile_workers)

    # Set when the service is asked to stop (`stop_evaluations`): the evaluations in flight stop at
    # their next step as if their callers had gone (workers killed), and answer 503 "shutting_down"
    # (a batch's stopped items: an ``executor_stopped`` verdict each).
    service_stop = ServiceStop()
    stopping = service_stop.stopping
    stoppable = service_stop.stoppable

    def stop_evaluations() -> None:
        """Stop every evaluation in flight or still waiting for a slot, and the tasks' preparations
        under way, at once (see `ServiceStop`)."""
        service_stop.stop()
        evaluator.stop_preparations()

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        stop_evaluations()
        pool.shutdown(wait=False, cancel_futures=True)
        evaluator.close()

    app = FastAPI(title="ReGraph executor", version="1", lifespan=lifespan)
    app.state.evaluator = evaluator
    app.state.slots = slots
    app.state.stop_evaluations = stop_evaluations

    install_error_handlers(app)

    def prepare(request: EvaluateRequest) -> None:
        # A task new to this executor has its reference built, its timing set stored and its serial
        # reference timed at once, while the request may still wait for a free evaluation slot. Not
        # once the service is stopping: the request is answered 503, and a reference build started
        # for it would only hold the shut-down up (review 46).
        if settings.prepare_tasks and not stopping.is_set():
            evaluator.prepare_task(request.task, request.options)

    async def in_pool(request: EvaluateRequest, cancelled: threading.Event, deadline: float) -> Verdict:
        prepare(request)
        return await slots.run(
            request.caller,
            pool,
            evaluator.evaluate,
            request.task,
            request.candidate,
            request.options,
            cancelled,
            deadline,
        )

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        try:
            chain = evaluator.compiler.toolchain
        except ToolchainError as e:
            return error_response(503, "toolchain_unavailable", str(e))
        return JSONResponse({"status": "ready", "nvcc": chain.release, "runtime": evaluator.runtime})

    @app.get("/v1/device", response_model=DeviceInfo)
    async def device() -> DeviceInfo:
        gpu = await asyncio.to_thread(query_gpu)
        try:
            nvcc: str | None = evaluator.compiler.toolchain.release
        except ToolchainError:
            nvcc = None
        # The figures the executor measured and kept (executor.peak), believed only when plausible.
        kept = "host" if evaluator.runtime == "host" else gpu.get("name")
        return DeviceInfo(
            **gpu,
            arch=evaluator.arch,
            runtime=evaluator.runtime,
            runtime_checks_available=evaluator.runtime_checks_available,
            nvcc=nvcc,
            candidate_process=evaluator.candidate_process,
            memory_cgroups=evaluator.memory_cgroups,
            peak=floor.stored_peak(settings.cache_dir / "device-peak", kept) if kept else None,
            turns=TurnUsage.model_validate(evaluator.turns.usage()),
        )

    @app.post("/v1/evaluate", response_model=Verdict)
    async def evaluate(request: EvaluateRequest, http: Request) -> Verdict | JSONResponse:
        deadline = request_deadline(settings)
        async with stoppable(http) as cancelled:
            try:
                return await within_request_limit(
                    in_pool(request, cancelled, deadline), settings, "evaluation", cancelled
                )
            except EvaluationCancelled:
                if stopping.is_set():
                    return stopped_answer()
                raise

    @app.post("/v1/prepare", response_model=PrepareResponse)
    async def prepare_ahead(request: PrepareRequest) -> PrepareResponse | JSONResponse:
        # Asked for by name (a job that starts), so done whatever prepare_tasks says; not once the
        # service is stopping.
        if stopping.is_set():
            return error_response(503, "shutting_down", "the executor is shutting down: nothing is prepared")
        started = evaluator.prepare_task(request.task, request.options) is not None
        if request.wait_s <= 0:
            return PrepareResponse(task_id=request.task.id, started=started)
        ready, baseline, waited = await wait_prepared(
            lambda: asyncio.to_thread(evaluator.task_preparation, request.task, request.options),
            request.wait_s,
            stopping,
        )
        if stopping.is_set() and not ready:  # the stop ended its preparation (review 30 F5)
            return error_response(
                503, "shutting_down", "the executor is shutting down: the preparation was stopped"
            )
        return PrepareResponse(
            task_id=request.task.id, started=started, ready=ready, baseline=baseline, waited_s=waited
        )

    @app.post("/v1/evaluate/batch", response_model=BatchResponse)
    async def evaluate_batch(batch: BatchRequest, http: Request) -> BatchResponse | JSONResponse:
        deadline = request_deadline(settings)
        if (refused := batch_refused(batch, settings)) is not None:
            return refused
        for item in batch.items:
            prepare(item)
        async with stoppable(http) as cancelled:

            def evaluate_one(item: EvaluateRequest) -> Awaitable[Verdict]:
                return slots.run(item.caller, pool, evaluate_safely, evaluator, item, cancelled, deadline)

            verdicts = await batch_verdicts(
                batch.items, evaluate_one, stopping, cancelled, settings.request_timeout_s
            )
        return BatchResponse(verdicts=verdicts)

    return app
