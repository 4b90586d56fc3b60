"""`Neo4jGraphStore`: the `GraphStore` protocols over Neo4j, assembled from one part per aggregate.

Storage shape (all common queries are one hop and indexed):

- `(:Technique {name, description, aliases, embedding, created_at, created_by})`;
- `(:Technique)-[:TRANSITION {key, n_examples, n_verified, n_rejected, success_rate, mean_speedup,
  median_speedup}]->(:Technique)`, `key` = "source -> target", plus hidden properties that keep
  retrieval and ingestion bounded whatever a transition's size: `candidate_ids` (the examples retrieval
  ranks, see `successors`), `verified_speedups` (what the statistics are computed from) and
  `candidates_rev` (a revision under which a process may cache what it read of the candidates);
- `(:Example {id, transition_key, source, target, ...})` found through the range index on
  `transition_key`; examples are never linked by relationships, so moving one is a property update;
- `(:RelabelDecision)`, `(:AuditEntry)`, `(:ApiKey)`, `(:Trajectory)` records.

Every mutation runs in one managed write transaction together with its audit entry. Transition
statistics are maintained inside that transaction: added examples are folded in (bounded work), and
curation (review, move, delete, merge) recomputes them from the examples, so they never drift. Embeddings
are computed by callers (`search.embeddings`); the store only stores and compares them.

The parts (each a module of this package, a `Neo4j...` class): techniques, transitions and examples
(`examples`), retrieval, curation (relabel decisions, audit), API keys (`keys`), the whole graph
(`transfer`); `base` holds the transaction plumbing and the statistics bookkeeping they share, `records`
the row conversions. The parts follow the storage; the protocols of `graphdb.store.interface` follow
the consumers (a technique merge is written by the curation part, with its undo record, and read as a
`TechniqueStore` method).
"""

from __future__ import annotations

from graphdb.store.curation import Neo4jCuration
from graphdb.store.examples import Neo4jExamples
from graphdb.store.keys import Neo4jKeys
from graphdb.store.retrieval import Neo4jRetrieval
from graphdb.store.techniques import Neo4jTechniques
from graphdb.store.transfer import Neo4jTransfer


class Neo4jGraphStore(
    Neo4jTechniques, Neo4jExamples, Neo4jRetrieval, Neo4jCuration, Neo4jKeys, Neo4jTransfer
):
    """`GraphStore` over a Neo4j database (embedded or external); the driver is the caller's."""
