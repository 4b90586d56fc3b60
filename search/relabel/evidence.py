"""What a step's code change shows: a CUDA-aware comparison of the code before and after a step.

Both versions are parsed with tree-sitter's CUDA grammar (comments and string literals never count).
From each parse we read *facts*: kernels defined and launched, memory spaces declared (`__shared__`,
`__constant__`, `extern __shared__`), the intrinsics and host API functions called, pragmas, launch
bounds and launch configurations, loops, branches, branch-free selects and divisions inside device
code, per-thread arrays, vector and half types, inline PTX. Facts become named *signals*
(`shared_memory`, `warp_shuffle`, `kernel_removed`, ...: `SIGNALS` lists them); a step's evidence is
the signals its change introduces and removes. The taxonomy names, per technique, the signals that
show it (`search/relabel/data/taxonomy.v1.json`). How branches and selects are told apart: docs/search.md
("Code evidence").

Code that does not parse is not an error here: the evidence says so (`parsed=False`), and the
relabeler flags the step instead of trusting signals read from a broken tree.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from search.errors import SearchError

MAX_CODE_BYTES = 1_000_000
"""Longer code is not parsed (a step's code is a few kilobytes; a megabyte is not a kernel)."""
MAX_ERROR_SHARE = 0.2
"""Code whose syntax errors cover more than this share of its bytes counts as not parsed."""

SIGNALS: dict[str, str] = {
    "first_kernel": "the first __global__ kernel appears (serial code became CUDA)",
    "kernel_added": "more __global__ kernels are defined",
    "kernel_removed": "fewer __global__ kernels are defined",
    "launch_added": "more kernel launch sites (<<<...>>>)",
    "launch_removed": "fewer kernel launch sites",
    "launch_config_changed": "a launch configuration (or a block-size constant) changed",
    "grid_stride_loop": "a loop strides by the whole grid (gridDim)",
    "kernel_loop_added": "more loops inside device code",
    "shared_memory": "__shared__ arrays are declared",
    "dynamic_shared_memory": "extern __shared__ (runtime-sized shared memory)",
    "shared_padding": "a __shared__ array dimension is padded (e.g. [T][T+1])",
    "shared_double_buffer": "a __shared__ array has a leading dimension of 2 or 3 (buffers)",
    "constant_memory": "__constant__ data or cudaMemcpyToSymbol",
    "syncthreads": "__syncthreads() barriers are used",
    "syncthreads_removed": "fewer block barriers or host synchronisations",
    "warp_shuffle": "__shfl_*_sync register exchange",
    "warp_vote": "__ballot_sync / __any_sync / __all_sync / __activemask",
    "warp_reduce_intrinsic": "__reduce_*_sync or cooperative-groups reduce",
    "atomics": "atomic operations (atomicAdd, atomicCAS, ...)",
    "atomics_removed": "fewer atomic operations",
    "ldg": "__ldg / cache-hinted loads",
    "restrict": "__restrict__ pointers",
    "vector_types": "vector types (float4, int4, uint4, float2, ...)",
    "half_precision": "FP16 / BF16 types or intrinsics",
    "precision_reduced": "fewer double-precision types, more single-precision ones",
    "fast_math": "fast-math intrinsics (__expf, __sinf, __fdividef, rsqrtf, ...)",
    "fma": "explicit fused multiply-adds (fmaf, __fmaf_rn)",
    "int_intrinsics": "integer intrinsics (__popc, __clz, __byte_perm, __dp4a, ...)",
    "pragma_unroll": "#pragma unroll",
    "launch_bounds": "__launch_bounds__",
    "occupancy_api": "the occupancy API (cudaOccupancy*)",
    "streams": "CUDA streams / cudaMemcpyAsync",
    "async_copy": "asynchronous global-to-shared copies (memcpy_async, cp.async, pipelines)",
    "tma": "TMA bulk copies / tensor maps",
    "pinned_memory": "page-locked host memory (cudaMallocHost, cudaHostAlloc, cudaHostRegister)",
    "unified_memory": "managed memory (cudaMallocManaged, prefetch, advise)",
    "zero_copy": "mapped host memory (cudaHostGetDevicePointer)",
    "memcpy_removed": "fewer host-device copies",
    "cuda_graphs": "CUDA graphs / stream capture",
    "cooperative_groups": "cooperative groups",
    "grid_sync": "grid-wide synchronisation (this_grid().sync, cooperative launch)",
    "device_launch": "a kernel launched from device code (dynamic parallelism)",
    "texture": "texture objects and fetches",
    "tensor_cores": "tensor-core MMA (wmma, mma.sync, wgmma)",
    "inline_ptx": "inline PTX (asm)",
    "library_call": "a CUDA library call (cuBLAS, cuFFT, CUB, Thrust, ...)",
    "cache_config": "L1/shared carveout or function attributes",
    "l2_persist": "L2 persistence (access policy window)",
    "clusters": "thread block clusters",
    "memory_pool": "stream-ordered allocation / memory pools",
    "branches_removed": "fewer branching constructs in device code (if, case labels, ?: and && || that guard work)",
    "branches_to_selects": "branches became selects: fewer branching constructs and more branch-free selects "
    "(?: on values, min/max, comparisons used as 0/1) in device code",
    "division_removed": "fewer divisions and modulos in device code",
    "register_array": "per-thread arrays in device code (register tiles, accumulators)",
    "template_added": "more templates (compile-time specialisation)",
    "threadfence": "__threadfence memory fences",
}

# Signals that are about the code as it is (present / absent); count-based ones come from `_delta`.
_PRESENCE_SIGNALS = frozenset(
    s
    for s in SIGNALS
    if s
    not in {
        "first_kernel",
        "kernel_added",
        "kernel_removed",
        "launch_added",
        "launch_removed",
        "launch_config_changed",
        "kernel_loop_added",
        "syncthreads_removed",
        "atomics_removed",
        "precision_reduced",
        "memcpy_removed",
        "branches_removed",
        "branches_to_selects",
        "division_removed",
        "template_added",
    }
)

_PREFIX_CALLS: tuple[tuple[str, str], ...] = (
    ("__shfl", "warp_shuffle"),
    ("__reduce_", "warp_reduce_intrinsic"),
    ("atomic", "atomics"),
    ("cudaOccupancy", "occupancy_api"),
    ("cudaStreamCreate", "streams"),
    ("cudaMemcpy", "memcpy"),
    ("cudaGraph", "cuda_graphs"),
    ("cudaMemPool", "memory_pool"),
    ("cublas", "library_call"),
    ("cufft", "library_call"),
    ("cusparse", "library_call"),
    ("cusolver", "library_call"),
    ("__pipeline_", "async_copy"),
    ("cuTensorMap", "tma"),
    ("__threadfence", "threadfence"),
    ("__syncthreads", "syncthreads"),
    ("__h", "half_precision"),
)
_EXACT_IDENTIFIERS: dict[str, str] = {
    **dict.fromkeys(
        ["__ballot_sync", "__any_sync", "__all_sync", "__activemask", "__match_any_sync"], "warp_vote"
    ),
    **dict.fromkeys(["__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv"], "ldg"),
    **dict.fromkeys(
        [
            "__expf",
            "__exp10f",
            "__logf",
            "__log2f",
            "__log10f",
            "__sinf",
            "__cosf",
            "__tanf",
            "__sincosf",
            "__powf",
            "__fdividef",
            "__frcp_rn",
            "__fsqrt_rn",
            "__frsqrt_rn",
            "rsqrtf",
            "__saturatef",
            "__fdiv_rn",
        ],
        "fast_math",
    ),
    **dict.fromkeys(["fmaf", "fma", "__fmaf_rn", "__fma_rn", "__fmaf_rz", "__fmaf_ru", "__fmaf_rd"], "fma"),
    **dict.fromkeys(
        [
            "__popc",
            "__popcll",
            "__clz",
            "__clzll",
            "__ffs",
            "__ffsll",
            "__brev",
            "__brevll",
            "__byte_perm",
            "__funnelshift_l",
            "__funnelshift_r",
            "__dp4a",
            "__dp2a_lo",
            "__dp2a_hi",
            "__vadd4",
            "__vsub4",
            "__vabsdiff4",
            "__vadd2",
            "__umulhi",
            "__mulhi",
            "__mul24",
            "__umul24",
            "__usad",
            "__sad",
        ],
        "int_intrinsics",
    ),
    **dict.fromkeys(
        [
            "__half",
            "half",
            "__half2",
            "half2",
            "__nv_bfloat16",
            "__nv_bfloat162",
            "__float2half",
            "__half2float",
        ],
        "half_precision",
    ),
    **dict.fromkeys(
        ["cudaMemcpyAsync", "cudaMemcpy2DAsync", "cudaStream_t", "cudaStreamSynchronize"], "streams"
    ),
    **dict.fromkeys(["cudaMallocHost", "cudaHostAlloc", "cudaHostRegister", "cudaFreeHost"], "pinned_memory"),
    **dict.fromkeys(["cudaMallocManaged", "cudaMemPrefetchAsync", "cudaMemAdvise"], "unified_memory"),
    **dict.fromkeys(["cudaHostGetDevicePointer", "cudaHostAllocMapped"], "zero_copy"),
    **dict.fromkeys(["cudaStreamBeginCapture", "cudaStreamEndCapture"], "cuda_graphs"),
    **dict.fromkeys(["cudaMallocAsync", "cudaFreeAsync", "cudaDeviceGetDefaultMemPool"], "memory_pool"),
    **dict.fromkeys(
        [
            "cudaFuncSetCacheConfig",
            "cudaDeviceSetCacheConfig",
            "cudaFuncSetAttribute",
            "cudaFuncSetSharedMemConfig",
        ],
        "cache_config",
    ),
    **dict.fromkeys(
        ["accessPolicyWindow", "cudaLimitPersistingL2CacheSize", "cudaAccessPolicyWindow"], "l2_persist"
    ),
    **dict.fromkeys(
        [
            "tex1Dfetch",
            "tex1D",
            "tex2D",
            "tex3D",
            "tex2DLayered",
            "cudaTextureObject_t",
            "cudaCreateTextureObject",
        ],
        "texture",
    ),
    **dict.fromkeys(["memcpy_async", "pipeline", "cp_async"], "async_copy"),
    **dict.fromkeys(["CUtensorMap", "cp_async_bulk_tensor", "cp_async_bulk"], "tma"),
    **dict.fromkeys(["wmma", "load_matrix_sync", "mma_sync", "store_matrix_sync"], "tensor_cores"),
    **dict.fromkeys(["cub", "thrust"], "library_call"),
    **dict.fromkeys(
        ["cooperative_groups", "this_thread_block", "tiled_partition", "thread_block_tile", "this_grid"],
        "cooperative_groups",
    ),
    **dict.fromkeys(["this_grid", "cudaLaunchCooperativeKernel", "grid_group"], "grid_sync"),
    **dict.fromkeys(
        ["__cluster_dims__", "this_cluster", "cluster_group", "cudaLaunchKernelEx", "map_shared_rank"],
        "clusters",
    ),
    **dict.fromkeys(["cudaMemcpyToSymbol", "cudaMemcpyToSymbolAsync"], "constant_memory"),
}
_VECTOR_TYPE = re.compile(
    r"^(u?char|u?short|u?int|u?long|u?longlong|float|double)[234]$|^make_(u?int|float|double|u?char|u?short)[234]$"
)
_LAUNCH_CONSTANT = re.compile(r"(BLOCK|THREADS|TPB|^BS$|^BX$|^BY$|WARPS_PER)", re.IGNORECASE)
_SYNC_CALLS = frozenset({"__syncthreads", "cudaDeviceSynchronize", "__syncwarp"})
_LEAF_NAMES = frozenset(
    {"identifier", "field_identifier", "type_identifier", "namespace_identifier", "primitive_type"}
)
_SELECT_FUNCTIONS = frozenset(
    {
        "min",
        "max",
        "umin",
        "umax",
        "llmin",
        "llmax",
        "ullmin",
        "ullmax",
        "fminf",
        "fmaxf",
        "fmin",
        "fmax",
        "__hmin",
        "__hmax",
        "__hmin2",
        "__hmax2",
        "abs",
        "labs",
        "llabs",
        "fabsf",
        "fabs",
        "copysignf",
        "copysign",
        "__saturatef",
        "__funnelshift_l",
        "__funnelshift_r",
        "__funnelshift_lc",
        "__funnelshift_rc",
        "__byte_perm",
        "__sad",
        "__usad",
        "__vabsdiffs4",
        "__vabsdiffu4",
        "__vmins4",
        "__vmaxs4",
        "__vminu4",
        "__vmaxu4",
        "__vmins2",
        "__vmaxs2",
        "__vminu2",
        "__vmaxu2",
    }
)
"""Functions that choose or clamp a value without branching (they compile to min/max/select/permute
instructions): calling one is a branch-free select, and one inside a ?: arm is not work it guards."""
# The node kinds `_analyze_cached` reads (every other node is only walked through).
_WALK_KINDS = frozenset(
    {
        "ERROR",
        "comment",
        "string_literal",
        "raw_string_literal",
        "char_literal",
        "gnu_asm_expression",
        "function_definition",
        "template_declaration",
        "launch_bounds",
        "kernel_call_syntax",
        "declaration",
        "preproc_def",
        "preproc_call",
        "type_qualifier",
        "for_statement",
        "while_statement",
        "do_statement",
        "if_statement",
        "case_statement",
        "conditional_expression",
        "call_expression",
        "binary_expression",
        "assignment_expression",
    }
)
_COMPARISONS = frozenset({"<", ">", "<=", ">=", "==", "!="})
_ARITHMETIC = frozenset({"+", "-", "*", "&", "|", "^", "<<", ">>"})
_COMPOUND_ARITHMETIC = frozenset({"+=", "-=", "*=", "&=", "|=", "^="})


class EvidenceError(SearchError):
    """The code analysis itself failed (never raised for code that merely does not parse)."""


@dataclass(frozen=True)
class CodeFacts:
    """What one version of the code contains (comments and strings excluded)."""

    parsed: bool
    reason: str = ""
    identifiers: Counter[str] = field(default_factory=Counter)
    presence: frozenset[str] = frozenset()
    kernels: int = 0
    launches: int = 0
    launch_configs: tuple[str, ...] = ()
    launch_constants: tuple[tuple[str, str], ...] = ()
    device_loops: int = 0
    device_branches: int = 0
    device_selects: int = 0
    device_divisions: int = 0
    syncs: int = 0
    atomics: int = 0
    memcpys: int = 0
    doubles: int = 0
    floats: int = 0
    templates: int = 0


@dataclass(frozen=True)
class CodeEvidence:
    """What a step's change introduces and removes, as signals (see `SIGNALS`)."""

    introduced: frozenset[str]
    removed: frozenset[str]
    present_after: frozenset[str]
    parsed: bool
    reason: str = ""
    identifiers_after: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, Any]:
        """A JSON-friendly summary (what a curator sees next to a decision)."""
        return {
            "introduced": sorted(self.introduced),
            "removed": sorted(self.removed),
            "present_after": sorted(self.present_after),
            "parsed": self.parsed,
            "reason": self.reason,
        }


_parser_lock = threading.Lock()


@lru_cache(maxsize=1)
def _parser() -> Any:
    try:
        import tree_sitter_cuda
        from tree_sitter import Language, Parser
    except ImportError as e:
        raise EvidenceError("the CUDA parser is missing: pip install tree-sitter tree-sitter-cuda") from e
    return Parser(Language(tree_sitter_cuda.language()))


def _is_device_function(node: Any) -> bool:
    return any(child.type in ("__global__", "__device__") for child in node.children)


def _is_kernel(node: Any) -> bool:
    return any(child.type == "__global__" for child in node.children)


def _shared_layout(declaration: Any) -> tuple[bool, bool]:
    """(padded, double-buffered) for a `__shared__` array declaration."""
    padded = buffered = False
    for child in declaration.children:
        if child.type != "array_declarator":
            continue
        dims: list[Any] = []
        node = child
        while node is not None and node.type == "array_declarator":
            size = node.child_by_field_name("size")
            if size is not None:
                dims.append(size)
            node = node.child_by_field_name("declarator")
        dims.reverse()  # outermost (first written) dimension first
        for size in dims:
            operator = size.child_by_field_name("operator") if size.type == "binary_expression" else None
            if operator is not None and operator.type == "+":
                padded = True
        if len(dims) >= 2 and dims[0].type == "number_literal" and dims[0].text in (b"2", b"3"):
            buffered = True
    return padded, buffered


def _callee(call: Any) -> str:
    """The name a call expression calls (`std::min` -> "min"; "" for calls through expressions)."""
    function = call.child_by_field_name("function")
    while function is not None and function.type in ("qualified_identifier", "template_function"):
        function = function.child_by_field_name("name")
    return (
        function.text.decode("utf-8", "replace")
        if function is not None and function.type == "identifier"
        else ""
    )


def _guards_work(node: Any) -> bool:
    """Whether an expression does work a condition can skip: writes (assignments, ++/--), memory
    reads (subscripts, `*p`, `p->f`) or calls other than the branch-free selects."""
    stack = [node]
    while stack:
        n = stack.pop()
        kind = n.type
        if kind in ("assignment_expression", "update_expression", "subscript_expression"):
            return True
        if kind == "call_expression" and _callee(n) not in _SELECT_FUNCTIONS:
            return True
        if kind in ("pointer_expression", "field_expression"):
            operator = n.child_by_field_name("operator")
            if operator is not None and operator.type in ("*", "->"):
                return True
        stack.extend(n.children)
    return False


def _is_zero_one(node: Any, booleans: set[str]) -> bool:
    """Whether an arithmetic operand is a truth value used as 0/1 (a comparison, `!x`, a `bool`
    variable), seen through parentheses, casts and a sign or complement (`-(a < b)` is a mask)."""
    while node is not None:
        kind = node.type
        if kind == "parenthesized_expression":
            node = node.named_children[0] if node.named_children else None
        elif kind == "cast_expression":
            node = node.child_by_field_name("value")
        elif kind == "unary_expression":
            operator = node.child_by_field_name("operator")
            op = operator.type if operator is not None else ""
            if op == "!":
                return True
            if op not in ("-", "~"):
                return False
            node = node.child_by_field_name("argument")
        elif kind == "binary_expression":
            operator = node.child_by_field_name("operator")
            return operator is not None and operator.type in _COMPARISONS
        elif kind == "identifier":
            return node.text.decode("utf-8", "replace") in booleans
        else:
            return False
    return False


def analyze_code(code: str) -> CodeFacts:
    """Parse one version of the code and collect its facts (cached by content)."""
    return _analyze_cached(hashlib.sha256(code.encode("utf-8", "replace")).hexdigest(), code)


@lru_cache(maxsize=4096)
def _analyze_cached(_digest: str, code: str) -> CodeFacts:
    data = code.encode("utf-8", "replace")
    if not data.strip():
        return CodeFacts(parsed=False, reason="the code is empty")
    if len(data) > MAX_CODE_BYTES:
        return CodeFacts(
            parsed=False, reason=f"the code is {len(data)} bytes (over {MAX_CODE_BYTES}); not parsed"
        )
    with _parser_lock:
        tree = _parser().parse(data)
    identifiers: Counter[str] = Counter()
    presence: set[str] = set()
    error_bytes = 0
    kernels = launches = loops = branches = divisions = syncs = atomics = memcpys = doubles = floats = 0
    templates = selects = 0
    booleans: set[str] = set()  # names declared `bool` in device code (scopes are not told apart)
    configs: list[str] = []
    constants: list[tuple[str, str]] = []
    # A pre-order walk with a cursor (document order, as the facts below depend on: a `bool` is declared
    # before it is used); `devices[-1]` tells whether the node is inside a __global__/__device__ function.
    # Most nodes (punctuation, literals, expressions of no interest) are only descended into.
    cursor = tree.walk()
    devices = [False]
    while True:
        node = cursor.node
        device = devices[-1]
        kind = node.type
        descend = True
        if kind in _LEAF_NAMES:
            text = node.text.decode("utf-8", "replace")
            identifiers[text] += 1
            if text == "double":
                doubles += 1
            elif text == "float":
                floats += 1
            descend = False
        elif kind not in _WALK_KINDS:
            pass
        elif kind == "ERROR":
            # The outermost broken region counts once; nothing read inside it is trusted.
            error_bytes += node.end_byte - node.start_byte
            descend = False
        elif kind in ("comment", "string_literal", "raw_string_literal", "char_literal"):
            descend = False
        elif kind == "gnu_asm_expression":
            presence.add("inline_ptx")
            text = node.text.decode("utf-8", "replace")
            if "cp.async.bulk" in text:
                presence.add("tma")
            elif "cp.async" in text:
                presence.add("async_copy")
            if "mma." in text or "wgmma" in text:
                presence.add("tensor_cores")
            descend = False
        elif kind == "function_definition":
            if _is_kernel(node):
                kernels += 1
            device = device or _is_device_function(node)
        elif kind == "template_declaration":
            templates += 1
        elif kind == "launch_bounds":
            presence.add("launch_bounds")
        elif kind == "kernel_call_syntax":
            launches += 1
            configs.append(re.sub(r"\s+", "", node.text.decode("utf-8", "replace")))
            if device:
                presence.add("device_launch")
        elif kind == "declaration":
            if device and any(c.type == "primitive_type" and c.text == b"bool" for c in node.children):
                for c in node.children:
                    name = c.child_by_field_name("declarator") if c.type == "init_declarator" else c
                    if name is not None and name.type == "identifier":
                        booleans.add(name.text.decode("utf-8", "replace"))
            qualifiers = {q.type for c in node.children if c.type == "type_qualifier" for q in c.children}
            storage = {c.text for c in node.children if c.type == "storage_class_specifier"}
            if "__shared__" in qualifiers:
                presence.add("shared_memory")
                if b"extern" in storage:
                    presence.add("dynamic_shared_memory")
                padded, buffered = _shared_layout(node)
                if padded:
                    presence.add("shared_padding")
                if buffered:
                    presence.add("shared_double_buffer")
            elif "__constant__" in qualifiers:
                presence.add("constant_memory")
            elif device and any(c.type == "array_declarator" for c in node.children):
                presence.add("register_array")
            elif not device and "constexpr" in qualifiers:
                for c in node.children:
                    if c.type == "init_declarator":
                        name, value = c.child_by_field_name("declarator"), c.child_by_field_name("value")
                        if (
                            name is not None
                            and value is not None
                            and _LAUNCH_CONSTANT.search(name.text.decode())
                        ):
                            constants.append((name.text.decode(), value.text.decode()))
        elif kind == "preproc_def":
            name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
            if name is not None and value is not None and _LAUNCH_CONSTANT.search(name.text.decode()):
                constants.append((name.text.decode(), value.text.decode().strip()))
        elif kind == "preproc_call":
            directive = node.child_by_field_name("directive")
            argument = node.child_by_field_name("argument")
            if (
                directive is not None
                and directive.text == b"#pragma"
                and argument is not None
                and argument.text.strip().startswith(b"unroll")
            ):
                presence.add("pragma_unroll")
        elif kind == "type_qualifier" and node.text == b"__restrict__":
            presence.add("restrict")
        elif device and kind in ("for_statement", "while_statement", "do_statement"):
            loops += 1
        elif device and kind in ("if_statement", "case_statement"):
            branches += 1
        elif device and kind == "conditional_expression":
            # A ?: whose arms do work is control flow; one that picks between values is a select.
            arms = (node.child_by_field_name("consequence"), node.child_by_field_name("alternative"))
            if any(arm is not None and _guards_work(arm) for arm in arms):
                branches += 1
            else:
                selects += 1
        elif device and kind == "call_expression" and _callee(node) in _SELECT_FUNCTIONS:
            selects += 1
        elif kind in ("binary_expression", "assignment_expression"):
            operator = node.child_by_field_name("operator")
            op = operator.type if operator is not None else ""
            if device and op in ("/", "%", "/=", "%="):
                divisions += 1
            if device and op == "+=" and b"gridDim" in node.text:
                presence.add("grid_stride_loop")
            if device and op in ("&&", "||"):
                # Short-circuit evaluation skips its right operand: a branch when that does work.
                right = node.child_by_field_name("right")
                if right is not None and _guards_work(right):
                    branches += 1
            elif device and (op in _ARITHMETIC or op in _COMPOUND_ARITHMETIC):
                # Predication by arithmetic: a truth value used as 0/1 (`i += take`, `x * (a < b)`).
                operands = (node.child_by_field_name("left"), node.child_by_field_name("right"))
                if any(o is not None and _is_zero_one(o, booleans) for o in operands):
                    selects += 1
        if descend and cursor.goto_first_child():
            devices.append(device)
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                break
            devices.pop()
        else:
            continue
        break
    for name, count in identifiers.items():
        signal = _EXACT_IDENTIFIERS.get(name)
        if signal is None:
            for prefix, prefixed in _PREFIX_CALLS:
                if name.startswith(prefix):
                    signal = prefixed
                    break
        if signal is None and _VECTOR_TYPE.match(name):
            signal = "vector_types"
        if signal == "memcpy":
            memcpys += count
        elif signal is not None:
            presence.add(signal)
        if name in _SYNC_CALLS:
            syncs += count
        if name.startswith("atomic"):
            atomics += count
    share = error_bytes / max(len(data), 1)
    parsed = share <= MAX_ERROR_SHARE
    reason = "" if parsed else f"{share:.0%} of the code does not parse as CUDA"
    return CodeFacts(
        parsed=parsed,
        reason=reason,
        identifiers=identifiers,
        presence=frozenset(presence & _PRESENCE_SIGNALS),
        kernels=kernels,
        launches=launches,
        launch_configs=tuple(sorted(configs)),
        launch_constants=tuple(sorted(constants)),
        device_loops=loops,
        device_branches=branches,
        device_selects=selects,
        device_divisions=divisions,
        syncs=syncs,
        atomics=atomics,
        memcpys=memcpys,
        doubles=doubles,
        floats=floats,
        templates=templates,
    )


def _delta(before: CodeFacts, after: CodeFacts) -> tuple[set[str], set[str]]:
    introduced: set[str] = set()
    removed: set[str] = set()
    if before.kernels == 0 and after.kernels > 0:
        introduced.add("first_kernel")
    elif after.kernels > before.kernels:
        introduced.add("kernel_added")
    elif after.kernels < before.kernels:
        introduced.add("kernel_removed")
    if after.launches > before.launches:
        introduced.add("launch_added")
    elif after.launches < before.launches:
        introduced.add("launch_removed")
    if (
        before.kernels > 0
        and after.kernels == before.kernels
        and (
            before.launch_configs != after.launch_configs or before.launch_constants != after.launch_constants
        )
    ):
        introduced.add("launch_config_changed")
    if before.kernels > 0 and after.device_loops > before.device_loops:
        introduced.add("kernel_loop_added")
    if after.syncs < before.syncs:
        introduced.add("syncthreads_removed")
    if after.atomics < before.atomics:
        introduced.add("atomics_removed")
    if after.doubles < before.doubles and after.floats > before.floats:
        introduced.add("precision_reduced")
    if after.memcpys < before.memcpys:
        introduced.add("memcpy_removed")
    if before.kernels > 0 and after.device_branches < before.device_branches:
        introduced.add("branches_removed")
        if after.device_selects > before.device_selects:
            introduced.add("branches_to_selects")
    if before.kernels > 0 and after.device_divisions < before.device_divisions:
        introduced.add("division_removed")
    if after.templates > before.templates:
        introduced.add("template_added")
    introduced |= set(after.presence - before.presence)
    removed |= set(before.presence - after.presence)
    return introduced, removed


def code_evidence(before: str, after: str) -> CodeEvidence:
    """The signals that the change `before` -> `after` introduces and removes."""
    facts_before, facts_after = analyze_code(before), analyze_code(after)
    if not facts_after.parsed:
        return CodeEvidence(frozenset(), frozenset(), frozenset(), parsed=False, reason=facts_after.reason)
    introduced, removed = _delta(facts_before, facts_after)
    return CodeEvidence(
        introduced=frozenset(introduced),
        removed=frozenset(removed),
        present_after=facts_after.presence,
        parsed=True,
        reason=facts_before.reason,
        identifiers_after=frozenset(facts_after.identifiers),
    )


_NAMED_API = re.compile(
    r"(__[a-z][a-z0-9_]+__|__[a-z][a-z0-9_]*|cuda[A-Z][A-Za-z0-9]+|atomic[A-Z][A-Za-z]*|"
    r"\b(?:float|int|uint|double)[24]\b|\bwmma\b|\btex[123]D\w*)"
)


def named_api(text: str) -> list[str]:
    """CUDA identifiers (intrinsics, qualifiers, API calls, vector types) that a method name mentions."""
    found = []
    for match in _NAMED_API.finditer(text):
        token = match.group(0)
        if token not in found:
            found.append(token)
    return found


def name_code_mismatch(name: str, evidence: CodeEvidence) -> list[str]:
    """The CUDA identifiers that `name` mentions but the code after the step never uses."""
    if not evidence.parsed:
        return []
    missing = []
    qualifier_signals = {
        "__shared__": "shared_memory",
        "__constant__": "constant_memory",
        "__launch_bounds__": "launch_bounds",
        "__restrict__": "restrict",
    }
    for mention in named_api(name):
        if mention in ("__global__", "__device__"):
            continue
        if mention in qualifier_signals:
            present = qualifier_signals[mention] in evidence.present_after
        else:
            stem = mention.rstrip("_")
            present = any(i == mention or i.startswith(stem) for i in evidence.identifiers_after)
        if not present:
            missing.append(mention)
    return missing
