"""The ParEval-style kernel-task suite (regraph_data/kernel_tasks): every task loads, its serial reference runs
at both sizes, and its candidate.cu passes the static checks and compiles for sm_90, with nvcc and with
NVRTC, with the entry kernel in the product and its launch fitting the compiled kernel's resources.

No GPU is needed: references are real g++ builds run through the executor, candidates real nvcc and
NVRTC builds through the executor's Compiler. Whether the candidates compute the right answer on a GPU
is for the executor benchmark on the device; until then each candidate is also run on the CPU through
regraph_data/kernel_tasks/cuda_on_cpu.h (CUDA threads as fibers, real barriers and warp shuffles, guard zones
around every array) and compared with the reference, which catches indexing, grid-coverage and
synchronisation mistakes, though not hardware races. Builds happen once per module, in parallel, into
a cache under the test's temporary directory.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import re
import subprocess
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from executor.abi import bind_entry, call_entry
from executor.cache import DEFAULT_CACHE_DIR, cached_product, content_key
from executor.checking import compare_output
from executor.compile import DEFAULT_ARCH, Compiler, CompilerChoice, kernel_symbol
from executor.inputs import generate_inputs
from executor.nvrtc import find_nvrtc
from executor.reference import build_reference, find_cxx, load_library, reference_on, run_reference
from executor.static import check_source, strip_source
from executor.taskformat import (
    C_SPELLING,
    KernelTask,
    ScalarArg,
    load_task,
    parse_signature,
    parse_task,
)
from executor.verdict import CompileResult

REPO_ROOT = Path(__file__).resolve().parents[3]
SUITE_DIR = REPO_ROOT / "regraph_data" / "kernel_tasks"
FUNCTION_TASKS_DIR = REPO_ROOT / "regraph_data" / "tasks"
EMULATION_HEADER = SUITE_DIR / "cuda_on_cpu.h"

TASK_DIRS = (
    sorted(p for p in SUITE_DIR.iterdir() if (p / "task.json").is_file()) if SUITE_DIR.is_dir() else []
)
TASK_IDS = [p.name for p in TASK_DIRS]

# What an SM of compute capability 9.0 gives one block without an opt-in attribute, which the
# executor's launcher does not set.
MAX_SHARED_BYTES_PER_BLOCK = 48 * 1024
REGISTERS_PER_SM = 65536


class Suite:
    """The loaded tasks with their candidate sources and compile results."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        self.tasks: dict[str, KernelTask] = {}
        self.candidates: dict[str, str] = {}
        # (task, "nvcc" | "nvrtc") -> result; NVRTC is the executor's default for kernel tasks.
        self.compiled: dict[tuple[str, str], CompileResult] = {}


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    """Every task loaded, with its reference library and its candidate built up front on every core.

    The references go to the executor's own cache (as in test_task_references): keyed by g++'s version,
    its flags and the sources, so a later run builds only what changed; the candidates, fresh."""
    result = Suite(tmp_path_factory.mktemp("kernel-tasks-cache"))
    for path in TASK_DIRS:
        task = load_task(path)
        assert isinstance(task, KernelTask), f"{path.name} is not a kernel task"
        result.tasks[path.name] = task
        result.candidates[path.name] = (path / "candidate.cu").read_text(encoding="utf-8")
    choices: list[CompilerChoice] = ["nvcc", "nvrtc"] if find_nvrtc() is not None else ["nvcc"]
    compilers = {c: Compiler(cache_dir=result.cache, arch=DEFAULT_ARCH, choice=c) for c in choices}
    with ThreadPoolExecutor(max_workers=2) as pool:
        # g++ and nvcc run as subprocesses, so threads overlap the builds; result() re-raises errors.
        references = [pool.submit(build_reference, t) for t in result.tasks.values()]
        compiles = {
            (tid, c): pool.submit(compilers[c].compile, result.tasks[tid], result.candidates[tid])
            for tid in result.tasks
            for c in choices
        }
        for future in references:
            future.result()
        result.compiled = {key: future.result() for key, future in compiles.items()}
    yield result


def test_suite_has_enough_distinct_tasks() -> None:
    assert len(TASK_DIRS) >= 20
    assert len(set(TASK_IDS)) == len(TASK_IDS)
    function_task_ids = {p.name for p in FUNCTION_TASKS_DIR.iterdir() if (p / "task.json").is_file()}
    assert not set(TASK_IDS) & function_task_ids, "kernel task ids must not collide with regraph_data/tasks"
    for path in TASK_DIRS:
        assert (path / "candidate.cu").is_file(), f"{path.name} has no candidate.cu"


def test_suite_spans_many_domains(suite: Suite) -> None:
    domains = {t.domain for t in suite.tasks.values()}
    assert len(domains) >= 12, sorted(domains)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_reference_is_deterministic_and_input_dependent(task_id: str, suite: Suite) -> None:
    task = suite.tasks[task_id]
    # run_reference rejects non-finite float outputs and integer outputs left at the poison value.
    first = run_reference(task, "test", seed=21)
    again = run_reference(task, "test", seed=21)
    other = run_reference(task, "test", seed=22)

    assert set(first.outputs) == {a.name for a in task.outputs}
    for arg in task.outputs:
        out = first.outputs[arg.name]
        assert out.size == task.array_length(arg, "test")
        np.testing.assert_array_equal(
            out, again.outputs[arg.name], err_msg=f"{arg.name} differs for one seed"
        )
    assert any(not np.array_equal(first.inputs[k], other.inputs[k]) for k in first.inputs)
    assert any(not np.array_equal(first.outputs[k], other.outputs[k]) for k in first.outputs), (
        "the outputs do not depend on the inputs"
    )


def timing_outputs(task: KernelTask) -> dict[str, tuple[int, int]]:
    """The reference's run at the timing size: each output's size and the number of distinct values
    among its first 64 Ki elements (the arrays themselves are dropped at once: they are large)."""
    run = run_reference(task, "timing", seed=5)
    return {
        name: (out.size, int(np.unique(out[: min(out.size, 1 << 16)]).size))
        for name, out in run.outputs.items()
    }


@pytest.fixture(scope="module")
def timing_runs(suite: Suite) -> dict[str, Future[dict[str, tuple[int, int]]]]:
    """Every reference run at the timing size, two at a time (the reference runs in C through ctypes,
    which releases the GIL, so both cores work); each test reads its own task's (and its error)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = {tid: pool.submit(timing_outputs, task) for tid, task in suite.tasks.items()}
        wait(runs.values())
    return runs


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_reference_runs_at_the_timing_size(
    task_id: str, suite: Suite, timing_runs: dict[str, Future[dict[str, tuple[int, int]]]]
) -> None:
    task = suite.tasks[task_id]
    outputs = timing_runs[task_id].result()  # re-raises the run's error
    for arg in task.outputs:
        size, distinct = outputs[arg.name]
        assert size == task.array_length(arg, "timing")
        # A reference whose output is constant at the timing size (e.g. an overflowed accumulator
        # saturating) would make the timing-size check meaningless.
        assert distinct > 1, f"{arg.name} is constant"


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_candidate_passes_the_static_checks(task_id: str, suite: Suite) -> None:
    task, source = suite.tasks[task_id], suite.candidates[task_id]
    assert check_source(task, source) == []
    # Kernel candidates may be compiled by NVRTC, which has no host headers.
    assert "#include" not in strip_source(source).code


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_candidate_kernel_matches_the_task_signature(task_id: str, suite: Suite) -> None:
    task, source = suite.tasks[task_id], suite.candidates[task_id]
    code = strip_source(source).code
    m = re.search(rf"__global__\s+void\s+{re.escape(task.entry)}\s*\(([^)]*)\)", code)
    assert m is not None, f"no __global__ void {task.entry}(...) in candidate.cu"
    _, got = parse_signature(f"void {task.entry}({m.group(1)})")
    _, want = parse_signature(task.kernel.signature)
    # The executor passes arguments by position, so types, pointer-ness and constness must agree.
    assert [(p.dtype, p.pointer, p.const) for p in got] == [(p.dtype, p.pointer, p.const) for p in want]


@pytest.mark.parametrize("compiler", ["nvcc", "nvrtc"])
@pytest.mark.parametrize("task_id", TASK_IDS)
def test_candidate_compiles_and_fits_its_launch(task_id: str, compiler: str, suite: Suite) -> None:
    task = suite.tasks[task_id]
    if (task_id, compiler) not in suite.compiled:
        pytest.skip(f"no {compiler} here")
    result = suite.compiled[(task_id, compiler)]
    assert result.ok, result.log
    assert result.compiler == compiler
    assert result.kind == "cubin"
    symbol = kernel_symbol(result.kernels, task.entry)
    assert symbol == task.entry, f"entry kernel not found unmangled in {[k.name for k in result.kernels]}"
    kernel = next(k for k in result.kernels if k.name == symbol)
    assert kernel.spill_store_bytes == 0 and kernel.spill_load_bytes == 0
    for size in ("test", "timing"):
        _, block, dynamic_shared = task.launch_config(size)
        threads = block[0] * block[1] * block[2]
        assert kernel.shared_bytes + dynamic_shared <= MAX_SHARED_BYTES_PER_BLOCK
        assert kernel.registers is not None and kernel.registers * threads <= REGISTERS_PER_SM


# --- candidates run on the CPU emulation ----------------------------------------------------------------

_EXTERN_SHARED = re.compile(r"extern\s+__shared__\s+([A-Za-z_][\w\s]*?)\s+([A-Za-z_]\w*)\s*\[\s*\]\s*;")


def emulation_source(task: KernelTask, candidate: str) -> str:
    """The candidate as a C++ translation unit for cuda_on_cpu.h, with an ``emu_run`` entry that takes
    the task's arguments (host arrays), launches the kernel over guarded copies and copies outputs back."""
    body = _EXTERN_SHARED.sub(
        lambda m: (
            f"{m.group(1)}* {m.group(2)} = reinterpret_cast<{m.group(1)}*>("
            "emu::machine().dynamic_shared.data());"
        ),
        candidate,
    )
    params, guards, call, checks = [], [], [], []
    arrays = 0
    for arg in task.args:
        ctype = C_SPELLING[arg.dtype]
        if isinstance(arg, ScalarArg):
            params.append(f"{ctype} {arg.name}")
            call.append(arg.name)
            continue
        params.append(f"const {ctype}* {arg.name}")
        guards.append(
            f'    emu::Guarded<{ctype}> guard_{arg.name}({arg.name}, lengths[{arrays}], "{arg.name}");'
        )
        call.append(f"guard_{arg.name}.device()")
        checks.append(f"    guard_{arg.name}.check_and_copy_back({'true' if arg.is_output else 'false'});")
        arrays += 1
    return "\n".join(
        [
            f'#include "{EMULATION_HEADER}"',
            body,
            "namespace {",
            "dim3 grid_dims, block_dims;",
            "long long dynamic_shared = 0;",
            "long long lengths[64];",
            "}  // namespace",
            'extern "C" void emu_configure(int gx, int gy, int gz, int bx, int by, int bz, long long shared,',
            "                              const long long* array_lengths, int count, int reverse_warps) {",
            "    grid_dims = dim3{unsigned(gx), unsigned(gy), unsigned(gz)};",
            "    block_dims = dim3{unsigned(bx), unsigned(by), unsigned(bz)};",
            "    dynamic_shared = shared;",
            "    for (int i = 0; i < count; ++i) lengths[i] = array_lengths[i];",
            "    emu::machine().reverse_warps = reverse_warps != 0;",
            "}",
            'extern "C" const char* emu_error() { return emu::machine().error; }',
            f'extern "C" void emu_run({", ".join(params)}) {{',
            *guards,
            # `::`: a parameter named like the kernel (ParEval's `average`) would hide it.
            "    auto body = [&] { " + f"::{task.entry}({', '.join(call)});" + " };",
            "    emu::launch(grid_dims, block_dims, dynamic_shared,",
            "                [](void* f) { (*static_cast<decltype(body)*>(f))(); }, &body);",
            "    if (emu::machine().error[0] != '\\0') return;",
            *checks,
            "}",
            "",
        ]
    )


EMULATION_FLAGS = ("-O1", "-std=c++17", "-shared", "-fPIC", "-w")


def build_emulation(task: KernelTask, candidate: str, work: Path) -> Path:
    """Compile a candidate against the CPU emulation into a shared library.

    The library goes to the executor's cache under `work`'s name for it, keyed like the references
    (g++'s version, the flags, the translation unit and the emulation header's text), so that a later
    run builds only what changed: the emulation is how these tests check a candidate, not what they
    test (the candidates' own builds, nvcc and NVRTC, are made fresh by `suite`)."""
    cxx = find_cxx()
    text = emulation_source(task, candidate)
    version = subprocess.run(
        [cxx, "--version"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    unit = text.replace(str(EMULATION_HEADER), EMULATION_HEADER.name)  # the same in every checkout
    key = content_key(
        "kernel-task-emulation", version, " ".join(EMULATION_FLAGS), unit, EMULATION_HEADER.read_text()
    )

    def build(scratch: Path, library: Path) -> None:
        source = scratch / f"{task.id}_emu.cpp"
        source.write_text(text, encoding="utf-8")
        cmd = [cxx, *EMULATION_FLAGS, str(source), "-o", str(library)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr[-4000:]

    library, _ = cached_product(work, key, ".so", build)
    return library


def emulation_sizes(task: KernelTask) -> dict[str, dict[str, int]]:
    """The test size, and the test size with every parameter rounded up to a multiple of 8, which
    takes the vectorised paths that candidates keep for aligned shapes (the timing sizes are aligned)."""
    test = task.size_values("test")
    aligned = {name: -(-value // 8) * 8 for name, value in test.items()}
    return {"test": test, "aligned": aligned} if aligned != test else {"test": test}


def emulate(
    task_data: dict[str, Any], params: dict[str, int], emu_library: str, reference_library: str
) -> str:
    """Run the emulated candidate and the reference on two seeded input sets, the warps of each block
    scheduled first to last for one and last to first for the other (a missing barrier shows in one
    order or the other); '' when they agree, else why not. Runs in a child process, so that a candidate
    that crashes cannot take the tests down."""
    data = dict(task_data)
    data["params"] = {
        name: {"test": value, "timing": data["params"][name]["timing"]} for name, value in params.items()
    }
    task = parse_task(data)
    assert isinstance(task, KernelTask)
    reference = load_library(Path(reference_library))
    lib = ctypes.CDLL(emu_library)
    lib.emu_error.restype = ctypes.c_char_p
    grid, block, shared = task.launch_config("test")
    lengths = (ctypes.c_longlong * len(task.arrays))(*(task.array_length(a, "test") for a in task.arrays))
    run = bind_entry(lib, "emu_run", task)
    for seed, reverse_warps in ((101, 0), (202, 1)):
        lib.emu_configure(*grid, *block, ctypes.c_longlong(shared), lengths, len(task.arrays), reverse_warps)
        inputs = generate_inputs(task, "test", seed, reference)
        work = inputs.copy()
        call_entry(run, task, work.scalars, work.arrays)
        error = lib.emu_error().decode()
        if error:
            return f"seed {seed}: {error}"
        expected, _ = reference_on(task, reference, inputs)
        for arg in task.outputs:
            failure = compare_output(task, arg, work.arrays[arg.name], expected[arg.name], "test", seed)
            if failure is not None:
                kind, mismatch = failure
                return (
                    f"seed {seed}: {kind.value}: {mismatch.count}/{mismatch.total} elements of {arg.name} differ "
                    f"(first at [{mismatch.index}]: expected {mismatch.expected}, got {mismatch.got})"
                )
    return ""


@pytest.fixture(scope="module")
def emulated(suite: Suite) -> dict[tuple[str, str], str]:
    """Every candidate run on the CPU emulation at its emulation sizes: (task, size) -> '' or the failure."""
    work = DEFAULT_CACHE_DIR / "kernel-task-emulation"
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            tid: pool.submit(build_emulation, task, suite.candidates[tid], work)
            for tid, task in suite.tasks.items()
        }
        libraries = {tid: future.result() for tid, future in futures.items()}
    results: dict[tuple[str, str], str] = {}
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        jobs = {
            (tid, name): pool.submit(
                emulate,
                task.model_dump(mode="json"),
                params,
                str(libraries[tid]),
                str(build_reference(task)),
            )
            for tid, task in suite.tasks.items()
            for name, params in emulation_sizes(task).items()
        }
        for key, job in jobs.items():
            try:
                results[key] = job.result(timeout=600)
            except Exception as e:  # a crashed child breaks the pool: report it against this task
                results[key] = f"the emulated candidate crashed: {e!r}"
    return results


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_candidate_matches_the_reference_on_the_cpu_emulation(
    task_id: str, suite: Suite, emulated: dict[tuple[str, str], str]
) -> None:
    for size in emulation_sizes(suite.tasks[task_id]):
        assert emulated[(task_id, size)] == "", f"{size} size: {emulated[(task_id, size)]}"
