"""The fleet's HTTP face: the executor's contract (`executor.app`) in front of `Fleet`.

``/v1/evaluate`` and ``/v1/evaluate/batch`` take and answer exactly what one executor does (each
verdict gains ``fleet``: its replica and attempts); ``/v1/device`` describes the first replica's GPU at
the top level, as one executor does, and lists every replica's under ``gpus``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from executor.app import (
    ServiceStop,
    batch_refused,
    batch_verdicts,
    error_response,
    install_error_handlers,
    request_deadline,
    stopped_answer,
    within_request_limit,
)
from executor.errors import EvaluationCancelled
from executor.fleet.router import Fleet, FleetUnavailableError
from executor.protocol import (
    BatchRequest,
    BatchResponse,
    DeviceInfo,
    EvaluateRequest,
    FleetDeviceInfo,
    PrepareRequest,
    PrepareResponse,
    ReplicaDevice,
    Verdict,
)
from executor.settings import ExecutorSettings

logger = logging.getLogger(__name__)


def create_fleet_app(settings: ExecutorSettings, fleet: Fleet | None = None) -> FastAPI:
    """Build the fleet's app; the fleet is started when the app starts unless one is given started."""
    owned = fleet is None
    fleet = fleet or Fleet(settings)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if owned:
            await asyncio.to_thread(fleet.start)
        yield
        if owned:
            await asyncio.to_thread(fleet.close)

    # As on one executor (`executor.server.ExecutorServer.shutdown` calls it on a signal): the
    # evaluations in flight or waiting are stopped on their replicas at once (the router's cancel, as
    # for a caller that went away) and answered 503 "shutting_down" (a batch's stopped items: an
    # ``executor_stopped`` verdict each); a ``POST /v1/prepare`` still waiting is answered 503
    # "shutting_down" too, and the replicas' preparations stop with their close.
    service_stop = ServiceStop()
    stopping = service_stop.stopping

    app = FastAPI(title="ReGraph executor fleet", version="1", lifespan=lifespan)
    app.state.fleet = fleet
    app.state.stop_evaluations = service_stop.stop
    install_error_handlers(app)

    @app.exception_handler(FleetUnavailableError)
    async def unavailable(_: Any, exc: FleetUnavailableError) -> JSONResponse:
        return error_response(503, "fleet_unavailable", str(exc))

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        if not fleet.replicas:
            return error_response(503, "fleet_unavailable", "no live replica")
        return JSONResponse({"status": "ready", "replicas": len(fleet.replicas)})

    @app.get("/v1/device", response_model=FleetDeviceInfo)
    async def device() -> FleetDeviceInfo:
        described = await fleet.describe()
        if not described:
            raise FleetUnavailableError("the fleet has no live replica")
        gpus = [ReplicaDevice.model_validate(d) for d in described]
        return FleetDeviceInfo(**gpus[0].model_dump(include=set(DeviceInfo.model_fields)), gpus=gpus)

    # A caller that goes away (or a request past its limit) stops its evaluations on the replicas,
    # as it does on one executor.
    @app.post("/v1/evaluate", response_model=Verdict)
    async def evaluate(request: EvaluateRequest, http: Request) -> Verdict | JSONResponse:
        deadline = request_deadline(settings)
        async with service_stop.stoppable(http) as cancelled:
            try:
                return await within_request_limit(
                    fleet.evaluate(request, cancelled, deadline), settings, "evaluation", cancelled
                )
            except EvaluationCancelled:
                if stopping.is_set():
                    return stopped_answer()
                raise

    @app.post("/v1/prepare", response_model=PrepareResponse)
    async def prepare(request: PrepareRequest) -> PrepareResponse | JSONResponse:
        if stopping.is_set():
            return error_response(503, "shutting_down", "the executor is shutting down: nothing is prepared")
        prepared = await fleet.prepare(request, stopping)
        if stopping.is_set() and not prepared.ready and request.wait_s > 0:
            # the stop ended the wait (as on one executor); the replicas' preparations end with their close
            return error_response(
                503, "shutting_down", "the executor is shutting down: the preparation was stopped"
            )
        return prepared

    @app.post("/v1/evaluate/batch", response_model=BatchResponse)
    async def evaluate_batch(batch: BatchRequest, http: Request) -> BatchResponse | JSONResponse:
        deadline = request_deadline(settings)
        if (refused := batch_refused(batch, settings)) is not None:
            return refused
        async with service_stop.stoppable(http) as cancelled:
            verdicts = await batch_verdicts(
                batch.items,
                lambda item: fleet.evaluate(item, cancelled, deadline),
                stopping,
                cancelled,
                settings.request_timeout_s,
            )
        return BatchResponse(verdicts=verdicts)

    return app
