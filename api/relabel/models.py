"""Wire models of relabeling: the construction's decisions, the review queue and the likely duplicates."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from api.wire import TechniqueName
from graphdb.models import KeptSeparate, RelabelDecision, RelabelOutcome


class CandidateScore(BaseModel):
    """One technique the scorer considered for a queued name."""

    technique: str
    probability: float = Field(description="the fitted scorer's probability that the name is this technique")
    features: dict[str, float] = Field(
        description="name_sim, text_sim, lexical, unexplained, evidence_support, evidence_best, "
        "evidence_absent, mentions, rank_gap (docs/search.md)"
    )


class CodeEvidencePublic(BaseModel):
    """What the step's code change shows (signals of search.relabel.evidence.SIGNALS)."""

    introduced: list[str] = Field(
        description="signals the change introduces (e.g. shared_memory, warp_shuffle)"
    )
    removed: list[str] = Field(description="signals the change removes")
    present_after: list[str] = Field(description="signals present in the code after the step")
    parsed: bool = Field(description="whether the code after the step parsed as CUDA")
    reason: str = ""


class QueueItemPublic(BaseModel):
    """A relabel decision waiting for a curator, with the evidence it rested on."""

    id: str
    candidate: str = Field(description="the method name as the trajectory wrote it")
    detail: str = Field(description="the step's detail (what the teacher said it did)")
    outcome: RelabelOutcome = Field(
        description="flagged: undecided, kept separate; merged/new: decided but flagged"
    )
    technique: str = Field(description="the technique the name maps to now")
    decided_by: str
    flags: list[str] = Field(
        description="why it is queued besides being undecided (name/code disagreement...)"
    )
    candidates: list[CandidateScore] = Field(description="the best candidates, most probable first")
    code: CodeEvidencePublic | None = Field(None, description="the code evidence, when the step carried code")
    judge_answer: dict[str, Any] | None
    at: datetime

    @classmethod
    def of(cls, decision: RelabelDecision) -> QueueItemPublic:
        """The public view of a queued decision."""
        evidence = decision.evidence or {}
        code = evidence.get("code")
        return cls(
            id=decision.id,
            candidate=decision.candidate,
            detail=decision.candidate_description,
            outcome=decision.outcome,
            technique=decision.technique,
            decided_by=decision.decided_by,
            flags=list(decision.flags),
            candidates=[CandidateScore.model_validate(c) for c in evidence.get("candidates", [])],
            code=CodeEvidencePublic.model_validate(code) if code else None,
            judge_answer=decision.judge_answer,
            at=decision.at,
        )


class QueueList(BaseModel):
    """A page of the review queue, newest first."""

    items: list[QueueItemPublic]
    total: int = Field(description="how many decisions wait in all")
    limit: int
    offset: int


class QueueMerge(BaseModel):
    """Move a queued name into an existing technique."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    into: TechniqueName


class QueueResolution(BaseModel):
    """What resolving a queued decision did."""

    id: str
    candidate: str
    technique: str = Field(description="the technique the name maps to now")
    resolution: str = Field(description='"accepted" or "merged:<technique>"')
    resolved_by: str
    resolved_at: datetime


class DuplicatePair(BaseModel):
    """Two techniques that are probably one, with the evidence."""

    keep: str = Field(description="the technique to keep (more examples; the taxonomy's name on a tie)")
    merge: str = Field(description="the technique to fold into `keep`")
    probability: float = Field(
        description="1.0 when the taxonomy or the names say they are one technique; else the scorer's "
        "probability for a pair the relabel rule would merge"
    )
    reasons: list[str]
    keep_examples: int
    merge_examples: int


class DuplicateList(BaseModel):
    """Likely duplicate technique pairs, most probable first."""

    items: list[DuplicatePair]
    techniques: int = Field(description="techniques compared")
    kept_separate: int = Field(0, description="pairs left out because a curator kept them apart")
    taxonomy_apart: int = Field(
        0, description="scorer pairs left out because they are different taxonomy techniques"
    )
    held_back: int = Field(
        0,
        description="scorer pairs from min_probability that the relabel rule would not merge (the evidence "
        "does not separate them, or a transition links them directly)",
    )


class DuplicateMerge(BaseModel):
    """Fold `merge` into `keep` in one call (aliases kept, transitions and examples moved)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    keep: TechniqueName
    merge: TechniqueName


class PairReview(BaseModel):
    """Two techniques a curator reviewed as a likely duplicate pair: keep them apart, or undo that."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    first: TechniqueName
    second: TechniqueName


class KeptSeparatePublic(BaseModel):
    """A pair kept apart: the likely-duplicates listing leaves it out."""

    first: str = Field(description="the technique whose name sorts first")
    second: str
    kept_by: str
    kept_at: datetime

    @classmethod
    def of(cls, kept: KeptSeparate) -> KeptSeparatePublic:
        """The public view of a stored pair."""
        return cls(first=kept.first, second=kept.second, kept_by=kept.by, kept_at=kept.at)


class KeptSeparateList(BaseModel):
    """Every pair kept apart, the latest first."""

    items: list[KeptSeparatePublic]


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
