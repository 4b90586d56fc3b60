"""A `KnowledgeSource` over a plain Python graph.

Real code, not a test double: it backs unit tests, the overhead benchmark and demos that run without
Neo4j. Code similarity is the Jaccard index of identifier/number token sets, which needs no model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from search.protocols import INITIAL_TECHNIQUE, RetrievedExample, SuccessorOption

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|\d+")


def code_tokens(code: str) -> frozenset[str]:
    """The set of identifiers and integer literals in `code`."""
    return frozenset(_TOKEN.findall(code))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two token sets (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


class PathStep(Protocol):
    """One step of an optimization path as a trajectory records it."""

    @property
    def method(self) -> str: ...
    @property
    def code(self) -> str: ...
    @property
    def think(self) -> str: ...
    @property
    def detail(self) -> str: ...


@dataclass
class _Edge:
    target: str
    examples: list[RetrievedExample] = field(default_factory=list)
    tokens: list[frozenset[str]] = field(default_factory=list)


class InMemoryKnowledge:
    """A reasoning graph held in dictionaries: technique -> successor technique -> examples."""

    blocking = False  # answers from memory: the search calls it inline, no thread hop

    def __init__(
        self, examples: Iterable[RetrievedExample] = (), edges: Iterable[tuple[str, str]] = ()
    ) -> None:
        """Build the graph from transition examples and, optionally, bare edges without examples."""
        # Insertion-ordered dicts keep successor order deterministic.
        self._out: dict[str, dict[str, _Edge]] = {}
        self._all: list[tuple[RetrievedExample, frozenset[str]]] = []
        for source, target in edges:
            self._edge(source, target)
        for example in examples:
            self.add_example(example)

    def _edge(self, source: str, target: str) -> _Edge:
        targets = self._out.setdefault(source, {})
        self._out.setdefault(target, {})
        if target not in targets:
            targets[target] = _Edge(target)
        return targets[target]

    def add_example(self, example: RetrievedExample) -> None:
        """Add one transition example (creating its edge if needed)."""
        edge = self._edge(example.source_technique, example.target_technique)
        tokens = code_tokens(example.code_before)
        edge.examples.append(example)
        edge.tokens.append(tokens)
        self._all.append((example, tokens))

    def add_path(
        self, task_id: str, start_code: str, steps: Iterable[PathStep], id_prefix: str, *, first: int = 0
    ) -> None:
        """Add a trajectory's steps, walked from the initial node and `start_code` (the task's serial
        reference): each step is an example of previous method -> its method (method names as written,
        whitespace normalised, not relabeled). Step i's example is named ``{id_prefix}:{first + i}``."""
        source, before = INITIAL_TECHNIQUE, start_code
        for index, step in enumerate(steps):
            target = " ".join(step.method.split())
            self.add_example(
                RetrievedExample(
                    id=f"{id_prefix}:{first + index}",
                    task_id=task_id,
                    source_technique=source,
                    target_technique=target,
                    code_before=before,
                    code_after=step.code,
                    think=step.think,
                    detail=step.detail,
                )
            )
            source, before = target, step.code

    @property
    def techniques(self) -> list[str]:
        """Every technique node, in insertion order."""
        return list(self._out)

    def successors(self, technique: str, code: str, k: int) -> list[SuccessorOption]:
        """Successors of `technique` with their top-`k` examples ranked by similarity, then speedup."""
        query = code_tokens(code)
        options: list[SuccessorOption] = []
        for edge in self._out.get(technique, {}).values():
            options.append(self._option(edge, query, k))
        return options

    def _option(self, edge: _Edge, query: frozenset[str], k: int) -> SuccessorOption:
        ranked = sorted(
            ((jaccard(query, tokens), ex) for ex, tokens in zip(edge.examples, edge.tokens, strict=True)),
            key=lambda pair: (-pair[0], -(pair[1].speedup or 0.0), pair[1].id),
        )
        speedups = [ex.speedup for ex in edge.examples if ex.speedup is not None]
        n = len(edge.examples)
        return SuccessorOption(
            technique=edge.target,
            n_examples=n,
            success_rate=(sum(1 for s in speedups if s > 1.0) / n) if n else 0.0,
            mean_speedup=(sum(speedups) / len(speedups)) if speedups else None,
            examples=[ex.model_copy(update={"similarity": sim}) for sim, ex in ranked[: max(k, 0)]],
        )

    def similar_examples(self, code: str, k: int) -> list[RetrievedExample]:
        """The `k` examples across the whole graph whose `code_before` is most similar to `code`."""
        query = code_tokens(code)
        ranked = sorted(
            ((jaccard(query, tokens), ex) for ex, tokens in self._all),
            key=lambda pair: (-pair[0], -(pair[1].speedup or 0.0), pair[1].id),
        )
        return [ex.model_copy(update={"similarity": sim}) for sim, ex in ranked[: max(k, 0)]]
