"""Session 27 (issue 28): headings that compare a technique with its absence, and names of one word."""

from __future__ import annotations

import pytest

from bench.probes.relabel_bench import OUTSIDE_DATA, load_outside_items
from search.embeddings import shared_embedder
from search.relabel.relabeler import RelabelPolicy, StepInput
from search.relabel.scoring import CandidateIndex, load_model
from search.relabel.taxonomy import Taxonomy, compared_with_its_absence, content_tokens
from tests.unit.search.test_relabel_precision import _check_development_set, _full_graph

DEV9_DATA = OUTSIDE_DATA.with_name("dev9.jsonl")


def test_dev9_set_shares_nothing_with_the_outside_set_nor_the_other_development_sets(
    taxonomy: Taxonomy,
) -> None:
    """The ninth development set (`dev9.jsonl`, session 27: SYCL Academy's lesson titles, Khronos'
    Vulkan samples' titles): the outside set's format, no taxonomy label word for word, and no item of the
    outside set, the other development sets or the general set."""
    items = load_outside_items(DEV9_DATA)
    assert len(items) >= 50
    _check_development_set(items, taxonomy, 9, least_new=30, least_merge=5)


# --- "X vs un-X" names X (`taxonomy.compared_with_its_absence`) ---------------------------------------


@pytest.mark.parametrize(
    ("name", "read"),
    [
        ("Coalesced vs uncoalesced memory access", "Coalesced memory access"),
        ("Non-fused versus fused kernels", "fused kernels"),
        ("Pinned vs. non-pinned memory", "Pinned memory"),
        ("fused vs un-fused", "fused"),
    ],
)
def test_a_word_against_its_negation_is_read_as_the_word(name: str, read: str) -> None:
    assert compared_with_its_absence(name) == read


@pytest.mark.parametrize(
    "name",
    [
        # two different things compared: left as written
        "Small register mode vs. large register mode",
        "Ahead-of-time vs JIT compilation",
        # "unit" is no negation of "it" (a word of three letters at least)
        "unit vs it",
        # no comparison
        "Unfused kernels",
    ],
)
def test_only_a_word_against_its_own_negation_is_read_so(name: str) -> None:
    assert compared_with_its_absence(name) == name


@pytest.mark.parametrize(
    ("name", "technique"),
    [
        # "uncoalesc" was a word no technique uses, half of the name unexplained
        ("Coalesced vs uncoalesced memory access", "Memory coalescing"),
        ("Non-fused versus fused kernels", "Kernel fusion"),
    ],
)
def test_a_heading_comparing_a_technique_with_its_absence_names_the_technique(
    policy: RelabelPolicy, name: str, technique: str, full_index: CandidateIndex
) -> None:
    assert "uncoalesc" not in content_tokens(name)
    choice = policy.choose(StepInput(name), full_index)
    assert (choice.outcome, choice.technique) == ("merge", technique), choice.flags


def test_the_new_technique_keeps_the_heading_as_written(
    policy: RelabelPolicy, full_index: CandidateIndex
) -> None:
    """The reading is for the words and the embedding only: a name that still names no technique is
    created (or queued) under its own words."""
    name = "Zorbic vs non-zorbic layouts"
    choice = policy.choose(StepInput(name), full_index)
    assert choice.outcome != "merge", choice
    assert choice.technique == name


# --- a name of one word names one technique only by a telling word of its names (`CandidateIndex.lone_word`) ---


@pytest.mark.parametrize(
    ("name", "word"),
    [
        # merged into Host-device transfer reduction (p 0.95) on "device", a word of five techniques' names
        ("Devices", "devic"),
        # "warp" is a word of nine techniques' names
        ("Warps", "warp"),
        ("Shared", "shar"),
    ],
)
def test_a_name_of_one_word_many_techniques_names_share_is_queued(
    policy: RelabelPolicy, name: str, word: str, full_index: CandidateIndex
) -> None:
    choice = policy.choose(StepInput(name), full_index)
    assert choice.outcome == "undecided", choice
    assert any(f.startswith("name_one_word:") and repr(word) in f for f in choice.flags), choice.flags


@pytest.mark.parametrize(
    ("name", "technique"),
    [
        # "pipelining" is a word of three techniques' aliases, the nearest of them double buffering's
        ("Pipelining", "Double buffering"),
        ("unroll it", "Loop unrolling"),
        ("Pad", "Bank conflict avoidance"),
    ],
)
def test_a_name_of_one_telling_word_of_the_techniques_names_still_merges(
    policy: RelabelPolicy, name: str, technique: str, full_index: CandidateIndex
) -> None:
    choice = policy.choose(StepInput(name), full_index)
    assert (choice.outcome, choice.technique) == ("merge", technique), choice.flags


def test_a_detail_or_more_words_lift_the_one_word_stop(
    policy: RelabelPolicy, full_index: CandidateIndex
) -> None:
    """The stop reads a name that is all the step says: a detail may tell which technique, and a name of
    two words is for the separation gate."""
    detailed = policy.choose(
        StepInput("Devices", detail="keep the arrays resident on the device between kernels, no copies back"),
        full_index,
    )
    assert not any(f.startswith("name_one_word:") for f in detailed.flags), detailed
    assert full_index.lone_word("Device memory copies", "Host-device transfer reduction") is None


def test_a_lone_word_only_a_description_uses_names_no_technique(taxonomy: Taxonomy) -> None:
    """Without a taxonomy the graph's techniques have their names and descriptions only: a word of a
    description alone ("device" of Parallelization's) does not name the technique."""
    bare = [
        t.model_copy(update={"aliases": []}) for t in _full_graph(taxonomy) if t.name == "Parallelization"
    ]
    policy = RelabelPolicy(shared_embedder(), taxonomy=None, model=load_model().for_knowledge(taxonomy=False))
    index = policy.index(bare)
    assert index.lone_word("Devices", "Parallelization") == (
        "its one word 'devic' is no word of 'Parallelization''s names"
    )
    assert index.lone_word("Parallelizing", "Parallelization") is None
