"""The `regraph` command line."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from enum import StrEnum
from types import FrameType
from typing import IO, Annotated

import typer
import uvicorn
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from api.logs import choose_log_format, configure_logging
from api.settings import ApiSettings
from api.startup import StartupStage
from graphdb.errors import GraphDBError
from regraph_cli.bench import bench_app
from regraph_cli.discovery import reach, refuse_second_stack
from regraph_cli.graph import graph_app, keys_app
from regraph_cli.local_executor import executor_start_wait_s
from regraph_cli.mcp import mcp_command
from regraph_cli.optimize import optimize_command
from regraph_cli.ports import check_ports
from regraph_cli.replay import replay_app
from regraph_cli.supervise import ExecutorStartError, ExecutorSupervisor

app = typer.Typer(
    no_args_is_help=True, help="ReGraph: CUDA optimization with a reasoning graph and a small model."
)
db_app = typer.Typer(no_args_is_help=True, help="The graph database: schema migrations and status.")
executor_app = typer.Typer(no_args_is_help=True, help="The GPU executor microservice.")
app.add_typer(db_app, name="db")
app.add_typer(executor_app, name="executor")
app.command("optimize")(optimize_command)
app.command("mcp")(mcp_command)
app.add_typer(bench_app, name="bench")
app.add_typer(graph_app, name="graph")
app.add_typer(keys_app, name="keys")
app.add_typer(replay_app, name="replay")

console = Console(stderr=True)
logger = logging.getLogger("regraph")


def _fail(message: str) -> typer.Exit:
    # The message may quote user input or a pattern such as '^[a-z0-9_]+$': never read it as markup.
    console.print(f"[bold red]error:[/] {escape(message)}")
    return typer.Exit(code=1)


@db_app.command("migrate")
def db_migrate() -> None:
    """Apply pending schema migrations (starting the embedded Neo4j when NEO4J_URI is unset)."""
    from api.state import graph_options
    from graphdb.connection import open_graph

    settings = reach(ApiSettings())  # the running stack's Neo4j, if `regraph up` runs on the data dir
    configure_logging(settings.log_level, "text")
    try:
        with open_graph(graph_options(settings)) as graph:
            applied = graph.migrations_applied
    except GraphDBError as e:
        raise _fail(str(e)) from e
    if applied:
        for name in applied:
            console.print(f"applied {name}")
    else:
        console.print("schema is up to date")


@db_app.command("status")
def db_status() -> None:
    """Show each migration and whether it is applied."""
    from api.state import graph_options
    from graphdb.connection import open_graph
    from graphdb.migrations import MigrationRunner

    settings = reach(ApiSettings())  # the running stack's Neo4j, if `regraph up` runs on the data dir
    configure_logging(settings.log_level, "text")
    try:
        with open_graph(graph_options(settings), migrate=False) as graph:
            statuses = MigrationRunner(graph.driver, graph.target.database).status()
    except GraphDBError as e:
        raise _fail(str(e)) from e
    table = Table("version", "name", "state", "applied at", "checksum")
    for s in statuses:
        table.add_row(f"V{s.version:03d}", s.name, s.state, s.applied_at or "", s.checksum[:12])
    Console().print(table)


@executor_app.command("serve")
def executor_serve(
    host: Annotated[str | None, typer.Option(help="listen address")] = None,
    port: Annotated[int | None, typer.Option(help="listen port")] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            help="serve a fleet, one replica per GPU of a Ray cluster: 'auto' or the cluster's "
            "address (default: REGRAPH_EXECUTOR_RAY; unset: one executor on this machine)"
        ),
    ] = None,
) -> None:
    """Run the executor service alone (compile, verify and time candidates), or as a fleet on Ray."""
    from executor.server import serve
    from executor.settings import ExecutorSettings

    overrides: dict[str, object] = {}
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    if ray is not None:
        overrides["ray"] = ray
    serve(ExecutorSettings(**overrides))  # type: ignore[arg-type]


GRACEFUL_SHUTDOWN_S = 2


class _Server(uvicorn.Server):
    """uvicorn's server, also telling `on_exit` when a signal asks it to stop (not after it has)."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None] | None) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self._on_exit is not None:
            self._on_exit()  # the executor stops alongside the API's own shut-down


class LogFormat(StrEnum):
    text = "text"
    json = "json"


def up_log_format(flag: LogFormat | None, settings: ApiSettings, stream: IO[str]) -> str:
    """`up`'s log format: --log-format, else REGRAPH_LOG_FORMAT, else text on a terminal, else JSON."""
    if flag is not None:
        return flag.value
    return choose_log_format(
        settings.log_format if "log_format" in settings.model_fields_set else None, stream
    )


def _refuse_taken_ports(settings: ApiSettings, executor_port: int | None) -> None:
    """Exit (code 2) before anything starts when a port `up` needs is taken, naming who holds it."""
    needed = [("the API", settings.host, settings.port)]
    if executor_port is not None:
        needed.append(("the executor", "127.0.0.1", executor_port))
    if settings.neo4j_uri is None:  # the embedded Neo4j binds its Bolt port on loopback
        needed.append(("the embedded Neo4j (Bolt, REGRAPH_NEO4J_PORT)", "127.0.0.1", settings.neo4j_port))
    taken = check_ports(needed)
    if not taken:
        return
    for port in taken:
        console.print(f"[bold red]error:[/] {escape(port.sentence())}", soft_wrap=True)
    console.print(
        "Nothing was started. Stop that process, or choose other ports (--port, --executor-port, "
        "REGRAPH_NEO4J_PORT).",
        soft_wrap=True,
    )
    raise typer.Exit(code=2)


@app.command("up")
def up(
    host: Annotated[str | None, typer.Option(help="API listen address (REGRAPH_HOST)")] = None,
    port: Annotated[int | None, typer.Option(help="API listen port (REGRAPH_PORT)")] = None,
    executor_port: Annotated[int, typer.Option(help="port for the local executor")] = 8081,
    with_executor: Annotated[
        bool, typer.Option(help="start a local executor unless REGRAPH_EXECUTOR_URL")
    ] = True,
    log_format: Annotated[
        LogFormat | None,
        typer.Option(
            help="log lines as text or JSON (REGRAPH_LOG_FORMAT; default: text on a terminal, else JSON)"
        ),
    ] = None,
) -> None:
    """Bring the stack up on this machine: Neo4j (embedded unless NEO4J_URI), migrations, executor, API."""
    overrides: dict[str, object] = {}
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    settings = ApiSettings(**overrides)  # type: ignore[arg-type]
    settings = settings.model_copy(update={"log_format": up_log_format(log_format, settings, sys.stderr)})
    refuse_second_stack(settings)
    start_executor = settings.executor_url is None and with_executor
    _refuse_taken_ports(settings, executor_port if start_executor else None)
    # Imported here, once the refusals above have passed, not with the CLI: the API is most of the CLI's
    # import time (2-4 s of a refusal at load 7), and the other commands and those refusals do not need it.
    from api.app import create_app
    from api.connections import server_config

    executor: ExecutorSupervisor | None = None
    if start_executor:
        # Supervised: restarted when it dies (the API's /readyz says it is down meanwhile).
        executor = ExecutorSupervisor(executor_port, start_wait_s=executor_start_wait_s())
        settings = settings.model_copy(update={"executor_url": executor.url})
    api = create_app(settings)
    # Header/idle timeouts and connection caps (api.connections): plain uvicorn lets idle clients hold every descriptor.
    # Open connections (an SSE stream, an MCP session) get GRACEFUL_SHUTDOWN_S to end at shut-down.
    config = server_config(api, settings, timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
    server = _Server(config, on_exit=executor.request_stop if executor is not None else None)
    # The executor starts beside the API, Neo4j and the model (it used to delay them by its 2-4 s);
    # one that does not come up ends `up` with exit 1, as before.
    executor_start = _ExecutorStart(executor, server)

    def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            time.sleep(READY_POLL_S)
        bound = settings.port
        for srv in server.servers:
            for sock in srv.sockets:
                bound = sock.getsockname()[1]
        print(f"ReGraph API serving on http://{settings.host}:{bound}  (docs: /docs, readiness: /readyz)")
        print(f"  curation workspace: http://{settings.host}:{bound}/ui  (sign in with an API key)")
        print(f"  executor: {settings.executor_url or 'not started'}")
        print("  starting: Neo4j, migrations and models (the routes answer 503 until ready)", flush=True)
        # The port opens before the start-up ends (api.startup): the database's address is known only
        # once it is reached.
        startup = api.state.startup
        while startup.stage not in (StartupStage.READY, StartupStage.FAILED) or not executor_start.done:
            if server.should_exit:
                return
            time.sleep(READY_POLL_S)
        if startup.stage is StartupStage.FAILED or executor_start.error is not None:
            return  # logged by the start-up (or below); the process ends with its status
        state = getattr(api.state, "regraph", None)
        neo4j_uri = state.target.uri if state is not None else settings.neo4j_uri
        print(f"  Neo4j: {neo4j_uri}")
        if state is not None and state.embedder is not None and not state.embedder.loaded:
            print("  embedding model: still loading (the first search waits for it)")
        print("Ready. Press Ctrl-C to stop.", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    try:
        server.run()
    finally:
        executor_start.stop()
    if executor_start.error is not None:
        raise _fail(executor_start.error)


READY_POLL_S = 0.05
"""How often `up` looks whether the start-up has ended (to print "Ready.")."""


class _ExecutorStart:
    """Start the supervised executor in a thread; when it does not come up, say so and stop the server."""

    def __init__(self, executor: ExecutorSupervisor | None, server: uvicorn.Server) -> None:
        self.executor = executor
        self.error: str | None = None
        self._server = server
        self._thread: threading.Thread | None = None
        if executor is not None:
            self._thread = threading.Thread(target=self._run, name="executor-start", daemon=True)
            self._thread.start()

    @property
    def done(self) -> bool:
        return self._thread is None or not self._thread.is_alive()

    def _run(self) -> None:
        assert self.executor is not None
        try:
            self.executor.start()
        except ExecutorStartError as e:
            if self.executor.state != "stopped":  # not a start cut short by our own shut-down
                self.error = str(e)
                self._server.should_exit = True

    def stop(self) -> None:
        """Stop the executor (a start under way ends), then wait for the starting thread."""
        if self.executor is not None:
            self.executor.stop()
        if self._thread is not None:
            self._thread.join(timeout=30)


def run() -> None:
    app()


if __name__ == "__main__":
    run()
