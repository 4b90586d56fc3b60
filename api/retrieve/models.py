"""Wire models of retrieval (`/v1/retrieve`): the successors of a technique with the examples closest to a code."""

from __future__ import annotations

from pydantic import BaseModel, Field

from api.examples.models import ScoredExamplePublic
from api.techniques.models import TransitionPublic
from api.wire import WireRequest

MAX_CODE_CHARS = 200_000
"""Longest source accepted for retrieval (a whole program; the body limit applies as well)."""


class RetrieveRequest(WireRequest):
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
