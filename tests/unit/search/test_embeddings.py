"""The embedder's batching by length: each text keeps its own vector, whatever batch it falls in."""

from __future__ import annotations

import numpy as np

from search.embeddings import shared_embedder

TEXTS = [
    "Shared memory tiling: stage tiles of A and B in __shared__ arrays and reuse them across the block",
    "unroll",
    "use __shfl_down_sync for the warp-level sum, then one atomicAdd per warp into the global result",
    "coalesce",
    "Loop unrolling: #pragma unroll 4 on the inner product loop",
    "tiling",
]


def test_vectors_come_back_in_the_order_of_the_texts_across_length_batches() -> None:
    embedder = shared_embedder()
    saved = embedder.batch_size
    embedder.batch_size = 2  # several batches, each holding texts of other positions
    try:
        batched = np.asarray(embedder.embed(TEXTS))
        batches = embedder.length_batches(TEXTS)
    finally:
        embedder.batch_size = saved
    one_by_one = np.asarray([embedder.embed_one(t) for t in TEXTS])
    assert sorted(i for b in batches for i in b) == list(range(len(TEXTS)))
    assert len(batches) == 3
    # The shortest texts share the first batch: batches are formed by length, not by position.
    lengths = embedder.token_lengths(TEXTS)
    assert max(lengths[i] for i in batches[0]) <= min(lengths[i] for i in batches[-1])
    assert np.abs(batched - one_by_one).max() < 1e-5
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
