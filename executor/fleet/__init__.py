"""The executor as a fleet on a Ray cluster: one replica per GPU behind one router with the executor's
HTTP contract (see docs/executor.md, "The fleet"). Importing this package does not import Ray."""
