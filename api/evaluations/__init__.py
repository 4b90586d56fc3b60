"""Evaluations: one candidate compiled, tested and timed by the executor."""
