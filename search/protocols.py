"""The ports the search engine depends on, plus the hierarchical reward.

`KnowledgeSource` is implemented against Neo4j by the graph helpers and in memory by
`search.inmemory.InMemoryKnowledge`; `CandidateEvaluator` is implemented by the executor client.
The engine only ever sees these protocols.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

# The initial node is part of the graph's own model; re-exported here for the engine's callers.
from graphdb.models import INITIAL_TECHNIQUE as INITIAL_TECHNIQUE


class RetrievedExample(BaseModel):
    """One observed transition between two techniques, as retrieved for a prompt."""

    model_config = ConfigDict(frozen=True)

    id: str
    task_id: str
    source_technique: str
    target_technique: str
    code_before: str
    code_after: str
    think: str = ""
    detail: str = ""
    speedup: float | None = Field(default=None, description="speedup of code_after over code_before")
    similarity: float | None = Field(default=None, description="code similarity to the query, if ranked")


class SuccessorOption(BaseModel):
    """A technique reachable in one hop, with the statistics of the edge and its best examples."""

    model_config = ConfigDict(frozen=True)

    technique: str
    n_examples: int = Field(ge=0)
    success_rate: float = Field(ge=0.0, le=1.0, description="fraction of the edge's examples that sped up")
    mean_speedup: float | None = None
    examples: list[RetrievedExample] = Field(default_factory=list)


@runtime_checkable
class KnowledgeSource(Protocol):
    """Read access to the reasoning graph.

    A source may set a class attribute ``blocking = False`` when its queries answer from memory without
    I/O; the search then calls it inline instead of in a worker thread (absent means blocking).
    """

    def successors(self, technique: str, code: str, k: int) -> list[SuccessorOption]:
        """Techniques one hop from `technique`, each with its top-`k` examples ranked for `code`.

        The order of the returned list must be deterministic for the same graph and arguments.
        """
        ...

    def similar_examples(self, code: str, k: int) -> list[RetrievedExample]:
        """Flat RAG: the `k` examples whose `code_before` is most similar to `code`, ignoring the graph."""
        ...


class Evaluation(BaseModel):
    """The evaluator's verdict on one candidate, reduced to what the search needs."""

    passed: bool
    reward: float
    speedup: float | None = Field(default=None, description="speedup over the serial C++ reference")
    error_kind: str | None = None
    message: str = ""
    raw: dict[str, Any] = Field(default_factory=dict, description="the executor's full verdict JSON")


@runtime_checkable
class CandidateEvaluator(Protocol):
    """Compiles, tests and times a candidate for one fixed task.

    A candidate that fails is a normal `Evaluation` with ``passed=False``; an evaluator that cannot
    produce a verdict raises `search.errors.EvaluatorUnavailableError`.
    """

    async def evaluate(self, code: str) -> Evaluation:
        """Return the verdict for `code` (a complete translation unit or kernel source)."""
        ...


def hierarchical_reward(*, passed: bool, speedup: float | None) -> float:
    """The paper's hierarchical reward.

    -1 if the candidate does not compile or any test fails; ``speedup - 1`` if it passes but is slower
    than the serial reference (so a slow correct candidate still beats a broken one); ``speedup``
    otherwise. `speedup` is over the serial C++ reference.
    """
    if not passed:
        return -1.0
    if speedup is None:
        raise ValueError("a passing candidate needs a measured speedup")
    if speedup < 1.0:
        return speedup - 1.0
    return speedup
