"""FastAPI dependencies as Annotated aliases, so endpoints take plain typed parameters."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from neo4j import Driver

from api.errors import ServiceUnavailableError
from api.settings import ApiSettings
from api.startup import RETRY_AFTER_S, Startup, unavailable_message
from api.state import AppState


def get_startup(request: Request) -> Startup:
    """The app's start-up record (`api/startup.py`)."""
    startup: Startup = request.app.state.startup
    return startup


def get_state(request: Request) -> AppState:
    """The opened state; 503 with `Retry-After` and the start-up phase until it exists."""
    state: AppState | None = getattr(request.app.state, "regraph", None)
    if state is None:
        raise ServiceUnavailableError(
            unavailable_message(get_startup(request)), headers={"Retry-After": str(RETRY_AFTER_S)}
        )
    return state


def get_driver(state: Annotated[AppState, Depends(get_state)]) -> Driver:
    return state.driver


def get_settings(state: Annotated[AppState, Depends(get_state)]) -> ApiSettings:
    return state.settings


StartupDep = Annotated[Startup, Depends(get_startup)]
StateDep = Annotated[AppState, Depends(get_state)]
DriverDep = Annotated[Driver, Depends(get_driver)]
SettingsDep = Annotated[ApiSettings, Depends(get_settings)]
