"""The candidate cache's bookkeeping: entries by revision, a byte budget, least recently used first out."""

from __future__ import annotations

import numpy as np

from graphdb.models import Example, utc_now
from graphdb.retrieval_cache import CandidateCache, TransitionCandidates


def candidates(*ids: str) -> TransitionCandidates:
    return TransitionCandidates(
        ids=list(ids), speedups=[1.0] * len(ids), matrix=np.ones((len(ids), 384), dtype=np.float32)
    )


def example(example_id: str, code: str = "x") -> Example:
    return Example(
        id=example_id,
        source="A",
        target="B",
        task_id="t",
        code_before=code,
        code_after=code,
        created_at=utc_now(),
    )


def test_entries_are_found_by_the_revisions_last_seen_out_of_a_technique() -> None:
    cache = CandidateCache()
    b, c = candidates("b1", "b2"), candidates("c1")
    cache.remember("A", 16, ["rev-b", "rev-c"], {"rev-b": b, "rev-c": c})
    assert cache.held("A", 16) == {"rev-b": b, "rev-c": c}
    # Another scan limit, or another technique, is another question.
    assert cache.held("A", 32) == {} and cache.held("B", 16) == {}
    # Once a transition changed, its old revision is no longer asked for; its new entry is.
    c2 = candidates("c1", "c2")
    cache.remember("A", 16, ["rev-b", "rev-c2"], {"rev-c2": c2})
    assert cache.held("A", 16) == {"rev-b": b, "rev-c2": c2}


def test_the_byte_budget_drops_the_least_recently_used_entries() -> None:
    one = candidates("x").nbytes
    cache = CandidateCache(max_bytes=2 * one)
    cache.remember("A", 16, ["r1"], {"r1": candidates("a")})
    cache.remember("B", 16, ["r2"], {"r2": candidates("b")})
    cache.held("A", 16)  # A's entry is now the most recently used
    cache.remember("C", 16, ["r3"], {"r3": candidates("c")})
    assert set(cache.held("A", 16)) == {"r1"} and cache.held("B", 16) == {}
    assert set(cache.held("C", 16)) == {"r3"}
    assert cache.stats().entries == 2 and cache.stats().nbytes <= 2 * one
    # Text makes an entry larger, and may push out others.
    entry = cache.held("C", 16)["r3"]
    cache.add_examples([(entry, [example("c", code="y" * 10_000)])])
    assert "c" in entry.examples and cache.held("A", 16) == {}


def test_only_an_entrys_own_candidates_are_kept_and_nothing_with_no_budget() -> None:
    cache = CandidateCache()
    entry = candidates("b1", "b2")
    cache.remember("A", 16, ["rev"], {"rev": entry})
    before = cache.stats().nbytes
    cache.add_examples([(entry, [example("b1"), example("elsewhere")])])
    assert set(entry.examples) == {"b1"} and cache.stats().nbytes > before
    cache.clear()
    assert cache.held("A", 16) == {} and cache.stats().nbytes == 0
    off = CandidateCache(max_bytes=0)
    off.remember("A", 16, ["rev"], {"rev": candidates("b1")})
    assert off.held("A", 16) == {} and off.stats().entries == 0
