"""The search package's exception hierarchy: one root, one subclass per failure family.

Only infrastructure failures are exceptions. A candidate that does not compile, fails its tests or
loses the entry point is a normal outcome of a search step and is recorded, not raised.
"""

from __future__ import annotations


class SearchError(Exception):
    """Root of every exception raised by the `search` package."""


class SearchConfigError(SearchError):
    """A search or model configuration is invalid (unknown method, backend, missing setting)."""


class KnowledgeError(SearchError):
    """The knowledge source (reasoning graph) could not answer a query."""


class EvaluatorUnavailableError(SearchError):
    """The evaluator could not produce a verdict at all (executor down, protocol error).

    Evaluator implementations raise this (or a subclass) instead of returning a made-up failure so
    that a broken executor aborts the search rather than silently scoring every candidate -1.
    """


class CodeExtractionError(SearchError):
    """No source code could be found in a model answer."""
