"""Retrieval's logic: the successors of a technique with the examples closest to a code, and the
free-text technique search (full-text and vector rankings fused, as the search engine ranks them).

No FastAPI here. It asks the store for its `RetrievalStore` only; errors are `api.graph.errors`'.
"""

from __future__ import annotations

from api.examples.models import ScoredExamplePublic
from api.graph.errors import InvalidGraphRequestError, translated
from api.retrieve.models import RetrieveRequest, RetrieveResponse, SuccessorPublic
from api.techniques.models import TechniqueHit, TechniquePublic, TechniqueSearchResponse, TransitionPublic
from graphdb.store import RetrievalStore
from search.embeddings import Embedder
from search.retrieval import GraphKnowledge


class RetrievalService:
    """Ranked reads of the graph, over a `RetrievalStore` and the embedding model."""

    def __init__(self, store: RetrievalStore, embedder: Embedder) -> None:
        """Serve `store`, embedding code and search text with `embedder`."""
        self.store = store
        self.embedder = embedder

    def retrieve(self, request: RetrieveRequest) -> RetrieveResponse:
        """Successors of a technique with their statistics and top-k examples for the request's code."""
        with translated():
            vector = self.embedder.embed_code([request.code])[0]
            found = self.store.successors(request.technique, vector, request.k)
        return RetrieveResponse(
            technique=request.technique,
            successors=[
                SuccessorPublic(
                    technique=s.transition.target,
                    transition=TransitionPublic.of(s.transition),
                    examples=[ScoredExamplePublic.of(e) for e in s.examples],
                )
                for s in found
            ],
        )

    def search_techniques(self, query: str, k: int) -> TechniqueSearchResponse:
        """Techniques matching free text: full-text and vector rankings fused."""
        if not query.strip():
            raise InvalidGraphRequestError("the search text is empty")
        with translated():
            hits = GraphKnowledge(self.store, self.embedder).search_techniques(query, k)
        return TechniqueSearchResponse(
            query=query,
            hits=[TechniqueHit(technique=TechniquePublic.of(h.technique), score=h.score) for h in hits],
        )
