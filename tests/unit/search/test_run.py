"""The optimization use-case (`search.run`) against the real executor on loopback (compile-only here)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.app import create_app as create_executor_app
from executor.client import ExecutorClient
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from search.backends.replay import ReplayModel, records_from_trajectories
from search.engine import SearchEvent
from search.inmemory import InMemoryKnowledge
from search.relabel.construction import read_trajectory_file
from search.run import (
    ImprovementSink,
    VerificationUnavailableError,
    prepare_task,
    run_optimization,
    search_config,
)
from tests.support.servers import serve_in_thread

ROOT = Path(__file__).resolve().parents[3]
TASK_ID = "mandelbrot_q28_i32"
TRAJECTORIES = ROOT / "bench" / "trajectories" / f"{TASK_ID}.jsonl"


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExecutorClient]:
    settings = ExecutorSettings(cache_dir=tmp_path_factory.mktemp("executor-cache"), runtime="none")
    with serve_in_thread(create_executor_app(settings)) as url, ExecutorClient(url) as client:
        yield client


def _model() -> ReplayModel:
    return ReplayModel(records_from_trajectories(TRAJECTORIES.read_text(encoding="utf-8").splitlines()))


def _no_offer() -> ImprovementSink:
    raise AssertionError("a run that verified nothing must not offer anything to the graph")


def test_a_run_on_an_executor_without_a_gpu_is_compile_only_and_says_so(executor: ExecutorClient) -> None:
    task, context = prepare_task(load_task(ROOT / "regraph_data" / "tasks" / TASK_ID), None)
    knowledge = InMemoryKnowledge()
    for number, item in enumerate(read_trajectory_file(TRAJECTORIES), start=1):
        knowledge.add_path(TASK_ID, context.initial_code, item.trajectory.steps, f"t{number}")
    modes: list[str] = []
    events: list[SearchEvent] = []
    outcome = asyncio.run(
        run_optimization(
            "regraph-mcgs",
            task,
            context,
            search_config("regraph-mcgs", {"evaluation_budget": 3, "rollouts": 2}),
            model=_model(),
            knowledge=knowledge,
            executor=executor,
            on_start=modes.append,
            on_event=events.append,
            improvements=_no_offer,
        )
    )
    assert modes == ["compile-only"] and outcome.verification == "compile-only"
    assert outcome.result.best_code is None and outcome.offered_examples == []
    counts = outcome.counts
    assert counts.total == len(outcome.result.candidates) > 0 and counts.passed == 0
    assert counts.not_verified + counts.failed + counts.no_code == counts.total
    assert counts.not_verified > 0  # the replayed steps compile
    assert (
        outcome.note.startswith("compile-only:") and "nothing is reported as an improvement" in outcome.note
    )
    assert events[0].kind == "started" and events[-1].kind == "finished"


def test_verified_results_are_refused_before_the_search_starts(executor: ExecutorClient) -> None:
    task, context = prepare_task(load_task(ROOT / "regraph_data" / "tasks" / TASK_ID), None)
    started: list[str] = []
    with pytest.raises(VerificationUnavailableError, match="no GPU runtime"):
        asyncio.run(
            run_optimization(
                "standard",
                task,
                context,
                search_config("standard", {"evaluation_budget": 1}),
                model=_model(),
                knowledge=InMemoryKnowledge(),
                executor=executor,
                verification="verified",
                on_start=started.append,
            )
        )
    assert started == []
