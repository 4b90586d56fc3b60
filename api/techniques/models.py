"""Wire models of the techniques and the transitions between them (`/v1/techniques`, `/v1/transitions`).

The store's models (`graphdb.models`) stay internal; embeddings never go over the wire.
"""

from __future__ import annotations

from datetime import datetime
from typing import Self

from pydantic import BaseModel, Field, model_validator

from api.wire import TechniqueName, WireRequest
from graphdb.models import Technique, TechniqueLabel, Transition, TransitionStats


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


class TechniqueCreate(WireRequest):
    """A new technique; its embedding is computed from "name: description"."""

    name: TechniqueLabel
    description: str = Field("", max_length=4000)
    aliases: list[TechniqueLabel] = Field(default_factory=list, max_length=50)


class TechniqueUpdate(WireRequest):
    """Rename a technique (the old name stays as an alias), describe it, or both."""

    name: TechniqueLabel | None = Field(None, description="the new name")
    description: str | None = Field(None, max_length=4000, description="the new description")

    @model_validator(mode="after")
    def _something_to_change(self) -> Self:
        if self.name is None and self.description is None:
            raise ValueError("give a new name, a new description, or both")
        return self


class MergeRequest(WireRequest):
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
