"""Session 30 (issue 28): the twelfth development set and the rules found on it."""

from __future__ import annotations

import pytest

from bench.probes.relabel_bench import OUTSIDE_DATA, load_outside_items
from search.relabel.relabeler import RelabelPolicy, StepInput
from search.relabel.taxonomy import Taxonomy, _stem
from tests.unit.search.test_relabel_precision import _check_development_set, _full_graph

DEV12_DATA = OUTSIDE_DATA.with_name("dev12.jsonl")


def test_dev12_set_shares_nothing_with_the_outside_set_nor_the_other_development_sets(
    taxonomy: Taxonomy,
) -> None:
    """The twelfth development set (`dev12.jsonl`, session 30: IREE's GPU code generation pass names,
    CSC's HIP optimisation slides): the outside set's format, no taxonomy label word for word, and no item
    of the outside set, the other development sets or the general set."""
    items = load_outside_items(DEV12_DATA)
    assert len(items) >= 50
    _check_development_set(items, taxonomy, 12, least_new=20, least_merge=14)


# --- an "-ert" verb meets its "-ersion" noun and its "-erter" agent noun (`taxonomy._stem`) -----------------


@pytest.mark.parametrize(
    "words",
    [
        ("convert", "converts", "converted", "converting", "conversion", "conversions", "converter"),
        ("invert", "inverted", "inversion", "inverter"),
        ("divert", "diversion"),
    ],
)
def test_an_ert_verb_meets_its_noun_and_agent_noun(words: tuple[str, ...]) -> None:
    assert {_stem(w) for w in words} == {_stem(words[0])}


@pytest.mark.parametrize(
    ("word", "stem"), [("version", "version"), ("versions", "version"), ("aversion", "aversion")]
)
def test_short_roots_keep_their_ersion(word: str, stem: str) -> None:
    assert _stem(word) == stem


def test_an_if_converter_is_if_conversion(policy: RelabelPolicy, taxonomy: Taxonomy) -> None:
    """A compiler's "if converter" pass (LLVM's AMDGPU back end, dev11) is the alias "if-conversion" of
    Branch elimination; a converter with a back-end prefix is no longer a new technique."""
    index = policy.index(_full_graph(taxonomy))
    choice = policy.choose(StepInput("If converter"), index)
    assert (choice.outcome, choice.technique) == ("merge", "Branch elimination"), choice
    assert policy.choose(StepInput("AMDGPUIfConverter"), index).outcome != "new"


# --- a heading's presentation word after a contained technique name (`scoring._HEADING_WORDS`) -------------


@pytest.mark.parametrize(
    ("name", "technique"),
    [
        ("Privatization Strategy", "Privatization"),
        ("Loop unrolling essentials", "Loop unrolling"),
        ("Kernel fusion overview", "Kernel fusion"),
    ],
)
def test_a_heading_word_after_a_technique_name_keeps_the_merge(
    policy: RelabelPolicy, taxonomy: Taxonomy, name: str, technique: str
) -> None:
    choice = policy.choose(StepInput(name), policy.index(_full_graph(taxonomy)))
    assert (choice.outcome, choice.technique) == ("merge", technique), choice


def test_a_heading_word_does_not_make_a_shared_word_a_technique(
    policy: RelabelPolicy, taxonomy: Taxonomy
) -> None:
    """ "Tiling Strategy" contains no one technique's label ("tiling" is loop tiling's, shared memory
    tiling's and register tiling's word): the heading word changes nothing, no tiling technique is chosen."""
    choice = policy.choose(StepInput("Tiling Strategy"), policy.index(_full_graph(taxonomy)))
    assert choice.outcome != "merge", choice


# --- a label left with a bare prefix is no key (`taxonomy.matching_key`) ------------------------------------


@pytest.mark.parametrize("name", ["Multi-GPU", "Multi GPU", "multi-gpu"])
def test_a_bare_prefix_key_matches_no_name(taxonomy: Taxonomy, name: str) -> None:
    """Kernel fission's alias "multi-kernel approach" normalises to "multi" ("kernel" and "approach" are
    filler), and so does "Multi-GPU": the taxonomy must not read a multi-GPU heading as that alias."""
    assert taxonomy.lookup(name) is None


def test_a_multi_gpu_heading_is_not_kernel_fission(policy: RelabelPolicy, taxonomy: Taxonomy) -> None:
    index = policy.index(_full_graph(taxonomy))
    assert index.label_hit("Multi-GPU") is None
    choice = policy.choose(StepInput("Multi-GPU"), index)
    assert (choice.outcome, choice.technique) != ("merge", "Kernel fission"), choice
