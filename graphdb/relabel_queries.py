"""Cypher of the relabel review queue (undecided and flagged relabel decisions) and its resolution."""

from __future__ import annotations

# Waiting for a curator: kept separate for lack of a decision (flagged), or decided with a flag (the
# name and the code disagree, the code does not parse...), and neither undone nor resolved yet.
LIST_QUEUE = """
MATCH (d:RelabelDecision)
WHERE d.undone_at IS NULL AND d.resolved_at IS NULL
  AND (d.outcome = 'flagged' OR size(coalesce(d.flags, [])) > 0)
RETURN d {.*} AS d
ORDER BY d.at DESC, d.id SKIP $offset LIMIT $limit
"""

COUNT_QUEUE = """
MATCH (d:RelabelDecision)
WHERE d.undone_at IS NULL AND d.resolved_at IS NULL
  AND (d.outcome = 'flagged' OR size(coalesce(d.flags, [])) > 0)
RETURN count(d) AS n
"""

MARK_DECISION_RESOLVED = """
MATCH (d:RelabelDecision {id: $id})
SET d.resolved_at = $at, d.resolved_by = $actor, d.resolution = $resolution
"""

# A queue merge undone (`undo_merge`): the decision waits for review again, as before it was resolved.
MARK_DECISION_UNRESOLVED = """
MATCH (d:RelabelDecision {id: $id})
REMOVE d.resolved_at, d.resolved_by, d.resolution
"""

# Likely duplicates a curator reviewed and kept apart: one KEPT_SEPARATE relationship per pair (its
# direction means nothing). A relationship follows its techniques through a rename and goes with a merged one.
KEEP_SEPARATE = """
MATCH (a:Technique {name: $first}), (b:Technique {name: $second})
MERGE (a)-[k:KEPT_SEPARATE]-(b)
ON CREATE SET k.by = $actor, k.at = $at
RETURN a.name AS first, b.name AS second, k.by AS by, k.at AS at
"""

LIST_KEPT_SEPARATE = """
MATCH (a:Technique)-[k:KEPT_SEPARATE]->(b:Technique)
WITH k, CASE WHEN a.name < b.name THEN [a.name, b.name] ELSE [b.name, a.name] END AS pair
RETURN pair[0] AS first, pair[1] AS second, k.by AS by, k.at AS at
ORDER BY at DESC, first, second
"""

# Import: the pairs of an export, between techniques imported in the same transaction (the store first
# refuses an export whose pairs name a technique it does not hold).
IMPORT_KEPT_SEPARATE = """
UNWIND $rows AS row
MATCH (a:Technique {name: row.first}), (b:Technique {name: row.second})
CREATE (a)-[:KEPT_SEPARATE {by: row.by, at: row.at}]->(b)
"""

UNDO_KEEP_SEPARATE = """
MATCH (a:Technique)-[k:KEPT_SEPARATE]-(b:Technique)
WHERE a.name = $first AND b.name = $second
DELETE k
RETURN count(k) AS n
"""
