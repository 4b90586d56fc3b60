"""A process-local cache of what retrieval reads about a transition's candidates, correct under writes.

Every write that changes anything retrieval returns about a transition's candidates (which examples
they are, or a field of one of them: ingest, review, move, delete, rename, merge, split, import) gives
the transition a fresh random `candidates_rev` in the same transaction (see graphdb/store_queries.py;
migration V005 gives one to transitions written before). Entries are keyed by that revision, so an
entry is never used once its transition changed, in this process or any other: there is nothing to
invalidate, and a stale entry just ages out. A revision is random, so it cannot name different data in
another database either, which is why one cache can serve every store of the process. (A write that
bypasses the store, raw Cypher changing examples, must renew the revision of their transitions too.)

Per (revision, scan limit) an entry holds the candidates' ids, speedups and code vectors (one float32
matrix), plus the examples that retrieval has returned from them so far. The cache is a least recently
used list bounded by an estimate of its size in bytes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphdb.models import Example

DEFAULT_CACHE_BYTES = 128 * 1024 * 1024
"""The default size budget; the benchmark's 100,000-example graph fills about 80 MiB when warm."""

_ENTRY_OVERHEAD_BYTES = 512
_EXAMPLE_OVERHEAD_BYTES = 1024
_TECHNIQUES_REMEMBERED = 4096


def _example_bytes(example: Example) -> int:
    texts = (example.code_before, example.code_after, example.think, example.detail, example.review_reason)
    return _EXAMPLE_OVERHEAD_BYTES + sum(len(t) for t in texts)


@dataclass
class TransitionCandidates:
    """The retrieval candidates of one transition as one revision of it had them, ready to rank."""

    ids: list[str]
    speedups: list[float]
    matrix: np.ndarray[Any, np.dtype[np.float32]]
    """The candidates' code vectors, one row each (zeros for a candidate without one)."""
    examples: dict[str, Example] = field(default_factory=dict)
    """The candidates whose text has been read, by id (only ever added to, under the cache's lock)."""
    members: frozenset[str] = field(init=False)
    nbytes: int = field(init=False)
    key: tuple[str, int] | None = field(init=False, default=None)
    """Where the cache holds it, once it does."""

    def __post_init__(self) -> None:
        self.members = frozenset(self.ids)
        self.nbytes = _ENTRY_OVERHEAD_BYTES + int(self.matrix.nbytes) + sum(64 + len(i) for i in self.ids)


@dataclass(frozen=True)
class CacheStats:
    """How often retrieval found what it needed in the cache (since creation or `clear`)."""

    transitions_hit: int
    transitions_read: int
    examples_hit: int
    examples_read: int
    entries: int
    nbytes: int


class CandidateCache:
    """Transition candidates (and their examples' text) by revision, bounded by `max_bytes`.

    Thread-safe: the search and the API call retrieval from several threads. `max_bytes` = 0 keeps
    nothing (every call reads everything).
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, int], TransitionCandidates] = OrderedDict()
        self._nbytes = 0
        # Revisions of the transitions out of each technique at its last retrieval, so the next one
        # can tell the database which candidates it need not send again.
        self._seen: OrderedDict[tuple[str, int], list[str]] = OrderedDict()
        self._lock = threading.Lock()
        self._transitions_hit = self._transitions_read = self._examples_hit = self._examples_read = 0

    def held(self, technique: str, scan_limit: int) -> dict[str, TransitionCandidates]:
        """The cached entries of the transitions seen out of `technique` last time, by revision.

        The caller keeps these references for the rest of its call, so an eviction meanwhile does
        not take away what it told the database it had.
        """
        with self._lock:
            found = {}
            for rev in self._seen.get((technique, scan_limit), []):
                entry = self._entries.get((rev, scan_limit))
                if entry is not None:
                    self._entries.move_to_end((rev, scan_limit))
                    found[rev] = entry
            return found

    def remember(
        self,
        technique: str,
        scan_limit: int,
        revs: list[str],
        read: dict[str, TransitionCandidates],
    ) -> None:
        """Record the revisions now out of `technique` and cache the entries just `read` (by revision)."""
        with self._lock:
            if self.max_bytes <= 0:
                return
            self._seen[(technique, scan_limit)] = revs
            self._seen.move_to_end((technique, scan_limit))
            while len(self._seen) > _TECHNIQUES_REMEMBERED:
                self._seen.popitem(last=False)
            for rev, entry in read.items():
                old = self._entries.pop((rev, scan_limit), None)
                if old is not None:
                    self._nbytes -= old.nbytes
                entry.key = (rev, scan_limit)
                self._entries[entry.key] = entry
                self._nbytes += entry.nbytes
            self._evict()

    def add_examples(self, additions: Iterable[tuple[TransitionCandidates, list[Example]]]) -> None:
        """Keep the text of candidates: each entry with some of its examples (others are ignored)."""
        with self._lock:
            for entry, examples in additions:
                grown = 0
                for example in examples:
                    if example.id in entry.members and example.id not in entry.examples:
                        entry.examples[example.id] = example
                        grown += _example_bytes(example)
                entry.nbytes += grown
                if entry.key is not None and self._entries.get(entry.key) is entry:
                    self._nbytes += grown
            self._evict()

    def count_transitions(self, *, hit: int, read: int) -> None:
        """Count transitions whose candidates were found in the cache and those read from the database."""
        with self._lock:
            self._transitions_hit += hit
            self._transitions_read += read

    def count_examples(self, *, hit: int, read: int) -> None:
        """Count examples found in the cache and examples read from the database."""
        with self._lock:
            self._examples_hit += hit
            self._examples_read += read

    def stats(self) -> CacheStats:
        """A snapshot of the counters and the size."""
        with self._lock:
            return CacheStats(
                transitions_hit=self._transitions_hit,
                transitions_read=self._transitions_read,
                examples_hit=self._examples_hit,
                examples_read=self._examples_read,
                entries=len(self._entries),
                nbytes=self._nbytes,
            )

    def clear(self) -> None:
        """Forget everything, counters included."""
        with self._lock:
            self._entries.clear()
            self._seen.clear()
            self._nbytes = 0
            self._transitions_hit = self._transitions_read = self._examples_hit = self._examples_read = 0

    def _evict(self) -> None:
        while self._entries and self._nbytes > self.max_bytes:
            _, entry = self._entries.popitem(last=False)
            self._nbytes -= entry.nbytes
