"""Running the executor service with uvicorn (wired to ``regraph executor serve`` by the CLI)."""

from __future__ import annotations

import uvicorn

from executor.app import create_app
from executor.logs import configure_logging
from executor.settings import ExecutorSettings


def serve(settings: ExecutorSettings) -> None:
    """Serve the executor API until interrupted: one executor on this machine's GPU, or, with
    ``settings.ray`` set, the fleet of replicas on that Ray cluster behind the same API."""
    configure_logging(settings.log_level)
    if settings.ray:
        from executor.fleet.app import create_fleet_app

        app = create_fleet_app(settings)
    else:
        app = create_app(settings)
    uvicorn.run(app, host=settings.host, port=settings.port, log_config=None, access_log=False)


if __name__ == "__main__":
    serve(ExecutorSettings())
