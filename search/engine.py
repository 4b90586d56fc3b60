"""Bookkeeping shared by every optimization method: candidates, budgets, seeds, events, the result.

`SearchSession` runs batches of model calls and evaluations with bounded concurrency, so that the
model can write the next candidate while the executor is still timing the previous one, and still
records candidates, spends budgets and emits events in one deterministic order (the order in which
the batch was submitted), whatever order the concurrent calls finish in.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field

from search.backends.base import ChatMessage
from search.policy import PolicyConfig, StepPolicy, StepProposal, TaskContext
from search.protocols import CandidateEvaluator, Evaluation, KnowledgeSource

logger = logging.getLogger(__name__)

Phase = Literal["expansion", "rollout", "attempt", "one-shot"]
EventKind = Literal["started", "candidate", "new_best", "iteration", "finished"]
StopReason = Literal["completed", "evaluation_budget", "token_budget", "exhausted"]


class SearchConfig(BaseModel):
    """Settings common to every method (MCGS adds its own in `search.mcgs.MCGSConfig`)."""

    seed: int = 0
    evaluation_budget: int = Field(default=200, ge=0, description="executor evaluations, hard limit")
    token_budget: int | None = Field(
        default=None, ge=0, description="model tokens (prompt+completion); no call starts once spent"
    )
    examples_per_step: int = Field(default=2, ge=0, description="retrieved examples shown per step")
    rag_examples: int = Field(default=3, ge=0, description="examples in the flat-RAG baseline prompt")
    attempts: int = Field(default=5, ge=1, description="regraph baseline: tries per step")
    max_path_length: int = Field(default=8, ge=1, description="most optimization steps on one path")
    generation_concurrency: int = Field(default=4, ge=1, description="model calls in flight at once")
    evaluation_concurrency: int = Field(default=1, ge=1, description="evaluations in flight at once")
    knowledge_in_thread: bool = Field(
        default=True, description="run (blocking) knowledge queries in a worker thread"
    )
    policy: PolicyConfig = Field(default_factory=PolicyConfig)


T = TypeVar("T")


def knowledge_blocks(knowledge: KnowledgeSource, config: SearchConfig) -> bool:
    """Whether `knowledge`'s queries go to a worker thread: only a source that blocks (a database) is worth
    a thread hop per query; one that answers from memory says so with ``blocking = False``."""
    return config.knowledge_in_thread and bool(getattr(knowledge, "blocking", True))


async def ask_knowledge(
    knowledge: KnowledgeSource, config: SearchConfig, query: Callable[..., T], *args: Any
) -> T:
    """`query(*args)` of `knowledge`: in a worker thread when `knowledge_blocks`, inline otherwise."""
    if knowledge_blocks(knowledge, config):
        return await asyncio.to_thread(query, *args)
    return query(*args)


class Candidate(BaseModel):
    """One piece of code the model proposed, with its place in the search and its verdict."""

    index: int
    parent_index: int | None = Field(
        description="the candidate this one was derived from; None: the initial code"
    )
    method: str
    phase: Phase
    path: list[str] = Field(description="techniques from the initial node to this candidate")
    technique: str | None
    code: str | None
    proposal_failure: str | None = None
    failure_kind: str | None = None
    evaluation: Evaluation | None = Field(default=None, description="None when there was no code to evaluate")
    reward: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str | None = None
    backend: str | None = None
    prompt_note: str | None = Field(default=None, description="what the prompt left out to fit the context")
    generation_s: float | None = Field(default=None, description="seconds the model spent on this candidate")
    evaluation_s: float | None = Field(default=None, description="seconds its evaluation took (wall)")

    @property
    def passed(self) -> bool:
        """Whether the candidate was evaluated and passed every test."""
        return self.evaluation is not None and self.evaluation.passed


class SearchEvent(BaseModel):
    """A progress event (the API streams these as server-sent events)."""

    kind: EventKind
    method: str
    task_id: str
    candidate: Candidate | None = None
    iteration: int | None = None
    best_index: int | None = None
    best_reward: float | None = None
    best_speedup: float | None = None
    evaluations_used: int
    tokens_used: int
    stop_reason: StopReason | None = None


class SearchResult(BaseModel):
    """Everything a run produced; only a candidate that passed can be the best."""

    method: str
    task_id: str
    best_code: str | None
    best_path: list[str] | None
    best_reward: float | None
    best_speedup: float | None
    best_index: int | None
    candidates: list[Candidate]
    evaluations_used: int
    tokens_used: int
    prompt_tokens: int
    completion_tokens: int
    iterations: int
    stop_reason: StopReason
    backends: list[str] = Field(
        description='"backend:model" of every model answer; replay shows as "replay:..."'
    )
    config: dict[str, Any]


ProgressCallback = Callable[[SearchEvent], Awaitable[None] | None]


@dataclass
class StepJob:
    """One model call to make (and evaluate), as submitted to `SearchSession.run_batch`."""

    messages: list[ChatMessage]
    phase: Phase
    path: list[str]
    technique: str | None
    parent_index: int | None


class SearchSession:
    """Runs jobs for one method on one task and keeps the books."""

    def __init__(
        self,
        method: str,
        task: TaskContext,
        policy: StepPolicy,
        evaluator: CandidateEvaluator,
        config: SearchConfig,
        on_event: ProgressCallback | None = None,
    ) -> None:
        """Start an empty session."""
        self.method = method
        self.task = task
        self.policy = policy
        self.evaluator = evaluator
        self.config = config
        self.on_event = on_event
        self.candidates: list[Candidate] = []
        self.evaluations_used = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.best: Candidate | None = None
        self.iterations = 0
        self._generation = asyncio.Semaphore(config.generation_concurrency)
        self._evaluation = asyncio.Semaphore(config.evaluation_concurrency)

    # ---- budgets --------------------------------------------------------------------------------

    @property
    def tokens_used(self) -> int:
        """Prompt plus completion tokens spent so far."""
        return self.prompt_tokens + self.completion_tokens

    def tokens_exhausted(self) -> bool:
        """Whether the token budget is spent."""
        budget = self.config.token_budget
        return budget is not None and self.tokens_used >= budget

    def evaluations_left(self) -> int:
        """Executor evaluations still allowed."""
        return self.config.evaluation_budget - self.evaluations_used

    def out_of_budget(self) -> StopReason | None:
        """Which budget is spent, if any."""
        if self.evaluations_left() <= 0:
            return "evaluation_budget"
        if self.tokens_exhausted():
            return "token_budget"
        return None

    # ---- events ---------------------------------------------------------------------------------

    async def emit(self, kind: EventKind, **fields: Any) -> None:
        """Send a progress event to the callback (sync or async), if there is one."""
        if self.on_event is None:
            return
        best = self.best
        event = SearchEvent(
            kind=kind,
            method=self.method,
            task_id=self.task.id,
            best_index=best.index if best else None,
            best_reward=best.reward if best else None,
            best_speedup=best.evaluation.speedup if best and best.evaluation else None,
            evaluations_used=self.evaluations_used,
            tokens_used=self.tokens_used,
            **fields,
        )
        outcome = self.on_event(event)
        if inspect.isawaitable(outcome):
            await outcome

    # ---- running jobs ---------------------------------------------------------------------------

    def _seed(self, index: int) -> int:
        # A distinct, reproducible sampling seed per candidate.
        return (self.config.seed * 1_000_003 + index) % 2**31

    async def run_batch(self, jobs: list[StepJob]) -> list[Candidate]:
        """Run `jobs` concurrently (bounded) and return their candidates in submission order.

        Evaluation admission is decided up front, in order, so that it does not depend on timing: at
        most as many jobs as evaluations are left are admitted. No model call starts once the token
        budget is spent (semaphore waiters are served in submission order, so the skipped jobs are
        always a suffix of the batch). Jobs not run are dropped; callers check `out_of_budget()`.
        """
        if self.tokens_exhausted():
            return []
        admitted = jobs[: max(self.evaluations_left(), 0)]
        first_index = len(self.candidates)
        tasks = [asyncio.ensure_future(self._run_one(job, first_index + i)) for i, job in enumerate(admitted)]
        results: list[Candidate] = []
        try:
            for task in tasks:
                candidate = await task
                if candidate is None:
                    continue
                await self._record(candidate)
                results.append(candidate)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return results

    async def _run_one(self, job: StepJob, index: int) -> Candidate | None:
        async with self._generation:
            # Checked again per call: with generation_concurrency=1 the token budget is exact (no call
            # starts once it is spent); with more, calls already in flight may finish past it.
            if self.tokens_exhausted():
                return None
            proposal: StepProposal = await self.policy.propose(job.messages, seed=self._seed(index))
        self.prompt_tokens += proposal.prompt_tokens
        self.completion_tokens += proposal.completion_tokens
        evaluation: Evaluation | None = None
        evaluation_s: float | None = None
        if proposal.code is not None:
            async with self._evaluation:
                began = time.perf_counter()
                evaluation = await self.evaluator.evaluate(proposal.code)
                evaluation_s = round(time.perf_counter() - began, 4)
            self.evaluations_used += 1
        return Candidate(
            index=index,
            parent_index=job.parent_index,
            method=self.method,
            phase=job.phase,
            path=job.path,
            technique=job.technique,
            code=proposal.code,
            proposal_failure=proposal.failure,
            failure_kind=proposal.failure_kind,
            evaluation=evaluation,
            reward=evaluation.reward if evaluation is not None else -1.0,
            prompt_tokens=proposal.prompt_tokens,
            completion_tokens=proposal.completion_tokens,
            model=proposal.model,
            backend=proposal.backend,
            prompt_note=proposal.prompt_note,
            generation_s=proposal.generation_s,
            evaluation_s=evaluation_s,
        )

    async def _record(self, candidate: Candidate) -> None:
        self.candidates.append(candidate)
        await self.emit("candidate", candidate=candidate)
        if candidate.passed and (self.best is None or candidate.reward > self.best.reward):
            self.best = candidate
            await self.emit("new_best", candidate=candidate)

    # ---- result ---------------------------------------------------------------------------------

    async def finish(self, stop_reason: StopReason) -> SearchResult:
        """Emit the final event and build the result."""
        await self.emit("finished", stop_reason=stop_reason)
        best = self.best
        backends = sorted(
            {
                f"{c.backend}:{c.model}"
                for c in self.candidates
                if c.backend is not None and c.model is not None
            }
        )
        return SearchResult(
            method=self.method,
            task_id=self.task.id,
            best_code=best.code if best else None,
            best_path=best.path if best else None,
            best_reward=best.reward if best else None,
            best_speedup=best.evaluation.speedup if best and best.evaluation else None,
            best_index=best.index if best else None,
            candidates=self.candidates,
            evaluations_used=self.evaluations_used,
            tokens_used=self.tokens_used,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            iterations=self.iterations,
            stop_reason=stop_reason,
            backends=backends,
            config=self.config.model_dump(mode="json"),
        )
