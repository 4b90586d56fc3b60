"""Fixtures of the relabel tests: the packaged embedder, taxonomy, one policy and one index of the full graph
per module."""

from __future__ import annotations

import pytest

from search.embeddings import Embedder, shared_embedder
from search.relabel.relabeler import RelabelPolicy
from search.relabel.scoring import CandidateIndex, load_model
from search.relabel.taxonomy import Taxonomy, default_taxonomy
from tests.unit.search.test_relabel_precision import _full_graph


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return shared_embedder()


@pytest.fixture(scope="module")
def taxonomy() -> Taxonomy:
    return default_taxonomy()


@pytest.fixture(scope="module")
def policy(embedder: Embedder, taxonomy: Taxonomy) -> RelabelPolicy:
    """One policy for the module: its cache embeds the taxonomy's labels once.

    Without the packaged examples (`search.relabel.examples`, session 32): they hold the development
    sets' names with their labels, so a test of a gate on a development set's name would be decided by
    that name's own label instead of by the gate. `test_relabel_session32` tests the examples."""
    return RelabelPolicy(embedder, taxonomy=taxonomy, model=load_model(), examples=[])


@pytest.fixture(scope="module")
def full_index(policy: RelabelPolicy, taxonomy: Taxonomy) -> CandidateIndex:
    """The candidates of a graph holding every taxonomy technique, built once for the module: the tests
    only read it (`CandidateIndex.add`, the one thing that changes an index, is a session's, not
    `RelabelPolicy.choose`'s)."""
    return policy.index(_full_graph(taxonomy))
