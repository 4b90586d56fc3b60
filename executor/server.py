"""Running the executor service with uvicorn (wired to ``regraph executor serve`` by the CLI)."""

from __future__ import annotations

from types import FrameType

import uvicorn
from fastapi import FastAPI

from executor.app import create_app
from executor.logs import configure_logging
from executor.settings import ExecutorSettings


class ExecutorServer(uvicorn.Server):
    """uvicorn's server, which stops the evaluations in flight as soon as a signal (Ctrl-C, SIGTERM)
    asks it to stop: its graceful shut-down waits for the open requests, and a hung candidate would
    otherwise hold it until the candidate's run limit."""

    def __init__(self, app: FastAPI, settings: ExecutorSettings) -> None:
        super().__init__(
            uvicorn.Config(app, host=settings.host, port=settings.port, log_config=None, access_log=False)
        )
        self.app = app

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        stop = getattr(self.app.state, "stop_evaluations", None)  # the fleet's app has none
        if stop is not None:
            stop()


def executor_server(settings: ExecutorSettings) -> ExecutorServer:
    """The server of :func:`serve`, not started: one executor on this machine's GPU, or, with
    ``settings.ray`` set, the fleet of replicas on that Ray cluster behind the same API."""
    if settings.ray:
        from executor.fleet.app import create_fleet_app

        app = create_fleet_app(settings)
    else:
        app = create_app(settings)
    return ExecutorServer(app, settings)


def serve(settings: ExecutorSettings) -> None:
    """Serve the executor API until interrupted (see :func:`executor_server`)."""
    configure_logging(settings.log_level)
    executor_server(settings).run()


if __name__ == "__main__":
    serve(ExecutorSettings())
