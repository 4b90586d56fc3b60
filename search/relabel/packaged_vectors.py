"""The taxonomy's embeddings, computed once and shipped, so a process does not embed them again.

A relabeler scores every step against all the taxonomy's labels and descriptions (655 texts for the
67 techniques of taxonomy 2026-11-27.2). Embedding them costs about 2.6 CPU-seconds on this project's
2-core machine, paid by every process that builds a graph (`regraph graph build`, the seed graph, a
server's first relabel): for a build of a hundred steps that is more than the decisions themselves.
`search/relabel/data/taxonomy_vectors.v1.npz` holds those vectors keyed by their exact text; the
process-wide cache (`scoring.shared_text_vectors`) starts from it.

It is used only when the embedder is the model the file was written with: the file stores the vector of
a probe sentence, and the embedder must give the same vector (cosine >= `PROBE_MATCH`), one short
embedding per process. A text the taxonomy changed is simply not in the file and is embedded as before
(the vectors are keyed by text, never by technique). Rewrite the file after changing the taxonomy or
the embedding model: `python -m search.relabel.packaged_vectors`. Since session 32 the file also holds
the labelled examples' names (`search.relabel.examples`, 849 names), embedded by every relabeler with
the default taxonomy; rewrite it after changing them too.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from search.embeddings import Embedder

logger = logging.getLogger(__name__)

PACKAGED_VECTORS_PATH = Path(__file__).resolve().parent / "data" / "taxonomy_vectors.v1.npz"
PROBE = "Stage tiles of the input in shared memory and synchronize the block before reuse."
"""The sentence whose vector tells whether an embedder is the model the file was written with."""
PROBE_MATCH = 0.9999


def taxonomy_texts() -> list[str]:
    """The texts a relabeler with the default taxonomy embeds for its candidates: every label, and
    "name: description" per technique (`scoring.candidate_text`)."""
    from search.relabel.relabeler import technique_candidates
    from search.relabel.scoring import candidate_text
    from search.relabel.taxonomy import default_taxonomy

    candidates = technique_candidates([], default_taxonomy())
    texts = [label for c in candidates for label in c.labels] + [candidate_text(c) for c in candidates]
    return list(dict.fromkeys(texts))


def example_texts() -> list[str]:
    """(session 32) The texts a relabeler with the default taxonomy embeds for its labelled examples
    (`search.relabel.examples`): each example's name as the scorer embeds a name."""
    from search.relabel.examples import example_text, read_examples

    return list(dict.fromkeys(example_text(e.name) for e in read_examples()[1]))


def write_packaged_vectors(
    embedder: Embedder, texts: Sequence[str], path: Path = PACKAGED_VECTORS_PATH
) -> int:
    """Embed `texts` (and the probe) with `embedder` and write them to `path`; returns how many."""
    unique = list(dict.fromkeys(texts))
    vectors = np.asarray(embedder.embed([*unique, PROBE]), dtype=np.float32)
    np.savez_compressed(
        path, texts=np.asarray(unique, dtype=np.str_), vectors=vectors[:-1], probe=vectors[-1]
    )
    return len(unique)


def read_packaged_vectors(
    embedder: Embedder, path: Path = PACKAGED_VECTORS_PATH
) -> dict[str, np.ndarray[Any, np.dtype[np.float32]]]:
    """The packaged vectors by text, or nothing when the file is missing, unreadable or was written with
    another model than `embedder`'s."""
    try:
        with np.load(path, allow_pickle=False) as data:
            texts, vectors, probe = data["texts"], data["vectors"], data["probe"]
    except (OSError, KeyError, ValueError) as e:
        logger.info("no packaged taxonomy vectors", extra={"path": str(path), "error": str(e)})
        return {}
    if len(texts) != len(vectors) or vectors.ndim != 2 or probe.shape != (vectors.shape[1],):
        return {}
    mine = np.asarray(embedder.embed_one(PROBE), dtype=np.float32)
    if mine.shape != probe.shape or float(mine @ probe) < PROBE_MATCH:
        logger.info("packaged taxonomy vectors are for another embedding model", extra={"path": str(path)})
        return {}
    return {str(t): np.asarray(v, dtype=np.float32) for t, v in zip(texts, vectors, strict=True)}


def main(argv: list[str] | None = None) -> int:
    """Rewrite the packaged vectors with the default embedder and taxonomy."""
    parser = argparse.ArgumentParser(description="write the packaged taxonomy embeddings")
    parser.add_argument("--out", type=Path, default=PACKAGED_VECTORS_PATH)
    args = parser.parse_args(argv)
    from search.embeddings import shared_embedder

    n = write_packaged_vectors(shared_embedder(), taxonomy_texts() + example_texts(), args.out)
    print(f"{n} taxonomy and example texts written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
