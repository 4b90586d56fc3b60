"""The executor's stop on a signal (Ctrl-C, SIGTERM) runs on the event loop, not in the signal handler:
the handler interrupts that same thread between two instructions, and stopping takes locks that the
interrupted code may hold (review 46: the app's set of evaluations, an event's lock), which would then
wait for themselves forever."""

from __future__ import annotations

import asyncio
import signal

from fastapi import FastAPI

from executor.server import ExecutorServer
from executor.settings import ExecutorSettings


def test_the_signal_handler_only_sets_the_flag_and_the_shutdown_stops_the_evaluations() -> None:
    app = FastAPI()
    calls: list[str] = []
    app.state.stop_evaluations = lambda: calls.append("stop")
    server = ExecutorServer(app, ExecutorSettings(port=0))
    server.handle_exit(signal.SIGTERM, None)
    assert server.should_exit
    assert calls == []  # nothing that takes a lock ran inside the handler
    # The shutdown that uvicorn's main loop runs next, on the event loop (a server never started: no
    # listening sockets, no lifespan to end).
    server.servers = []
    server.force_exit = True
    asyncio.run(server.shutdown())
    assert calls == ["stop"]
