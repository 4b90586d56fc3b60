"""Fixtures of the relabel tests: the packaged embedder, taxonomy and one policy per module."""

from __future__ import annotations

import pytest

from search.embeddings import Embedder, shared_embedder
from search.relabel.relabeler import RelabelPolicy
from search.relabel.scoring import load_model
from search.relabel.taxonomy import Taxonomy, default_taxonomy


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return shared_embedder()


@pytest.fixture(scope="module")
def taxonomy() -> Taxonomy:
    return default_taxonomy()


@pytest.fixture(scope="module")
def policy(embedder: Embedder, taxonomy: Taxonomy) -> RelabelPolicy:
    """One policy for the module: its cache embeds the taxonomy's labels once."""
    return RelabelPolicy(embedder, taxonomy=taxonomy, model=load_model())
