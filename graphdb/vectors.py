"""Code embeddings as the store keeps them for retrieval: packed float32 bytes, compared in Python.

Every example carries its code embedding twice: `code_embedding` (a list of floats, what the vector
index and exports use) and `code_vector`, the same values as 384 little-endian float32 (1,536 bytes).
Reading a byte array is one value for the database, where reading the float list materializes 384
boxed numbers, so retrieval reads the bytes and ranks the candidates with one matrix product here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from graphdb.models import EMBEDDING_DIMENSIONS

VECTOR_DTYPE = np.dtype("<f4")
VECTOR_BYTES = EMBEDDING_DIMENSIONS * VECTOR_DTYPE.itemsize

MISSING_SIMILARITY = -1.0
"""The similarity of a candidate without an embedding: the lowest cosine, so it ranks last."""


def pack_vector(embedding: Sequence[float]) -> bytes:
    """An embedding as the `code_vector` property stores it."""
    return np.asarray(embedding, dtype=VECTOR_DTYPE).tobytes()


def _row(value: Any) -> np.ndarray[Any, np.dtype[np.float32]] | None:
    if isinstance(value, bytes | bytearray) and len(value) == VECTOR_BYTES:
        return np.frombuffer(value, dtype=VECTOR_DTYPE)
    if isinstance(value, list) and len(value) == EMBEDDING_DIMENSIONS:
        # An example written before `code_vector` existed: its float list.
        return np.asarray(value, dtype=VECTOR_DTYPE)
    return None


def unpack_vectors(vectors: Sequence[Any]) -> np.ndarray[Any, np.dtype[np.float32]]:
    """Packed bytes, float lists or None (missing) as one float32 matrix, a row each (zeros if missing)."""
    if vectors and all(isinstance(v, bytes) and len(v) == VECTOR_BYTES for v in vectors):
        return np.frombuffer(b"".join(vectors), dtype=VECTOR_DTYPE).reshape(len(vectors), -1)
    matrix = np.zeros((len(vectors), EMBEDDING_DIMENSIONS), dtype=np.float32)
    for i, value in enumerate(vectors):
        row = _row(value)
        if row is not None:
            matrix[i] = row
    return matrix


def cosines(query: Sequence[float], matrix: np.ndarray[Any, np.dtype[np.float32]]) -> list[float]:
    """The cosine of `query` with each row of `matrix` (see `unpack_vectors`); a zero row gets
    `MISSING_SIMILARITY`."""
    if len(matrix) == 0:
        return []
    q = np.asarray(query, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(q))
    dots = matrix @ q
    safe = np.where(norms > 0, norms, 1.0)
    sims = np.where(norms > 0, dots / safe, MISSING_SIMILARITY)
    clipped: list[float] = np.clip(sims, -1.0, 1.0).tolist()
    return clipped


def cosine_similarities(query: Sequence[float], vectors: Sequence[Any]) -> list[float]:
    """The cosine of `query` with each of `vectors` (packed bytes, float lists, or None for missing).

    A missing or zero vector gets `MISSING_SIMILARITY`.
    """
    return cosines(query, unpack_vectors(vectors))
