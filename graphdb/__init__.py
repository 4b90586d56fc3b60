"""Everything Neo4j and nothing else: the embedded server, the driver, migrations and the graph store."""
