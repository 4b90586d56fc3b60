"""Cypher: read-only queries over the graph, under the limits."""
