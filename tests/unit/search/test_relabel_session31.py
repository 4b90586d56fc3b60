"""Session 31 (issue 28): the thirteenth development set and the rules found on it."""

from __future__ import annotations

import pytest

from bench.probes.relabel_bench import OUTSIDE_DATA, load_outside_items
from search.relabel.relabeler import RelabelPolicy, StepInput
from search.relabel.scoring import CandidateIndex, StepText
from search.relabel.taxonomy import Taxonomy, concept_tokens, without_backend_prefix
from tests.unit.search.test_relabel_precision import _check_development_set

DEV13_DATA = OUTSIDE_DATA.with_name("dev13.jsonl")


def test_dev13_set_shares_nothing_with_the_outside_set_nor_the_other_development_sets(
    taxonomy: Taxonomy,
) -> None:
    """The thirteenth development set (`dev13.jsonl`, session 31: an LLM code optimizer's CUDA optimization
    menu, MLIR's affine, GPU and NVGPU pass names): the outside set's format, no taxonomy label word for
    word, and no item of the outside set, the other development sets or the general set."""
    items = load_outside_items(DEV13_DATA)
    assert len(items) >= 50
    _check_development_set(items, taxonomy, 13, least_new=14, least_merge=25)


# --- a back end's prefix on a pass name is not embedded (`taxonomy.without_backend_prefix`) ----------------


@pytest.mark.parametrize(
    ("name", "embedded"),
    [
        ("AMDGPUIfConverter", "branch Converter"),
        ("LLVMGPUTensorCoreVectorizationPass", "Tensor Core Vectorization Pass"),
        ("ROCDLPrefetchSharedMemoryPass", "Prefetch Shared Memory Pass"),
        ("IREELoopInvariantCodeMotionPass", "Loop Invariant Code Motion Pass"),
        # not a prefix: the whole word, one word after it, or a word of another kind
        ("AMDGPU", "AMDGPU"),
        ("SPIRVEmulate", "SPIRV Emulate"),
        ("GPUPipeliningPass", "GPU Pipelining Pass"),
        ("NVPTX back end", "NVPTX back end"),
    ],
)
def test_a_back_end_prefix_is_not_embedded(name: str, embedded: str) -> None:
    assert StepText(name).embedded_name() == embedded


def test_a_back_end_prefix_stays_a_word_of_the_name() -> None:
    """Only the embedded text loses the prefix: the words the gates read keep it (an unknown word)."""
    assert without_backend_prefix("LLVMGPUTensorCoreVectorizationPass") == "TensorCoreVectorizationPass"
    assert "llvmgpu" in concept_tokens("LLVMGPUTensorCoreVectorizationPass")


@pytest.mark.parametrize(
    ("name", "technique"),
    [("LLVMGPUTensorCoreVectorizationPass", "Tensor core MMA"), ("AMDGPUIfConverter", "Branch elimination")],
)
def test_a_pass_name_with_a_back_end_prefix_merges(
    full_index: CandidateIndex, policy: RelabelPolicy, name: str, technique: str
) -> None:
    """IREE's tensor-core vectorization pass (dev12) and LLVM's AMDGPU if-converter (dev11): queued
    before, the prefix pulling the name's embedding away from the technique."""
    choice = policy.choose(StepInput(name), full_index)
    assert (choice.outcome, choice.technique) == ("merge", technique), choice


@pytest.mark.parametrize(
    ("name", "not_into"),
    [
        ("ROCDLPrefetchSharedMemoryPass", "Unified memory prefetching"),
        ("AMDGPUAtomicOptimizer", "Atomic operation optimization"),
    ],
)
def test_a_back_end_prefix_still_holds_a_name_back(
    full_index: CandidateIndex, policy: RelabelPolicy, name: str, not_into: str
) -> None:
    """The prefix dropped from the words too merged these two wrongly (dev12: the pass prefetches into
    shared memory, double buffering; dev11: the optimizer aggregates atomics per wavefront): kept as a
    word, it still holds them back."""
    choice = policy.choose(StepInput(name), full_index)
    assert choice.outcome != "merge", choice
    assert not (choice.outcome == "merge" and choice.technique == not_into)


# --- "existing" is a hedge (`taxonomy._FILLER`) --------------------------------------------------------------


def test_existing_is_a_hedge() -> None:
    assert concept_tokens("Use existing libraries") == concept_tokens("Use libraries")


def test_use_existing_libraries_is_vendor_library_offload(
    full_index: CandidateIndex, policy: RelabelPolicy
) -> None:
    """CSC's HIP course's "Use existing libraries" (dev12) was created as a new technique (p 0.45)."""
    choice = policy.choose(StepInput("Use existing libraries"), full_index)
    assert (choice.outcome, choice.technique) == ("merge", "Vendor library offload"), choice
