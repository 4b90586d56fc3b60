"""The technique taxonomy: the canonical CUDA optimization techniques a curator recognises.

Shipped as `search/relabel/data/taxonomy.v1.json` (format `regraph.taxonomy/v1`, versioned by its `version`
field): per technique a name, a one-paragraph description, aliases (the other names teachers use),
the code-evidence signals that show it (`search.relabel.evidence.SIGNALS`) and the identifiers a step naming it
is expected to use. It serves twice:

- it seeds an empty graph (setting `REGRAPH_TAXONOMY`: the packaged file, a team's own file, or
  `none`), so construction merges onto canonical nodes from the first trajectory;
- the relabeler reads it as background knowledge: a graph technique whose name or alias is one of a
  taxonomy technique's labels inherits that technique's aliases, description and evidence for matching,
  and a step named after a taxonomy technique that the graph lacks becomes that canonical technique.

Labels are compared in a normalised form (`label_key`): case, punctuation, hyphens, filler words
("use", "apply", "optimization"...) and plural/verb endings do not matter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from search.errors import SearchError
from search.relabel.glossary import explain_jargon

TAXONOMY_FORMAT = "regraph.taxonomy/v1"
DEFAULT_TAXONOMY_PATH = Path(__file__).resolve().parent / "data" / "taxonomy.v1.json"

_FILLER = frozenset(
    {
        "a",
        "an",
        "the",
        "of",
        "to",
        "for",
        "with",
        "via",
        "by",
        "in",
        "on",
        "and",
        "use",
        "using",
        "used",
        "usage",  # the noun of "use": "register usage" says what "register use" says
        "apply",
        "applying",
        "add",
        "adding",
        "do",
        "doing",
        "introduce",
        "introducing",
        "implement",
        "implementing",
        "optimization",
        "optimisation",
        "optimize",
        "optimise",
        "technique",
        "step",
        "based",
        "cuda",
        # (session 21) the other platforms and the vendors say where, as "CUDA" and "GPU" do, not which
        # technique: "Programming Intel XMX Using SYCL ...", "HIP streams", "OpenCL work-groups"
        *("hip", "rocm", "opencl", "sycl", "oneapi", "nvidia", "amd", "intel"),
        # (session 26) a "rewriter" is a compiler pass that rewrites into what it names (XLA's
        # "conv_fusion_rewriter" fuses convolutions, "gemm_rewriter" calls the library's GEMM): the
        # word says how a compiler is organised, not which technique
        *("rewriter", "rewriters"),
        "gpu",
        "kernel",
        "better",
        "improved",
        "improve",
        # Informal filler: "just unroll it", "slap __ldg on the reads", "more stuff per thread".
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "just",
        "stuff",
        "thing",
        "things",
        "we",
        "our",
        "let",
        "so",
        "really",
        "little",
        "bit",
        "slap",
        "throw",
        # Verbs of doing that say nothing about which technique: "make the loads wide", "switch to
        # SoA", "get rid of the divides", "move the table to constant memory", "play with block dims".
        "make",
        "making",
        "made",
        "switch",
        "switching",
        "play",
        "get",
        "getting",
        "rid",
        "turn",
        "turning",
        "move",
        "moving",
        "put",
        "putting",
        "go",
        "stop",
        "keep",
        "keeping",
        "try",
        # (session 20) "process four outputs per thread", "handle several elements": doing, not which
        "process",
        "processing",
        "handle",
        "handling",
        "perform",
        "performing",
        "some",
        "all",
        "whole",
        "each",
        "every",
        "from",
        "into",
        "onto",
        "at",
        "up",
        "out",
        "instead",
        # Auxiliary verbs (session 20): "restructure the algorithm to be more suitable for the GPU"
        *("be", "is", "are", "was", "were", "been", "being", "can", "could", "should", "will", "would"),
        *("may", "might", "must", "does", "did", "has", "have", "had"),
        # Where, relative to what (session 20): "tree reduction within a thread block", "work spread
        # across warps", "some warps load, others compute". The nouns around them say which technique;
        # the preposition or pronoun does not. ("over", "through" and "inside" stay words: technique
        # descriptions use them, "read through the texture cache", "launch kernels from inside a kernel".)
        "within",
        "across",
        "among",
        "other",
        "others",
        "another",
        "wise",
        # Amounts: "four outputs per thread", "4 partial sums", "more work per thread".
        "more",
        "less",
        "fewer",
        # (session 26) "use minimal synchronization" says how much, as "fewer" does
        *("minimal", "minimum"),
        "several",
        "many",
        "multiple",
        "two",
        "three",
        "four",
        "eight",
        "sixteen",
        # Hedges (issue 28, dev2): "use single-precision when possible", "only where necessary", "if
        # needed" say when to apply a technique, not which one.
        *("possible", "possibly", "necessary", "needed"),
        # (session 31) "Use existing libraries" (dev12): what is there already, as "possible" is what can
        # be done; the noun after it says which technique
        "existing",
        # (session 22) Words about the text, not the technique: a guide's heading "A note on rocWMMA" or
        # "MFMA compiler intrinsic syntax" names rocWMMA, the MFMA intrinsics.
        *("note", "notes", "syntax"),
    }
)
COMPILER_NAMES = frozenset(
    {"triton", "tritongpu", "ttg", "ttng", "xla", "tvm", "tir", "mlir", "llvm", "nvvm", "hlo", "mhlo"}
)
"""(session 26) Compilers and their dialects, as their pass names start ("tritongpu-coalesce", TVM's
"tir", MLIR's "convert-gpu-to-nvvm"): real names, never a made-up word (`strange_words`), but kept as
words for the scorer: dropping them as filler let "tritongpu-prefetch" merge on "prefetch" alone."""
_FILLER_FAMILIES = (
    # (session 24) a heading's "approach" says how it is presented, not which technique ("the atomic
    # approach"). "strategy" was tried too and left out: "a tiling strategy" then merged into one of
    # the tiling techniques on the bare graph, a doubtful item of another tiling
    "approach",
    # (session 22) a hedge, as "possible" and "needed" are: "Considering native_ and half_ versions",
    # "Considerations for selecting the work-group size" say to weigh a technique, not which one
    "consider",
    "optimization",
    "optimize",
    "technique",
    "implement",
    "improve",
    "apply",
    "use",
    "introduce",
)
"""Filler words whose every form is filler (session 20): "optimizing", "optimized", "optimizations",
"techniques", "improves", "applies", "uses" stem like them ("Optimizing memory transfers" read an
unknown word `optim` before, which no technique's words use: its filler noun "optimization" is dropped)."""
_NUMBER = re.compile(r"^x?\d{1,2}x?$")
"""Small counts ("4 streams", "x8", "4x") say how much, not which technique; "128"(-bit) is kept."""
_TOKEN = re.compile(r"[a-z0-9_]+")

ABBREVIATIONS: dict[str, str] = {
    "smem": "shared memory",
    "shmem": "shared memory",
    "gmem": "global memory",
    "cmem": "constant memory",
    "const": "constant",
    "mem": "memory",
    "regs": "registers",
    "reg": "register",
    "thr": "thread",
    "thrs": "threads",
    "elem": "element",
    "elems": "elements",
    "occ": "occupancy",
    "ilp": "instruction level parallelism",
    "tlp": "thread level parallelism",
    "shfl": "shuffle",
    "lut": "lookup table",
    "aos": "array of structures",
    "soa": "structure of arrays",
    "fp16": "half precision",
    "bf16": "half precision",
    "fp32": "single precision",
    "fp64": "double precision",
    # NumPy's, PyTorch's and Julia's names of the IEEE types (session 21): float32 is single precision
    "float16": "half precision",
    "bfloat16": "half precision",
    "float32": "single precision",
    "float64": "double precision",
    "h2d": "host to device copy",
    "d2h": "device to host copy",
    "sm": "streaming multiprocessor",
    "tpb": "threads per block",
    "ldg": "read only cache ldg",
    "atomics": "atomic operations",
    "cg": "cooperative groups",
    "uvm": "unified memory",
    "perf": "performance",
    "calc": "calculation",
    "xfer": "transfer",
    "xfers": "transfers",
    "async": "asynchronous",
    "vec": "vector",
    "vectorise": "vectorize",
    "parallelisation": "parallelization",
    "optimisation": "optimization",
    "tile": "tiling",
    "struct": "structure",
    "structs": "structures",
    "dim": "dimension",
    "dims": "dimensions",
    "div": "division",
    "divs": "divisions",
    "divide": "division",
    "divides": "divisions",
    "coeff": "coefficient",
    "coeffs": "coefficients",
    "if": "branch",
    "ifs": "branches",
    "conditionals": "branches",
    "conditional": "branch",
    # Shared memory under its other names (the Best Practices Guide calls it on-chip memory; other
    # architectures call it a scratchpad or local data share).
    "scratchpad": "shared memory",
    "lds": "shared memory",
}
_WORD = re.compile(r"[A-Za-z0-9_]+")

BACKEND_PREFIX = re.compile(r"\b(?:LLVMGPU|LLVMCPU|SPIRV|ROCDL|IREE|AMDGPU|NVPTX)(?=(?:[A-Z][a-z]+){2})")
"""(session 31) A compiler back end's name at the head of a camel-case pass name, before two or more
capitalised words: LLVM's "AMDGPUIfConverter", "NVPTXLowerArgs" (dev11), IREE's
"LLVMGPUTensorCoreVectorizationPass", "ROCDLPrefetchSharedMemoryPass", "SPIRVVectorizeLoadStorePass",
"IREELoopInvariantCodeMotionPass" (dev12). It says for which target the pass runs, as "GPU" and "HIP" do,
not which technique."""


def without_backend_prefix(text: str) -> str:
    """`text` without a back end's prefix on a pass name (`BACKEND_PREFIX`): "AMDGPUIfConverter" ->
    "IfConverter". Only for the text a step's name is embedded as (`StepText.embedded_name`): the prefix
    stays a word of the name (an unknown one), so the gates that hold a name with words no technique uses
    still read it (session 31: dropped from the words as well, "ROCDLPrefetchSharedMemoryPass" merged
    into Unified memory prefetching and "AMDGPUAtomicOptimizer" into Atomic operation optimization)."""
    return BACKEND_PREFIX.sub("", text)


_CAMEL = re.compile(r"^(?:[a-z]+|[A-Z][a-z]+)(?:[A-Z][a-z]+)+$")
"""A word joined in camel case from words of at least two letters each ("loopUnrolling",
"WarpShuffleReduce", "cudaMemcpyAsync"); "SoA", "SpMV" or "tex2D" are not."""
_CAMEL_PART = re.compile(r"[A-Z]?[a-z]+")
_CAMEL_ACRONYM_PART = re.compile(r"[A-Z][a-z]+|[a-z]+|[A-Z]+?(?=[A-Z][a-z]|$)")
"""(session 28) The parts of a camel-case word that also holds acronyms: a capitalised or lower-case
word, or a run of capitals ("CUBLAS", "PTX") up to the next capitalised word ("CUFFTPlan" -> "CUFFT",
"Plan")."""


def _acronym_parts(part: str) -> list[str] | None:
    """The words of a camel-case `part` that joins words with acronyms ("matrixMulCUBLAS",
    "inlinePTX", "simpleCUFFT"), or None when it is not one.

    Letters only, and every part at least three letters long: one word written in mixed case stays
    whole ("SoA", "SpMV", "cuBLAS", "GPUs", "APIs", "PCIe", "NVLink", "OpenMP"), and so does a word with
    digits ("tex2D", "bf16TensorCoreGemm", "BF16Promote": a type or version tag joined to a verb may
    name the operation on the type as well as the type used, so it is read as before, as one word).
    """
    if not part.isalpha() or part.isupper() or part.islower():
        return None
    pieces = _CAMEL_ACRONYM_PART.findall(part)
    if len(pieces) < 2 or "".join(pieces) != part:
        return None
    short = [piece for piece in pieces if len(piece) < 3]
    # (session 29) one two-letter piece among at least two words of three letters or more ("SILoadStore",
    # "AMDGPUIfConverter"): the words around it say what the identifier is; "NVLink", "OpenMP", "SpMV"
    # have one word or none beside theirs and stay whole
    if short and not (len(short) == 1 and len(short[0]) == 2 and len(pieces) - 1 >= 2):
        return None
    return pieces


def split_compound(word: str, *, plurals: bool = False) -> str:
    """A snake_case or camelCase word as its words ("shared_memory_tiling" -> "shared memory tiling",
    "LoopUnrolling" -> "Loop Unrolling"), each shorthand written out.

    Technique databases and logs key their entries so; the words, not the joined form, say which
    technique. CUDA's own identifiers that start with an underscore (`__ldg`, `__launch_bounds__`,
    `__shfl_down_sync`) stay whole: they are matched as identifiers.
    """
    if word.startswith("_"):
        return word
    parts = [p for p in word.split("_") if p] if "_" in word else [word]
    words: list[str] = []
    for part in parts:
        if _CAMEL.match(part):
            words.extend(_CAMEL_PART.findall(part))
        else:
            words.extend(_acronym_parts(part) or [part])
    if len(words) <= 1:
        return shorthand(word.lower().strip("_"), plurals=plurals) or word
    return " ".join(ABBREVIATIONS.get(w.lower(), w) for w in words)


def shorthand(word: str, *, plurals: bool = False) -> str | None:
    """What a lower-case shorthand stands for, or None; with `plurals` its plural too ("luts" like
    "lut", "tiles" like "tile": for word matching, not for the text an embedding reads)."""
    written = ABBREVIATIONS.get(word)
    if written is None and plurals and len(word) > 2 and word.endswith("s"):
        written = ABBREVIATIONS.get(word[:-1])
    return written


_CL_MATH = r"(?:cos|divide|exp|exp2|exp10|log|log2|log10|powr|recip|rsqrt|sin|sqrt|tan)"
"""The OpenCL C math built-ins that have native_ and half_ versions."""
VENDOR_TERMS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), cuda)
    for pattern, cuda in (
        # OpenCL and SYCL: a work-group is a thread block, a work-item a thread, a sub-group a warp
        # (Khronos OpenCL 3.0 and SYCL 2020 execution models; AMD's HIP terminology table and Intel's
        # "Migrating from CUDA to SYCL" mapping tables write the same pairs).
        (r"\bwork[\s_-]?groups\b", "thread blocks"),
        (r"\bwork[\s_-]?group\b", "thread block"),
        (r"\bwork[\s_-]?items\b", "threads"),
        (r"\bwork[\s_-]?item\b", "thread"),
        (r"\bsub[\s_-]?groups\b", "warps"),
        (r"\bsub[\s_-]?group\b", "warp"),
        # HIP and AMD: a wavefront is a warp (HIP terminology table).
        (r"\bwavefronts\b", "warps"),
        (r"\bwavefront\b", "warp"),
        # OpenCL and HIP: a compute unit is a streaming multiprocessor (HIP terminology table); AMD's
        # matrix cores are its tensor cores (AMD's matrix-core guides for CDNA).
        (r"\bcompute[\s_-]units\b", "streaming multiprocessors"),
        (r"\bcompute[\s_-]unit\b", "streaming multiprocessor"),
        (r"\bmatrix[\s_-]cores\b", "tensor cores"),
        (r"\bmatrix[\s_-]core\b", "tensor core"),
        # Intel's shared local memory (SLM) is CUDA's shared memory (oneAPI GPU optimization guide). Plain
        # "local memory" is left alone: in OpenCL it is shared memory, in CUDA a thread's spill space.
        (r"\bshared[\s_-]local[\s_-]memory\b", "shared memory"),
        # Intel's Xe Matrix Extensions (XMX) are its GPUs' tensor cores, and SYCL's joint_matrix API is
        # the WMMA of "tensor hardware" (Intel oneAPI GPU Optimization Guide, "Programming Intel XMX
        # Using SYCL Joint Matrix Extension": one API for Intel AMX, Intel XMX and NVIDIA Tensor Cores).
        (r"\bxmx\b", "tensor cores"),
        (r"\bjoint[\s_-]matri(?:x|ces)\b", "tensor core fragments"),
        # OpenCL C's native_ and half_ math built-ins (native_sin, half_exp, ...) trade accuracy for
        # speed: "may map to one or more native device instructions and will typically have better
        # performance", their accuracy implementation-defined (native_) or about 10 bits (half_) (Khronos
        # OpenCL 1.2 reference pages, "Math built-in functions"; SYCL 2020's sycl::native and sycl::half_
        # precision namespaces are the same). CUDA's are the fast math intrinsics (__sinf, __expf). Only the
        # prefix on its own ("native_ and half_ versions") or on a math function's name: "half_precision"
        # is half precision.
        (r"\b(?:native|half)_(?=" + _CL_MATH + r"\b|(?!\w))", "fast math "),
        # (session 22) PTX's and CUTLASS's "CTA" (cooperative thread array) is CUDA C++'s thread block
        # (PTX ISA, "Cooperative Thread Arrays": "a CTA is an array of threads", the thread block of
        # the programming guide); "2-CTA cluster" is a cluster of two thread blocks.
        (r"\bctas\b", "thread blocks"),
        (r"\bcta\b", "thread block"),
        # AMD's MFMA (matrix fused multiply-add) instructions are what its matrix cores run, as
        # mma.sync is what tensor cores run (AMD CDNA ISA guides and the lab note "AMD matrix cores");
        # rocWMMA is AMD's WMMA API for them (ROCm rocWMMA documentation: "the AMD counterpart of
        # CUDA's WMMA"). Before "fused multiply-add" could read as FMA.
        (r"\bmfma\b", "tensor core mma"),
        (r"\brocwmma\b", "wmma"),
        # HIP's and AMD's "non-pageable" host memory is CUDA's page-locked (pinned) memory (HIP
        # programming guide, "pinned (non-pageable) host memory").
        (r"\bnon[\s_-]?pageable\b", "page-locked"),
        # (session 22) OpenCL C's "built-in functions" and the compilers' "builtins" (HIP's and Clang's
        # __builtin_* functions) are what CUDA calls intrinsics (Khronos OpenCL C specification,
        # "Built-in Functions"; Clang's "Builtin Functions"): "Math Built-Ins", "MFMA builtins".
        # An identifier such as __builtin_nontemporal_load is code and stays whole.
        (r"\bbuilt[\s-]?ins\b|\bbuiltins\b", "intrinsics"),
        (r"\bbuilt[\s-]?in\b|\bbuiltin\b", "intrinsic"),
        # The same words joined or hyphenated: "tensorcore", "tensor-core".
        (r"\btensor[_-]?cores\b", "tensor cores"),
        (r"\btensor[_-]?core\b", "tensor core"),
    )
)
"""Other vendors' and APIs' words for a CUDA idea, as patterns -> the CUDA words (session 20, issue 28).

Only mappings the APIs' own documentation states one to one, and phrases, not single words where
CUDA means something else by the same word. They are read before the words are split, so that a
hyphenated "Work-Group" is one idea, and they are word normalisation for every text (names,
descriptions, aliases alike), not taxonomy aliases."""


def vendor_terms(text: str) -> str:
    """`text` with other vendors' words for a CUDA idea written in CUDA's (`VENDOR_TERMS`)."""
    for pattern, cuda in VENDOR_TERMS:
        text = pattern.sub(cuda, text)
    return text


_COMPARED_WITH_ITS_ABSENCE: tuple[re.Pattern[str], ...] = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"\b(?P<word>[a-z][a-z-]+[a-z])\s+(?:vs\.?|versus)\s+(?:un-?|non-?)(?P=word)\b",
        r"\b(?:un-?|non-?)(?P<word>[a-z][a-z-]+[a-z])\s+(?:vs\.?|versus)\s+(?P=word)\b",
    )
)
"""A word set against its own negation ("Fused vs Unfused Kernels", "non-coalesced vs. coalesced
access"; session 27, issue 28): guides and course books head the section that teaches a technique as a
comparison of the code with and without it, so the heading names the technique once, by its word
("Fused Kernels"). Only a word against the same word with "un-" or "non-": "Small Register Mode vs.
Large Register Mode" or "Ahead-of-time vs JIT compilation" compare two different things and stay as
written."""


def compared_with_its_absence(text: str) -> str:
    """`text` with "X vs un-X" (or "non-X vs X") written as X (`_COMPARED_WITH_ITS_ABSENCE`)."""
    for pattern in _COMPARED_WITH_ITS_ABSENCE:
        text = pattern.sub(lambda match: match.group("word"), text)
    return text


def expand_abbreviations(text: str, *, plurals: bool = False) -> str:
    """`text` with common CUDA shorthands written out ("smem" -> "shared memory"), other vendors' words
    in CUDA's (`vendor_terms`: "work-group" -> "thread block"), jargon in plain words (`glossary`:
    "hoisting" -> "loop invariant code motion") and snake_case or camelCase words split (`split_compound`); with `plurals`, plural shorthands too (`shorthand`)."""
    text = explain_jargon(vendor_terms(compared_with_its_absence(text)))
    return _WORD.sub(lambda match: _split_and_explain(match.group(0), plurals=plurals), text)


def _split_and_explain(word: str, *, plurals: bool) -> str:
    """`split_compound`, then other vendors' words and jargon read again in the split words (session 25):
    a joined identifier hides its words from the word-bounded patterns ("HoistIfThenElse" is "hoist if
    then else", "RewriteCooperativeFetch" "rewrite cooperative fetch"). Only a word that split: the
    text's other words were read already, and a pattern's plain words must not be read twice."""
    split = split_compound(word, plurals=plurals)
    if " " in split and " " not in word:
        split = explain_jargon(vendor_terms(split))
    return split


def _stem(token: str) -> str:
    """A light stemmer: enough to make "unrolling"/"unrolled"/"unroll" and "loops"/"loop" meet.

    A final "e" goes too ("restructure"/"restructuring", "coalesce"/"coalesced"), and "-less" words
    keep their root ("branchless" -> "branch": the technique is about the branch). A word ending in a
    double s keeps it, and "-sses" loses only "es", so "access" and "accesses" meet at "access".

    A verb and its noun meet: "-ize"/"-ise" go like "-ization" ("vectorize", "vectorized" and
    "vectorization" -> "vector"), and an "-ate" verb loses its "at" like its "-ation" noun ("eliminate",
    "eliminating" and "elimination" -> "elimin"; "private", "privatize" -> "priv") when at least four
    letters stay.
    """
    if token in _FUSE:
        # (session 24) "fuse", "fused", "fusing" and "fusion" meet ("fus", "fuse" and "fusion" before):
        # "Fuse operations" is kernel fusion
        return "fusion"
    if token.endswith("wise") and len(token) - 4 >= 3:
        # "elementwise", "blockwise", "rowwise" are their root's (session 20): "element-wise" reads
        # "element" and filler "wise"; "-wise" is no "-ise" verb ("elementw" before)
        return _stem(token[:-4])
    verb_at = token.endswith(_AT_ENDINGS)
    token = _stem_suffixes(token)
    if verb_at and token.endswith("at") and not token.endswith("eat") and len(token) >= 6:
        # ("repeated" keeps "repeat": its "at" is the root's)
        token = token[:-2]
    return token


_FUSE = frozenset({"fuse", "fused", "fuses", "fusing", "fusion", "fusions"})
"""A verb whose noun ends in "-sion" (`_stem`)."""

_AT_ENDINGS: tuple[str, ...] = (
    *("ate", "ated", "ates", "ating", "ation", "ations"),
    *("ization", "izations", "isation", "isations"),
    *("atize", "atized", "atizes", "atizing", "atise", "atised"),
    *("ator", "ators"),
)
"""Endings after which a stem's final "at" is the "-ate" verb's, not the root's (`_stem`)."""


def _stem_suffixes(token: str) -> str:
    """`_stem` without its last step (an "-ate" verb's "at")."""
    if token.endswith("ically") and len(token) - 4 >= 4:
        # an adverb meets its adjective: "atomically" -> "atomic", "dynamically" -> "dynamic"
        token = token[:-4]
    elif token.endswith("ously") and len(token) - 2 >= 7:
        # "asynchronously" -> "asynchronous" (-> "asynchron", below)
        token = token[:-2]
    if token.endswith("less") and len(token) - 4 >= 4:
        token = token[:-4]
    if token.endswith("ss"):
        # "access"/"accesses", "pass"/"passes": a double s is the root's, not a plural.
        return token
    if token.endswith("ous") and len(token) > 6:
        # "synchronous" -> "synchron" (meets "synchronize"), "contiguous" -> "contigu"; not a plural.
        return token[:-3]
    if token.endswith("sses") and len(token) > 5:
        return token[:-2]
    # (session 29) an agent noun meets its verb and the verb's noun: "-ator" like "-ate" ("accumulator",
    # "allocator", "iterator": `_stem` then drops the verb's "at" as for "accumulation"; "equator" keeps
    # its letters, four stay before the ending), "-izer" like "-ize" (below: "vectorizer" like
    # "vectorization"); and an "-uce" verb meets its "-uction" noun ("reduce", "reducing" -> "reduction",
    # "introduce" -> "introduction"; three letters at least before "uce")
    for suffix, cut in (("ators", 3), ("ator", 2)):
        if token.endswith(suffix) and len(token) - len(suffix) >= 4:
            return token[:-cut]
    # (session 30) an "-ert" verb meets its "-ersion" noun and its "-erter" agent noun ("convert",
    # "conversion", "converter"; "invert", "inversion"): three letters at least before the ending, so
    # "version" and "aversion" keep theirs
    for suffix in ("ersions", "ersion", "erters", "erter"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            return token[: -len(suffix)] + "ert"
    for suffix in ("uces", "uced", "ucing", "uce"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            return token[: -len(suffix)] + "uction"
    if len(token) > 4 and token.endswith(("ies", "ied")):
        # "copies"/"copied" -> "copy", "libraries" -> "library"
        return token[:-3] + "y"
    for suffix, keep in (
        ("izers", 4),
        ("izer", 4),
        ("isers", 5),
        ("iser", 5),
        ("izations", 3),
        ("ization", 3),
        ("isations", 3),
        ("isation", 3),
        ("izing", 4),
        ("ized", 4),
        ("izes", 4),
        ("ize", 4),
        ("ising", 5),
        ("ised", 5),
        ("ises", 5),
        ("ise", 5),
        ("ations", 3),
        ("ation", 3),
        ("ing", 3),
        ("ed", 3),
        ("es", 4),
        ("s", 3),
    ):
        if token.endswith(suffix) and len(token) - len(suffix) >= keep:
            token = token[: -len(suffix)]
            if (
                suffix in ("ing", "ed")
                and len(token) > 3
                and token[-1] == token[-2]
                and token[-1] not in "lsfz"
            ):
                # "splitting" -> "split", "padded" -> "pad", "overlapping" -> "overlap" (not "spill", "pass")
                token = token[:-1]
            break
    if token.endswith("e") and len(token) > 4:
        token = token[:-1]
    return token


_FILLER_STEMS = frozenset(_stem(w) for w in _FILLER_FAMILIES)


_CLAUSE_END = r"(?=[,.;:!?()\[\]]|\s[-\u2013\u2014]\s|\s(?:and|but|so|which|then)\s|$)"
_CONTRASTS: tuple[re.Pattern[str], ...] = (
    # "pad the tile instead of ...", "rather than ...", "without ...": what follows is not the step.
    re.compile(
        r"\b(?:instead\s+of|rather\s+than|as\s+opposed\s+to|in\s+place\s+of|in\s+lieu\s+of|without|"
        r"no\s+longer|not)\b.*?" + _CLAUSE_END,
        re.IGNORECASE,
    ),
    # "switch from X to Y", "moved away from X", "replace X with Y": X is what the step left behind.
    re.compile(
        r"\b(?:switch\w*|mov\w*|chang\w*|go\w*|went|migrat\w*|convert\w*|port\w*)\s+(?:away\s+)?from\b.*?"
        r"(?=\bto\b|\binto\b|\bwith\b|[,.;:!?()]|$)",
        re.IGNORECASE,
    ),
    re.compile(r"\breplac\w*\b.*?(?=\bwith\b|\bby\b|[,.;:!?()]|$)", re.IGNORECASE),
)


def strip_contrasts(text: str) -> str:
    """`text` without its negated or contrastive parts.

    In a description or a step's detail, "uses warp shuffles instead of shared memory", "switch from
    __ldg to texture objects" or "replace the atomics with a private histogram" name what the step is
    *not*: shared memory, `__ldg` and the atomics must not count as evidence for the techniques they
    name. The part after the contrast marker, up to the end of its clause, is dropped ("from X to Y"
    keeps Y). Used on descriptions and details, not on names (a name's "without" is handled by
    `content_tokens`; aliases such as "select instead of branch" stay matchable).
    """
    out = text
    for pattern in _CONTRASTS:
        out = pattern.sub(" ", out)
    return out


_APOSTROPHE_S = re.compile(r"(?<=\w)['\u2019]s\b")


def content_tokens(text: str) -> list[str]:
    """The stemmed content words of `text` (`_content_tokens`, cached: names and labels repeat)."""
    return list(_content_tokens(text))


@lru_cache(maxsize=16384)
def _content_tokens(text: str) -> tuple[str, ...]:
    """The stemmed content words of `text` (filler words dropped; `__ldg` keeps its inner underscores).

    "per" binds to the word after it ("outputs per thread" -> output, per_thread), so that "outputs
    per thread" (coarsening) and "thread per output" (a first port) do not read as the same words.
    """
    # "Float32's", "the GPU's": a possessive or a plural written with an apostrophe is its word's (session 21)
    text = _APOSTROPHE_S.sub("", text)
    lowered = expand_abbreviations(text, plurals=True).lower().replace("-", " ").replace("/", " ")
    # "Loop tiling without shared memory" is not about shared memory: what follows "without" is dropped.
    lowered = lowered.split(" without ", 1)[0]
    words = [
        stem
        for t in _TOKEN.findall(lowered)
        if t not in _FILLER and t.strip("_") not in _FILLER and not _NUMBER.match(t)
        for stem in (_stem(t.strip("_") or t),)
        if stem not in _FILLER_STEMS
    ]
    out: list[str] = []
    for word in words:
        if out and out[-1] == "per":
            out[-1] = f"per_{word}"
        else:
            out.append(word)
    return tuple(out)


# Words of the CUDA vocabulary that name one idea, as stems (`content_tokens`) -> one word. Used by the
# scorer's word features and the precision gate (what a technique's words explain of a name), never by
# `label_key`: two labels are still the same only when their own words are.
CONCEPTS: dict[str, str] = {
    "cpu": "host",
    "copy": "transfer",
    "memcpy": "transfer",
    # "data movement" between host and device is the copies (session 20)
    "movement": "transfer",
    "fus": "fuse",
    "fusion": "fuse",
    "merg": "fuse",
    "combin": "fuse",
    "fission": "split",
    "decompos": "split",
    "decomposition": "split",
    "synchroniz": "sync",
    "synchron": "sync",
    "barrier": "sync",
    "balanc": "balance",
    "even": "balance",
    "evenly": "balance",
    "distribut": "balance",
    "distribution": "balance",
    "interchang": "reorder",
    # a loop permutation is a loop interchange (session 21: TVM's schedule tutorials' "Loop Permutation")
    "permut": "reorder",
    "swap": "reorder",
    "rearrang": "reorder",
    "wider": "wide",
    "widen": "wide",
    "multiplic": "multiply",
    "division": "divide",
    "divid": "divide",
    "allocat": "alloc",
    "calcul": "comput",
    "concurrent": "overlap",
    "concurrency": "overlap",
    "concurrently": "overlap",
    "preload": "prefetch",
    "dedic": "specializ",
    "special": "specializ",
    "skip": "prune",
    "prun": "prune",
    "cull": "prune",
    "cubla": "library",
    "cufft": "library",
    "cuspars": "library",
    "curand": "library",
    "cudnn": "library",
    "cub": "library",
    "thrust": "library",
    "nccl": "library",
    "tabul": "tabl",
    "lift": "hoist",
    # CUDA's barrier intrinsics are the synchronization they name.
    "syncthread": "sync",
    "syncwarp": "sync",
    # Limiting a resource (the launch-bounds alias "limit registers per thread"): "capping register
    # usage", "constrain registers".
    "cap": "limit",
    "constrain": "limit",
    # A noun and its adjective or verb that the stemmer leaves apart.
    "residency": "resident",
    # What a step keeps, moves or lays out: its arrays are its data ("keep the arrays resident on the
    # device" is the transfer technique's "keep data on the device").
    "array": "data",
    "traversal": "travers",
    # Verbs of redoing an algorithm: "rework the algorithm" restructures it.
    "rework": "restructur",
    "redesign": "restructur",
    "reformul": "restructur",
}


def concept_tokens(text: str) -> list[str]:
    """`content_tokens` with the words of one idea made one (`CONCEPTS`: "copies" and "transfers",
    "CPU" and "host", "combining" and "fused")."""
    return [CONCEPTS.get(t, t) for t in content_tokens(text)]


WORKLOADS = frozenset(
    _stem(w)
    for w in (
        *("matmul", "matmuls", "gemm", "gemms", "sgemm", "hgemm", "dgemm", "gemv", "spmv", "spmm"),
        *("softmax", "layernorm", "rmsnorm"),
    )
)
"""Names of the computation a kernel performs, as stems (session 21, issue 28): the operators of the
BLAS and of ML libraries (cuBLAS's GEMM and GEMV, cuSPARSE's SpMV and SpMM, the softmax and
normalisation layers of cuDNN and PyTorch), words no technique of the taxonomy uses. Words the taxonomy
uses ("histogram", "stencil", "scan", "transpose", "matrix") are not workloads here: they tell
techniques apart. (A camel-case "LayerNorm" is split into "Layer Norm" first, so it is no workload
word.) See `workload_key` and `kernel_keys`."""


def label_key(text: str) -> str:
    """The normalised form two labels are compared in (word order kept)."""
    return " ".join(content_tokens(text))


BARE_PREFIXES = frozenset({"multi", "non", "pre", "semi", "sub", "co", "inter", "intra", "un"})
"""(session 30) Combining prefixes that say nothing alone: a label whose only word left is one of them
("multi-kernel approach" -> "multi": "kernel" and "approach" are filler) is no key to match names by,
or every "Multi-GPU" heading (dev2, dev5, dev6, dev10, the general set: multi-GPU programming, a
technique the taxonomy lacks) would meet it (`Taxonomy.lookup`, `CandidateIndex.label_hit`)."""


def matching_key(key: str) -> bool:
    """Whether a label's `label_key` or `bag_key` may match names: not empty, not a bare prefix."""
    return bool(key) and key not in BARE_PREFIXES


def bag_key(text: str) -> str:
    """The normalised words of a label in sorted order: "restructure the algorithm" meets
    "algorithm restructuring". Matched only where no two techniques share a bag."""
    return " ".join(sorted(set(content_tokens(text))))


def workload_key(name: str) -> str | None:
    """`label_key` of `name` without its workload words (`WORKLOADS`), or None when it has none ("" when
    it is only workload words: "GEMM", "softmax kernel")."""
    words = content_tokens(name)
    if not any(w in WORKLOADS for w in words):
        return None
    return " ".join(w for w in words if w not in WORKLOADS)


def kernel_keys(labels: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The keys a workload name may meet (session 21, issue 28), from `(owner, label)` pairs: where a
    label says a technique of "the kernel" ("persistent kernel", "templated kernel"; "kernel" is filler),
    a name may say it of a workload ("Persistent GEMM", "Templated matmul"), so the label's `label_key`
    -> its owner. Only when each of the key's words is in the labels of that one owner: "cooperative
    kernel" (grid-wide synchronization) is left out because "cooperative tile loading" is shared memory
    tiling's ("Cooperative GEMM" is CUTLASS's warp-group schedule), "fused kernel" because "fused
    multiply-add" is another technique's; and only labels with the word "kernel": the alias "pruning"
    does not make "Pruned GEMM" (pruned weights) work pruning."""
    pairs = list(labels)
    owners: dict[str, set[str]] = {}
    for owner, label in pairs:
        for word in content_tokens(label):
            owners.setdefault(word, set()).add(owner)
    out: dict[str, str] = {}
    for owner, label in pairs:
        if not re.search(r"\bkernels?\b", label, re.IGNORECASE):
            continue
        key = label_key(label)
        if matching_key(key) and all(owners.get(w) == {owner} for w in key.split()):
            out.setdefault(key, owner)
    return out


class TaxonomyError(SearchError):
    """The taxonomy file is missing or not a valid `regraph.taxonomy/v1` document."""


class TaxonomyTechnique(BaseModel):
    """One canonical technique."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    category: str = ""
    description: str = Field(min_length=1)
    aliases: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list, description="signals (search.relabel.evidence.SIGNALS)")
    mentions: list[str] = Field(default_factory=list, description="identifiers a step naming it uses")

    @property
    def labels(self) -> list[str]:
        """The name first, then the aliases."""
        return [self.name, *self.aliases]


class TaxonomyDocument(BaseModel):
    """The file's shape."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: str
    version: str
    sources: list[str] = Field(default_factory=list)
    techniques: list[TaxonomyTechnique]


@dataclass(frozen=True)
class Taxonomy:
    """A loaded taxonomy with its label index."""

    version: str
    techniques: tuple[TaxonomyTechnique, ...]
    source: str = ""
    _by_key: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    _by_name: dict[str, TaxonomyTechnique] = field(default_factory=dict, compare=False, repr=False)
    _by_bag: dict[str, str | None] = field(default_factory=dict, compare=False, repr=False)
    _by_kernel_key: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for technique in self.techniques:
            for label in technique.labels:
                bag = bag_key(label)
                if matching_key(bag):
                    owner = self._by_bag.get(bag, technique.name)
                    # A bag two techniques share is ambiguous: matched by neither.
                    self._by_bag[bag] = technique.name if owner == technique.name else None
        for technique in self.techniques:
            self._by_name[technique.name] = technique
            for label in technique.labels:
                key = label_key(label)
                owner = self._by_key.get(key)
                if owner is not None and owner != technique.name:
                    raise TaxonomyError(
                        f"label {label!r} of {technique.name!r} normalises like one of {owner!r} ({key!r})"
                    )
                if matching_key(key):
                    self._by_key[key] = technique.name
        self._by_kernel_key.update(
            kernel_keys((t.name, label) for t in self.techniques for label in t.labels)
        )

    def get(self, name: str) -> TaxonomyTechnique:
        """The technique called exactly `name`; raises `TaxonomyError`."""
        try:
            return self._by_name[name]
        except KeyError as e:
            raise TaxonomyError(f"the taxonomy has no technique {name!r}") from e

    def lookup(self, label: str) -> TaxonomyTechnique | None:
        """The technique one of whose labels normalises like `label` (in order, else as a bag; else a
        workload name, "Persistent GEMM", as a label of the kernel, `kernel_keys`), if any."""
        name = self._by_key.get(label_key(label)) or self._by_bag.get(bag_key(label))
        if name is None:
            workload = workload_key(label)
            name = self._by_kernel_key.get(workload) if workload else None
        return self._by_name[name] if name is not None else None

    @property
    def names(self) -> list[str]:
        """Technique names in file order."""
        return [t.name for t in self.techniques]

    def to_json(self) -> dict[str, Any]:
        """The document (what an export carries)."""
        return {
            "format": TAXONOMY_FORMAT,
            "version": self.version,
            "techniques": [t.model_dump() for t in self.techniques],
        }


def parse_taxonomy(document: dict[str, Any], source: str = "") -> Taxonomy:
    """Validate a taxonomy document (signals are checked against `search.relabel.evidence.SIGNALS`)."""
    from search.relabel.evidence import SIGNALS

    try:
        parsed = TaxonomyDocument.model_validate(document)
    except ValidationError as e:
        raise TaxonomyError(f"{source or 'taxonomy'}: not a {TAXONOMY_FORMAT} document: {e}") from e
    if parsed.format != TAXONOMY_FORMAT:
        raise TaxonomyError(f"{source or 'taxonomy'}: format {parsed.format!r}, expected {TAXONOMY_FORMAT!r}")
    for technique in parsed.techniques:
        unknown = [s for s in technique.evidence if s not in SIGNALS]
        if unknown:
            raise TaxonomyError(f"{source}: {technique.name!r} names unknown evidence signals {unknown}")
    return Taxonomy(version=parsed.version, techniques=tuple(parsed.techniques), source=source)


def load_taxonomy(path: Path | None = None) -> Taxonomy:
    """Read a taxonomy file (default: the packaged one)."""
    target = path or DEFAULT_TAXONOMY_PATH
    try:
        document = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise TaxonomyError(f"cannot read the taxonomy {target}: {e}") from e
    return parse_taxonomy(document, str(target))


@lru_cache(maxsize=1)
def default_taxonomy() -> Taxonomy:
    """The packaged taxonomy (read once)."""
    return load_taxonomy(None)


def taxonomy_setting(value: str | None) -> Taxonomy | None:
    """Resolve a `REGRAPH_TAXONOMY`-style setting: empty/"default" = packaged, "none" = no taxonomy, else a path."""
    if value is None or value.strip() in ("", "default"):
        return default_taxonomy()
    if value.strip().lower() == "none":
        return None
    return load_taxonomy(Path(value))
