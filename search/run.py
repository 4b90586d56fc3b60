"""The optimization use-case: one program, one task, one method, one typed outcome.

Every way of optimizing a program goes through `run_optimization`: the API's job service (which adds
queueing, persistence and event fan-out around it), ``regraph optimize`` in process, and the benchmark
runner. It takes the method and its settings (`search_config`), the generator model, a knowledge
source, the executor client and the verification asked for, streams the search's events to a callback,
and returns an `OptimizationOutcome`: the best verified code and its path, every candidate with its
verdict, the tallies and one honest sentence about what was verified. A verified improvement can be
offered back to the graph (`ImprovementSink`, implemented by `search.relabel.construction.GraphImprovements`).

Verification (see `search.evaluation`): ``auto`` verifies when the executor has a GPU runtime and runs
compile-only otherwise; ``verified`` refuses to run without one (`VerificationUnavailableError`);
``compile-only`` never runs a candidate. A compile-only outcome never reports an improvement.

No graph database and no executor internals here: the executor is reached through its client and its
wire protocol only, the graph through a `KnowledgeSource` and an `ImprovementSink`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, ValidationError

from executor.client import ExecutorClient
from executor.protocol import EvaluationOptions, FunctionTask, KernelTask
from search.backends.base import ChatModel
from search.baselines import config_class, optimize
from search.codeextract import is_serial_cpp
from search.engine import Candidate, ProgressCallback, SearchConfig, SearchResult
from search.errors import SearchConfigError, SearchError
from search.evaluation import NOT_VERIFIED, ExecutorEvaluator, VerificationMode, executor_can_verify
from search.policy import TaskContext
from search.protocols import CandidateEvaluator, KnowledgeSource

logger = logging.getLogger(__name__)

VerificationAsked = Literal["auto", "verified", "compile-only"]
"""What a caller asks for; `VerificationMode` is what a run then does."""


class VerificationUnavailableError(SearchError):
    """Verified results were asked for, but the executor has no GPU runtime to run candidates on."""


class TaskInputError(SearchError):
    """The task and the program given cannot make an optimization (e.g. no serial reference)."""


class CandidateCounts(BaseModel):
    """How the candidates of a run fared."""

    total: int = 0
    passed: int = Field(0, description="correct on every input set and timed")
    not_verified: int = Field(0, description="compiled, but not run (compile-only executor)")
    failed: int = Field(0, description="rejected, did not compile, crashed, wrong output...")
    no_code: int = Field(0, description="the model's answer had no usable code (no evaluation spent)")


class OptimizationOutcome(BaseModel):
    """What one optimization produced. Only a verified candidate can be the best one."""

    verification: VerificationMode
    note: str = Field(description="in words: what was verified and what the best result is")
    counts: CandidateCounts
    result: SearchResult = Field(description="every candidate with its path and verdict, the best code")
    offered_examples: list[str] = Field(
        default_factory=list, description="ids of pending graph examples made from the best path"
    )


class ImprovementSink(Protocol):
    """Where the steps of a verified improvement are offered (as pending examples, for curators)."""

    def offer(self, result: SearchResult, initial_code: str) -> list[str]:
        """Offer the best path's steps; the ids of the examples offered. Raises `SearchError`."""
        ...


def prepare_task(
    task: FunctionTask | KernelTask, source: str | None
) -> tuple[FunctionTask | KernelTask, TaskContext]:
    """The task to evaluate against and the search's context for optimizing `source` (default: the
    task's serial reference). A task without a reference takes a serial C++ `source` as its reference;
    raises `TaskInputError` when there is none to take."""
    if not task.reference_source.strip():
        if source is None or not is_serial_cpp(source):
            raise TaskInputError(
                "the task has no reference_source: send the serial C++ reference in the task, or a serial "
                "C++ program as 'source' (it then serves as the reference)"
            )
        task = task.model_copy(update={"reference_source": source})
    context = TaskContext.from_task_json(task.model_dump(mode="json"))
    if source is not None:
        context = context.model_copy(update={"initial_code": source})
    return task, context


def search_config(method: str, fields: dict[str, Any]) -> SearchConfig:
    """The search settings of `method` (its own class, `search.baselines.config_class`) from `fields`.

    A field the method's settings do not have (a typo, or an MCGS knob given to a baseline) is an
    error rather than silently ignored; raises `SearchConfigError`.
    """
    cls = config_class(method)
    unknown = sorted(set(fields) - set(cls.model_fields))
    if unknown:
        raise SearchConfigError(
            f"unknown search setting(s) for method {method}: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(cls.model_fields))})"
        )
    try:
        return cls.model_validate(fields)
    except ValidationError as e:
        raise SearchConfigError(f"invalid search settings: {e}") from e


def count_candidates(candidates: list[Candidate]) -> CandidateCounts:
    """Tally the candidates' outcomes."""
    counts = CandidateCounts(total=len(candidates))
    for c in candidates:
        if c.evaluation is None:
            counts.no_code += 1
        elif c.evaluation.passed:
            counts.passed += 1
        elif c.evaluation.error_kind == NOT_VERIFIED:
            counts.not_verified += 1
        else:
            counts.failed += 1
    return counts


def _why_it_stopped(result: SearchResult, verification: VerificationMode) -> str:
    """Why the search ended before its evaluation budget, in words ("" when it was the budget)."""
    budget = result.config.get("evaluation_budget")
    used = f"{result.evaluations_used} of {budget}" if budget is not None else str(result.evaluations_used)
    if result.stop_reason == "exhausted":
        why = (
            "in compile-only mode no candidate is run, so none passes and none can be built on"
            if verification == "compile-only"
            else "every path ended in a failed candidate, at the path-length limit or at a technique "
            "with no successor in the graph"
        )
        return f" The search stopped after {used} evaluations with nothing left to explore: {why}."
    if result.stop_reason == "token_budget":
        return f" The search stopped after {used} evaluations: its token budget was spent."
    return ""


def describe_result(result: SearchResult, verification: VerificationMode, counts: CandidateCounts) -> str:
    """The outcome in one honest sentence or two, and why the search stopped early when it did."""
    why = _why_it_stopped(result, verification)
    if verification == "compile-only":
        return (
            f"compile-only: the executor has no GPU, so no candidate was run. {counts.not_verified} of "
            f"{counts.total} candidates compiled and passed the static checks, {counts.failed} failed, "
            f"{counts.no_code} had no code. Correctness and speedup were not measured; nothing is "
            f"reported as an improvement.{why}"
        )
    if result.best_speedup is None:
        return (
            f"verified: none of the {counts.total} candidates passed every test "
            f"({counts.failed} failed).{why}"
        )
    return (
        f"verified: the best candidate (#{result.best_index}, path {' -> '.join(result.best_path or [])}) "
        f"passed every test with a {result.best_speedup:.3g}x speedup over the serial reference.{why}"
    )


def verified_path(result: SearchResult) -> list[Candidate]:
    """The candidates from the first step to the best one, following parents (empty without a best)."""
    if result.best_index is None:
        return []
    by_index = {c.index: c for c in result.candidates}
    chain: list[Candidate] = []
    index: int | None = result.best_index
    while index is not None:
        candidate = by_index[index]
        chain.append(candidate)
        index = candidate.parent_index
    return list(reversed(chain))


def choose_verification(executor: ExecutorClient, asked: VerificationAsked) -> VerificationMode:
    """What a run does for what was asked: verified where the executor can run candidates.

    Raises `VerificationUnavailableError` when ``verified`` was asked of an executor without a GPU
    runtime, `EvaluatorUnavailableError` when the executor cannot be asked.
    """
    if asked == "compile-only":
        return "compile-only"
    if executor_can_verify(executor):
        return "verified"
    if asked == "verified":
        raise VerificationUnavailableError("verified results were asked but the executor has no GPU runtime")
    return "compile-only"


async def run_optimization(
    method: str,
    task: FunctionTask | KernelTask,
    context: TaskContext,
    config: SearchConfig,
    *,
    model: ChatModel,
    knowledge: KnowledgeSource,
    executor: ExecutorClient,
    verification: VerificationAsked = "auto",
    on_event: ProgressCallback | None = None,
    on_start: Callable[[VerificationMode], Awaitable[None] | None] | None = None,
    evaluation_options: EvaluationOptions | None = None,
    evaluator: CandidateEvaluator | None = None,
    improvements: Callable[[], ImprovementSink] | None = None,
    caller: str | None = None,
) -> OptimizationOutcome:
    """Optimize `context.initial_code` for `task` with `method` and return the typed outcome.

    `on_start` is told the verification mode before the search starts, `on_event` receives the
    search's events in order. `evaluator` replaces the executor's (a benchmark's own judge); the
    executor is still asked whether it can verify. With `improvements` (a factory, called in a worker
    thread only for a verified run), the best path is offered to the sink it returns; a failed offer
    is logged and does not lose the outcome. `caller` (the job owner's key id) goes with every
    evaluation to the executor, whose compile slots are shared fairly between callers. Raises `SearchError`
    (`VerificationUnavailableError`, `EvaluatorUnavailableError`, `SearchConfigError`, ...).
    """
    mode = await asyncio.to_thread(choose_verification, executor, verification)
    if on_start is not None:
        started = on_start(mode)
        if started is not None:
            await started
    if evaluator is not None:
        result = await optimize(method, context, knowledge, model, evaluator, config, on_event)
    else:
        # The run's own judge: one connection pool to the executor for all its evaluations, closed
        # when the search ends (cancelled or failed included).
        async with ExecutorEvaluator(
            executor, task, mode=mode, options=evaluation_options, caller=caller
        ) as judge:
            result = await optimize(method, context, knowledge, model, judge, config, on_event)
    counts = count_candidates(result.candidates)
    offered: list[str] = []
    if mode == "verified" and improvements is not None:
        sink = await asyncio.to_thread(improvements)
        try:
            offered = await asyncio.to_thread(sink.offer, result, context.initial_code)
        except SearchError as e:
            # The search itself succeeded; a failed offer must not throw its result away.
            logger.warning("could not offer the improvement to the graph", extra={"error": str(e)})
    return OptimizationOutcome(
        verification=mode,
        note=describe_result(result, mode, counts),
        counts=counts,
        result=result,
        offered_examples=offered,
    )
