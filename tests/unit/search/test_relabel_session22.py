"""Session 22 (issue 28, dev4): heading words that are filler, and a name whose only unknown word sits
on a phrase several techniques' labels hold (PTX's and AMD's words: `test_relabel_vendor_words.py`)."""

from __future__ import annotations

import pytest

from search.relabel.relabeler import RelabelPolicy, StepInput
from search.relabel.scoring import CandidateIndex, WordCoverage, separation
from search.relabel.taxonomy import Taxonomy, concept_tokens
from tests.unit.search.test_relabel_precision import _ranked


@pytest.mark.parametrize(
    ("heading", "name"),
    [("A note on rocWMMA", "rocWMMA"), ("MFMA compiler intrinsic syntax", "MFMA compiler intrinsic")],
)
def test_heading_words_are_filler(heading: str, name: str) -> None:
    assert concept_tokens(heading) == concept_tokens(name)


def test_an_unknown_word_on_a_phrase_of_several_techniques_is_not_separated() -> None:
    """The only word no candidate uses sits on a phrase that several candidates' labels hold: that word
    says which technique, and the graph lacks it, whatever the name lead or the detail say."""
    lead = _ranked(
        [{"name_sim": 0.78, "text_sim": 0.44, "unexplained": 1 / 3}, {"name_sim": 0.65, "text_sim": 0.39}]
    )
    common = WordCoverage({"t0": 0.4, "t1": 0.4}, {"t0": 0, "t1": 0}, unknown=1, common_phrase=True)
    reason = separation(lead, name_words=3, detail=True, coverage=common)
    assert reason is not None and reason.startswith("name_unexplained")
    # the same lead on a phrase one technique holds separates as before
    own = WordCoverage({"t0": 0.4, "t1": 0.4}, {"t0": 0, "t1": 0}, unknown=1)
    assert separation(lead, name_words=3, detail=True, coverage=own) is None
    # code that supports the best candidate more than any other still separates it
    coded = _ranked(
        [
            {"name_sim": 0.78, "text_sim": 0.44, "unexplained": 1 / 3, "evidence_support": 1.0},
            {"name_sim": 0.65, "text_sim": 0.39},
        ]
    )
    assert separation(coded, name_words=3, detail=True, coverage=common) is None


def test_word_coverage_marks_an_unknown_word_on_a_shared_phrase(full_index: CandidateIndex) -> None:
    # "memory access" is a phrase of coalescing's, vectorized access's and bank conflict avoidance's labels
    assert full_index.word_coverage("Nontemporal memory access").common_phrase
    # "global memory access" only coalescing's; "zorbified" and "nontemporal" apart: no run of known words
    assert not full_index.word_coverage("Global memory access efficiency").common_phrase
    assert not full_index.word_coverage("memory access").common_phrase  # no unknown word
    assert not full_index.word_coverage("nontemporal loads zorbified stores").common_phrase


def test_nontemporal_memory_access_is_queued_not_merged_into_coalescing(
    policy: RelabelPolicy, taxonomy: Taxonomy, full_index: CandidateIndex
) -> None:
    """dev4 h061 (AMD lab notes): nontemporal loads and stores are no taxonomy technique; "memory access"
    is a phrase of several techniques' labels, so nothing in the name says coalescing."""
    step = StepInput(
        "Nontemporal memory access",
        detail="load and store through nontemporal builtins so that streamed data does not stay in the caches",
    )
    choice = policy.choose(step, full_index)
    assert choice.outcome == "undecided", (choice.technique, choice.flags)
    assert any(f.startswith("name_unexplained") for f in choice.flags), choice.flags


@pytest.mark.parametrize(
    ("written", "read"),
    [
        # OpenCL's built-in functions and the compilers' builtins are intrinsics
        ("Math Built-Ins", "math intrinsics"),
        ("built-in functions", "intrinsic functions"),
        ("MFMA builtins", "MFMA intrinsics"),
        # a hedge: weighing a technique is not another technique
        ("Considering the block size", "the block size"),
        ("Work-group size considerations", "work-group size"),
    ],
)
def test_words_written_two_ways_read_alike(written: str, read: str) -> None:
    assert concept_tokens(written) == concept_tokens(read)


def test_a_compiler_builtin_identifier_stays_code() -> None:
    assert concept_tokens("__builtin_nontemporal_load") == ["builtin_nontemporal_load"]


def test_native_and_half_math_builtins_merge_into_fast_math(
    policy: RelabelPolicy, full_index: CandidateIndex
) -> None:
    """dev2 d055 (Intel's OpenCL guide): queued before, its "Considering" and "Built-Ins" words no
    technique's."""
    name = "Considering native_ and half_ Versions of Math Built-Ins"
    choice = policy.choose(StepInput(name), full_index)
    assert (choice.outcome, choice.technique) == ("merge", "Fast math intrinsics"), choice.flags
