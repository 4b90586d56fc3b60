"""The packaged taxonomy embeddings (`search.relabel.packaged_vectors`): complete, the embedder's own,
and refused when written with another model."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from search.embeddings import Embedder
from search.relabel.packaged_vectors import (
    PACKAGED_VECTORS_PATH,
    read_packaged_vectors,
    taxonomy_texts,
    write_packaged_vectors,
)
from search.relabel.scoring import shared_text_vectors


def test_packaged_vectors_cover_the_taxonomy(embedder: Embedder) -> None:
    packaged = read_packaged_vectors(embedder)
    missing = [t for t in taxonomy_texts() if t not in packaged]
    assert missing == [], (
        f"{len(missing)} taxonomy texts are not in {PACKAGED_VECTORS_PATH.name}: "
        "run `python -m search.relabel.packaged_vectors`"
    )


def test_packaged_vectors_are_the_embedders_own(embedder: Embedder) -> None:
    packaged = read_packaged_vectors(embedder)
    sample = taxonomy_texts()[::40]
    fresh = np.asarray(embedder.embed(sample), dtype=np.float32)
    stored = np.stack([packaged[t] for t in sample])
    assert float(np.max(np.abs(fresh - stored))) < 1e-5
    # the process-wide cache starts from them
    shared = shared_text_vectors(embedder)
    assert all(np.allclose(shared.get(t), packaged[t]) for t in sample)


def test_vectors_of_another_model_are_refused(embedder: Embedder, tmp_path: Path) -> None:
    path = tmp_path / "vectors.npz"
    write_packaged_vectors(embedder, ["Loop unrolling", "Kernel fusion"], path)
    assert set(read_packaged_vectors(embedder, path)) == {"Loop unrolling", "Kernel fusion"}
    with np.load(path) as data:
        texts, vectors, probe = data["texts"], data["vectors"], data["probe"]
    other = np.roll(probe, 1)  # what another model would give for the probe sentence
    np.savez_compressed(path, texts=texts, vectors=vectors, probe=other)
    assert read_packaged_vectors(embedder, path) == {}
    assert read_packaged_vectors(embedder, tmp_path / "absent.npz") == {}
