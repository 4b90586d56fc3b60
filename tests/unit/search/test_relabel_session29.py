"""Session 29 (issue 28): the eleventh development set and the rules found on it."""

from __future__ import annotations

import pytest

from bench.probes.relabel_bench import OUTSIDE_DATA, load_outside_items
from search.relabel.relabeler import RelabelPolicy, StepInput
from search.relabel.taxonomy import Taxonomy, _stem, split_compound
from tests.unit.search.test_relabel_precision import _check_development_set, _full_graph

DEV11_DATA = OUTSIDE_DATA.with_name("dev11.jsonl")


def test_dev11_set_shares_nothing_with_the_outside_set_nor_the_other_development_sets(
    taxonomy: Taxonomy,
) -> None:
    """The eleventh development set (`dev11.jsonl`, session 29: the CUDA C++ Best Practices Guide's
    headings and recommendations, two LLM kernel agents' strategy lists, ROCm's Triton tuning page): the
    outside set's format, no taxonomy label word for word, and no item of the outside set, the other
    development sets or the general set."""
    items = load_outside_items(DEV11_DATA)
    assert len(items) >= 50
    _check_development_set(items, taxonomy, 11, least_new=20, least_merge=15)


# --- an agent noun meets its verb, an "-uce" verb its "-uction" noun (`taxonomy._stem`) ----------------------


@pytest.mark.parametrize(
    "words",
    [
        ("reduce", "reduces", "reduced", "reducing", "reduction", "reductions"),
        ("introduce", "introduction"),
        ("accumulate", "accumulating", "accumulation", "accumulator", "accumulators"),
        ("allocate", "allocation", "allocator", "allocators"),
        ("iterate", "iteration", "iterator"),
        ("vectorize", "vectorization", "vectorizer", "vectorizers", "vectorise", "vectoriser"),
        ("optimize", "optimization", "optimizer", "optimisers"),
    ],
)
def test_an_agent_noun_and_an_uction_noun_meet_their_verb(words: tuple[str, ...]) -> None:
    assert len({_stem(w) for w in words}) == 1, {w: _stem(w) for w in words}


@pytest.mark.parametrize(
    ("word", "stem"),
    # a root that only looks like the endings keeps its letters (at least three stay before them)
    [("equator", "equator"), ("truce", "truc"), ("sizer", "sizer"), ("register", "register")],
)
def test_short_roots_keep_their_endings(word: str, stem: str) -> None:
    assert _stem(word) == stem


@pytest.mark.parametrize(
    ("name", "technique"),
    [
        # a compiler pass's verb ("-Reduce") is its technique's noun ("reduction")
        ("StrengthReduceIndexMath", "Strength reduction"),
        ("Strength-reduce the index arithmetic", "Strength reduction"),
        # a pass named by its agent noun ("vectorizer") is its technique ("vectorized", "vectorization")
        ("Global load vectorizer", "Vectorized memory access"),
    ],
)
def test_a_verb_or_agent_noun_merges_like_the_techniques_noun(
    policy: RelabelPolicy, taxonomy: Taxonomy, name: str, technique: str
) -> None:
    choice = policy.choose(StepInput(name), policy.index(_full_graph(taxonomy)))
    assert (choice.outcome, choice.technique) == ("merge", technique), choice


def test_a_calculator_is_still_a_tool_and_calculating_is_not(
    policy: RelabelPolicy, taxonomy: Taxonomy
) -> None:
    """ "calculator" stems like "calculate" now; the diagnostic rule reads it as written, so a tool named
    with it still waits ("Bank conflict calculator") and a thread that calculates does not."""
    index = policy.index(_full_graph(taxonomy))
    choice = policy.choose(StepInput("Bank conflict calculator"), index)
    assert choice.outcome == "undecided"
    assert any(f.startswith("name_diagnostic") for f in choice.flags), choice.flags
    choice = policy.choose(StepInput("Each thread calculates four outputs"), index)
    assert (choice.outcome, choice.technique) == ("merge", "Thread coarsening"), choice


# --- one two-letter acronym among words in camel case (`taxonomy._acronym_parts`) ----------------------------


@pytest.mark.parametrize(
    ("word", "words"),
    [
        ("GLTextureFetch", "GL Texture Fetch"),
        ("persistentThreadsCG", "persistent Threads cooperative groups"),
        ("HSPinnedMemory", "HS Pinned Memory"),
    ],
)
def test_one_two_letter_acronym_among_words_is_split(word: str, words: str) -> None:
    assert split_compound(word) == words


@pytest.mark.parametrize(
    "word",
    # one word or none beside the short piece, or two short pieces: one word in mixed case
    ["NVLink", "OpenMP", "SpMV", "cuBLAS", "PCIe", "copyToSM", "AoSToSoA"],
)
def test_a_short_piece_with_one_word_beside_it_stays_whole(word: str) -> None:
    assert split_compound(word) == word


@pytest.mark.parametrize(
    ("name", "technique"),
    [
        ("GLVectorizedLoads", "Vectorized memory access"),
        ("aggregatedWarpAtomicsCG", "Warp-aggregated atomics"),
    ],
)
def test_an_identifier_with_a_two_letter_acronym_merges_by_its_words(
    policy: RelabelPolicy, taxonomy: Taxonomy, name: str, technique: str
) -> None:
    choice = policy.choose(StepInput(name), policy.index(_full_graph(taxonomy)))
    assert (choice.outcome, choice.technique) == ("merge", technique), choice


def test_a_two_letter_acronym_that_names_another_technique_is_queued(
    policy: RelabelPolicy, taxonomy: Taxonomy
) -> None:
    """ "CG" (cooperative groups) beside persistent threads' words: two techniques, nothing tells them
    apart, so the name waits rather than merging into either."""
    choice = policy.choose(StepInput("persistentThreadsCG"), policy.index(_full_graph(taxonomy)))
    assert choice.outcome == "undecided", choice
