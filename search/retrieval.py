"""`GraphKnowledge`: the search engine's `KnowledgeSource` over the graph store.

Successors come from one indexed hop; each successor's examples are ranked by code similarity to the
current code (embedded once and cached), then by verified speedup. Free-text technique search mixes
full-text and vector results by reciprocal rank fusion.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict

from graphdb.errors import GraphDBError, TechniqueNotFoundError
from graphdb.models import Example, ScoredExample, ScoredTechnique, Technique
from graphdb.store import DEFAULT_SCAN_LIMIT, RetrievalStore
from search.embeddings import Embedder, technique_text
from search.errors import KnowledgeError
from search.protocols import RetrievedExample, SuccessorOption

logger = logging.getLogger(__name__)

RRF_K = 60
"""Reciprocal rank fusion constant (the usual 60: a rank-1 hit in one list beats rank 2 in both)."""


def retrieved(scored: ScoredExample) -> RetrievedExample:
    """A stored example as the search engine sees it."""
    e: Example = scored.example
    return RetrievedExample(
        id=e.id,
        task_id=e.task_id,
        source_technique=e.source,
        target_technique=e.target,
        code_before=e.code_before,
        code_after=e.code_after,
        think=e.think,
        detail=e.detail,
        speedup=e.speedup,
        similarity=scored.similarity,
    )


class GraphKnowledge:
    """Read access to the reasoning graph for the search engine (implements `KnowledgeSource`)."""

    def __init__(
        self,
        store: RetrievalStore,
        embedder: Embedder,
        *,
        scan_limit: int = DEFAULT_SCAN_LIMIT,
        nearest: int = 0,
        unverified_success_rate: float = 0.5,
        cache_size: int = 256,
    ) -> None:
        """`unverified_success_rate` stands in for an edge none of whose examples was validated.

        `scan_limit` and `nearest` are passed to `RetrievalStore.successors`: how many of a transition's
        retrieval candidates are ranked, and how many globally nearest examples (vector index, about
        10 ms more per step) may complement the candidates of large transitions.
        """
        self.store = store
        self.embedder = embedder
        self.scan_limit = scan_limit
        self.nearest = nearest
        self.unverified_success_rate = unverified_success_rate
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def _code_vector(self, code: str) -> list[float]:
        # The search asks about the same code for every child of a node: embed it once.
        key = hashlib.sha256(code.encode()).hexdigest()
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        vector = self.embedder.embed_code([code])[0]
        with self._lock:
            self._cache[key] = vector
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return vector

    def successors(self, technique: str, code: str, k: int) -> list[SuccessorOption]:
        """Techniques one hop from `technique` (by name), each with its top-`k` examples for `code`."""
        vector = self._code_vector(code)
        try:
            found = self.store.successors(
                technique, vector, k, scan_limit=self.scan_limit, nearest=self.nearest
            )
        except TechniqueNotFoundError as e:
            raise KnowledgeError(f"the graph has no technique {technique!r}") from e
        except GraphDBError as e:
            raise KnowledgeError(f"the graph could not answer: {e}") from e
        options = []
        for successor in found:
            stats = successor.transition.stats
            rate = stats.success_rate if stats.success_rate is not None else self.unverified_success_rate
            options.append(
                SuccessorOption(
                    technique=successor.transition.target,
                    n_examples=stats.n_examples,
                    success_rate=rate,
                    mean_speedup=stats.mean_speedup,
                    examples=[retrieved(s) for s in successor.examples],
                )
            )
        return options

    def similar_examples(self, code: str, k: int) -> list[RetrievedExample]:
        """Flat RAG over every example (not rejected), most similar `code_before` first."""
        try:
            found = self.store.similar_examples(self._code_vector(code), k)
        except GraphDBError as e:
            raise KnowledgeError(f"the graph could not answer: {e}") from e
        return [retrieved(s) for s in found]

    def search_techniques(self, query: str, k: int = 10) -> list[ScoredTechnique]:
        """Hybrid technique search: full-text and vector rankings fused (score = summed 1/(60+rank))."""
        try:
            text_hits = self.store.search_techniques_text(query, 2 * k)
            vector_hits = self.store.nearest_techniques(
                self.embedder.embed_one(technique_text(query, "")), 2 * k
            )
        except GraphDBError as e:
            raise KnowledgeError(f"the graph could not answer: {e}") from e
        fused: dict[str, float] = {}
        techniques: dict[str, Technique] = {}
        for hits in (text_hits, vector_hits):
            for rank, hit in enumerate(hits, start=1):
                fused[hit.technique.name] = fused.get(hit.technique.name, 0.0) + 1.0 / (RRF_K + rank)
                techniques.setdefault(hit.technique.name, hit.technique)
        ranked = sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k]
        return [ScoredTechnique(technique=techniques[name], score=score) for name, score in ranked]
