"""Session 28 (issue 28): an English word list for made-up words, camel case with acronyms, and the tenth
development set."""

from __future__ import annotations

import logging
import sys

import pytest

from bench.probes.relabel_bench import OUTSIDE_DATA, load_outside_items
from search.relabel.relabeler import RelabelPolicy, StepInput, common_words, strange_words
from search.relabel.scoring import CandidateIndex
from search.relabel.taxonomy import Taxonomy, content_tokens, split_compound
from tests.unit.search.test_relabel_precision import _check_development_set

DEV10_DATA = OUTSIDE_DATA.with_name("dev10.jsonl")


def test_dev10_set_shares_nothing_with_the_outside_set_nor_the_other_development_sets(
    taxonomy: Taxonomy,
) -> None:
    """The tenth development set (`dev10.jsonl`, session 28: NVIDIA's CUDA samples' and ROCm's HIP
    examples' directory names): the outside set's format, no taxonomy label word for word, and no item of
    the outside set, the other development sets or the general set."""
    items = load_outside_items(DEV10_DATA)
    assert len(items) >= 50
    _check_development_set(items, taxonomy, 10, least_new=20, least_merge=15)


# --- made-up words against an English word list (`relabeler.common_words`) -------------------------------

INNER_LOOP = frozenset(content_tokens("inner loop shared memory tiling"))


@pytest.mark.parametrize(
    "name",
    [
        # real words the embedding model's word-piece vocabulary lacks (the dictionary before session 28)
        "Superfluous inner loop",
        "Spurious inner loop",
        "Coherence of the inner loop",
        "Radix inner loop",
        "Halving the inner loop",
        "Swizzled inner loop",
        "Rasterization of the inner loop",
        "Convolution of the inner loop",
        # a verb behind "en-" ("enqueue" is "en" + "queue")
        "Enqueueing the inner loop",
        # C++'s keywords are words of the code the names are about
        "Struct of the inner loop",
        "Constexpr inner loop",
    ],
)
def test_real_words_are_not_made_up(name: str) -> None:
    assert strange_words(name, INNER_LOOP) == [], name


@pytest.mark.parametrize(
    ("name", "strange"),
    [
        ("Zorbification of the inner loop", ["zorbification"]),
        ("Blorpwise inner loop", ["blorpwise"]),
        ("Flimflarbing the inner loop", ["flimflarbing"]),
        ("Snorbulated shared memory tiling", ["snorbulated"]),
        ("Glorpification of the inner loop", ["glorpification"]),
        ("Inner loop krangulation", ["krangulation"]),
    ],
)
def test_made_up_words_stay_strange(name: str, strange: list[str]) -> None:
    assert strange_words(name, INNER_LOOP) == strange


def test_the_dictionary_is_an_english_word_list() -> None:
    words = common_words()
    assert len(words) > 100_000
    assert {"superfluous", "coherence", "multiply", "dependencies", "struct"} <= words
    assert not {"zorbification", "blorpwise", "zorb"} & words


@pytest.mark.parametrize(
    ("real", "made_up"),
    [("Superfluous copies", "Zorbulent copies"), ("Coherence of host data", "Zorbence of host data")],
)
def test_a_name_of_real_words_no_technique_knows_is_new(
    policy: RelabelPolicy, real: str, made_up: str, full_index: CandidateIndex
) -> None:
    """A familiar phrase around a real word no technique uses names a technique the graph lacks (a new
    one); the same phrase around a made-up word waits for a curator (`name_not_understood`)."""
    choice = policy.choose(StepInput(real), full_index)
    assert (choice.outcome, choice.flags) == ("new", ()), choice
    choice = policy.choose(StepInput(made_up), full_index)
    assert choice.outcome == "undecided"
    assert any(f.startswith("name_not_understood") for f in choice.flags), choice.flags


@pytest.mark.parametrize("name", ["x", "?!?", "the of", "Warp shuffle " * 1000, "Сoalescing", "の loop"])
def test_bad_input_is_still_queued_with_a_reason(
    policy: RelabelPolicy, name: str, full_index: CandidateIndex
) -> None:
    """Issue 28's bad input (one character, punctuation only, stop words only, 10 kB, mixed scripts):
    queued with a reason, never a merge and never a new technique, with the larger dictionary too."""
    choice = policy.choose(StepInput(name), full_index)
    assert choice.outcome == "undecided"
    assert any(f.startswith("name_unusable") for f in choice.flags), choice.flags


# --- camel case with acronyms (`taxonomy.split_compound`, `_acronym_parts`) ---------------------------------


@pytest.mark.parametrize(
    ("word", "words"),
    [
        ("callCUBLASGemm", "call CUBLAS Gemm"),
        ("stencilWithInlinePTX", "stencil With Inline PTX"),
        ("copyWithTMA", "copy With TMA"),
        ("VerifyGPUCode", "Verify GPU Code"),
        ("HTTPServer", "HTTP Server"),
        # camel case of whole words is read as before
        ("HoistIfThenElse", "Hoist branch Then Else"),
        ("cudaMallocHost", "cuda Malloc Host"),
    ],
)
def test_camel_case_with_acronyms_is_split(word: str, words: str) -> None:
    assert split_compound(word) == words


@pytest.mark.parametrize(
    "word",
    # one word in mixed case, a word with a part of two letters or fewer, a word with digits
    [
        "SpMV",
        "tex2D",
        "cuBLAS",
        "GPUs",
        "APIs",
        "PCIe",
        "NVLink",
        "OpenMP",
        "FP16Demote",
        "bf16TensorCoreGemm",
    ],
)
def test_one_word_in_mixed_case_stays_whole(word: str) -> None:
    assert split_compound(word) == word


@pytest.mark.parametrize(
    ("name", "technique"),
    [
        ("callCUBLASGemm", "Vendor library offload"),
        ("stencilWithInlinePTX", "Inline PTX"),
        ("copyWithTMA", "Tensor Memory Accelerator"),
    ],
)
def test_an_identifier_with_an_acronym_merges_by_its_words(
    policy: RelabelPolicy, name: str, technique: str, full_index: CandidateIndex
) -> None:
    """A program's or a log's identifier that joins words with an acronym ("callCUBLASGemm") is read as
    its words; it was one opaque word before and became a new technique."""
    choice = policy.choose(StepInput(name), full_index)
    assert (choice.outcome, choice.technique) == ("merge", technique), choice


def test_a_type_tag_joined_to_a_verb_is_not_read_as_the_type(
    policy: RelabelPolicy, full_index: CandidateIndex
) -> None:
    """ "FP16Demote" stays one word: a precision's name joined to a verb may name the conversion as well
    as the precision used, and merging it into reduced precision arithmetic would be a guess."""
    choice = policy.choose(StepInput("FP16Demote"), full_index)
    assert choice.outcome != "merge", choice


def test_without_the_word_list_the_vocabulary_is_the_dictionary(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An installation without pyspellchecker degrades to the dictionary before session 28 (with a
    warning), rather than failing every "new" decision."""
    monkeypatch.setitem(sys.modules, "spellchecker", None)  # an import of it raises ImportError
    common_words.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="search.relabel.relabeler"):
            words = common_words()
        assert "superfluous" not in words
        assert "struct" in words
        assert "pyspellchecker is not installed" in caplog.text
        assert strange_words("Zorbification of the inner loop", INNER_LOOP) == ["zorbification"]
    finally:
        common_words.cache_clear()
    monkeypatch.undo()
    assert "superfluous" in common_words()
