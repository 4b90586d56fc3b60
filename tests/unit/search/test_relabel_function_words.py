"""Session 20's relabel rules (issue 28): function words are filler, "-wise" words are their root's, data
movement is the copies, a name about studying a program is no technique, and a rival a hair nearer by
name is beaten by a clearly nearer detail with more of the name's words explained."""

from __future__ import annotations

import pytest

from search.embeddings import Embedder
from search.relabel.relabeler import RelabelPolicy, StepInput, name_problem
from search.relabel.scoring import CandidateIndex, load_model, separation
from search.relabel.taxonomy import Taxonomy, concept_tokens, content_tokens
from tests.unit.search.test_relabel_precision import _full_graph, _ranked


@pytest.mark.parametrize(
    ("wordy", "plain"),
    [
        ("Tree reduction within a thread block", "tree reduction thread block"),
        ("Spreading the work across warps", "spreading work warps"),
        ("rows split evenly among threads", "rows split evenly threads"),
        ("some warps load, others compute", "warps load compute"),
        ("one warp loads while another computes", "one warp loads while computes"),
        ("Restructure the algorithm to be more suitable for GPUs", "restructure algorithm suitable gpus"),
        ("Process eight outputs per thread", "outputs per thread"),
        ("Handle several elements in each thread", "elements thread"),
        # hedges (issue 28, dev2): when to apply it, not which technique
        ("Use single-precision when possible", "single-precision when"),
        ("Unroll loops where necessary", "unroll loops where"),
        ("Pin host buffers if needed", "pin host buffers if"),
    ],
)
def test_function_words_are_filler(wordy: str, plain: str) -> None:
    assert content_tokens(wordy) == content_tokens(plain)


def test_prepositions_that_descriptions_use_stay_words() -> None:
    # "read through the texture cache" and "launch kernels from inside a kernel" keep them
    assert "through" in content_tokens("Read data through texture objects")
    assert "insid" in content_tokens("Launching kernels from inside a kernel")
    assert "over" in content_tokens("stride loop over the grid")


@pytest.mark.parametrize(
    ("wise", "root"),
    [("elementwise", "element"), ("element-wise", "element"), ("blockwise", "block"), ("rowwise", "row")],
)
def test_wise_words_meet_their_root(wise: str, root: str) -> None:
    assert content_tokens(f"{wise} kernel fusion") == content_tokens(f"{root} kernel fusion")


def test_data_movement_is_the_copies() -> None:
    assert (
        concept_tokens("data movement") == concept_tokens("data copies") == concept_tokens("data transfers")
    )


def test_tree_reduction_within_a_block_merges(policy: RelabelPolicy, full_index: CandidateIndex) -> None:
    """ "within" no longer counts as a word the tree reduction leaves unexplained."""
    choice = policy.choose(StepInput("Tree reduction within a thread block"), full_index)
    assert (choice.outcome, choice.technique) == ("merge", "Shared memory tree reduction"), choice.flags


def test_data_movement_overlap_merges(policy: RelabelPolicy, full_index: CandidateIndex) -> None:
    choice = policy.choose(StepInput("Overlapping data movement and kernels with streams"), full_index)
    assert (choice.outcome, choice.technique) == ("merge", "Streams and copy-compute overlap"), choice.flags


@pytest.mark.parametrize(
    "name",
    [
        "Thread divergence profiling",
        "Detecting bank conflicts",
        "Measuring memory coalescing",
        "Warp divergence analysis",
    ],
)
def test_a_name_about_studying_a_program_is_queued(
    policy: RelabelPolicy, name: str, full_index: CandidateIndex
) -> None:
    choice = policy.choose(StepInput(name), full_index)
    assert choice.outcome == "undecided", (choice.outcome, choice.technique, choice.flags)
    assert any(f.startswith("name_diagnostic") for f in choice.flags), choice.flags


def test_a_study_word_of_the_technique_itself_still_merges(
    policy: RelabelPolicy, full_index: CandidateIndex
) -> None:
    """The launch-bounds technique's own words use "calculator" (the occupancy calculator)."""
    assert full_index.diagnostic("Occupancy calculator usage", "Occupancy-aware launch bounds") is None
    assert full_index.diagnostic("Occupancy calculator usage", "Block size tuning") == "calculator"
    choice = policy.choose(StepInput("Reducing warp divergence by regrouping threads"), full_index)
    assert (choice.outcome, choice.technique) == ("merge", "Warp divergence reduction"), choice.flags


def test_a_hair_behind_by_name_with_a_nearer_detail_and_more_words() -> None:
    """ "Process four outputs per thread" with its detail: 0.01 nearer to Parallelization by name, the
    detail clearly nearer coarsening's description, a third of its words coarsening lacks against two
    thirds for Parallelization; register tiling far by name."""
    rows = [
        {"name_sim": 0.76, "text_sim": 0.50, "unexplained": 1 / 3},
        {"name_sim": 0.77, "text_sim": 0.44, "unexplained": 2 / 3},
        {"name_sim": 0.37, "text_sim": 0.49, "unexplained": 1 / 3},
    ]
    assert separation(_ranked(rows), name_words=3, detail=True) is None
    # not without the detail
    assert separation(_ranked(rows), name_words=3, detail=False) is not None
    # not when the rival a hair nearer by name explains as many of the name's words
    same_words = [rows[0], {**rows[1], "unexplained": 1 / 3}, rows[2]]
    assert separation(_ranked(same_words), name_words=3, detail=True) is not None
    # not when it is more than a hair nearer by name
    nearer = [rows[0], {**rows[1], "name_sim": 0.79}, rows[2]]
    assert separation(_ranked(nearer), name_words=3, detail=True) is not None
    # not when the detail is only a hair nearer
    close_detail = [rows[0], {**rows[1], "text_sim": 0.49}, rows[2]]
    assert separation(_ranked(close_detail), name_words=3, detail=True) is not None


def test_four_outputs_per_thread_with_its_detail_merges(
    policy: RelabelPolicy, full_index: CandidateIndex
) -> None:
    step = StepInput(
        "Process four outputs per thread",
        "Each thread now computes 4 consecutive outputs, halving the number of blocks and reusing the "
        "loaded neighbours.",
    )
    choice = policy.choose(step, full_index)
    assert (choice.outcome, choice.technique) == ("merge", "Thread coarsening"), choice.flags


@pytest.mark.parametrize(
    ("inflected", "plain"),
    [
        ("Optimizing memory transfers", "memory transfers"),
        ("Optimizations of warp divergence", "warp divergence"),
        ("Optimized atomic operations", "atomic operations"),
        ("Techniques for coalescing", "coalescing"),
        ("Improving occupancy", "occupancy"),
        ("applies loop unrolling", "loop unrolling"),
        ("uses pinned memory", "pinned memory"),
    ],
)
def test_every_form_of_a_filler_word_is_filler(inflected: str, plain: str) -> None:
    """ "optimization" was filler but "optimizing" read as a word no technique uses (`optim`)."""
    assert content_tokens(inflected) == content_tokens(plain)
    # words that merely start alike stay
    assert content_tokens("optimal block size") == ["optimal", "block", "size"]


def test_optimizing_headings_merge_without_a_taxonomy(embedder: Embedder, taxonomy: Taxonomy) -> None:
    """Without a taxonomy every word of the name must be the technique's own (the `explained` gate):
    "optimized" no longer stands in the way."""
    graph = [
        t
        for t in _full_graph(taxonomy)
        if t.name == "Warp divergence reduction" or t.name == "Parallelization"
    ]
    bare = RelabelPolicy(embedder, taxonomy=None, model=load_model())
    choice = bare.choose(
        StepInput("Optimized warp divergence handling"),
        bare.index([t.model_copy(update={"aliases": []}) for t in graph]),
    )
    assert (choice.outcome, choice.technique) == ("merge", "Warp divergence reduction"), choice.flags


@pytest.mark.parametrize(
    "name", ["Optimizing", "Optimizations", "Techniques", "within across", "Improving it"]
)
def test_a_name_of_filler_forms_only_is_unusable(
    policy: RelabelPolicy, name: str, full_index: CandidateIndex
) -> None:
    """Queued with its reason, never created as a technique named "Optimizing"."""
    assert name_problem(name) == "the name has only filler words"
    choice = policy.choose(StepInput(name), full_index)
    assert choice.outcome == "undecided" and choice.flags[-1].startswith("name_unusable"), choice
