"""Session 23 (issue 28): name and description embeddings that agree by a wide margin separate the best
candidate, though the name shares one word with it (`AGREE_NAME_LEAD`, `AGREE_TEXT_LEAD`)."""

from __future__ import annotations

import pytest

from bench.probes.relabel_bench import OUTSIDE_DATA, load_outside_items
from bench.probes.relabel_bench_gates import gate_of
from search.relabel.relabeler import RelabelPolicy, StepInput
from search.relabel.scoring import AGREE_NAME_LEAD, AGREE_TEXT_LEAD, WordCoverage, separation
from search.relabel.taxonomy import Taxonomy
from tests.unit.search.test_relabel_precision import (
    _check_named_set,
    _full_graph,
    _ranked,
    _shares_no_item,
)


def _one_word(name_lead: float, text_lead: float) -> list[dict[str, float]]:
    """Three name words, one of them the best candidate's: the name lead alone does not separate."""
    return [
        {"name_sim": 0.34 + name_lead, "text_sim": 0.25 + text_lead, "unexplained": 2 / 3},
        {"name_sim": 0.34, "text_sim": 0.25, "unexplained": 1.0},
        {"name_sim": 0.30, "text_sim": 0.20, "unexplained": 1.0},
    ]


def test_agreeing_leads_separate() -> None:
    wide = _ranked(_one_word(AGREE_NAME_LEAD + 0.01, AGREE_TEXT_LEAD + 0.01))
    assert separation(wide, name_words=3, detail=False) is None
    # either lead short of its margin: not separated (the evidence does not agree clearly)
    short_text = _ranked(_one_word(AGREE_NAME_LEAD + 0.2, AGREE_TEXT_LEAD - 0.02))
    assert (separation(short_text, name_words=3, detail=False) or "").startswith("not_separated")
    short_name = _ranked(_one_word(AGREE_NAME_LEAD - 0.02, AGREE_TEXT_LEAD + 0.2))
    assert (separation(short_name, name_words=3, detail=False) or "").startswith("not_separated")


def test_agreeing_leads_do_not_lift_the_word_stops() -> None:
    """A name mostly of words no candidate uses stays queued, however far both embeddings lead."""
    rows = _one_word(AGREE_NAME_LEAD + 0.2, AGREE_TEXT_LEAD + 0.2)
    own = WordCoverage({"t0": 0.3, "t1": 0.0, "t2": 0.0}, {"t0": 0, "t1": 0, "t2": 0}, unknown=2)
    reason = separation(_ranked(rows), name_words=3, detail=False, coverage=own)
    assert reason is not None and reason.startswith("name_unexplained")


@pytest.mark.parametrize(
    ("name", "technique"),
    [
        # dev4 h067 (Numba CUDA's guide) and general g166: one word shared, both embeddings far ahead
        ("On the use of the restrict keyword", "Pointer aliasing hints (__restrict__)"),
        ("elementwise_kernel_fusion", "Kernel fusion"),
    ],
)
def test_names_far_ahead_on_both_embeddings_merge(
    policy: RelabelPolicy, taxonomy: Taxonomy, name: str, technique: str
) -> None:
    choice = policy.choose(StepInput(name), policy.index(_full_graph(taxonomy)))
    assert (choice.outcome, choice.technique) == ("merge", technique), choice.flags


def test_a_name_about_studying_a_program_still_waits(policy: RelabelPolicy, taxonomy: Taxonomy) -> None:
    """dev2 d023: both embeddings lead for occupancy launch bounds (0.36, 0.15), but it studies occupancy."""
    choice = policy.choose(StepInput("Profile occupancy"), policy.index(_full_graph(taxonomy)))
    assert choice.outcome == "undecided"
    assert any(f.startswith("name_diagnostic") for f in choice.flags), choice.flags


def test_the_gate_probe_names_the_gate() -> None:
    assert gate_of(("not_separated: the name ...",), "undecided", "merge") == "not_separated"
    assert gate_of((), "new", "new") == "model_new"
    assert gate_of((), "undecided", "undecided") == "model_undecided"


DEV5_DATA = OUTSIDE_DATA.with_name("dev5.jsonl")


def test_dev5_set_shares_nothing_with_the_outside_set_nor_the_other_development_sets(
    taxonomy: Taxonomy,
) -> None:
    """The fifth development set (`dev5.jsonl`, session 23: CuPy's performance best practices, the Mojo
    GPU puzzles, JAX Pallas' Mosaic GPU pipelining guide, AdaptiveCpp's performance guide, Taichi's
    performance tuning article): the outside set's format, no taxonomy label word for word, and no item
    of the outside set, the other development sets or the general set (compared by program)."""
    items = load_outside_items(DEV5_DATA)
    assert len(items) >= 40
    _check_named_set(items, taxonomy, "dev5")
    _shares_no_item(
        items,
        "dev5",
        (
            (OUTSIDE_DATA, "the outside set"),
            (OUTSIDE_DATA.with_name("dev2.jsonl"), "dev2"),
            (OUTSIDE_DATA.with_name("dev3.jsonl"), "dev3"),
            (OUTSIDE_DATA.with_name("dev4.jsonl"), "dev4"),
            (OUTSIDE_DATA.with_name("general.jsonl"), "the general set"),
        ),
    )
    clear = [i for i in items if not i.doubtful]
    assert sum(i.truth == "NEW" for i in clear) >= 10, "dev5 needs near-misses that must not merge"
    assert sum(i.truth != "NEW" for i in clear) >= 10, "dev5 needs clear paraphrases that must merge"


@pytest.mark.parametrize(
    ("name", "technique"),
    [
        ("hipHostMalloc", "Pinned host memory"),
        ("x.pin_memory()", "Pinned host memory"),
        ("sycl::malloc_shared", "Unified memory prefetching"),
        ("__shfl_xor reduction (HIP)", "Warp-level shuffle reduction"),
        ("cub::WarpScan", "Warp-level scan with shuffles"),
        ("wp.atomic_add", "Atomic operation optimization"),
        ("native_exp", "Fast math intrinsics"),
        ("torch.cuda.Stream", "Streams and copy-compute overlap"),
        ("nvcuda::wmma and wgmma", "Tensor core MMA"),
        ("if constexpr", "Compile-time specialization"),
    ],
)
def test_other_frameworks_identifiers_name_their_technique(
    policy: RelabelPolicy, taxonomy: Taxonomy, name: str, technique: str
) -> None:
    """The same GPU constructs in HIP, SYCL, OpenCL, CUB, PyTorch, Warp and Triton-era APIs are
    mentions of the technique, as the CUDA ones are (general API knowledge, `taxonomy.v1.json`)."""
    assert technique in policy.index(_full_graph(taxonomy)).named(name)


def test_a_name_writing_another_techniques_identifier_waits(
    policy: RelabelPolicy, taxonomy: Taxonomy
) -> None:
    """dev5 k013 (Mojo GPU puzzles): "warp.sum()" is a warp reduction; the name's embedding is nearest to
    the warp scan's "warp prefix sum". Name and scorer disagree: queued, never merged into the scan."""
    choice = policy.choose(StepInput("warp.sum() Essentials"), policy.index(_full_graph(taxonomy)))
    assert choice.outcome == "undecided", (choice.outcome, choice.technique)
    assert any(f.startswith("name_mentions_other") for f in choice.flags), choice.flags
    # an identifier of the chosen technique itself, or of none, changes nothing
    index = policy.index(_full_graph(taxonomy))
    assert policy.choose(StepInput("Drop redundant __syncthreads"), index).technique == (
        "Synchronization reduction"
    )
    assert policy.choose(StepInput("warp reduce with __shfl_down_sync"), index).outcome == "merge"
