"""The ports the search engine depends on.

`KnowledgeSource` is implemented against Neo4j by the graph helpers and in memory by
`search.inmemory.InMemoryKnowledge`; `CandidateEvaluator` is implemented by the executor client.
The engine only ever sees these protocols.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from executor.protocol import Verdict

INITIAL_TECHNIQUE = "sequential code"
"""The node every path starts from: the serial program. The graph names it the same
(`graphdb.models.INITIAL_TECHNIQUE`; the search core does not import graphdb, and a layering test
checks that the two agree)."""


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

    def verdict(self) -> Verdict | None:
        """The executor's verdict, typed; None when `raw` is not one (an evaluator other than the executor's)."""
        if not self.raw:
            return None
        try:
            return Verdict.model_validate(self.raw)
        except ValidationError:
            return None


@runtime_checkable
class CandidateEvaluator(Protocol):
    """Compiles, tests and times a candidate for one fixed task.

    A candidate that fails is a normal `Evaluation` with ``passed=False``; an evaluator that cannot
    produce a verdict raises `search.errors.EvaluatorUnavailableError`.
    """

    async def evaluate(self, code: str) -> Evaluation:
        """Return the verdict for `code` (a complete translation unit or kernel source)."""
        ...
