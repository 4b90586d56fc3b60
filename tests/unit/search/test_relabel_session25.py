"""Session 25 (issue 28): a seventh development set (dev7), names as compilers and kernel write-ups
write them (pass and rule identifiers, terse tags), and the rules it asked for."""

from __future__ import annotations

import pytest

from bench.probes.relabel_bench import OUTSIDE_DATA, load_outside_items
from search.relabel.relabeler import RelabelPolicy, StepInput
from search.relabel.scoring import CandidateIndex
from search.relabel.taxonomy import Taxonomy, expand_abbreviations
from tests.unit.search.test_relabel_precision import _check_development_set

DEV7_DATA = OUTSIDE_DATA.with_name("dev7.jsonl")


def test_dev7_set_shares_nothing_with_the_outside_set_nor_the_other_development_sets(
    taxonomy: Taxonomy,
) -> None:
    """The seventh development set (`dev7.jsonl`, session 25: Triton's and XLA's GPU passes, TVM's TIR
    passes and MetaSchedule rules, two GEMM write-ups' optimization tags): the outside set's format, no
    taxonomy label word for word, and no item of the outside set, the other development sets or the
    general set (compared by program)."""
    items = load_outside_items(DEV7_DATA)
    assert len(items) >= 100
    _check_development_set(items, taxonomy, 7, least_new=25, least_merge=20)


# --- identifiers read as words before the glossary (`taxonomy._split_and_explain`) -----------------------


def test_a_joined_identifier_shows_its_jargon_to_the_glossary() -> None:
    """Compiler passes and schedule rules are written as identifiers; their words are read by the
    glossary and the vendor words once split ("HoistIfThenElse" hoists; `thrust_sort` is Thrust's), and
    a word read already is not read twice."""
    assert "loop invariant code motion" in expand_abbreviations("HoistIfThenElse")
    assert "cooperative loading of shared memory tiles" in expand_abbreviations("RewriteCooperativeFetch")
    assert "vendor library" in expand_abbreviations("thrust_sort")
    assert expand_abbreviations("use thrust").count("vendor library") == 1
    assert expand_abbreviations("__ldg") == "__ldg"


@pytest.mark.parametrize(
    ("name", "technique"),
    [("HoistIfThenElse", "Loop-invariant code motion"), ("RewriteCooperativeFetch", "Shared memory tiling")],
)
def test_identifier_names_merge_through_their_jargon(
    policy: RelabelPolicy, name: str, technique: str, full_index: CandidateIndex
) -> None:
    choice = policy.choose(StepInput(name), full_index)
    assert (choice.outcome, choice.technique) == ("merge", technique), choice.flags


# --- one shared word with a clear name lead (`scoring.separation`, `ONE_WORD_LEAD`) ----------------------


def test_one_shared_word_of_the_techniques_name_with_a_clear_lead_separates(
    policy: RelabelPolicy, full_index: CandidateIndex
) -> None:
    """The name shares one word with Persistent threads, "persistent" ("kernel" is filler), a word of its
    name; the name is far nearer to it than to anything else, and "lookahead" is no other technique's."""
    choice = policy.choose(StepInput("Lookahead persistent kernel"), full_index)
    assert (choice.outcome, choice.technique) == ("merge", "Persistent threads"), choice.flags


@pytest.mark.parametrize(
    ("name", "not_into"),
    [
        # "multidimensional" is a word of Multidimensional thread mapping: the name may mean it
        ("Multi-dimensional parallelization", "Parallelization"),
        # the shared word "basic" is only an alias's ("basic CUDA kernel"), not Parallelization's name
        ("Multi-GPU Basics", "Parallelization"),
    ],
)
def test_one_shared_word_does_not_separate_when_the_name_points_elsewhere_or_shares_only_an_alias_word(
    policy: RelabelPolicy, name: str, not_into: str, full_index: CandidateIndex
) -> None:
    choice = policy.choose(StepInput(name), full_index)
    assert not (choice.outcome == "merge" and choice.technique == not_into), choice
    assert choice.outcome == "undecided"
