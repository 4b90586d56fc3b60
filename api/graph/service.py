"""The graph's services composed: `GraphServices`, the six feature services of the graph over one store.

Each operation lives in the service of its aggregate, in its feature folder, and asks the store only for
that aggregate's protocol (`graphdb.store.interface`): `api.techniques.service.TechniqueService`
(`TechniqueStore`), `api.examples.service.ExampleService` (`ExampleStore`),
`api.retrieve.service.RetrievalService` (`RetrievalStore`), `api.audit.service.AuditService`
(`AuditStore`), `api.keys.service.KeyService` (`KeyStore`) and `api.transfer.service.TransferService`
(`TransferStore`). `GraphServices.over` builds the six over one whole `GraphStore` and holds them side
by side, one attribute each: a face asks for the one its route, page or tool belongs to
(`api.deps.TechniqueServiceDep` and the others; `ReasoningGraphService.graph.techniques` for MCP).

No FastAPI here. Every operation calls the store (which records who and when for each write in the
same transaction) and raises the `GraphServiceError`s of `api.graph.errors`, which the faces translate.
"""

from __future__ import annotations

from dataclasses import dataclass

from api.audit.service import AuditService
from api.examples.service import ExampleService
from api.keys.service import KeyService
from api.retrieve.service import RetrievalService
from api.techniques.service import TechniqueService
from api.transfer.service import TransferService
from graphdb.store import GraphStore
from search.embeddings import Embedder

__all__ = ["GraphServices"]


@dataclass(frozen=True)
class GraphServices:
    """The graph's feature services over one store: each face takes the one of its feature."""

    techniques: TechniqueService
    examples: ExampleService
    retrieval: RetrievalService
    audit: AuditService
    keys: KeyService
    transfer: TransferService

    @classmethod
    def over(cls, store: GraphStore, embedder: Embedder) -> GraphServices:
        """The six services over `store`, those that embed code or technique texts with `embedder`."""
        return cls(
            techniques=TechniqueService(store, embedder),
            examples=ExampleService(store),
            retrieval=RetrievalService(store, embedder),
            audit=AuditService(store),
            keys=KeyService(store),
            transfer=TransferService(store),
        )
