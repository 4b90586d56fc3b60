"""Wire models of the examples on the transitions and their review (`/v1/examples`)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from api.wire import TechniqueName, WireRequest
from graphdb.models import Example, ReviewStatus, ScoredExample, StepVerdict


class ExamplePublic(BaseModel):
    """One observed step of a transition: the code before and after applying a technique."""

    id: str
    source: str
    target: str
    task_id: str
    think: str
    detail: str
    code_before: str
    code_after: str
    source_label: str
    target_label: str
    speedup: float | None
    speedup_over_serial: float | None
    verdict: StepVerdict | None
    device: str | None
    model: str
    review_status: ReviewStatus
    review_reason: str
    trajectory_id: str | None
    step_index: int | None
    created_at: datetime

    @classmethod
    def of(cls, example: Example) -> ExamplePublic:
        """The public view of a stored example (its code embedding left out)."""
        return cls.model_validate(example.model_dump(exclude={"code_embedding"}))


class ExampleList(BaseModel):
    """A page of examples."""

    items: list[ExamplePublic]
    limit: int
    offset: int


class ScoredExamplePublic(BaseModel):
    """An example with the cosine similarity of its `code_before` to the query code."""

    example: ExamplePublic
    similarity: float

    @classmethod
    def of(cls, scored: ScoredExample) -> ScoredExamplePublic:
        """The public view of a scored example."""
        return cls(example=ExamplePublic.of(scored.example), similarity=scored.similarity)


class ReviewRequest(WireRequest):
    """A curator's verdict on an example; rejected examples are never retrieved and leave the statistics."""

    decision: Literal["approve", "reject"]
    reason: str = Field("", max_length=2000)


class SplitRequest(WireRequest):
    """Move a mislabeled example to the transition source -> target (created when missing)."""

    source: str | None = Field(
        None, min_length=1, max_length=200, description="the technique the code was at; default: unchanged"
    )
    target: TechniqueName
