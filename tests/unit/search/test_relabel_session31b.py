"""Session 31b (issue 28): the `explained` gate of the relabeler without a taxonomy lets one word in five
or more go unexplained (`scoring.EXPLAINED_SHARE`), chosen leave-one-set-out on the development sets."""

from __future__ import annotations

import numpy as np
import pytest

from bench.probes.relabel_bench import OUTSIDE_DATA, Item, load_items, load_outside_items, scenarios
from search.embeddings import Embedder
from search.relabel.relabeler import RelabelPolicy
from search.relabel.scoring import FEATURES, Ranked, ScoringModel, decide, load_model
from search.relabel.taxonomy import Taxonomy


def _ranked(unexplained: float) -> Ranked:
    features = [0.0] * len(FEATURES)
    features[FEATURES.index("unexplained")] = unexplained
    return Ranked(("t0", "t1"), (0.95, 0.01), (tuple(features), tuple(features)))


@pytest.mark.parametrize(
    ("words", "unexplained_words", "decision"),
    [
        (5, 1, "merge"),
        (6, 1, "merge"),
        (7, 1, "merge"),
        (4, 1, "undecided"),
        (3, 1, "undecided"),
        (10, 2, "merge"),
        (9, 2, "undecided"),
        (1, 0, "merge"),
    ],
)
def test_the_explained_gate_lets_one_word_in_five_go_unexplained(
    words: int, unexplained_words: int, decision: str
) -> None:
    model = ScoringModel(
        weights=(0.0,) * len(FEATURES),
        bias=0.0,
        merge_threshold=0.7,
        new_threshold=0.2,
        margin=0.0,
        merge_gate="explained",
    )
    # the share as the scorer computes it (float32), not a rounded literal
    share = float(np.float32(1.0) - np.float32(words - unexplained_words) / np.float32(words))
    assert decide(model, _ranked(share), []) == decision


def _bare_choice(
    embedder: Embedder, taxonomy: Taxonomy, item_name: str, items: list[Item]
) -> tuple[str, str]:
    bare = next(s for s in scenarios(taxonomy) if s.name == "bare")
    policy = RelabelPolicy(embedder, taxonomy=None, model=load_model())
    index = policy.index(bare.techniques)
    item = next(i for i in items if i.name == item_name)
    choice = policy.choose(item.step(), index)
    return choice.outcome, (choice.technique if choice.outcome == "merge" else "")


@pytest.mark.parametrize(
    ("source", "name", "technique"),
    [
        ("general", "Reusing data loaded into shared memory across a block", "Shared memory tiling"),
        (
            "general",
            "Summing values within a warp using shuffle instructions",
            "Warp-level shuffle reduction",
        ),
        (
            "dev13",
            "Use multiple CUDA streams to overlap computation and data movement",
            "Streams and copy-compute overlap",
        ),
    ],
)
def test_a_long_name_with_one_unexplained_word_merges_without_a_taxonomy(
    embedder: Embedder, taxonomy: Taxonomy, source: str, name: str, technique: str
) -> None:
    items = load_outside_items(OUTSIDE_DATA.with_name(f"{source}.jsonl"))
    assert _bare_choice(embedder, taxonomy, name, items) == ("merge", technique)


def test_one_unexplained_word_in_four_still_waits_without_a_taxonomy(
    embedder: Embedder, taxonomy: Taxonomy
) -> None:
    """ "shuffle-based warp prefix sum" (own set): "prefix" is the one word of four the warp reduction
    lacks, and a warp scan is what it names."""
    items = load_items(taxonomy)
    assert _bare_choice(embedder, taxonomy, "shuffle-based warp prefix sum", items)[0] == "undecided"
