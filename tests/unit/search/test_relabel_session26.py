"""Session 26 (issue 28): kinds of fusion as compilers name them, and compilers' own names in pass names."""

from __future__ import annotations

import pytest

from bench.probes.relabel_bench import OUTSIDE_DATA, load_outside_items
from search.relabel.relabeler import RelabelPolicy, StepInput, strange_words
from search.relabel.scoring import CandidateIndex
from search.relabel.taxonomy import Taxonomy, concept_tokens
from tests.unit.search.test_relabel_precision import _check_development_set

# --- a kind of fusion is Kernel fusion (`CandidateIndex.kind_of`, `KIND_HEADS`) ----------------------------


@pytest.mark.parametrize(
    "name",
    [
        # the probability alone made it a new technique (p 0.29)
        "horizontal_input_fusion",
        # the scorer ranked Temporal blocking first ("multi" of "multi-step stencil fusion")
        "multi_output_fusion",
        # "copy" is the transfer techniques' word, but no rare one
        "copy_fusion",
        # a "rewriter" is the pass, not the technique
        "conv_fusion_rewriter",
    ],
)
def test_a_kind_of_fusion_merges_into_kernel_fusion(
    policy: RelabelPolicy, name: str, full_index: CandidateIndex
) -> None:
    choice = policy.choose(StepInput(name), full_index)
    assert (choice.outcome, choice.technique) == ("merge", "Kernel fusion"), choice.flags


@pytest.mark.parametrize(
    ("name", "technique"),
    [
        # "stencil" is a rare word of Temporal blocking's alias "multi-step stencil fusion"
        ("Stencil sweep fusion", "Temporal blocking"),
        # "time" is all the words of another technique's kind of fusion ("time-step fusion")
        ("Time fusion", "Temporal blocking"),
        # "FMA" is the fused multiply-add's label
        ("FMA fusion", "Fused multiply-add"),
    ],
)
def test_a_fusion_whose_qualifier_names_another_technique_is_no_kind_of_kernel_fusion(
    policy: RelabelPolicy, name: str, technique: str, full_index: CandidateIndex
) -> None:
    assert full_index.kind_of(name) is None
    choice = policy.choose(StepInput(name), full_index)
    assert not (choice.outcome == "merge" and choice.technique == "Kernel fusion"), choice
    assert (choice.outcome, choice.technique) in (("merge", technique), ("undecided", name)), choice


def test_a_fusion_that_says_another_techniques_label_of_two_words_is_no_kind(
    full_index: CandidateIndex,
) -> None:
    """ "Loop tiling fusion" says Loop tiling whole, though neither "loop" nor "tiling" is a rare word."""
    assert full_index.kind_of("Loop tiling fusion") is None


def test_a_kind_the_name_embedding_puts_elsewhere_is_not_merged(
    policy: RelabelPolicy, full_index: CandidateIndex
) -> None:
    """ "Instruction fusion" reads as a kind of fusion, but its name is 0.1 nearer to other techniques
    (fused multiply-add, instruction-level parallelism) than to Kernel fusion: not merged."""
    assert full_index.kind_of("instruction fusion") == "Kernel fusion"
    choice = policy.choose(StepInput("instruction fusion"), full_index)
    assert choice.outcome != "merge", choice


def test_only_a_name_ending_in_fusion_is_a_kind(policy: RelabelPolicy, full_index: CandidateIndex) -> None:
    """The head must be "fusion" as written ("combining" and "merging" mean fusing to the word features,
    not here), the name must say which kind (a word before it), and a made-up word is no kind."""
    assert full_index.kind_of("Instruction combining") is None
    assert full_index.kind_of("Fusion of the epilogues") is None
    assert full_index.kind_of("Fusion") is None
    choice = policy.choose(StepInput("Zorbic fusion"), full_index)
    assert choice.outcome != "merge", choice


# --- compilers' names in pass names (`COMPILER_NAMES`) and "rewriter" --------------------------------------


def test_a_compilers_name_is_no_made_up_word(policy: RelabelPolicy, full_index: CandidateIndex) -> None:
    """Triton's passes are "tritongpu-..."; the prefix is the compiler's name, not a word nobody knows,
    so a pass the graph lacks becomes a new technique instead of waiting as not understood."""
    assert strange_words("tritongpu-reorder-instructions", full_index.vocabulary_words()) == []
    choice = policy.choose(StepInput("tritongpu-reorder-instructions"), full_index)
    assert not any(f.startswith("name_not_understood") for f in choice.flags), choice.flags
    assert choice.outcome == "new", choice


def test_a_rewriter_is_filler() -> None:
    assert concept_tokens("conv_fusion_rewriter") == concept_tokens("conv fusion")


# --- the eighth development set (`dev8.jsonl`) -------------------------------------------------------------

DEV8_DATA = OUTSIDE_DATA.with_name("dev8.jsonl")


def test_dev8_set_shares_nothing_with_the_outside_set_nor_the_other_development_sets(
    taxonomy: Taxonomy,
) -> None:
    """The eighth development set (`dev8.jsonl`, session 26: ONNX Runtime's graph transformers' names):
    the outside set's format, no taxonomy label word for word, and no item of the outside set, the other
    development sets or the general set."""
    items = load_outside_items(DEV8_DATA)
    assert len(items) >= 50
    _check_development_set(items, taxonomy, 8, least_new=15, least_merge=15)


# --- "minimal" says how much, as "fewer" does ----------------------------------------------------------------


def test_minimal_is_an_amount(policy: RelabelPolicy, full_index: CandidateIndex) -> None:
    """dev2's "Use minimal synchronization" waited as a word no technique uses beside a phrase of
    several techniques' labels; "minimal" and "minimum" say how much, as "fewer" and "less" do."""
    assert concept_tokens("Use minimal synchronization") == concept_tokens("synchronization")
    choice = policy.choose(StepInput("Use minimal synchronization"), full_index)
    assert (choice.outcome, choice.technique) == ("merge", "Synchronization reduction"), choice.flags
