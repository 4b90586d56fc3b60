"""Session 23 (issue 28): which gate keeps the development sets' right merges out, dev5, other frameworks'
identifiers, and a name that writes another technique's identifier. A rule that let name and description
embeddings agreeing by a wide margin separate the best candidate (13b0707) was reverted: on the outside
set it made one more false merge (a diagnostic name merged into a technique), and precision comes first."""

from __future__ import annotations

import pytest

from bench.probes.relabel_bench import OUTSIDE_DATA, load_outside_items
from bench.probes.relabel_bench_gates import gate_of
from search.relabel.relabeler import RelabelPolicy, StepInput
from search.relabel.scoring import CandidateIndex, separation
from search.relabel.taxonomy import Taxonomy
from tests.unit.search.test_relabel_precision import (
    _check_development_set,
    _ranked,
)


def test_agreeing_embeddings_alone_do_not_separate() -> None:
    """Three name words, one of them the best candidate's: however far both embeddings lead, the name's
    lead alone (less than what its unexplained share asks) does not separate it; it is queued."""
    rows = [
        {"name_sim": 0.64, "text_sim": 0.55, "unexplained": 2 / 3},
        {"name_sim": 0.34, "text_sim": 0.25, "unexplained": 1.0},
        {"name_sim": 0.30, "text_sim": 0.20, "unexplained": 1.0},
    ]
    assert (separation(_ranked(rows), name_words=3, detail=False) or "").startswith("not_separated")


def test_a_name_about_studying_a_program_waits(policy: RelabelPolicy, full_index: CandidateIndex) -> None:
    """dev2 d023: both embeddings lead for occupancy launch bounds (0.36, 0.15), but it studies occupancy:
    queued, never merged."""
    choice = policy.choose(StepInput("Profile occupancy"), full_index)
    assert choice.outcome == "undecided", (choice.technique, choice.flags)


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
    _check_development_set(items, taxonomy, 5, least_new=10, least_merge=10)


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
    taxonomy: Taxonomy, name: str, technique: str, full_index: CandidateIndex
) -> None:
    """The same GPU constructs in HIP, SYCL, OpenCL, CUB, PyTorch, Warp and Triton-era APIs are
    mentions of the technique, as the CUDA ones are (general API knowledge, `taxonomy.v1.json`)."""
    assert technique in full_index.named(name)


def test_a_name_writing_another_techniques_identifier_waits(
    policy: RelabelPolicy, full_index: CandidateIndex
) -> None:
    """dev5 k013 (Mojo GPU puzzles): "warp.sum()" is a warp reduction; the name's embedding is nearest to
    the warp scan's "warp prefix sum". Name and scorer disagree: queued, never merged into the scan."""
    choice = policy.choose(StepInput("warp.sum() Essentials"), full_index)
    assert choice.outcome == "undecided", (choice.outcome, choice.technique)
    assert any(f.startswith("name_mentions_other") for f in choice.flags), choice.flags
    # an identifier of the chosen technique itself, or of none, changes nothing
    assert policy.choose(StepInput("Drop redundant __syncthreads"), full_index).technique == (
        "Synchronization reduction"
    )
    assert policy.choose(StepInput("warp reduce with __shfl_down_sync"), full_index).outcome == "merge"
