"""Cypher used by the graphdb package's infrastructure: named constants, values always as $parameters.

The reasoning-graph store keeps its own queries beside it (graphdb/store_queries.py).
"""

PING = "RETURN 1 AS ok"

SERVER_COMPONENTS = "CALL dbms.components() YIELD name, versions, edition RETURN name, versions, edition"

# The migration runner's own bookkeeping; created before any migration runs.
MIGRATION_CONSTRAINT = (
    "CREATE CONSTRAINT schema_migration_version IF NOT EXISTS "
    "FOR (m:SchemaMigration) REQUIRE m.version IS UNIQUE"
)

APPLIED_MIGRATIONS = """
MATCH (m:SchemaMigration)
RETURN m.version AS version, m.name AS name, m.checksum AS checksum, m.applied_at AS applied_at
ORDER BY m.version
"""

RECORD_MIGRATION = """
CREATE (m:SchemaMigration {
  version: $version, name: $name, checksum: $checksum, applied_at: datetime(), statements: $statements
})
"""

AWAIT_INDEXES = "CALL db.awaitIndexes($timeout_s)"

SHOW_INDEXES = """
SHOW INDEXES YIELD name, type, state, labelsOrTypes, properties, options
RETURN name, type, state, labelsOrTypes, properties, options
ORDER BY name
"""

SHOW_CONSTRAINTS = "SHOW CONSTRAINTS YIELD name, type, labelsOrTypes, properties RETURN name, type, labelsOrTypes, properties"

# The compact schema of graphdb/schema.py (labels' and relationship types' properties, and which
# labels each relationship type joins).
NODE_TYPE_PROPERTIES = (
    "CALL db.schema.nodeTypeProperties() YIELD nodeLabels, propertyName, propertyTypes "
    "RETURN nodeLabels, propertyName, propertyTypes"
)

REL_TYPE_PROPERTIES = (
    "CALL db.schema.relTypeProperties() YIELD relType, propertyName, propertyTypes "
    "RETURN relType, propertyName, propertyTypes"
)

SCHEMA_PATTERNS = "CALL db.schema.visualization() YIELD nodes, relationships RETURN nodes, relationships"
