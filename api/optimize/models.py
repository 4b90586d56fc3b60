"""Wire models of the optimize endpoint and its jobs (``/v1/optimize``, ``/v1/jobs``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from executor.protocol import Task
from graphdb.jobs import JobRecord
from search.baselines import Method
from search.engine import SearchConfig
from search.run import CandidateCounts, OptimizationOutcome, search_config

JobStateName = Literal["queued", "running", "succeeded", "failed", "cancelled"]
Verification = Literal["verified", "compile-only"]

MAX_SOURCE_CHARS = 400_000
"""The executor's own limit on one candidate's source."""


class OptimizeCreate(BaseModel):
    """``POST /v1/optimize``: optimize one program for one task."""

    model_config = ConfigDict(extra="forbid")

    source: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_SOURCE_CHARS,
        description="the program to optimize (serial C++ or CUDA); default: the task's serial reference. "
        "When the task has no reference_source, a serial C++ `source` is also used as the reference.",
    )
    task: Task | None = Field(
        default=None, description="the task inline, in the executor's regraph.task/v1 format"
    )
    task_ref: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9_]+$",
        max_length=100,
        description="the id of a task directory under the service's tasks directory (REGRAPH_TASKS_DIR)",
    )
    method: Method = "regraph-mcgs"
    budget: int = Field(default=20, ge=1, le=1000, description="executor evaluations, hard limit")
    token_budget: int | None = Field(default=None, ge=1, description="model tokens, prompt plus completion")
    seed: int = Field(default=0, ge=0)
    rollouts: int | None = Field(default=None, ge=1, le=1000, description="regraph-mcgs: iterations")
    rollouts_in_flight: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="regraph-mcgs: iterations run at once, so the model writes candidates while the "
        "executor times others (default 4); 1 runs the sequential algorithm. Results do not depend on "
        "timing either way, only on the seed and this setting",
    )
    verification: Literal["auto", "verified", "compile-only"] = Field(
        default="auto",
        description="'verified': fail unless the executor can run and time candidates (GPU); "
        "'compile-only': only compile and statically check (nothing is verified, no speedup); "
        "'auto': verified when the executor has a GPU, else compile-only (the result says which)",
    )

    @model_validator(mode="after")
    def _one_task(self) -> OptimizeCreate:
        if (self.task is None) == (self.task_ref is None):
            raise ValueError("give exactly one of 'task' (inline regraph.task/v1) and 'task_ref' (a task id)")
        return self

    def search_config(self) -> SearchConfig:
        """The search settings this request asks for (MCGS's own knobs only for ``regraph-mcgs``)."""
        fields: dict[str, Any] = {
            "seed": self.seed,
            "evaluation_budget": self.budget,
            "token_budget": self.token_budget,
        }
        if self.method == "regraph-mcgs":
            if self.rollouts is not None:
                fields["rollouts"] = self.rollouts
            if self.rollouts_in_flight is not None:
                fields["rollouts_in_flight"] = self.rollouts_in_flight
        return search_config(self.method, fields)


class EvaluationPublic(BaseModel):
    """The verdict on one candidate: passed or not, its reward, and the executor's full verdict."""

    passed: bool
    reward: float
    speedup: float | None = Field(default=None, description="speedup over the serial C++ reference")
    error_kind: str | None = None
    message: str = ""
    raw: dict[str, Any] = Field(default_factory=dict, description="the executor's full verdict JSON")


class CandidatePublic(BaseModel):
    """One piece of code the model proposed, with its place in the search and its verdict."""

    index: int
    parent_index: int | None = Field(
        description="the candidate this one was derived from; None: the initial code"
    )
    method: str
    phase: str = Field(description="expansion, rollout, attempt or one-shot")
    path: list[str] = Field(description="techniques from the initial node to this candidate")
    technique: str | None
    code: str | None
    proposal_failure: str | None = None
    failure_kind: str | None = None
    evaluation: EvaluationPublic | None = Field(
        default=None, description="None when there was no code to evaluate"
    )
    reward: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str | None = None
    backend: str | None = None


class SearchPublic(BaseModel):
    """What the search produced: every candidate and the best verified one (its code and path)."""

    method: str
    task_id: str
    best_code: str | None
    best_path: list[str] | None
    best_reward: float | None
    best_speedup: float | None
    best_index: int | None
    candidates: list[CandidatePublic]
    evaluations_used: int
    tokens_used: int
    prompt_tokens: int
    completion_tokens: int
    iterations: int
    stop_reason: str = Field(description="completed, evaluation_budget, token_budget or exhausted")
    backends: list[str] = Field(
        description='"backend:model" of every model answer; replay shows as "replay:..."'
    )
    config: dict[str, Any] = Field(description="the search settings the run used")


class OptimizeResult(BaseModel):
    """What a finished job produced. Only a verified candidate can be the best one."""

    verification: Verification
    note: str = Field(description="in words: what was verified and what the best result is")
    counts: CandidateCounts
    search: SearchPublic = Field(description="every candidate with its path and verdict, the best code")
    offered_examples: list[str] = Field(
        default_factory=list, description="ids of pending graph examples made from the best path"
    )

    @classmethod
    def from_outcome(cls, outcome: OptimizationOutcome) -> OptimizeResult:
        """The wire form of an optimization's outcome."""
        return cls.model_validate(
            {
                **outcome.model_dump(mode="json", exclude={"result"}),
                "search": outcome.result.model_dump(mode="json"),
            }
        )


class JobPublic(BaseModel):
    """A job as the API shows it."""

    id: str
    state: JobStateName
    method: str
    task_id: str
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = Field(None, description="why the job failed or was cancelled")
    event_count: int = 0
    events_url: str
    request: dict[str, Any] = Field(description="the request as submitted")
    result: OptimizeResult | None = None

    @classmethod
    def of(cls, record: JobRecord) -> JobPublic:
        """The public view of a stored job."""
        return cls(
            id=record.id,
            state=record.state,
            method=record.method,
            task_id=record.task_id,
            created_at=record.created_at,
            started_at=record.started_at,
            finished_at=record.finished_at,
            error=record.error,
            event_count=record.event_count,
            events_url=f"/v1/jobs/{record.id}/events",
            request=record.request,
            result=OptimizeResult.model_validate(record.result) if record.result is not None else None,
        )


class JobAccepted(BaseModel):
    """``202 Accepted`` answer of ``POST /v1/optimize``."""

    id: str
    state: JobStateName
    job_url: str
    events_url: str


class JobList(BaseModel):
    """``GET /v1/jobs``."""

    jobs: list[JobPublic]


class JobEventPublic(BaseModel):
    """One progress event, as sent over server-sent events (``event: <kind>``, ``id: <seq>``).

    Kinds: ``state`` (the job's state changed: ``data.state``, ``data.error``), and the search's own
    events ``started``, ``candidate`` (the candidate with its verdict), ``new_best``, ``iteration``,
    ``finished``; each search event carries the best so far and the budgets spent. The stream ends
    with ``event: end`` whose data is the finished job.
    """

    seq: int
    kind: str
    at: datetime
    data: dict[str, Any]


class JobStatus(BaseModel):
    """An optimization job in brief: its state, its outcome once finished (the full result is a resource)."""

    id: str
    state: JobStateName
    method: str
    task_id: str
    error: str | None
    event_count: int
    finished: bool
    verification: Verification | None = None
    outcome: str | None = Field(None, description="the outcome in words, once finished")
    counts: CandidateCounts | None = None
    best_speedup: float | None = None
    best_path: list[str] | None = None
    best_code: str | None = None
    result_uri: str = Field(description="the resource with the full result (every candidate)")
    progress: list[str] = Field(
        default_factory=list, description="the progress followed during this call, one line per event"
    )
