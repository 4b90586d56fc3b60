"""The reasoning-graph store: one protocol per aggregate and `GraphStore`, their union (`interface`),
its Neo4j implementation (`Neo4jGraphStore`) and the routes' time-bounded one (`BoundedGraphStore`).

`Neo4jGraphStore` is assembled from one part per aggregate (see `graphdb.store.neo4j`); its errors are
in `graphdb.errors`; a store over a started and migrated database comes from `graphdb.connection.open_graph`.
"""

from graphdb.store.base import CANDIDATES_PER_TRANSITION, PROCESS_CANDIDATE_CACHE
from graphdb.store.bounded import BoundedGraphStore
from graphdb.store.interface import (
    AuditStore,
    ConstructionStore,
    CurationStore,
    ExampleStore,
    GraphStore,
    IngestStore,
    KeyStore,
    RelabelStore,
    RetrievalStore,
    TechniqueStore,
    TransferStore,
    TransitionReader,
)
from graphdb.store.keys import hash_token
from graphdb.store.neo4j import Neo4jGraphStore
from graphdb.store.retrieval import DEFAULT_SCAN_LIMIT

__all__ = [
    "CANDIDATES_PER_TRANSITION",
    "DEFAULT_SCAN_LIMIT",
    "PROCESS_CANDIDATE_CACHE",
    "AuditStore",
    "BoundedGraphStore",
    "ConstructionStore",
    "CurationStore",
    "ExampleStore",
    "GraphStore",
    "IngestStore",
    "KeyStore",
    "Neo4jGraphStore",
    "RelabelStore",
    "RetrievalStore",
    "TechniqueStore",
    "TransferStore",
    "TransitionReader",
    "hash_token",
]
