"""The throughput benchmark's hang candidates really never return (bench/probes/throughput.py).

A candidate that is sent as a hang but finishes makes the benchmark's hang cost meaningless: on the
H100 a spin on a volatile *local* (``volatile int x = 1; while (x) {}``) was built into a kernel of
k_byte_hist_chunks that returned in 0.07 s and passed. What the GPU runs is decided by the device
compiler, so this checks the PTX that the toolchain (the PyPI nvcc, as the executor finds it) makes of
every kernel task's hang candidate: each has a loop that reloads the global flag with a volatile load
and branches back while it is 0, and nothing in the source writes that flag.
"""

from __future__ import annotations

import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bench.probes.executor_bench import task_dirs
from bench.probes.throughput import HANG_FLAG, HANG_SPIN, build_queue, hang_source
from executor.cache import DEFAULT_CACHE_DIR, cached_product, content_key
from executor.compile import find_toolchain
from executor.errors import ToolchainError
from executor.taskformat import KernelTask

KERNEL_TASKS = Path(__file__).parents[3] / "regraph_data" / "kernel_tasks"

# A block that reloads the flag from global memory and branches back to itself: the spin.
SPIN = re.compile(
    rf"(\$L__BB\d+_\d+):\s*\n\s*ld\.volatile\.global\.u32\s+%r\d+,\s*\[{HANG_FLAG}\];"
    rf"[^$]*?bra(?:\.uni)?\s+\1;"
)


def _ptx(source: str, arch: str = "sm_90") -> str:
    """The PTX the executor's nvcc makes of ``source``, kept in the executor's cache under a key of the
    nvcc's full version text, the flags and the source (as test_kernel_tasks keeps its emulation
    builds): what this test looks at is that PTX, which those decide, so a later run builds only a
    hang whose source or toolchain changed (24 nvcc runs, ~10 s of both cores, before)."""
    try:
        chain = find_toolchain()
    except ToolchainError as e:  # the gate installs the nvcc wheel; say so rather than skip silently
        pytest.fail(f"no nvcc to build the PTX with: {e}")
    flags = [f"-arch={arch}", "-std=c++17", *chain.extra_flags, "-ptx"]
    key = content_key("throughput-hang-ptx", chain.version, " ".join(flags), source)

    def build(work: Path, ptx: Path) -> None:
        (work / "hang.cu").write_text(source)
        done = subprocess.run(
            [str(chain.nvcc), *flags, "hang.cu", "-o", str(ptx)],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr

    ptx, _ = cached_product(DEFAULT_CACHE_DIR / "throughput-hang-ptx", key, ".ptx", build)
    return ptx.read_text()


def test_every_kernel_task_gets_a_hang_that_spins_on_an_unwritten_global() -> None:
    dirs = task_dirs([KERNEL_TASKS])
    hangs = [item for item in build_queue(dirs, per_task=0, hangs=len(dirs), seed=0) if item.kind == "hang"]
    assert len(hangs) == len(dirs)  # every kernel task's entry was found
    # nvcc runs as a subprocess, so two threads keep both cores busy (each build in a folder of its own).
    with ThreadPoolExecutor(max_workers=2) as pool:
        ptxs = list(pool.map(_ptx, [item.source for item in hangs]))
    for item, ptx in zip(hangs, ptxs, strict=True):
        assert isinstance(item.task, KernelTask)
        # Only the declaration and the spin's read mention the flag: nothing sets it.
        assert len(re.findall(rf"\b{HANG_FLAG}\b", item.source)) == 2, item.task.id
        assert item.source.startswith(f"__device__ volatile int {HANG_FLAG} = 0;\n"), item.task.id
        assert HANG_SPIN in item.source, item.task.id
        entry = ptx[ptx.index(f".entry {item.task.entry}(") :]
        assert SPIN.search(entry), f"{item.task.id}: no spin on the global flag in the entry's PTX"


def test_a_task_whose_entry_is_not_found_gets_no_hang() -> None:
    task = build_queue(task_dirs([KERNEL_TASKS])[:1], per_task=1, hangs=0, seed=0)[0].task
    assert hang_source(task, "__global__ void some_other_kernel(int n) {}\n") is None
