"""A small glossary of GPU and HPC jargon, read before a technique name is scored (session 24, issue 28).

Names written outside the team use the trade's words for an idea the taxonomy writes in plain words:
compilers "hoist" what loop-invariant code motion moves, TVM "cooperatively fetches" the tile that
shared memory tiling loads, CUDA's "mapped" host memory is zero-copy memory. MiniLM and the word rules do not know these; the glossary writes the plain words in
their place, for names, details, labels and descriptions alike (the same normalisation as
`taxonomy.VENDOR_TERMS`, which maps other vendors' words one to one).

Rules for an entry: written from general knowledge of the field (compiler, CUDA, HIP, SYCL and library
documentation), never from a benchmark set's names (a test fails if a phrase of the outside set appears
in it); a phrase whose meaning does not depend on the framework; and the plain words of one technique or
of a facility, never a guess at which technique a heading means.
"""

from __future__ import annotations

import re

GLOSSARY: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), plain)
    for pattern, plain in (
        # A suspended hyphen carries the shared second word to the first ("distributed- vs.
        # shared-memory" is "distributed-memory vs. shared-memory"), so the first word is not read as
        # an adjective of the words after the conjunction.
        (r"\b([a-z0-9]+)-\s+(and|or|vs\.?|versus|to)\s+([a-z0-9]+)-([a-z0-9]+)\b", r"\1-\4 \2 \3-\4"),
        # A distributed-memory machine is one of nodes that exchange messages (MPI), not CUDA's
        # distributed shared memory of a thread block cluster.
        (r"\bdistributed[\s_-]+memory\b", "multi node message passing memory"),
        # Compilers' loop-invariant code motion (LICM) is called hoisting: an invariant expression is
        # "hoisted" out of the loop (LLVM's LICM pass, GCC's -fmove-loop-invariants).
        (r"\blicm\b", "loop invariant code motion"),
        (r"\bhoist(?:s|ed|ing)?\b", "loop invariant code motion"),
        # TVM's and Ansor's "cooperative fetching": the threads of a block load a tile into shared
        # memory together before computing on it.
        (r"\bcooperative(?:ly)?[\s_-]+fetch(?:es|ed|ing)?\b", "cooperative loading of shared memory tiles"),
        # "Array packing" (TVM, Halide, BLAS libraries' packed panels) rearranges an array in memory so
        # that the inner loop reads it contiguously: a data layout transformation.
        (r"\barray[\s_-]+packing\b", "array data layout transformation"),
        # CUDA's and HIP's "mapped" host allocations are pinned host buffers that the device addresses
        # directly: zero-copy access (cudaHostAllocMapped, hipHostMallocMapped).
        (r"\bmapped[\s_-]+(?:host[\s_-]+)?memory\b", "mapped host memory zero copy"),
        # The C preprocessor works at compile time: a "#define" constant is a compile-time constant.
        (r"\bpreprocessor\b", "compile time preprocessor"),
        # "multi-dimensional" is the taxonomy's "multidimensional" (the hyphen split one word in two).
        (r"\bmulti[\s_-]+dimensional\b", "multidimensional"),
        # The named parallel prefix (scan) algorithms: Hillis and Steele's, Kogge and Stone's, Brent
        # and Kung's, Sklansky's, Ladner and Fischer's (the scan and prefix-adder literature).
        (
            r"\b(?:hillis[\s_-]+steele|kogge[\s_-]+stone|brent[\s_-]+kung|sklansky|ladner[\s_-]+fischer)\b",
            "parallel prefix scan",
        ),
        # A persistent kernel is a long-lived (long-running) one whose blocks stay resident and pull
        # work (the persistent-threads papers).
        (r"\blong[\s_-]+(?:lived|running)\s+(blocks|threads|kernels?|ctas)\b", r"persistent \1"),
        # Caching results of a function call in a table is memoization (a lookup table).
        (r"\bmemoi[sz](?:e|es|ed|ing|ation)\b", "memoization lookup table"),
        # Tuned libraries for BLAS, FFT, sparse algebra, DNNs and parallel primitives are vendor
        # libraries (NVIDIA's, AMD's and Intel's library lists); random numbers and multi-GPU
        # communication libraries are left out (their headings are about other things), and so is a
        # library's API written as code (`cub::WarpReduce` names its own technique).
        (
            r"\b(thrust|cub|hipcub|rocprim|cublas(?:lt)?|hipblas(?:lt)?|rocblas|cufft|rocfft|hipfft"
            r"|cusparse|rocsparse|cusolver|rocsolver|cudnn|miopen|cutensor|onemkl)\b(?!::)",
            r"\1 vendor library",
        ),
    )
)
"""Jargon as patterns -> the plain words of the idea (session 24, issue 28)."""


def explain_jargon(text: str) -> str:
    """`text` with the glossary's jargon written in plain words (`GLOSSARY`)."""
    for pattern, plain in GLOSSARY:
        text = pattern.sub(plain, text)
    return text
