"""The relabel review queue and likely duplicates: the logic behind `api/routers/relabel.py`.

No FastAPI here. The queue lists relabel decisions that wait for a curator (undecided names, and
decisions flagged for a name/code disagreement or code that does not parse) with the evidence they
rested on; resolving one keeps it or moves the name into another technique. Likely duplicates rank
pairs of existing techniques by the relabeler's own scorer (a graph built before the scorer existed
may hold several nodes for one technique) and merge a pair in one call.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from api.graph.service import (
    GraphConflictError,
    GraphServiceError,
    GraphUnavailableError,
    InvalidGraphRequestError,
    UnknownResourceError,
)
from api.relabel.protocol import (
    DuplicateList,
    DuplicateMerge,
    DuplicatePair,
    KeptSeparateList,
    KeptSeparatePublic,
    PairReview,
    QueueItemPublic,
    QueueList,
    QueueResolution,
)
from graphdb.errors import (
    DecisionNotFoundError,
    GraphDBError,
    InvalidOperationError,
    StoreUnavailableError,
    TechniqueExistsError,
    TechniqueNotFoundError,
)
from graphdb.models import INITIAL_TECHNIQUE, Technique
from graphdb.store import GraphStore
from search.embeddings import EmbeddingError
from search.relabel import RelabelPolicy, technique_candidates
from search.relabel_scoring import FEATURES, CandidateIndex, StepText, TechniqueCandidate
from search.taxonomy import label_key

logger = logging.getLogger(__name__)

MAX_TECHNIQUES_COMPARED = 2000
"""Likely duplicates compare every pair: past this many techniques the request is refused."""

_SCORED_KEPT = 8  # scored technique sets kept (see RelabelService._scored_pairs)
_SCORED: OrderedDict[tuple[Any, ...], dict[tuple[str, str], tuple[float, frozenset[str]]]] = OrderedDict()
_SCORED_LOCK = threading.Lock()


@contextmanager
def _translated() -> Iterator[None]:
    """Store and embedding errors as the graph service's errors (which the routers translate)."""
    try:
        yield
    except (TechniqueNotFoundError, DecisionNotFoundError) as e:
        raise UnknownResourceError(str(e)) from e
    except (TechniqueExistsError, InvalidOperationError) as e:
        raise GraphConflictError(str(e)) from e
    except StoreUnavailableError as e:
        raise GraphUnavailableError(str(e)) from e
    except EmbeddingError as e:
        raise GraphUnavailableError(f"the embedding model failed: {e}") from e
    except GraphDBError as e:
        raise GraphServiceError(str(e)) from e


def scorer_rows(
    policy: RelabelPolicy, candidates: tuple[TechniqueCandidate, ...], steps: list[StepText]
) -> Iterator[tuple[int, list[TechniqueCandidate], np.ndarray[Any, np.dtype[np.float64]]]]:
    """For each technique i (its name and description as `steps[i]`): the others and the scorer's probabilities.

    The scorer's choice for step i is among all the other techniques, so each row is computed
    against an index of the others. Building n such indexes was the first look's cost (each
    tokenises every label again: ~3 s for 67 techniques); one index over all of them gives the
    same features (to float rounding, ~1e-7 in a probability): without code evidence, every feature of a pair but the rank gap reads only the
    step and that candidate, and the rank gap (the best blend among the others minus this one's)
    is recomputed here without the step itself. tests/integration/api/test_duplicate_scoring.py
    holds this to the per-step indexes on the seed graph's techniques.
    """
    if len(candidates) < 2:
        return
    index = CandidateIndex(list(candidates), policy.vectors)
    name_col, text_col, gap_col = (FEATURES.index(f) for f in ("name_sim", "text_sim", "rank_gap"))
    for i, step in enumerate(steps):
        features = index.features(
            step,
            None,
            policy.vectors.get(step.embedded_name()),
            policy.vectors.get(step.embedded_text()),
        )
        rows = np.delete(features, i, axis=0)
        blend = 0.5 * rows[:, name_col] + 0.5 * rows[:, text_col]
        rows[:, gap_col] = float(np.max(blend)) - blend
        yield i, [*candidates[:i], *candidates[i + 1 :]], policy.model.probabilities(rows)


class RelabelService:
    """The review queue and likely duplicates over a store and the relabeler's policy."""

    def __init__(self, store: GraphStore, policy: RelabelPolicy) -> None:
        """Serve `store`; score duplicates with `policy` (its embedding cache is kept across calls)."""
        self.store = store
        self.policy = policy

    # -- the queue -------------------------------------------------------------------------------------

    def list_queue(self, *, limit: int, offset: int) -> QueueList:
        """Decisions waiting for a curator, newest first, with their evidence."""
        with _translated():
            items = self.store.list_queue(limit=limit, offset=offset)
            total = self.store.count_queue()
        return QueueList(
            items=[QueueItemPublic.of(d) for d in items], total=total, limit=limit, offset=offset
        )

    def resolve(self, decision_id: str, *, into: str | None, actor: str) -> QueueResolution:
        """Keep a queued decision (`into=None`) or move its name into technique `into`."""
        if into == INITIAL_TECHNIQUE:
            raise InvalidGraphRequestError(f"nothing can be merged into {INITIAL_TECHNIQUE!r}")
        with _translated():
            decision = self.store.resolve_decision(decision_id, into=into, actor=actor)
        assert decision.resolved_at is not None and decision.resolution is not None
        technique = (
            decision.resolution.removeprefix("merged:")
            if decision.resolution != "accepted"
            else decision.technique
        )
        return QueueResolution(
            id=decision.id,
            candidate=decision.candidate,
            technique=technique,
            resolution=decision.resolution,
            resolved_by=decision.resolved_by or actor,
            resolved_at=decision.resolved_at,
        )

    # -- likely duplicates -------------------------------------------------------------------------------

    def _techniques(self) -> list[Technique]:
        out: list[Technique] = []
        while True:
            page = self.store.list_techniques(limit=500, offset=len(out))
            out.extend(page)
            if len(page) < 500 or len(out) > MAX_TECHNIQUES_COMPARED:
                return [t for t in out if t.name != INITIAL_TECHNIQUE]

    def _example_counts(self) -> Counter[str]:
        # Counted in the database: reading every transition was seconds on a 100k-example graph.
        return Counter({name: links.examples_in for name, links in self.store.technique_links().items()})

    def likely_duplicates(self, *, min_probability: float, limit: int) -> DuplicateList:
        """Pairs of techniques that probably name one technique, most probable first.

        A pair is certain (1.0) when both techniques are linked to one taxonomy technique or a label of
        one normalises like a label of the other; otherwise its probability is the scorer's, reading
        each technique's name and description as a step and the other as a candidate (the higher way).
        """
        with _translated():
            techniques = self._techniques()
            if len(techniques) > MAX_TECHNIQUES_COMPARED:
                raise InvalidGraphRequestError(
                    f"the graph has over {MAX_TECHNIQUES_COMPARED} techniques; compare them offline"
                )
            counts = self._example_counts()
            candidates = [c for c in technique_candidates(techniques, self.policy.taxonomy) if c.in_graph]
            scored = self._scored_pairs(tuple(candidates), min_probability)
            kept = {(k.first, k.second) for k in self.store.list_kept_separate()}
        taxonomy_names = set(self.policy.taxonomy.names) if self.policy.taxonomy is not None else set()
        pairs = []
        left_out = 0
        for (first, second), (probability, reasons) in scored.items():
            if probability < min_probability:
                continue
            if (first, second) in kept:
                left_out += 1
                continue
            # Keep the technique with more examples; on a tie the taxonomy's name, then the shorter name.
            rank_first = (counts[first], first in taxonomy_names, -len(first))
            rank_second = (counts[second], second in taxonomy_names, -len(second))
            keep, merge = (first, second) if rank_first >= rank_second else (second, first)
            pairs.append(
                DuplicatePair(
                    keep=keep,
                    merge=merge,
                    probability=round(probability, 4),
                    reasons=sorted(reasons),
                    keep_examples=counts[keep],
                    merge_examples=counts[merge],
                )
            )
        pairs.sort(key=lambda p: (-p.probability, p.keep, p.merge))
        return DuplicateList(items=pairs[:limit], techniques=len(techniques), kept_separate=left_out)

    def _scored_pairs(
        self, candidates: tuple[TechniqueCandidate, ...], min_probability: float
    ) -> dict[tuple[str, str], tuple[float, frozenset[str]]]:
        """Each pair (names in order) from `min_probability` with its probability and reasons.

        Memoised on the candidates themselves (names, descriptions, labels, taxonomy links) and the
        policy: the page is read far more often than the techniques change (scoring is ~0.1 s for the
        seed graph's 67 techniques, see `scorer_rows`). Any change to a technique changes the key, so
        nothing stale is served.
        """
        key = (self.policy, min_probability, candidates)
        with _SCORED_LOCK:
            if key in _SCORED:
                _SCORED.move_to_end(key)
                return _SCORED[key]
        scored: dict[tuple[str, str], tuple[float, frozenset[str]]] = {}

        def note(a: str, b: str, probability: float, reason: str) -> None:
            key = (a, b) if a < b else (b, a)
            previous, reasons = scored.get(key, (0.0, frozenset()))
            scored[key] = (max(previous, probability), reasons | {reason})

        keys = [{label_key(label) for label in c.labels if label_key(label)} for c in candidates]
        for i, a in enumerate(candidates):
            for j in range(i + 1, len(candidates)):
                b = candidates[j]
                if a.concept is not None and a.concept == b.concept:
                    note(a.name, b.name, 1.0, f"both are the taxonomy technique {a.concept!r}")
                elif keys[i] & keys[j]:
                    note(a.name, b.name, 1.0, "a name or alias of one is written like one of the other")
        steps = [StepText(c.name, c.description) for c in candidates]
        self.policy.vectors.ensure([s.embedded_name() for s in steps] + [s.embedded_text() for s in steps])
        for i, others, probabilities in scorer_rows(self.policy, candidates, steps):
            for candidate, p in zip(others, probabilities, strict=True):
                if p >= min_probability:
                    note(candidates[i].name, candidate.name, float(p), "the relabel scorer")
        with _SCORED_LOCK:
            _SCORED[key] = scored
            while len(_SCORED) > _SCORED_KEPT:
                _SCORED.popitem(last=False)
        return scored

    def merge(self, request: DuplicateMerge, *, actor: str) -> Technique:
        """Fold `merge` into `keep`: its names become aliases, its transitions and examples move."""
        if request.keep == request.merge:
            raise InvalidGraphRequestError("cannot merge a technique into itself")
        if INITIAL_TECHNIQUE in (request.keep, request.merge):
            raise InvalidGraphRequestError(f"{INITIAL_TECHNIQUE!r} is never merged")
        with _translated():
            return self.store.merge_techniques(request.merge, request.keep, actor=actor)

    def keep_separate(self, request: PairReview, *, actor: str) -> KeptSeparatePublic:
        """Record that the pair was reviewed and is kept apart: it leaves the likely duplicates."""
        self._check_pair(request)
        with _translated():
            return KeptSeparatePublic.of(self.store.keep_separate(request.first, request.second, actor=actor))

    def list_kept_separate(self) -> KeptSeparateList:
        """Every pair kept apart, the latest first."""
        with _translated():
            return KeptSeparateList(items=[KeptSeparatePublic.of(k) for k in self.store.list_kept_separate()])

    def undo_keep_separate(self, request: PairReview, *, actor: str) -> None:
        """Forget a keep-separate decision: the pair may be listed as a likely duplicate again."""
        self._check_pair(request)
        with _translated():
            self.store.undo_keep_separate(request.first, request.second, actor=actor)

    @staticmethod
    def _check_pair(request: PairReview) -> None:
        if request.first == request.second:
            raise InvalidGraphRequestError("a technique is never a duplicate of itself")
        if INITIAL_TECHNIQUE in (request.first, request.second):
            raise InvalidGraphRequestError(f"{INITIAL_TECHNIQUE!r} is never a duplicate")
