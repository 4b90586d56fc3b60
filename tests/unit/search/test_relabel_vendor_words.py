"""Other vendors' words for a CUDA idea (issue 28, session 20): OpenCL's and SYCL's work-group,
work-item and sub-group, HIP's wavefront, Intel's shared local memory, and "tensorcore" written as one
word read as CUDA's thread block, thread, warp, shared memory and tensor core. Word normalisation
(`VENDOR_TERMS`), not taxonomy aliases."""

from __future__ import annotations

import pytest

from search.relabel.relabeler import RelabelPolicy, StepInput
from search.relabel.scoring import CandidateIndex
from search.relabel.taxonomy import concept_tokens, vendor_terms


@pytest.mark.parametrize(
    ("vendor", "cuda"),
    [
        ("work-group size", "thread block size"),
        ("workgroup size", "thread block size"),
        ("Work Groups per compute unit", "thread blocks per SM"),
        ("one work-item per output", "one thread per output"),
        ("sub-group shuffle", "warp shuffle"),
        ("subgroup reduction", "warp reduction"),
        ("wavefront-level reduction", "warp-level reduction"),
        ("Wavefronts per SIMD", "warps per SIMD"),
        ("Shared Local Memory", "shared memory"),
        ("occupancy per compute unit", "occupancy per streaming multiprocessor"),
        ("Compute Units", "SMs"),
        ("matrix cores", "tensor cores"),
        ("Tensorcore", "tensor core"),
        ("tensor-cores", "tensor cores"),
        # session 21: Intel's XMX and SYCL's joint matrix, OpenCL's native_ and half_ math built-ins
        ("Intel XMX", "tensor cores"),
        ("XMX engines", "tensor core engines"),
        ("joint_matrix loads", "tensor core fragment loads"),
        ("native_sin", "fast math sin"),
        ("native_sin and half_cos", "fast math sin and fast math cos"),
        ("half_exp", "fast math exp"),
        # session 21: the platforms and vendors are filler, as "CUDA" is
        ("SYCL work-group size", "CUDA thread block size"),
        ("HIP streams", "streams"),
        ("OpenCL on Intel and AMD", "CUDA on NVIDIA"),
        # session 22 (dev4): PTX's CTA, AMD's MFMA and rocWMMA, HIP's non-pageable memory
        ("2-CTA Cluster", "thread block cluster"),
        ("CTAs per SM", "thread blocks per SM"),
        ("MFMA instructions", "tensor core mma instructions"),
        ("rocWMMA fragments", "wmma fragments"),
        ("Non-pageable memory", "page-locked memory"),
        ("non pageable host buffers", "page-locked host buffers"),
    ],
)
def test_vendor_words_read_as_cuda_words(vendor: str, cuda: str) -> None:
    assert concept_tokens(vendor) == concept_tokens(cuda)


@pytest.mark.parametrize(
    "text",
    [
        # CUDA's local memory is a thread's spill space; OpenCL's is shared memory: not mapped
        "local memory",
        # parts of other words
        "homework group",
        "frontwave",
        # "native" and "half" as words, and an identifier that is not an OpenCL math built-in
        "native code",
        "half the threads",
        "half_precision",
        # session 22: pageable memory is not pinned; words that only start like CTA or MFMA
        "pageable memory",
        "octal ctable",
        "mfmax",
    ],
)
def test_words_that_mean_something_else_in_cuda_stay(text: str) -> None:
    assert vendor_terms(text) == text


@pytest.mark.parametrize(
    ("name", "technique"),
    [
        ("Tensorcores", "Tensor core MMA"),
        ("Tuning the work-group size", "Block size tuning"),
        ("Programming Intel XMX Using SYCL", "Tensor core MMA"),
        ("Using native_ versions of math functions", "Fast math intrinsics"),
        # session 22 (dev4 h097, h074, h073; "note" and "syntax" are filler)
        ("2-CTA Cluster", "Thread block clusters"),
        ("A note on rocWMMA", "Tensor core MMA"),
        ("MFMA compiler intrinsic syntax", "Tensor core MMA"),
    ],
)
def test_vendor_names_merge_into_the_cuda_technique(
    policy: RelabelPolicy, name: str, technique: str, full_index: CandidateIndex
) -> None:
    choice = policy.choose(StepInput(name), full_index)
    assert (choice.outcome, choice.technique) == ("merge", technique), choice.flags
