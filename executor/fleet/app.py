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

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import Field

from executor.app import BatchRequest, BatchResponse, DeviceInfo, _error
from executor.evaluate import EvaluateRequest
from executor.fleet.router import Fleet, FleetUnavailableError
from executor.settings import ExecutorSettings
from executor.verdict import Verdict

logger = logging.getLogger(__name__)


class ReplicaDevice(DeviceInfo):
    """One replica of the fleet and its GPU."""

    replica: str
    node: str | None = None
    gpu_ids: str = ""


class FleetDeviceInfo(DeviceInfo):
    """``GET /v1/device`` of a fleet: the first replica's device, and all of them under ``gpus``."""

    gpus: list[ReplicaDevice] = Field(default_factory=list)


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

    app = FastAPI(title="ReGraph executor fleet", version="1", lifespan=lifespan)
    app.state.fleet = fleet
    _install_error_handlers(app)

    @app.exception_handler(FleetUnavailableError)
    async def unavailable(_: Any, exc: FleetUnavailableError) -> JSONResponse:
        return _error(503, "fleet_unavailable", str(exc))

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        if not fleet.replicas:
            return _error(503, "fleet_unavailable", "no live replica")
        return JSONResponse({"status": "ready", "replicas": len(fleet.replicas)})

    @app.get("/v1/device", response_model=FleetDeviceInfo)
    async def device() -> FleetDeviceInfo:
        described = await fleet.describe()
        if not described:
            raise FleetUnavailableError("the fleet has no live replica")
        gpus = [ReplicaDevice.model_validate(d) for d in described]
        return FleetDeviceInfo(**gpus[0].model_dump(include=set(DeviceInfo.model_fields)), gpus=gpus)

    @app.post("/v1/evaluate", response_model=Verdict)
    async def evaluate(request: EvaluateRequest) -> Verdict | JSONResponse:
        try:
            return await asyncio.wait_for(fleet.evaluate(request), timeout=settings.request_timeout_s)
        except TimeoutError:
            return _error(504, "timeout", f"evaluation took longer than {settings.request_timeout_s:.0f}s")

    @app.post("/v1/evaluate/batch", response_model=BatchResponse)
    async def evaluate_batch(batch: BatchRequest) -> BatchResponse | JSONResponse:
        if len(batch.items) > settings.max_batch:
            return _error(413, "batch_too_large", f"at most {settings.max_batch} items per batch")
        try:
            verdicts = await asyncio.wait_for(
                fleet.evaluate_many(batch.items), timeout=settings.request_timeout_s
            )
        except TimeoutError:
            return _error(504, "timeout", f"batch took longer than {settings.request_timeout_s:.0f}s")
        return BatchResponse(verdicts=verdicts)

    return app


def _install_error_handlers(app: FastAPI) -> None:
    from fastapi import Request
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException as StarletteHTTPException

    from executor.errors import ExecutorError

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return _error(exc.status_code, kind, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:20])
        return _error(422, "validation_error", problems)

    @app.exception_handler(ExecutorError)
    async def executor_error(_: Request, exc: ExecutorError) -> JSONResponse:
        logger.exception("fleet error")
        return _error(500, "executor_error", str(exc))
