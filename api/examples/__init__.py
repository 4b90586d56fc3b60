"""Examples: the concrete examples on the transitions, and their review."""
