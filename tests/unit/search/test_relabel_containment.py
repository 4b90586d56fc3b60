"""Containment (issue 28): a name that holds a technique's name or alias as a phrase, with only generic
instruction and purpose words around it ("Exploit CUDA graphs to maximize throughput"), is evidence for
that technique; a contrary word, a second technique, a word of its own or a detail that points elsewhere
still queue it. The names here are written for these tests from the taxonomy's labels and the guides'
general style, not from the outside set."""

from __future__ import annotations

import pytest

from search.relabel.relabeler import RelabelPolicy, StepInput
from search.relabel.scoring import (
    LEAD_WORDS,
    PURPOSE_WORDS,
    CandidateIndex,
    Containment,
    TechniqueCandidate,
    containment_conflict,
)
from search.relabel.taxonomy import Taxonomy, concept_tokens
from tests.unit.search.test_relabel_precision import _full_graph, _ranked


@pytest.fixture(scope="module")
def index(policy: RelabelPolicy, taxonomy: Taxonomy) -> CandidateIndex:
    return policy.index(_full_graph(taxonomy))


@pytest.mark.parametrize(
    ("name", "technique", "leftover"),
    [
        ("Employ thread coarsening for performance", "Thread coarsening", ("employ", "performanc")),
        ("Exploit CUDA graphs to maximize throughput", "CUDA graphs", ("exploit", "maxim", "throughput")),
        ("Leverage shared memory tiling for higher throughput", "Shared memory tiling", None),
        ("Apply memory coalescing for bandwidth", "Memory coalescing", ("bandwidth",)),
    ],
)
def test_a_name_around_a_label_is_contained(
    index: CandidateIndex, name: str, technique: str, leftover: tuple[str, ...] | None
) -> None:
    contained = index.containment(name)
    assert contained is not None, name
    assert contained.technique == technique
    if leftover is not None:
        assert contained.leftover == leftover


@pytest.mark.parametrize(
    "name",
    [
        # a contrary word: the technique is what was left behind, or the name says what it did without
        "Avoid shared memory tiling",
        "Employ thread coarsening instead",
        "Employ thread coarsening without shared memory",
        # two techniques
        "Employ loop unrolling and kernel fusion",
        # a word of its own after the label, or a purpose word before it
        "Thread coarsening for stencils",
        "Performance thread coarsening",
        # "launch" tells techniques apart: not a generic purpose word
        "Use kernel fusion to cut launch overhead",
        # "latency" is a word of few techniques' names and aliases, one of them not double buffering
        "Use double buffering to hide latency",
    ],
)
def test_containment_needs_only_generic_words_around_one_label(index: CandidateIndex, name: str) -> None:
    assert index.containment(name) is None


def test_a_rival_label_overlapping_the_phrase_refuses(policy: RelabelPolicy) -> None:
    """Two labels that overlap in the name ("warp shuffle" and "shuffle overhead"): neither is contained
    alone, though the words left around either are generic ("overhead" is a purpose word, in more names
    than `RARE_WORD_USERS`)."""
    candidates = [
        TechniqueCandidate("A", "exchange values between lanes", ("A", "warp shuffle")),
        TechniqueCandidate("B", "fewer shuffles", ("B", "shuffle overhead")),
        TechniqueCandidate("C", "fewer launches", ("C", "launch overhead")),
        TechniqueCandidate("D", "fewer barriers", ("D", "barrier overhead")),
    ]
    small = CandidateIndex(candidates, policy.vectors)
    assert small.containment("Employ warp shuffle for performance") is not None
    assert small.containment("Employ warp shuffle overhead") is None


def test_generic_words_name_no_technique(taxonomy: Taxonomy) -> None:
    """The generic lists stay generic: no taxonomy name or alias is made only of their words."""
    generic = LEAD_WORDS | PURPOSE_WORDS
    for technique in taxonomy.techniques:
        for label in (technique.name, *technique.aliases):
            words = set(concept_tokens(label))
            assert not words or not words <= generic, label


def test_containment_conflict() -> None:
    contained = Containment("t0", "T zero", ("employ",))
    agree = _ranked([{"text_sim": 0.6}, {"text_sim": 0.59}])
    assert containment_conflict(agree, contained, detail=True) is None
    # the scorer ranks another technique first
    other = Containment("t1", "T one", ())
    assert containment_conflict(agree, other, detail=False) is not None
    # the detail is nearer to another technique's description
    detail = _ranked([{"text_sim": 0.5}, {"text_sim": 0.55}])
    assert containment_conflict(detail, contained, detail=True) is not None
    assert containment_conflict(detail, contained, detail=False) is None
    # the code supports another technique more
    code = _ranked([{"evidence_support": 0.0}, {"evidence_support": 1.0}])
    assert containment_conflict(code, contained, detail=False) is not None
    mentions = _ranked([{"mentions": 0.0}, {"mentions": 1.0}])
    assert containment_conflict(mentions, contained, detail=False) is not None


@pytest.mark.parametrize(
    ("name", "technique"),
    [
        ("Exploit CUDA graphs to maximize throughput", "CUDA graphs"),
        ("Employ pinned memory for performance", "Pinned host memory"),
        ("Exploit register blocking to maximize throughput", "Register tiling"),
        # below the merge threshold by score alone (no separation flag): containment decides
        ("Exploit early exit to maximize throughput", "Early exit and work pruning"),
        ("Exploit strength reduction to maximize throughput", "Strength reduction"),
    ],
)
def test_a_guide_heading_merges(
    policy: RelabelPolicy, index: CandidateIndex, name: str, technique: str
) -> None:
    choice = policy.choose(StepInput(name), index)
    assert (choice.outcome, choice.technique) == ("merge", technique), choice.flags


def test_a_detail_that_points_elsewhere_still_queues(policy: RelabelPolicy, index: CandidateIndex) -> None:
    name = "Exploit CUDA graphs to maximize throughput"
    detail = "allocated the host buffers with cudaMallocHost so the copies run at full bandwidth"
    choice = policy.choose(StepInput(name, detail), index)
    assert choice.outcome == "undecided", (choice.outcome, choice.technique)
