"""Wire models of the graph API (`/v1/retrieve`, `/v1/techniques`, `/v1/examples`, `/v1/cypher`, ...).

These are the public shapes; the store's models (`graphdb.models`) stay internal. Embeddings never
go over the wire (they are 384 floats each and only meaningful to the store), and API keys are
shown with their token exactly once, when created.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from graphdb.models import (
    ApiKey,
    AuditEntry,
    Example,
    RelabelDecision,
    RelabelOutcome,
    ReviewStatus,
    Role,
    ScoredExample,
    StepVerdict,
    Technique,
    TechniqueLabel,
    Transition,
    TransitionStats,
)

MAX_CODE_CHARS = 200_000
"""Longest source accepted for retrieval (a whole program; the body limit applies as well)."""

TechniqueName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
"""An existing technique's exact name (a lookup; names that enter the graph are `TechniqueLabel`s)."""


class _Request(BaseModel):
    # Unknown fields in a request are refused so that a typo does not silently do nothing.
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


# -- techniques ---------------------------------------------------------------------------------------


class TechniquePublic(BaseModel):
    """A technique as the API shows it (without its embedding)."""

    name: str
    description: str
    aliases: list[str]
    created_at: datetime
    created_by: str

    @classmethod
    def of(cls, technique: Technique) -> TechniquePublic:
        """The public view of a stored technique."""
        return cls(
            name=technique.name,
            description=technique.description,
            aliases=list(technique.aliases),
            created_at=technique.created_at,
            created_by=technique.created_by,
        )


class TechniqueList(BaseModel):
    """A page of techniques, by name."""

    items: list[TechniquePublic]
    limit: int
    offset: int


class TechniqueCreate(_Request):
    """A new technique; its embedding is computed from "name: description"."""

    name: TechniqueLabel
    description: str = Field("", max_length=4000)
    aliases: list[TechniqueLabel] = Field(default_factory=list, max_length=50)


class TechniqueUpdate(_Request):
    """Rename a technique (the old name stays as an alias), describe it, or both."""

    name: TechniqueLabel | None = Field(None, description="the new name")
    description: str | None = Field(None, max_length=4000, description="the new description")

    @model_validator(mode="after")
    def _something_to_change(self) -> Self:
        if self.name is None and self.description is None:
            raise ValueError("give a new name, a new description, or both")
        return self


class MergeRequest(_Request):
    """Fold technique `source` into `into`: its transitions and examples move, its names become aliases."""

    source: TechniqueName
    into: TechniqueName


class TechniqueHit(BaseModel):
    """A technique found by a search, with its fused rank score (higher is better)."""

    technique: TechniquePublic
    score: float


class TechniqueSearchResponse(BaseModel):
    """Hybrid (full-text + vector) technique search results, best first."""

    query: str
    hits: list[TechniqueHit]


# -- transitions and examples -------------------------------------------------------------------------


class TransitionPublic(BaseModel):
    """A directed edge source -> target with statistics over its examples."""

    key: str
    source: str
    target: str
    stats: TransitionStats

    @classmethod
    def of(cls, transition: Transition) -> TransitionPublic:
        """The public view of a stored transition."""
        return cls(
            key=transition.key, source=transition.source, target=transition.target, stats=transition.stats
        )


class TransitionList(BaseModel):
    """A page of transitions, by source then target."""

    items: list[TransitionPublic]
    limit: int
    offset: int


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


class ReviewRequest(_Request):
    """A curator's verdict on an example; rejected examples are never retrieved and leave the statistics."""

    decision: Literal["approve", "reject"]
    reason: str = Field("", max_length=2000)


class SplitRequest(_Request):
    """Move a mislabeled example to the transition source -> target (created when missing)."""

    source: str | None = Field(
        None, min_length=1, max_length=200, description="the technique the code was at; default: unchanged"
    )
    target: TechniqueName


# -- retrieval ----------------------------------------------------------------------------------------


class RetrieveRequest(_Request):
    """Which techniques can follow `technique` for this code, each with its most similar examples."""

    technique: str = Field(min_length=1, max_length=200, description="the technique the code is at now")
    code: str = Field(min_length=1, max_length=MAX_CODE_CHARS, description="the current source code")
    k: int = Field(3, ge=1, le=20, description="examples per successor")


class SuccessorPublic(BaseModel):
    """One successor technique: the transition's statistics and its top examples for the query code."""

    technique: str
    transition: TransitionPublic
    examples: list[ScoredExamplePublic]


class RetrieveResponse(BaseModel):
    """Successors of a technique, by name; examples rank by code similarity, then verified speedup."""

    technique: str
    successors: list[SuccessorPublic]


# -- relabel decisions, audit, keys -------------------------------------------------------------------


class DecisionPublic(BaseModel):
    """A relabeling decision of the graph construction (undoable by a curator)."""

    id: str
    candidate: str
    candidate_description: str
    matched: str | None
    score: float | None
    outcome: RelabelOutcome
    technique: str
    decided_by: str
    judge_answer: dict[str, Any] | None
    at: datetime
    undone_at: datetime | None
    undone_by: str | None
    resolution: str | None = Field(
        None, description='a curator\'s settlement of a queued decision: "accepted" or "merged:<technique>"'
    )
    resolved_by: str | None = None
    resolved_at: datetime | None = None

    @classmethod
    def of(cls, decision: RelabelDecision) -> DecisionPublic:
        """The public view of a decision (the candidate's embedding left out).

        `technique` is where the name is now: after a curator merged a queued name, the technique it
        was merged into (the decision recorded at construction time named the one before).
        """
        public = cls.model_validate(decision.model_dump(exclude={"candidate_embedding"}))
        if decision.resolution is not None and decision.resolution.startswith("merged:"):
            return public.model_copy(update={"technique": decision.resolution.removeprefix("merged:")})
        return public


class DecisionList(BaseModel):
    """A page of relabel decisions, newest first."""

    items: list[DecisionPublic]
    limit: int
    offset: int


class AuditEntryPublic(BaseModel):
    """Who changed what, and when."""

    id: str
    actor: str
    action: str
    target: str
    details: dict[str, Any]
    at: datetime

    @classmethod
    def of(cls, entry: AuditEntry) -> AuditEntryPublic:
        """The public view of an audit entry."""
        return cls.model_validate(entry.model_dump())


class AuditList(BaseModel):
    """A page of audit entries, newest first."""

    items: list[AuditEntryPublic]
    limit: int
    offset: int


class ApiKeyCreate(_Request):
    """A new API key. Its name is what the audit log records for every change made with it."""

    name: str = Field(min_length=1, max_length=100, pattern=r"^[\w.@-]+$")
    role: Role


class ApiKeyPublic(BaseModel):
    """An API key without its token (only the token's hash is stored)."""

    id: str
    name: str
    role: Role
    created_at: datetime
    created_by: str
    revoked_at: datetime | None

    @classmethod
    def of(cls, key: ApiKey) -> ApiKeyPublic:
        """The public view of a stored key (its hash left out)."""
        return cls.model_validate(key.model_dump(exclude={"key_hash"}))


class ApiKeyCreated(ApiKeyPublic):
    """A key just created: `token` is shown this once and cannot be recovered later."""

    token: str


# -- whole graph and Cypher ---------------------------------------------------------------------------


class ImportSummary(BaseModel):
    """What an import loaded. API keys are never imported: keys in the file are ignored and counted."""

    techniques: int
    transitions: int
    examples: int
    decisions: int
    audit: int
    trajectories: int
    api_keys_ignored: int = Field(
        description="API keys the file held (files written before exports left them out): not imported"
    )


class CypherRequest(_Request):
    """A read-only Cypher query with `$parameters`; writes and administration are refused."""

    query: str = Field(min_length=1, max_length=10_000)
    parameters: dict[str, Any] = Field(default_factory=dict)
    row_limit: int | None = Field(None, ge=1, description="at most the server's limit (the default)")
    timeout_s: float | None = Field(None, gt=0, description="at most the server's limit (the default)")


class CypherResponse(BaseModel):
    """The rows of a read query; `truncated` says that more rows were available past `row_limit`."""

    columns: list[str]
    rows: list[dict[str, Any]]
    truncated: bool
    row_limit: int
