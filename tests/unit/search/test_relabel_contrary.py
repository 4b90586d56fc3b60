"""Contrary names (issue 28: "negated or contrastive mentions ... do not count"): a name that holds a
technique's own label right after a contrary word ("Avoid shared memory tiling") is not that technique
and is queued for a curator, whichever path (alias, taxonomy, model) would have decided it; a name whose
contrary word stands before the problem a technique fights ("Avoid bank conflicts", "Avoid warp
divergence") still merges into that technique. The names are written for these tests from the
taxonomy's labels, not from the outside set."""

from __future__ import annotations

import pytest

from search.relabel.relabeler import RelabelPolicy, StepInput
from search.relabel.scoring import CandidateIndex
from search.relabel.taxonomy import Taxonomy
from tests.unit.search.test_relabel_precision import _full_graph


@pytest.fixture(scope="module")
def index(policy: RelabelPolicy, taxonomy: Taxonomy) -> CandidateIndex:
    return policy.index(_full_graph(taxonomy))


@pytest.mark.parametrize(
    ("name", "technique"),
    [
        ("Avoid shared memory tiling", "Shared memory tiling"),  # merged by the model before
        ("Without loop unrolling", "Loop unrolling"),
        ("Disable loop unrolling", "Loop unrolling"),
        ("Get rid of loop unrolling", "Loop unrolling"),  # the alias path, "get rid of" is filler there
        ("Instead of kernel fusion", "Kernel fusion"),  # the alias path too
        ("Not using pinned memory", "Pinned host memory"),
        ("Avoid thread coarsening", "Thread coarsening"),
    ],
)
def test_a_name_against_a_technique_is_queued(
    policy: RelabelPolicy, index: CandidateIndex, name: str, technique: str
) -> None:
    assert technique in index.contradicted(name)
    choice = policy.choose(StepInput(name), index)
    assert choice.outcome == "undecided", (choice.outcome, choice.technique)
    assert choice.technique == name
    assert any(f.startswith("name_contradicts") and repr(technique) in f for f in choice.flags), choice.flags


@pytest.mark.parametrize(
    ("name", "technique"),
    [
        ("Avoid bank conflicts", "Bank conflict avoidance"),
        ("Eliminate shared memory bank conflicts", "Bank conflict avoidance"),
        ("Avoid warp divergence", "Warp divergence reduction"),
        ("Avoid branch divergence", "Warp divergence reduction"),
        ("Avoid atomic operations", "Atomic operation optimization"),  # "fewer atomics" is its alias
        ("Avoid divergent branches", "Warp divergence reduction"),  # an alias; the name says "reduction"
        ("Remove host-device copies", "Host-device transfer reduction"),
    ],
)
def test_avoiding_a_problem_still_merges(
    policy: RelabelPolicy, index: CandidateIndex, name: str, technique: str
) -> None:
    assert technique not in index.contradicted(name)
    choice = policy.choose(StepInput(name), index)
    assert (choice.outcome, choice.technique) == ("merge", technique), choice.flags


def test_the_problem_a_label_fights_is_not_the_technique(index: CandidateIndex) -> None:
    # "branch divergence" is an alias of Warp divergence reduction, and "branch divergence reduction"
    # says it is what the technique reduces; "shared memory reduction" is a reduction algorithm's own
    # name: its "reduction" is in the phrase, so avoiding it turns against the technique.
    assert "Warp divergence reduction" not in index.contradicted("Eliminate branch divergence")
    assert "Shared memory tree reduction" in index.contradicted("Avoid shared memory reduction")


def test_a_merge_elsewhere_stands(policy: RelabelPolicy, index: CandidateIndex) -> None:
    """Only the contradicted technique is refused: the name's own technique is another one."""
    name = "Loop tiling without shared memory tiling"
    assert "Shared memory tiling" in index.contradicted(name)
    choice = policy.choose(StepInput(name), index)
    assert (choice.outcome, choice.technique) == ("merge", "Loop tiling"), choice.flags


def test_a_contrary_name_is_not_created_silently(policy: RelabelPolicy, index: CandidateIndex) -> None:
    name = "No kernel fusion across library calls"  # created as a new technique before
    assert "Kernel fusion" in index.contradicted(name)
    choice = policy.choose(StepInput(name), index)
    assert choice.outcome == "undecided", (choice.outcome, choice.technique)
    assert any(f.startswith("name_contradicts") for f in choice.flags)
