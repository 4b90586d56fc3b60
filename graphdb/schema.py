"""The graph's schema in a compact form: labels and their properties, relationship types, indexes.

Only what a reader's Cypher may reach (`graphdb.cypher_guard.READABLE_LABELS`) is described. For
readers who write Cypher against the graph (the MCP server hands it to coding agents, so it is
kept short enough for a model's context): one line per property, one line per index. Read in a READ
transaction with a server-side timeout.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from neo4j import READ_ACCESS, Driver, ManagedTransaction, unit_of_work
from neo4j.exceptions import Neo4jError, ServiceUnavailable
from pydantic import BaseModel, Field

from graphdb.cypher_guard import READABLE_LABELS

# SchemaReadError is re-exported: a reader of the schema catches it from here too.
from graphdb.errors import SchemaReadError as SchemaReadError
from graphdb.queries import NODE_TYPE_PROPERTIES, REL_TYPE_PROPERTIES, SCHEMA_PATTERNS, SHOW_INDEXES

# What the properties mean where records refer to each other by value (see graphdb/store_queries.py).
JOINS = (
    "Example.transition_key = TRANSITION.key; Example.source/target are the transition's technique names",
    "TRANSITION statistics count examples not rejected; review_status is pending, approved or rejected",
    "Technique 'sequential code' is where every optimization path starts",
    "embedding and code_embedding are 384-float vectors (db.index.vector.queryNodes); code_vector packs one",
)


class GraphSchema(BaseModel):
    """Labels with their properties ("name: type"), relationship types, the patterns that join them, indexes."""

    labels: dict[str, list[str]] = Field(description="label -> properties as 'name: type'")
    relationships: dict[str, list[str]] = Field(description="relationship type -> properties as 'name: type'")
    patterns: list[str] = Field(description="which labels each relationship type joins, e.g. (:A)-[:R]->(:B)")
    indexes: list[str] = Field(description="one line per index: name, kind and what it covers")
    joins: list[str] = Field(description="how records refer to each other where no relationship does")


def _property_line(row: dict[str, Any]) -> str:
    types = row.get("propertyTypes") or []
    return f"{row['propertyName']}: {'|'.join(types) or 'unknown'}"


def _index_line(row: dict[str, Any]) -> str:
    owners = ",".join(row.get("labelsOrTypes") or [])
    properties = ", ".join(row.get("properties") or [])
    return f"{row['name']}: {str(row['type']).lower()} on {owners}({properties})"


def read_schema(driver: Driver, database: str, *, timeout_s: float = 10.0) -> GraphSchema:
    """The schema of `database`; raises `SchemaReadError`."""

    @unit_of_work(timeout=timeout_s)
    def work(tx: ManagedTransaction) -> GraphSchema:
        labels: dict[str, list[str]] = defaultdict(list)
        for row in tx.run(NODE_TYPE_PROPERTIES).data():
            for label in row["nodeLabels"]:
                # Only what a reader's query may reach (the Cypher guard refuses the other labels).
                if label in READABLE_LABELS and row["propertyName"] is not None:
                    labels[label].append(_property_line(row))
        relationships: dict[str, list[str]] = defaultdict(list)
        for row in tx.run(REL_TYPE_PROPERTIES).data():
            rel_type = str(row["relType"]).removeprefix(":`").removesuffix("`")
            relationships.setdefault(rel_type, [])
            if row["propertyName"] is not None:
                relationships[rel_type].append(_property_line(row))
        patterns: set[str] = set()
        for record in tx.run(SCHEMA_PATTERNS):
            # The schema's nodes are virtual: their labels reach the driver but not Cypher's labels().
            for rel in record["relationships"]:
                ends = [sorted(n.labels) if n is not None else [] for n in (rel.start_node, rel.end_node)]
                if all(ends) and set(ends[0]) <= READABLE_LABELS and set(ends[1]) <= READABLE_LABELS:
                    patterns.add(f"(:{ends[0][0]})-[:{rel.type}]->(:{ends[1][0]})")
        readable = READABLE_LABELS | set(relationships)
        indexes = [
            _index_line(row)
            for row in tx.run(SHOW_INDEXES).data()
            if row["type"] != "LOOKUP" and set(row.get("labelsOrTypes") or []) <= readable
        ]
        return GraphSchema(
            labels={k: sorted(v) for k, v in sorted(labels.items())},
            relationships={k: sorted(v) for k, v in sorted(relationships.items())},
            patterns=sorted(patterns),
            indexes=indexes,
            joins=list(JOINS),
        )

    try:
        with driver.session(
            database=database, default_access_mode=READ_ACCESS, notifications_min_severity="OFF"
        ) as session:
            return session.execute_read(work)
    except (Neo4jError, ServiceUnavailable, OSError) as e:
        raise SchemaReadError(f"the graph schema could not be read: {e}") from e
