"""FastAPI dependencies as Annotated aliases, so endpoints take plain typed parameters."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request
from neo4j import Driver

from api.audit.service import AuditService
from api.errors import ServiceUnavailableError
from api.examples.service import ExampleService
from api.graph.service import GraphServices
from api.keys.service import KeyService
from api.optimize.service import JobService
from api.relabel.service import RelabelService
from api.retrieve.service import RetrievalService
from api.settings import ApiSettings
from api.startup import RETRY_AFTER_S, Startup, unavailable_message
from api.state import AppState
from api.techniques.service import TechniqueService
from api.transfer.service import TransferService


def get_startup(request: Request) -> Startup:
    """The app's start-up record (`api/startup.py`)."""
    startup: Startup = request.app.state.startup
    return startup


def get_state(request: Request) -> AppState:
    """The opened state; 503 with `Retry-After` and the start-up phase until it exists."""
    state: AppState | None = getattr(request.app.state, "regraph", None)
    if state is None:
        raise ServiceUnavailableError(unavailable_message(get_startup(request)), retry_after_s=RETRY_AFTER_S)
    return state


def get_driver(state: Annotated[AppState, Depends(get_state)]) -> Driver:
    return state.driver


def get_settings(state: Annotated[AppState, Depends(get_state)]) -> ApiSettings:
    return state.settings


StartupDep = Annotated[Startup, Depends(get_startup)]
StateDep = Annotated[AppState, Depends(get_state)]
DriverDep = Annotated[Driver, Depends(get_driver)]
SettingsDep = Annotated[ApiSettings, Depends(get_settings)]


def get_graph_services(state: StateDep) -> GraphServices:
    """The graph's feature services over the app's store and embedding model (built once a request)."""
    if state.graph_store is None or state.embedder is None:
        raise ServiceUnavailableError("the graph store is starting or stopping")
    return GraphServices.over(state.graph_store, state.embedder)


_GraphServicesDep = Annotated[GraphServices, Depends(get_graph_services)]


def get_technique_service(graph: _GraphServicesDep) -> TechniqueService:
    return graph.techniques


def get_example_service(graph: _GraphServicesDep) -> ExampleService:
    return graph.examples


def get_retrieval_service(graph: _GraphServicesDep) -> RetrievalService:
    return graph.retrieval


def get_audit_service(graph: _GraphServicesDep) -> AuditService:
    return graph.audit


def get_key_service(graph: _GraphServicesDep) -> KeyService:
    return graph.keys


def get_transfer_service(graph: _GraphServicesDep) -> TransferService:
    return graph.transfer


# What a route or a page takes: the one service of its feature (each face's routes ask for their own).
TechniqueServiceDep = Annotated[TechniqueService, Depends(get_technique_service)]
ExampleServiceDep = Annotated[ExampleService, Depends(get_example_service)]
RetrievalServiceDep = Annotated[RetrievalService, Depends(get_retrieval_service)]
AuditServiceDep = Annotated[AuditService, Depends(get_audit_service)]
KeyServiceDep = Annotated[KeyService, Depends(get_key_service)]
TransferServiceDep = Annotated[TransferService, Depends(get_transfer_service)]


def get_relabel_service(state: StateDep) -> RelabelService:
    """The relabel service over the app's store and its (lazily built, cached) relabel policy."""
    if state.graph_store is None or state.embedder is None:
        raise ServiceUnavailableError("the graph store is starting or stopping")
    return RelabelService(state.graph_store, state.relabel_policy())


def get_jobs(state: StateDep) -> JobService:
    """The running job service (the queue that /v1/optimize, /ui/jobs and the MCP tools feed)."""
    if state.jobs is None:
        raise ServiceUnavailableError("the job service is starting or stopping")
    return state.jobs


RelabelServiceDep = Annotated[RelabelService, Depends(get_relabel_service)]
JobsDep = Annotated[JobService, Depends(get_jobs)]

Limit = Annotated[int, Query(ge=1, le=1000, description="page size")]
Offset = Annotated[int, Query(ge=0, le=10_000_000, description="items to skip")]
