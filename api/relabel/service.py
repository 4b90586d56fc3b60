"""The relabel review queue and likely duplicates: the logic behind `api/relabel/http.py`.

No FastAPI here. The queue lists relabel decisions that wait for a curator (undecided names, and
decisions flagged for a name/code disagreement or code that does not parse) with the evidence they
rested on; resolving one keeps it or moves the name into another technique. Likely duplicates rank
pairs of existing techniques by the relabeler's own decision rule (a graph built before the scorer
existed may hold several nodes for one technique) and merge a pair in one call.

Precision first: a pair is proposed only when the relabeler itself would merge one technique into the
other and the other's nearest technique is the first (`pair_scores`): two techniques linked to different
taxonomy techniques are kept apart by the taxonomy, a scorer pair must pass the calibrated rule
(thresholds, margin and the separation gate of `search.relabel.scoring.separation`) one way and be the
best candidate the other way, and it is shown at the lower of the two directions' probabilities; the
graph's own evidence is read and shown: a transition
between the two (a trajectory applied one right after the other) says they are different steps, so
such a pair is held back unless its names say it is one technique.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from api.graph.errors import (
    GraphConflictError,
    GraphServiceError,
    GraphUnavailableError,
    InvalidGraphRequestError,
    UnknownResourceError,
)
from api.relabel.models import (
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
from graphdb.store import RelabelStore
from search.embeddings import EmbeddingError
from search.relabel.relabeler import (
    EXAMPLES_READ,
    PairScores,
    RelabelPolicy,
    characteristic_signals,
    code_disagrees,
    pair_scores,
    technique_candidates,
)
from search.relabel.scoring import TechniqueCandidate

logger = logging.getLogger(__name__)

MAX_TECHNIQUES_COMPARED = 2000
"""Likely duplicates compare every pair: past this many techniques the request is refused."""

_SCORED_KEPT = 8  # scored technique sets kept (see RelabelService._scored_pairs)
_SCORED: OrderedDict[tuple[Any, ...], PairScores] = OrderedDict()
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


class RelabelService:
    """The review queue and likely duplicates over a store and the relabeler's policy."""

    def __init__(self, store: RelabelStore, policy: RelabelPolicy) -> None:
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
        each technique's name and description as a step and the other as a candidate, the lower of the
        two ways: the relabel rule would merge one into the other, and the other's nearest technique is
        the first (`pair_scores`, `pair_rule="mutual"`).
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
            listed = sorted(
                ((pair, value) for pair, value in scored.pairs.items() if value[0] >= min_probability),
                key=lambda item: (-item[1][0], item[0]),
            )
            window = [pair for pair, _ in listed[: limit + len(kept) + 20]]
            between = self._transitions_between(window)
            signals = self._signals(
                {name for pair, value in listed[: len(window)] if value[0] < 1.0 for name in pair}
            )
        taxonomy_names = set(self.policy.taxonomy.names) if self.policy.taxonomy is not None else set()
        pairs = []
        left_out = 0
        held_back = scored.held_back
        for (first, second), (probability, reasons) in listed:
            if (first, second) in kept:
                left_out += 1
                continue
            steps_between = between.get((first, second), 0)
            if steps_between:
                # The graph's own evidence: a trajectory applied one right after the other, so a teacher
                # saw two steps. Only names that say one technique outweigh that.
                if probability < 1.0:
                    held_back += 1
                    continue
                reasons = reasons | {
                    f"{steps_between} transition(s) link them directly (a trajectory applied one after "
                    "the other): check that they are one technique"
                }
            if probability < 1.0 and code_disagrees(
                signals.get(first, frozenset()), signals.get(second, frozenset())
            ):
                # The graph's own evidence again: their examples' code shows different changes.
                held_back += 1
                continue
            shared = signals.get(first, frozenset()) & signals.get(second, frozenset())
            if shared:
                reasons = reasons | {f"the examples of both show {', '.join(sorted(shared))} in their code"}
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
        return DuplicateList(
            items=pairs[:limit],
            techniques=len(techniques),
            kept_separate=left_out,
            taxonomy_apart=scored.taxonomy_apart,
            held_back=held_back,
        )

    def _signals(self, names: set[str]) -> dict[str, frozenset[str]]:
        """`characteristic_signals` of each technique's examples (up to `EXAMPLES_READ` of them)."""
        out: dict[str, frozenset[str]] = {}
        for name in sorted(names):
            changes: list[tuple[str, str]] = []
            for transition in self.store.transitions_of(name):
                if transition.target != name or len(changes) >= EXAMPLES_READ:
                    continue
                examples = self.store.list_examples(
                    source=transition.source, target=name, limit=EXAMPLES_READ - len(changes)
                )
                changes.extend((e.code_before, e.code_after) for e in examples)
            out[name] = characteristic_signals(changes)
        return out

    def _transitions_between(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """For each pair (names in order): how many transitions go directly from one to the other."""
        out: dict[tuple[str, str], int] = {}
        seen: dict[str, set[str]] = {}
        for first, second in pairs:
            if first not in seen:
                seen[first] = {
                    t.target if t.source == first else t.source for t in self.store.transitions_of(first)
                }
            # transitions_of lists both directions, so one side's listing covers the pair
            out[(first, second)] = int(second in seen[first])
        return out

    def _scored_pairs(self, candidates: tuple[TechniqueCandidate, ...], min_probability: float) -> PairScores:
        """`pair_scores` of the graph's techniques, memoised.

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
        scored = pair_scores(self.policy, candidates, min_probability)
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
