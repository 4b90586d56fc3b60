"""`regraph graph ...` (build, export, import, stats) and `regraph keys create-admin` (the admin bootstrap).

These work on the graph database directly (embedded unless NEO4J_URI is set), like `regraph db`, so
they need no running API and no API key.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from api.logs import configure_logging
from api.settings import ApiSettings, default_tasks_dir
from api.state import graph_options
from executor.client import ExecutorClient
from executor.errors import ExecutorError
from executor.protocol import NOT_JUDGED
from executor.taskformat import load_task
from graphdb.connection import open_graph
from graphdb.errors import GraphDBError
from graphdb.export import export_to_file, import_from_file
from graphdb.models import ReviewStatus, Role
from graphdb.store import GraphStore
from regraph_cli.discovery import reach
from search.backends.base import ChatModel
from search.backends.config import ModelRoles, RoleConfig, build_model, require_structured_output
from search.embeddings import shared_embedder
from search.errors import EvaluatorUnavailableError, SearchError
from search.relabel.construction import (
    BuildSummary,
    GraphBuilder,
    ReferencesInOrder,
    ReferenceSource,
    SourcedTrajectory,
    StepCheck,
    TaskDirectoryReferences,
    read_trajectories,
)
from search.relabel.relabeler import build_relabeler, role_judge
from search.relabel.teacher import DEFAULT_MAX_STEPS, TeacherTrajectorySource, load_teacher_tasks

graph_app = typer.Typer(
    no_args_is_help=True, help="The reasoning graph: build it from trajectories, export, import."
)
keys_app = typer.Typer(no_args_is_help=True, help="API keys.")

console = Console(stderr=True)
logger = logging.getLogger("regraph")


def _fail(message: str) -> typer.Exit:
    # The message may quote user input or a pattern such as '^[a-z0-9_]+$': never read it as markup.
    console.print(f"[bold red]error:[/] {escape(message)}")
    return typer.Exit(code=1)


@contextmanager
def _store() -> Iterator[GraphStore]:
    """The graph store over the configured Neo4j, migrated first (as the API does at start-up)."""
    settings = reach(ApiSettings())  # the running stack's Neo4j, if `regraph up` runs on the data dir
    configure_logging(settings.log_level, "text")
    with open_graph(graph_options(settings), migrate=settings.migrate_on_start) as graph:
        yield graph.store


class ExecutorStepValidator:
    """Validates trajectory steps with the executor service (compile, test and time on its GPU)."""

    def __init__(self, client: ExecutorClient, tasks_dir: Path) -> None:
        """Evaluate through `client`, with tasks read from `tasks_dir`."""
        self.client = client
        self.tasks_dir = tasks_dir

    def __call__(self, task_id: str, code: str) -> StepCheck:
        """The executor's verdict on `code` for `task_id`, as a step check."""
        verdict = self.client.evaluate(load_task(self.tasks_dir / task_id), code)
        if verdict.error in NOT_JUDGED:  # the executor's failure, not the step's: never a rejected step
            raise EvaluatorUnavailableError(
                f"the executor did not judge a step of {task_id}: {verdict.error}: {verdict.message}"
            )
        reason = verdict.message or (verdict.error.value if verdict.error else "")
        return StepCheck(
            passed=verdict.passed,
            speedup_over_serial=verdict.speedup if verdict.passed else None,
            device=verdict.device,
            reason=reason,
        )


def summary_table(summary: BuildSummary) -> Table:
    """The build summary as a two-column table."""
    table = Table("", "count", title="graph build")
    rows = [
        ("trajectories read", summary.trajectories_read),
        ("ingested", summary.trajectories_ingested),
        ("already ingested (skipped)", summary.trajectories_already_ingested),
        ("examples added", summary.examples_added),
        ("steps rejected by validation", summary.rejected_steps),
        ("steps skipped", summary.skipped_steps),
        ("techniques created", summary.techniques_created),
        ("names merged into a technique", summary.merges),
        ("names flagged for curators", summary.flagged),
        ("transitions created", summary.transitions_created),
        ("graph: techniques", summary.nodes),
        ("graph: transitions", summary.transitions),
        ("graph: examples", summary.examples),
    ]
    for label, value in rows:
        table.add_row(label, str(value))
    return table


def _teacher_role(url: str | None, model: str | None, api_key: str | None) -> RoleConfig:
    """The teacher's backend: --teacher-url/--teacher-model, else the `teacher` role of the environment."""
    if url or model:
        if not (url and model):
            raise _fail("--teacher-url and --teacher-model go together")
        return RoleConfig(backend="openai", base_url=url, model=model, api_key=api_key)
    role = ModelRoles().teacher
    if role is None:
        raise _fail(
            "--teacher-tasks needs a teacher model: --teacher-url and --teacher-model, or the "
            "REGRAPH_MODELS__TEACHER__* settings"
        )
    return role


def _teacher_trajectories(source: TeacherTrajectorySource, progress: Progress) -> list[SourcedTrajectory]:
    bar = progress.add_task("asking the teacher", total=len(source.tasks))
    source.progress = lambda done, _total, task_id: progress.update(
        bar, completed=done, description=f"teacher: {task_id}"
    )
    return list(source())


@graph_app.command("build")
def build(
    files: Annotated[
        list[Path] | None, typer.Argument(help="trajectory files (JSONL) or directories of them")
    ] = None,
    executor_url: Annotated[
        str | None, typer.Option(help="validate every step with this executor (default: no validation)")
    ] = None,
    tasks_dir: Annotated[
        Path | None, typer.Option(help="task directories (serial references); default: the bundled tasks")
    ] = None,
    on_failure: Annotated[
        str,
        typer.Option(
            help="a step failing validation: 'reject' it (kept, never retrieved) or 'skip' the rest"
        ),
    ] = "reject",
    approve: Annotated[
        bool, typer.Option(help="mark new examples approved instead of pending review")
    ] = False,
    teacher_tasks: Annotated[
        str | None,
        typer.Option(
            help="also ask a teacher model for one trajectory per task: a task directory, a directory "
            "of them, or comma-separated task ids (in --tasks-dir)"
        ),
    ] = None,
    teacher_url: Annotated[
        str | None, typer.Option(help="the teacher's OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    ] = None,
    teacher_model: Annotated[str | None, typer.Option(help="the teacher's model name on that server")] = None,
    teacher_api_key: Annotated[
        str | None, typer.Option(envvar="REGRAPH_TEACHER_API_KEY", help="the teacher server's API key")
    ] = None,
    teacher_max_steps: Annotated[int, typer.Option(min=1, help="steps per teacher trajectory")] = (
        DEFAULT_MAX_STEPS
    ),
    teacher_concurrency: Annotated[int, typer.Option(min=1, help="teacher requests at once")] = 1,
    teacher_out: Annotated[
        Path | None,
        typer.Option(help="append the teacher's trajectories to this JSONL file (re-buildable without it)"),
    ] = None,
) -> None:
    """Build (or extend) the graph from trajectories; re-running adds only what is new."""
    if on_failure not in ("reject", "skip"):
        raise _fail("--on-failure is 'reject' or 'skip'")
    if not files and not teacher_tasks:
        raise _fail("give trajectory files, --teacher-tasks, or both")
    tasks = tasks_dir or default_tasks_dir()
    try:
        trajectories = read_trajectories(files or [])
    except SearchError as e:
        raise _fail(f"{e} (nothing was written)") from e
    try:
        # The judge role first: refused, it should not wait for the teacher's whole run (session 39).
        judge = role_judge()
    except SearchError as e:
        raise _fail(f"{e} (nothing was written)") from e
    teacher: TeacherTrajectorySource | None = None
    references: ReferenceSource = TaskDirectoryReferences(tasks)
    if teacher_tasks:
        role = _teacher_role(teacher_url, teacher_model, teacher_api_key)
        try:
            # Before the model is built: on a backend that cannot hold the answer's schema the teacher
            # would skip every task and the build would go on without it.
            require_structured_output(
                "teacher",
                role,
                otherwise=", or give --teacher-url and --teacher-model (an OpenAI-compatible server)",
            )
            teacher_model_obj: ChatModel = build_model(role)
            teacher = TeacherTrajectorySource(
                teacher_model_obj,
                load_teacher_tasks(teacher_tasks, tasks),
                model_name=role.model or role.backend,
                max_steps=teacher_max_steps,
                concurrency=teacher_concurrency,
                record_path=teacher_out,
                close_model=True,
            )
        except SearchError as e:
            raise _fail(f"{e} (nothing was written)") from e
        references = ReferencesInOrder(teacher.reference, references)
    client = ExecutorClient(executor_url) if executor_url else None
    try:
        with (
            _store() as store,
            Progress(
                TextColumn("[progress.description]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
            ) as progress,
        ):
            if teacher is not None:
                trajectories += _teacher_trajectories(teacher, progress)
            embedder = shared_embedder()
            # The one relabeler of every graph-building path: taxonomy and scorer from the settings,
            # the judge from the `judge` model role (REGRAPH_MODELS__JUDGE__*) when set.
            relabeler = build_relabeler(store, embedder, judge=judge)
            builder = GraphBuilder(
                store=store,
                embedder=embedder,
                relabeler=relabeler,
                seed_taxonomy=relabeler.policy.taxonomy,
                references=references,
                validator=ExecutorStepValidator(client, tasks) if client else None,
                on_failure="skip" if on_failure == "skip" else "reject",
                review_status=ReviewStatus.APPROVED if approve else ReviewStatus.PENDING,
                actor="cli",
            )
            bar = progress.add_task("ingesting trajectories", total=len(trajectories))
            summary = builder.build(
                trajectories,
                lambda done, _total, origin: progress.update(bar, completed=done, description=origin),
            )
    except (GraphDBError, SearchError, ExecutorError) as e:
        raise _fail(f"{e} (trajectories ingested before this one are kept; re-run to resume)") from e
    finally:
        if client is not None:
            client.close()
    Console().print(summary_table(summary))
    if teacher is not None:
        console.print(
            f"teacher: {len(teacher.tasks) - len(teacher.skipped)} of {len(teacher.tasks)} tasks answered"
            + (f", trajectories appended to {teacher_out}" if teacher_out else "")
        )
        for skip in teacher.skipped:
            console.print(f"  skipped {escape(skip.task_id)}: {escape(skip.reason)}")


@graph_app.command("export")
def export(out: Annotated[Path, typer.Argument(help="the JSON file to write")]) -> None:
    """Write the whole graph (techniques, transitions, examples, decisions, audit, keys) to one file."""
    try:
        with _store() as store:
            document = export_to_file(store, out)
    except (GraphDBError, OSError) as e:
        raise _fail(str(e)) from e
    console.print(
        f"exported {len(document.techniques)} techniques, {len(document.transitions)} transitions, "
        f"{len(document.examples)} examples to {out}"
    )


@graph_app.command("import")
def import_(source: Annotated[Path, typer.Argument(help="a file written by `regraph graph export`")]) -> None:
    """Load an export into an empty graph, all or nothing."""
    try:
        with _store() as store:
            document = import_from_file(store, source, actor="cli")
    except GraphDBError as e:
        raise _fail(str(e)) from e
    console.print(
        f"imported {len(document.techniques)} techniques, {len(document.transitions)} transitions, "
        f"{len(document.examples)} examples"
        + (f"; the file's {len(document.api_keys)} API key(s) were ignored" if document.api_keys else "")
    )


@graph_app.command("stats")
def stats() -> None:
    """Sizes of the graph and what waits for curators."""
    try:
        with _store() as store:
            counts = store.counts()
            pending = len(store.list_examples(status=ReviewStatus.PENDING, limit=100_000))
            flagged = store.count_queue()
    except GraphDBError as e:
        raise _fail(str(e)) from e
    table = Table("", "count", title="reasoning graph")
    for label, value in [
        ("techniques", counts["techniques"]),
        ("transitions", counts["transitions"]),
        ("examples", counts["examples"]),
        ("examples pending review", pending),
        ("relabel decisions waiting in the curator queue", flagged),
    ]:
        table.add_row(label, str(value))
    Console().print(table)


@keys_app.command("create-admin")
def create_admin(
    name: Annotated[str, typer.Argument(help="the key's name, recorded with every change")],
) -> None:
    """Create an admin API key and print its token (shown this once; only its hash is stored)."""
    try:
        with _store() as store:
            if any(k.name == name and k.revoked_at is None for k in store.list_api_keys()):
                raise _fail(f"a live API key is already called {name!r}")
            key, token = store.create_api_key(name, Role.ADMIN, actor="cli")
    except GraphDBError as e:
        raise _fail(str(e)) from e
    console.print(f"created admin key {key.name!r} (id {key.id}); its token is shown once:")
    print(token)
