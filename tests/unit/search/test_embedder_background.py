"""The embedding model loaded in a thread (issue 31: `regraph up` is ready without waiting for it):
the first use waits for the model and gets the same vectors; a failed load is raised at every use."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from search.embeddings import Embedder, EmbeddingError, shared_embedder

TEXT = "Shared memory tiling: stage tiles of A and B in __shared__ arrays and reuse them across the block"


def test_the_first_use_waits_for_a_background_load_and_gets_the_same_vectors() -> None:
    embedder = Embedder(background=True)
    vector = embedder.embed_one(TEXT)  # waits for the thread's model
    assert embedder.loaded
    assert np.allclose(vector, shared_embedder().embed_one(TEXT), atol=1e-6)
    assert len(embedder.length_batches([TEXT, "unroll"])) == 1


def test_a_failed_background_load_is_raised_at_each_use(tmp_path: Path) -> None:
    not_a_model = tmp_path / "empty"
    not_a_model.mkdir()
    embedder = Embedder(not_a_model, background=True)  # returns at once; the thread fails
    for _ in range(2):
        with pytest.raises(EmbeddingError, match="could not load the embedding model"):
            embedder.embed_one(TEXT)
    assert not embedder.loaded
    with pytest.raises(EmbeddingError, match="could not load the embedding model"):
        Embedder(not_a_model)  # loading in the caller's thread raises at once, as before
