"""The reasoning-graph store: the `GraphStore` interface (`interface`) and its Neo4j implementation.

`Neo4jGraphStore` is assembled from one part per aggregate (see `graphdb.store.neo4j`); its errors are
in `graphdb.errors`; a store over a started and migrated database comes from `graphdb.connection.open_graph`.
"""

from graphdb.store.base import CANDIDATES_PER_TRANSITION, PROCESS_CANDIDATE_CACHE
from graphdb.store.interface import GraphStore
from graphdb.store.keys import hash_token
from graphdb.store.neo4j import Neo4jGraphStore
from graphdb.store.retrieval import DEFAULT_SCAN_LIMIT

__all__ = [
    "CANDIDATES_PER_TRANSITION",
    "DEFAULT_SCAN_LIMIT",
    "PROCESS_CANDIDATE_CACHE",
    "GraphStore",
    "Neo4jGraphStore",
    "hash_token",
]
