"""FastAPI dependencies as Annotated aliases, so endpoints take plain typed parameters."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from neo4j import Driver

from api.errors import ServiceUnavailableError
from api.settings import ApiSettings
from api.state import AppState


def get_state(request: Request) -> AppState:
    state: AppState | None = getattr(request.app.state, "regraph", None)
    if state is None:
        raise ServiceUnavailableError("the service is starting or stopping")
    return state


def get_driver(state: Annotated[AppState, Depends(get_state)]) -> Driver:
    return state.driver


def get_settings(state: Annotated[AppState, Depends(get_state)]) -> ApiSettings:
    return state.settings


StateDep = Annotated[AppState, Depends(get_state)]
DriverDep = Annotated[Driver, Depends(get_driver)]
SettingsDep = Annotated[ApiSettings, Depends(get_settings)]
