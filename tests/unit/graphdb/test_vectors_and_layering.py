"""Packed code vectors and their cosine ranking (graphdb's place in the imports: tests/unit/test_layering.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphdb.vectors import MISSING_SIMILARITY, VECTOR_BYTES, cosine_similarities, pack_vector

ROOT = Path(__file__).resolve().parents[3]


def vector(seed: int) -> list[float]:
    v = np.random.default_rng(seed).normal(size=384)
    return [float(x) for x in v / np.linalg.norm(v)]


def test_packed_vectors_rank_like_the_float_lists() -> None:
    query, others = vector(0), [vector(i) for i in range(1, 6)]
    expected = [float(np.dot(query, o)) for o in others]
    packed = [pack_vector(o) for o in others]
    assert all(len(p) == VECTOR_BYTES for p in packed)
    assert cosine_similarities(query, packed) == pytest.approx(expected, abs=1e-6)
    # Examples written before the packed copy existed offer their float lists; a missing one ranks last.
    mixed = [packed[0], others[1], None, packed[3], b"short"]
    sims = cosine_similarities(query, mixed)
    assert sims[:2] == pytest.approx(expected[:2], abs=1e-6) and sims[3] == pytest.approx(
        expected[3], abs=1e-6
    )
    assert sims[2] == sims[4] == MISSING_SIMILARITY
    assert cosine_similarities(query, [pack_vector(query)]) == pytest.approx([1.0], abs=1e-6)
    assert cosine_similarities(query, [pack_vector([0.0] * 384)]) == [MISSING_SIMILARITY]
    assert cosine_similarities(query, []) == []
