"""Running the executor service with uvicorn (wired to ``regraph executor serve`` by the CLI)."""

from __future__ import annotations

import contextlib
import socket

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

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Stop the evaluations, then shut down as uvicorn does. Here, on the event loop's thread once
        the signal's flag is seen (uvicorn checks it every 0.1 s), not in the signal handler: the
        handler runs on that same thread between two instructions, and a lock that the interrupted
        code held (the app's set of evaluations, an event's) would wait for itself forever (review
        46)."""
        stop = getattr(self.app.state, "stop_evaluations", None)  # the executor's app and the fleet's
        if stop is not None:
            stop()
        await super().shutdown(sockets=sockets)


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
    # uvicorn raises the signal it stopped for again once it is done: Ctrl-C ends quietly, as under
    # uvicorn.run (review 46: a traceback and status -2 otherwise); SIGTERM still ends the process.
    with contextlib.suppress(KeyboardInterrupt):
        executor_server(settings).run()


if __name__ == "__main__":
    serve(ExecutorSettings())
