"""Retrieval: a technique's successors with the examples closest to the query code, and nearest examples."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from graphdb import store_queries as q
from graphdb.errors import TechniqueNotFoundError
from graphdb.models import EMBEDDING_DIMENSIONS, Example, ScoredExample, SuccessorTransition
from graphdb.retrieval_cache import TransitionCandidates
from graphdb.store.base import CANDIDATES_PER_TRANSITION, StoreBase
from graphdb.store.records import _retrieved, _retrieved_example, _similarity, _transition
from graphdb.vectors import cosines, unpack_vectors

DEFAULT_SCAN_LIMIT = 16
"""How many candidates of one transition retrieval compares with the query code by default.

Bounding this is what keeps the search's per-step call fast on a large graph: the most connected
technique has ~40 successors, each ranking this many candidates (see bench/probes/graph_bench.py); a
transition of at most this many examples is ranked exactly. At most `CANDIDATES_PER_TRANSITION`.
"""


class Neo4jRetrieval(StoreBase):
    """The retrieval part of `Neo4jGraphStore`."""

    def successors(
        self,
        technique: str,
        embedding: list[float],
        k: int,
        *,
        scan_limit: int = DEFAULT_SCAN_LIMIT,
        nearest: int = 0,
    ) -> list[SuccessorTransition]:
        """Transitions out of `technique` (by target name) with their top-`k` examples for the query code.

        Each transition keeps up to `CANDIDATES_PER_TRANSITION` retrieval candidates: all of its live
        examples when they fit, else its best verified speedups and its most recent examples. The first
        `scan_limit` of them rank by code similarity, then speedup, then id; so a transition of up to
        `scan_limit` examples is ranked exactly and a larger one at a bounded cost. With `nearest` > 0
        the global vector index also offers its `nearest` closest examples of the larger transitions
        (a near-duplicate outside the candidates is then found, for about 10 ms more per call).

        What was read of a transition's candidates (ids, speedups, packed code vectors, and the text of
        those returned) is kept in `candidate_cache` under the transition's revision, which every write
        that changes it renews (see `graphdb.retrieval_cache`). One read then brings the transitions with
        their statistics and revisions, the candidates of those not cached under their current revision,
        and the text of the examples that the cached candidates rank first; all candidates are ranked
        here at once (see `graphdb.vectors`), and a second read brings the text of the chosen examples
        still missing (all of them, when nothing was cached).
        """
        if k <= 0:
            rows, _ = self._successor_rows(technique, scan_limit=0, known=[], texts=[])
            return [
                SuccessorTransition(transition=_transition(r["r"], r["source"], r["target"]), examples=[])
                for r in rows
            ]
        cache = self.candidate_cache
        held = cache.held(technique, scan_limit)
        # Rank the cached candidates now, as if their transitions had not changed since: the text of the
        # examples they would return, where not cached yet, then comes with the same read.
        held_pools = _similarity_pools(list(held.values()), embedding)
        expected = [_top_ids(pool, k) for pool in held_pools]
        texts = {
            i for c, ids in zip(held.values(), expected, strict=True) for i in ids if i not in c.examples
        }
        rows, prefetched = self._successor_rows(
            technique, scan_limit=scan_limit, known=list(held), texts=sorted(texts)
        )
        candidates = self._candidates(technique, scan_limit, rows, held)
        # The same matrices in the same order give the same similarities: no need to compare again.
        unchanged = all(r["cached"] for r in rows) and [r["rev"] for r in rows] == list(held)
        pools = held_pools if unchanged else _similarity_pools(candidates, embedding)
        scanned = min(scan_limit, CANDIDATES_PER_TRANSITION)
        big = [i for i, r in enumerate(rows) if (r["r"].get("n_examples") or 0) > scanned]
        if big and nearest > 0:
            position = {rows[i]["r"]["key"]: i for i in big}
            for hit in self._rows(
                q.SIMILAR_EXAMPLES_IN_KEYS,
                lists={"keys": list(position)},
                embedding=embedding,
                candidates=nearest,
            ):
                pools[position[hit["key"]]].setdefault(
                    hit["id"], (_similarity(hit["score"]), float(hit["speedup"]))
                )
            unchanged = False
        chosen = expected if unchanged else [_top_ids(pool, k) for pool in pools]
        read = {e.id: e for e in map(_retrieved_example, prefetched)}
        found: dict[str, Example] = {}
        for c, ids in zip(candidates, chosen, strict=True):
            found.update((i, c.examples[i]) for i in ids if i in c.examples)
        hits = len(found)
        found.update((i, read[i]) for ids in chosen for i in ids if i in read)
        wanted = sorted({i for ids in chosen for i in ids} - found.keys())
        if wanted:
            more = self._rows_autocommit(q.EXAMPLES_BY_IDS, lists={"ids": wanted})[0]["examples"]
            read.update((e.id, e) for e in map(_retrieved_example, more))
            found.update((i, read[i]) for i in wanted if i in read)
        cache.count_examples(hit=hits, read=len(found) - hits)
        cache.add_examples(
            [(c, [read[i] for i in ids if i in read]) for c, ids in zip(candidates, chosen, strict=True)]
        )
        return [
            SuccessorTransition(
                transition=_transition(row["r"], row["source"], row["target"]),
                # An example deleted between the two reads is left out.
                examples=[ScoredExample(example=found[i], similarity=pool[i][0]) for i in ids if i in found],
            )
            for row, pool, ids in zip(rows, pools, chosen, strict=True)
        ]

    def preload_retrieval(
        self, *, scan_limit: int = DEFAULT_SCAN_LIMIT, k: int = 1, stop: threading.Event | None = None
    ) -> int:
        """Read every technique's successor candidates into `candidate_cache`; the number of techniques.

        What a service does at start so that its first retrieval per technique costs what a later one
        does (the candidates' vectors are the costly part of a first read): one `successors` call per
        technique with a neutral query, which also caches the text of each transition's first example.
        Safe to run beside other calls; a technique removed meanwhile is skipped. Setting `stop` ends
        it after the technique in hand (the caller is about to close the driver).
        """
        names: list[str] = []
        offset, page = 0, 1000
        while batch := self._rows(q.LIST_TECHNIQUES, limit=page, offset=offset):
            names.extend(row["t"]["name"] for row in batch)
            offset += page
        neutral = [1.0 / np.sqrt(EMBEDDING_DIMENSIONS)] * EMBEDDING_DIMENSIONS
        done = 0
        for name in names:
            if stop is not None and stop.is_set():
                break
            try:
                self.successors(name, neutral, k, scan_limit=scan_limit)
            except TechniqueNotFoundError:
                continue
            done += 1
        return done

    def _successor_rows(
        self, technique: str, *, scan_limit: int, known: list[str], texts: list[str]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The successors and examples of `store_queries.SUCCESSORS`; raises `TechniqueNotFoundError`."""
        row = self._rows_autocommit(
            q.SUCCESSORS, name=technique, scan_limit=scan_limit, lists={"known": known, "texts": texts}
        )[0]
        rows: list[dict[str, Any]] = row["successors"]
        if not rows and not self._rows(q.GET_TECHNIQUE, name=technique):
            raise TechniqueNotFoundError(f"no technique is called {technique!r}")
        return rows, row["examples"]

    def _candidates(
        self,
        technique: str,
        scan_limit: int,
        rows: list[dict[str, Any]],
        held: dict[str, TransitionCandidates],
    ) -> list[TransitionCandidates]:
        """Each row's candidates: from `held` when the database left them out, else as read (and cached)."""
        legacy_ids = [i for row in rows if not row["cached"] for i in row["legacy"]]
        legacy: dict[str, Any] = {}
        if legacy_ids:
            # Examples written before `code_vector` existed: their float lists, read separately.
            legacy = dict(
                self._rows_autocommit(q.CODE_EMBEDDINGS_BY_IDS, lists={"ids": legacy_ids})[0]["vectors"]
            )
        fresh = [row for row in rows if not row["cached"]]
        vectors: list[Any] = []
        for row in fresh:
            if row["legacy"]:
                packed, old = iter(row["vectors"]), set(row["legacy"])
                vectors.extend(legacy.get(i) if i in old else next(packed) for i in row["ids"])
            else:
                vectors.extend(row["vectors"])
        # One matrix for every vector read (unpacking is cheaper at once); each transition its own copy.
        matrix, start = unpack_vectors(vectors), 0
        read: list[TransitionCandidates] = []
        for row in fresh:
            end = start + len(row["ids"])
            read.append(
                TransitionCandidates(
                    ids=row["ids"],
                    speedups=[float(x) for x in row["speedups"]],
                    matrix=matrix[start:end].copy(),
                )
            )
            start = end
        self.candidate_cache.remember(
            technique,
            scan_limit,
            [row["rev"] for row in rows if row["rev"] is not None],
            {row["rev"]: c for row, c in zip(fresh, read, strict=True) if row["rev"] is not None},
        )
        built = iter(read)
        out = [held[row["rev"]] if row["cached"] else next(built) for row in rows]
        hits = sum(1 for row in rows if row["cached"])
        self.candidate_cache.count_transitions(hit=hits, read=len(rows) - hits)
        return out

    def similar_examples(self, embedding: list[float], k: int) -> list[ScoredExample]:
        """The `k` examples (not rejected) whose code before is closest to the query, over the whole graph."""
        if k <= 0:
            return []
        rows = self._rows(q.SIMILAR_EXAMPLES, embedding=embedding, k=k, candidates=max(4 * k, 50))
        return [_retrieved(dict(r["e"])) for r in rows]


def _similarity_pools(
    candidates: list[TransitionCandidates], embedding: list[float]
) -> list[dict[str, tuple[float, float]]]:
    """Per transition: candidate id -> (cosine with the query, speedup); all compared at once."""
    if not candidates:
        return []
    similarities = iter(cosines(embedding, np.concatenate([c.matrix for c in candidates])))
    return [{i: (next(similarities), s) for i, s in zip(c.ids, c.speedups, strict=True)} for c in candidates]


def _top_ids(pool: dict[str, tuple[float, float]], k: int) -> list[str]:
    """The `k` best of a pool: by similarity, then speedup, then id."""
    # Similarity to 6 digits (float32 precision), so that identical code ties and speedup decides.
    order = sorted(pool.items(), key=lambda item: (-round(item[1][0], 6), -item[1][1], item[0]))
    return [example_id for example_id, _ in order[:k]]
