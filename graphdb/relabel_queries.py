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
