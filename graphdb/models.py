"""The reasoning graph's domain models: what the store reads and writes, and what export files hold.

Timestamps are timezone-aware UTC datetimes chosen by Python (never by the server), so that an
export followed by an import reproduces every value exactly.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, field_validator

EMBEDDING_DIMENSIONS = 384
INITIAL_TECHNIQUE = "sequential code"
"""The graph's initial node: the serial C++ reference every optimization path starts from."""
EXPORT_FORMAT: Literal["regraph.graph/v1"] = "regraph.graph/v1"
TRANSITION_KEY_SEPARATOR = " -> "


def utc_now() -> datetime:
    """The current time in UTC, truncated to microseconds (what Python and the export keep)."""
    return datetime.now(UTC)


def transition_key(source: str, target: str) -> str:
    """The key of the transition between two techniques; examples carry it (indexed) to find their edge."""
    return f"{source}{TRANSITION_KEY_SEPARATOR}{target}"


def content_id(*parts: str) -> str:
    """A stable id from content: re-ingesting the same thing yields the same id."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\x00")
    return digest.hexdigest()[:32]


MAX_NAME_CHARS = 200
"""Longest technique name or alias."""

# Characters a name may not hold: controls (NUL, line breaks...), the bidirectional formatting
# characters that make text display in another order than it reads (right-to-left override...),
# line/paragraph separators and lone surrogates (which no encoder accepts).
_REFUSED_IN_NAMES = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff\ufeff]"
)


def check_name(value: str) -> str:
    """`value` if it is fit to name a technique (or be an alias); raises `ValueError` otherwise."""
    if not value.strip():
        raise ValueError("a name cannot be empty")
    if len(value) > MAX_NAME_CHARS:
        raise ValueError(f"a name is at most {MAX_NAME_CHARS} characters, got {len(value)}")
    bad = _REFUSED_IN_NAMES.search(value)
    if bad is not None:
        raise ValueError(
            f"a name cannot hold control or text-direction characters (found U+{ord(bad.group()):04X})"
        )
    return value


TechniqueLabel = Annotated[str, StringConstraints(strip_whitespace=True), AfterValidator(check_name)]
"""A technique name or alias as it may enter the graph: 1-200 characters, none of them a control or
text-direction character."""


def _check_embedding(value: list[float] | None) -> list[float] | None:
    if value is not None and len(value) != EMBEDDING_DIMENSIONS:
        raise ValueError(f"an embedding has {EMBEDDING_DIMENSIONS} dimensions, got {len(value)}")
    return value


class ReviewStatus(StrEnum):
    """A curator's view of an example: pending until reviewed; rejected examples are never retrieved."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class Role(StrEnum):
    """What an API key may do: read the graph, curate it, or also manage keys."""

    READER = "reader"
    CURATOR = "curator"
    ADMIN = "admin"


class RelabelOutcome(StrEnum):
    """What the relabeler did with a candidate technique name."""

    EXACT = "exact"  # the name (or an alias) already exists
    MERGED = "merged"  # close enough to an existing technique: the name became an alias
    NEW = "new"  # far from everything: a new technique
    FLAGGED = "flagged"  # ambiguous and no judge: kept separate, waiting for a curator


class Technique(BaseModel):
    """A node of the reasoning graph: one optimization technique (or the initial "sequential code")."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    aliases: list[str] = Field(default_factory=list, description="other names merged onto this one")
    embedding: list[float] | None = Field(default=None, description='embedding of "name: description"')
    created_at: datetime
    created_by: str = "system"

    _v_embedding = field_validator("embedding")(_check_embedding)


class TransitionStats(BaseModel):
    """Statistics of a transition's examples; rejected examples count only in `n_rejected`."""

    model_config = ConfigDict(frozen=True)

    n_examples: int = Field(0, ge=0, description="examples not rejected and not held for a curator")
    n_verified: int = Field(0, ge=0, description="of those, examples whose step was validated and passed")
    n_rejected: int = Field(0, ge=0)
    success_rate: float | None = Field(None, ge=0.0, le=1.0, description="verified examples that sped up")
    mean_speedup: float | None = None
    median_speedup: float | None = None


class Transition(BaseModel):
    """A directed edge source -> target: an observed application of `target` to code at `source`."""

    model_config = ConfigDict(frozen=True)

    key: str
    source: str
    target: str
    stats: TransitionStats


class StepVerdict(StrEnum):
    """Whether a step's code passed validation; absent when the step was not validated."""

    PASSED = "passed"
    FAILED = "failed"


class Example(BaseModel):
    """One observed step on a transition: the code before and after applying a technique."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(min_length=1)
    source: str = Field(description="technique the code_before is at")
    target: str = Field(description="technique applied to reach code_after")
    task_id: str
    think: str = ""
    detail: str = ""
    code_before: str
    code_after: str
    code_embedding: list[float] | None = Field(default=None, description="embedding of code_before")
    source_label: str = Field(
        "", description="the source method as the trajectory wrote it, before relabeling"
    )
    target_label: str = Field("", description="the method as the trajectory wrote it, before relabeling")
    speedup: float | None = Field(None, gt=0, description="over the previous step, when measured")
    speedup_over_serial: float | None = Field(None, gt=0)
    verdict: StepVerdict | None = None
    device: str | None = None
    model: str = Field("", description="the model (or person) that produced the step")
    review_status: ReviewStatus = ReviewStatus.PENDING
    review_reason: str = ""
    held: bool = Field(
        False,
        description="held for a curator (a speedup beyond what the graph has seen, issue 33): pending, and "
        "used by neither retrieval nor the transition's statistics until approved",
    )
    trajectory_id: str | None = None
    step_index: int | None = Field(None, ge=0)
    created_at: datetime

    _v_embedding = field_validator("code_embedding")(_check_embedding)

    @field_validator("held", mode="before")
    @classmethod
    def _not_held_when_unset(cls, value: object) -> object:
        return False if value is None else value  # examples written before the property existed

    @property
    def transition_key(self) -> str:
        """The key of the transition this example belongs to."""
        return transition_key(self.source, self.target)


class ExampleSummary(BaseModel):
    """What a list of examples shows of each: where it is, its task and measurement, no code."""

    model_config = ConfigDict(frozen=True)

    id: str
    source: str
    target: str
    task_id: str
    device: str | None = None
    speedup: float | None = None
    verdict: StepVerdict | None = None
    trajectory_id: str | None = None
    step_index: int | None = None


class RelabelDecision(BaseModel):
    """One relabeling decision, kept so that curators can audit and undo it."""

    model_config = ConfigDict(frozen=True)

    id: str
    candidate: str = Field(description="the method name as written in the trajectory")
    candidate_description: str = ""
    candidate_embedding: list[float] | None = None
    matched: str | None = Field(None, description="the nearest existing technique, if any")
    score: float | None = Field(None, description="cosine similarity to `matched`")
    outcome: RelabelOutcome
    technique: str = Field(description="the technique the candidate now maps to")
    decided_by: Literal["exact", "threshold", "judge", "curator", "alias", "taxonomy", "model"]
    judge_answer: dict[str, Any] | None = None
    at: datetime
    undone_at: datetime | None = None
    undone_by: str | None = None
    flags: list[str] = Field(
        default_factory=list,
        description="why a curator should look (name/code disagreement, unparsed code...)",
    )
    evidence: dict[str, Any] | None = Field(
        None, description="what the decision rested on: best candidates with features, the code evidence"
    )
    resolved_at: datetime | None = Field(None, description="when a curator settled a queued decision")
    resolved_by: str | None = None
    resolution: str | None = Field(None, description='"accepted" (kept as new) or "merged:<technique>"')

    _v_embedding = field_validator("candidate_embedding")(_check_embedding)


class KeptSeparate(BaseModel):
    """Two techniques a curator reviewed as a likely duplicate pair and kept apart."""

    model_config = ConfigDict(frozen=True)

    first: str = Field(description="the pair's technique whose name sorts first")
    second: str
    by: str
    at: datetime


class AuditEntry(BaseModel):
    """Who changed what and when."""

    model_config = ConfigDict(frozen=True)

    id: str
    actor: str
    action: str
    target: str = Field(description='what was acted on, e.g. "technique:Loop unrolling" or "example:<id>"')
    details: dict[str, Any] = Field(default_factory=dict)
    at: datetime


class ApiKey(BaseModel):
    """An API key as stored: only the sha256 of its token is kept."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    role: Role
    key_hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    created_at: datetime
    created_by: str
    revoked_at: datetime | None = None


class TechniqueLinks(BaseModel):
    """How one technique is linked: transitions out of it and into it, and the examples of those into it."""

    model_config = ConfigDict(frozen=True)

    out_n: int
    in_n: int
    examples_in: int


class ReviewQueueFilter(BaseModel):
    """What the review queue shows of the pending examples: each set field must match (None: any)."""

    model_config = ConfigDict(frozen=True)

    technique: str | None = Field(default=None, description="either end of the example's transition")
    transition: str | None = Field(default=None, description='"source -> target"')
    task: str | None = None
    device: str | None = None
    min_speedup: float | None = None

    def keeps(self, example: ExampleSummary) -> bool:
        """Whether `example` passes (the same test as the page query's, for lists already read)."""
        return (
            (self.technique is None or self.technique in (example.source, example.target))
            and (self.transition is None or self.transition == f"{example.source} -> {example.target}")
            and (self.task is None or example.task_id == self.task)
            and (self.device is None or example.device == self.device)
            and (
                self.min_speedup is None
                or (example.speedup is not None and example.speedup >= self.min_speedup)
            )
        )


class ReviewQueuePage(BaseModel):
    """Everything the review queue shows, read in one query together with the visitor's key."""

    model_config = ConfigDict(frozen=True)

    key: ApiKey = Field(description="the live key the page was read for")
    pending: list[ExampleSummary] = Field(description="pending examples, oldest first, up to the limit")
    example: Example | None = Field(description="the example shown in full (without its embedding)")
    transition: Transition | None = Field(description="the shown example's transition")
    technique_names: list[str] = Field(description="every technique's name, sorted (the split picker)")


class TrajectoryRecord(BaseModel):
    """A trajectory that has been ingested (whole: its steps were committed together)."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="content hash of the trajectory")
    task_id: str
    model: str
    source: str = Field("", description="where it came from, e.g. a file path")
    n_steps: int = Field(ge=0)
    n_examples_added: int = Field(ge=0)
    n_rejected: int = Field(0, ge=0)
    ingested_at: datetime


class AliasAddition(BaseModel):
    """An alias to append to an existing technique within a batch."""

    model_config = ConfigDict(frozen=True)

    technique: str
    alias: str


class IngestBatch(BaseModel):
    """Everything one trajectory adds, written in one transaction (all or nothing)."""

    trajectory: TrajectoryRecord | None = None
    new_techniques: list[Technique] = Field(default_factory=list)
    aliases: list[AliasAddition] = Field(default_factory=list)
    decisions: list[RelabelDecision] = Field(default_factory=list)
    examples: list[Example] = Field(default_factory=list)
    actor: str = "construction"


class IngestResult(BaseModel):
    """What a batch actually changed; duplicates of existing ids are skipped, not errors."""

    already_ingested: bool = False
    techniques_created: int = 0
    transitions_created: int = 0
    examples_created: int = 0
    examples_skipped: int = 0


class ScoredTechnique(BaseModel):
    """A technique found by a search, with the search's score (higher is closer)."""

    model_config = ConfigDict(frozen=True)

    technique: Technique
    score: float


class ScoredExample(BaseModel):
    """An example with its code similarity to a query."""

    model_config = ConfigDict(frozen=True)

    example: Example
    similarity: float


class SuccessorTransition(BaseModel):
    """One successor of a technique: the transition and its best examples for the query code."""

    model_config = ConfigDict(frozen=True)

    transition: Transition
    examples: list[ScoredExample]


class GraphExport(BaseModel):
    """The whole graph as one JSON document (import reproduces it exactly)."""

    format: Literal["regraph.graph/v1"] = EXPORT_FORMAT
    exported_at: datetime
    techniques: list[Technique]
    transitions: list[Transition]
    examples: list[Example]
    decisions: list[RelabelDecision]
    audit: list[AuditEntry]
    api_keys: list[dict[str, Any]] = Field(
        default_factory=list,
        description="always empty: API keys are the deployment's, not the graph's; an import ignores any "
        "(files written before keys were left out hold them) and says how many",
    )
    trajectories: list[TrajectoryRecord]
    # Absent from exports written before pairs were kept apart: those import with none.
    kept_separate: list[KeptSeparate] = Field(default_factory=list)
