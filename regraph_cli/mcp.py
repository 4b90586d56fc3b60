"""``regraph mcp``: the reasoning graph as an MCP server over stdio, for a local coding agent.

It starts or reaches the stack as ``regraph up`` does (the embedded Neo4j unless REGRAPH_NEO4J_URI is
set, migrations, a local executor unless REGRAPH_EXECUTOR_URL is set) and serves, in this process,
the same tools, resources and prompts as the API's ``/mcp`` (`api.mcp.stdio`). While ``regraph up``
runs on the same data directory it uses that stack's Neo4j and executor instead (`api.discovery`),
leaving the running API's jobs to it. Standard output carries the protocol only: logs and the
executor's output go to standard error.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Annotated

import anyio
import typer
from rich.console import Console

from api.discovery import reach_running_stack
from api.logs import configure_logging
from api.settings import ApiSettings
from regraph_cli.discovery import refuse_other_data_dir
from regraph_cli.local_executor import start_local_executor, stop_local_executor
from regraph_cli.supervise import ExecutorStartError

if TYPE_CHECKING:
    from api.mcp.stdio import StdioStartupError

console = Console(stderr=True)


def mcp_command(
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="REGRAPH_API_KEY", help="an API key: its role is the agent's role (default: read only)"
        ),
    ] = None,
    executor_port: Annotated[int, typer.Option(help="port for the local executor")] = 8081,
    with_executor: Annotated[
        bool, typer.Option(help="start a local executor unless REGRAPH_EXECUTOR_URL")
    ] = True,
) -> None:
    """Serve the reasoning graph to a local coding agent over MCP (stdio), starting the stack if needed."""
    # The running stack's Neo4j and executor, if `regraph up` runs on the data dir (its jobs stay its own).
    reached = reach_running_stack(ApiSettings())
    if reached.running is not None:
        console.print(f"[dim]{reached.describe()}[/]")
    else:  # as the other commands: never a second Neo4j on the default data dir beside a running stack
        refuse_other_data_dir(reached.settings)
    settings = reached.settings
    configure_logging(settings.log_level, "text")  # on stderr: stdout is the protocol's
    starter: _ExecutorStarter | None = None
    if settings.executor_url is None and with_executor:
        # Started beside the handshake: an agent waits only seconds for the server; evaluations made
        # before the executor answers are told it is unreachable.
        starter = _ExecutorStarter(executor_port)
        settings = settings.model_copy(update={"executor_url": starter.url})
    # A client that goes away may end us with SIGTERM or SIGHUP: unwind, so the executor stops with us.
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    # The server's modules (most of the API) are imported here, while the executor starts, not with
    # the CLI: the other commands do not need them.
    from api.mcp.settings import McpSettings
    from api.mcp.stdio import StdioStartupError, serve_stdio

    def stop_now(error: StdioStartupError) -> None:
        console.print(f"[bold red]error:[/] {error}")
        if starter is not None:
            starter.stop()
        sys.stderr.flush()
        os._exit(1)  # the protocol's reader may be blocked on an open stdin: nothing else would end it

    try:
        anyio.run(
            partial(serve_stdio, recover_jobs=reached.running is None, on_startup_error=stop_now),
            settings,
            McpSettings(),
            api_key,
        )
    except StdioStartupError as e:
        console.print(f"[bold red]error:[/] {e}")
        raise typer.Exit(code=1) from e
    except KeyboardInterrupt:
        pass
    finally:
        if starter is not None:
            starter.stop()


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


class _ExecutorStarter:
    """A local executor started in a thread (`start_local_executor` waits until it answers)."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._start, args=(start_local_executor, port), daemon=True)
        self._thread.start()

    def _start(self, start: Callable[..., tuple[subprocess.Popen[bytes], str]], port: int) -> None:
        try:
            self.process, _ = start(port, quiet_stdout=True, on_started=self._started)
        except (ExecutorStartError, OSError) as e:
            console.print(f"[bold red]the local executor did not start:[/] {e}")

    def _started(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process

    def stop(self) -> None:
        if self.process is not None:
            stop_local_executor(self.process)
