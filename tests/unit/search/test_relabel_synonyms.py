"""Words of one idea that the taxonomy's own vocabulary already uses (issue 28, session 19): capping or
constraining a resource is limiting it (the launch-bounds alias "limit registers per thread"), a noun
meets the word the stemmer left apart from it ("residency", "traversal"), "usage" is filler as "use"
is, and a step's arrays are its data; session 21: "float32"/"float64"/"float16"/"bfloat16" are the IEEE
types' shorthands, a loop permutation is a loop interchange, and "'s" belongs to its word."""

from __future__ import annotations

import pytest

from search.relabel.relabeler import RelabelPolicy, StepInput
from search.relabel.scoring import CandidateIndex
from search.relabel.taxonomy import concept_tokens, label_key


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("capping registers", "limit registers"),
        ("constrained registers", "limiting registers"),
        ("data residency", "resident data"),
        ("traversal order", "traversing order"),
        ("register usage", "register use"),
        ("keep the arrays on the device", "keep data on the device"),
        # session 21: the IEEE types by NumPy's, PyTorch's and Julia's names, loop permutation, "'s"
        ("float32", "FP32"),
        ("Float64's", "double precision"),
        ("bfloat16 math", "half precision math"),
        ("loop permutation", "loop interchange"),
        ("the GPU's memory", "the GPU memory"),
        ("the kernel\u2019s loads", "kernel loads"),
    ],
)
def test_words_of_one_idea_meet(one: str, other: str) -> None:
    assert sorted(concept_tokens(one)) == sorted(concept_tokens(other))


def test_label_keys_keep_their_own_words() -> None:
    # `label_key` (the alias path) does not read the concepts: "cap" is not "limit" there
    assert label_key("cap registers") != label_key("limit registers")


def test_capping_registers_is_launch_bounds(policy: RelabelPolicy, full_index: CandidateIndex) -> None:
    choice = policy.choose(StepInput("Cap registers per thread to raise occupancy"), full_index)
    assert (choice.outcome, choice.technique) == ("merge", "Occupancy-aware launch bounds"), choice.flags


def test_register_usage_is_register_use(policy: RelabelPolicy, full_index: CandidateIndex) -> None:
    """ "usage" is filler as "use" is: the launch-bounds description's "register use" explains it."""
    choice = policy.choose(StepInput("Limit register usage to raise occupancy"), full_index)
    assert (choice.outcome, choice.technique) == ("merge", "Occupancy-aware launch bounds"), choice.flags


def test_resident_arrays_are_kept_data(policy: RelabelPolicy, full_index: CandidateIndex) -> None:
    """ "arrays" are the transfer technique's "data" ("keep data on the device")."""
    step = StepInput(
        "Keep the arrays resident on the device between iterations",
        "The time loop runs on the device: data is copied in once and out once.",
    )
    choice = policy.choose(step, full_index)
    assert (choice.outcome, choice.technique) == ("merge", "Host-device transfer reduction"), choice.flags
    # and AoS -> SoA is still the layout change (its arrays and structures alike)
    layout = policy.choose(StepInput("Convert the array of structures to a structure of arrays"), full_index)
    assert (layout.outcome, layout.technique) == ("merge", "Data layout transformation"), layout.flags


def test_capping_alone_is_not_created_as_new(policy: RelabelPolicy, full_index: CandidateIndex) -> None:
    """Too little to merge on, but no longer a new technique either: a curator decides."""
    choice = policy.choose(StepInput("Capping the register count"), full_index)
    assert choice.outcome == "undecided", (choice.outcome, choice.technique)


@pytest.mark.parametrize(
    ("name", "technique"),
    [
        ("Prefer float32 over float64", "Reduced precision arithmetic"),
        ("Compute in float16", "Reduced precision arithmetic"),
        ("Loop permutation", "Memory access pattern reordering"),
    ],
)
def test_type_names_and_permutations_merge(
    policy: RelabelPolicy, name: str, technique: str, full_index: CandidateIndex
) -> None:
    """Session 21 (dev3: "Use Float32's instead of Float64's", TVM's "Loop Permutation" were created new)."""
    choice = policy.choose(StepInput(name), full_index)
    assert (choice.outcome, choice.technique) == ("merge", technique), choice.flags
