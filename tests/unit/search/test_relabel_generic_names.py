"""Generic names (issue 28, session 20): a topic heading ("L2 cache optimizations") whose words are all
words of one technique's name is broader than that technique, and an advice against something ("Avoid
allocating ...") is the technique that reduces it only when it names at least half of that technique's
own naming words; both are queued for a curator instead of merged (`generic_name`, `name_generic`)."""

from __future__ import annotations

import pytest

from search.relabel.relabeler import RelabelPolicy, StepInput
from search.relabel.scoring import CandidateIndex, generic_name
from search.relabel.taxonomy import Taxonomy
from tests.unit.search.test_relabel_precision import _full_graph


@pytest.mark.parametrize(
    ("name", "technique", "detail", "lacking"),
    [
        ("L2 cache techniques", "L2 cache persistence", "", ("persistenc",)),
        ("Warp shuffle optimizations", "Warp-level shuffle reduction", "", ("level", "reduction")),
        (
            "Avoid allocating the whole device memory",
            "Stream-ordered memory allocation",
            "",
            ("stream", "order"),
        ),
        # the detail names what the heading lacks
        ("L2 cache optimizations", "L2 cache persistence", "the reused data persists in L2", ()),
        # a topic heading that names the technique whole
        ("Memory coalescing strategies", "Memory coalescing", "", ()),
        # a topic heading with a word the technique's name lacks is not broader than it
        ("Shared memory bank techniques", "Shared memory tiling", "", ()),
        # "avoid" is the technique's reducing word; one root, two stems ("divergent", "divergence")
        ("Avoid divergent warps", "Warp divergence reduction", "", ()),
        ("Avoid bank conflicts", "Bank conflict avoidance", "", ()),
        # neither a topic nor an advice against: other rules decide
        ("L2 cache", "L2 cache persistence", "", ()),
        ("Optimize the block size", "Block size tuning", "", ()),
    ],
)
def test_generic_name(
    taxonomy: Taxonomy, name: str, technique: str, detail: str, lacking: tuple[str, ...]
) -> None:
    assert generic_name(name, taxonomy.get(technique).labels, detail) == lacking


@pytest.mark.parametrize(
    ("name", "labels", "lacking"),
    [
        # a topic heading that says an alias whole names the technique
        ("Warp shuffle techniques", ("Warp-level shuffle reduction", "warp shuffle"), ()),
        ("Warp shuffle techniques", ("Warp-level shuffle reduction", "warp reduce"), ("level", "reduction")),
        # an advice against the problem an alias names ("divergent branches")
        ("Avoid divergent branches", ("Warp divergence reduction", "divergent branches"), ()),
        ("Avoid divergent branches", ("Warp divergence reduction",), ("warp",)),
    ],
)
def test_a_label_said_enough_names_the_technique(
    name: str, labels: tuple[str, ...], lacking: tuple[str, ...]
) -> None:
    assert generic_name(name, labels) == lacking


@pytest.mark.parametrize("name", ["L2 cache techniques", "Warp shuffle optimizations"])
def test_a_topic_heading_is_queued(policy: RelabelPolicy, name: str, full_index: CandidateIndex) -> None:
    choice = policy.choose(StepInput(name), full_index)
    assert choice.outcome == "undecided", (choice.technique, choice.flags)
    assert any(f.startswith("name_generic") for f in choice.flags), choice.flags


@pytest.mark.parametrize(
    ("name", "detail", "technique"),
    [
        (
            "L2 cache optimizations",
            "set an access policy window so the reused data persists",
            "L2 cache persistence",
        ),
        ("Memory coalescing strategies", "", "Memory coalescing"),
        ("Loop unrolling tricks", "", "Loop unrolling"),
        ("Avoid divergent warps", "", "Warp divergence reduction"),
    ],
)
def test_names_that_say_the_technique_still_merge(
    policy: RelabelPolicy, name: str, detail: str, technique: str, full_index: CandidateIndex
) -> None:
    choice = policy.choose(StepInput(name, detail), full_index)
    assert (choice.outcome, choice.technique) == ("merge", technique), choice.flags


def test_a_topic_heading_does_not_create_the_technique_it_is_broader_than(
    policy: RelabelPolicy, taxonomy: Taxonomy
) -> None:
    """On a graph without the technique, the taxonomy's canonical is not created for the heading either;
    a name that says the technique whole still creates it."""
    graph = [t for t in _full_graph(taxonomy) if t.name != "L2 cache persistence"]
    index = policy.index(graph)
    heading = policy.choose(StepInput("L2 cache techniques"), index)
    assert (heading.outcome, heading.canonical) == ("undecided", None), heading.flags
    whole = policy.choose(StepInput("L2 cache persistence tricks"), index)
    assert whole.outcome == "new" and whole.canonical is not None
    assert whole.canonical.name == "L2 cache persistence"
