"""What running a function candidate in a process of its own costs (:mod:`executor.worker.runner`).

    python -m bench.probes.runner_overhead --calls 2000 --md bench/results/2026-11-29_s23/runner_overhead.md

A host candidate (built with the host compiler) is called the two ways the worker can: in the worker's
own process through ctypes (as before the split; the naive baseline still is), and in a runner, on
arrays in a shared mapping, the call's request and acknowledgement on a socket. For an empty entry and
for a copy ``y = x`` at a few sizes it prints the median and the 90th percentile of a call timed the
way the worker times a trial (its clock around the call), and the difference: what the split adds to
every call. Then the one-off costs: starting a runner (until its first answer), loading the library
in it, handing it a mapping of each size, and the fastest empty round trip (what the worker reports
as ``seconds["runner_roundtrip"]``). Last, what the shared mapping costs the candidate's own copies
(it has no huge pages where ``/sys/kernel/mm/transparent_hugepage/shmem_enabled`` says ``never``):
copies out of numpy's arrays and out of a mapping, on the host and, with ``--gpu``, to the device.
"""

from __future__ import annotations

import argparse
import functools
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from executor.inputs import InputSet
from executor.worker.host import FunctionRuntime, HostFunctionRuntime, RunnerFunctionRuntime
from executor.worker.runner import Runner, SharedArrays
from tests.support.hostcode import build_host_candidates, one_input_task, write_task

EMPTY = 'extern "C" void op(int n, const float* x, float* y) { }'
COPY = '#include <cstring>\nextern "C" void op(int n, const float* x, float* y) { std::memcpy(y, x, (size_t)n * 4); }'
SIZES = (1, 1 << 16, 1 << 22)


def _timed(runtime: FunctionRuntime, work: InputSet, calls: int) -> tuple[float, float]:
    """Median and 90th percentile of ``calls`` calls of ``runtime`` on ``work``, in microseconds."""
    times = np.empty(calls)
    for i in range(calls):
        start = time.perf_counter()
        runtime.invoke(work)
        times[i] = time.perf_counter() - start
    return float(np.median(times) * 1e6), float(np.percentile(times, 90) * 1e6)


def _best_us(copy: Callable[[], object], repeats: int = 30) -> float:
    """The median of ``repeats`` runs of ``copy``, in microseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy()
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e6)


def page_rows(gpu: bool) -> list[str]:
    """What the memory the candidate is handed costs it: a copy out of numpy's arrays (huge pages where
    the host gives them) against one out of a runner's shared mapping, on the host and, with ``gpu``,
    to the device from pageable memory (pycuda's ``memcpy_htod``, as a function candidate's
    ``cudaMemcpy`` from its inputs)."""
    rows = []
    cuda: Any = None
    if gpu:
        import pycuda.autoinit  # the context of this probe
        import pycuda.driver

        cuda = pycuda.driver
    for mb in (16, 256):
        n = (mb << 20) // 4
        anon = {"x": np.ones(n, np.float32), "y": np.zeros(n, np.float32)}
        shared = SharedArrays.like(anon).arrays
        np.copyto(shared["x"], anon["x"])
        np.copyto(shared["y"], anon["y"])
        for where, arrays in (("numpy", anon), ("shared", shared)):
            x, y = arrays["x"], arrays["y"]
            host_us = _best_us(functools.partial(np.copyto, y, x))
            rows.append(f"| host copy | {mb} MB | {where} | {host_us:.0f} |")
            if cuda is not None:
                device = cuda.mem_alloc(x.nbytes)
                device_us = _best_us(functools.partial(cuda.memcpy_htod, device, x))
                rows.append(f"| to the device | {mb} MB | {where} | {device_us:.0f} |")
                device.free()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--gpu", action="store_true", help="also time copies to the device (pycuda)")
    parser.add_argument("--md", type=Path, default=None, help="also write the tables here")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="runner-overhead-"))
    task = write_task(
        tmp, one_input_task("op", domain="elementwise", description="y = x", timing=1 << 16), COPY
    )
    built = build_host_candidates(tmp, {"empty": EMPTY, "copy": COPY})
    rows = []
    for name, product in built.items():
        local = HostFunctionRuntime(task, product, "op")
        runner = Runner("host")
        split = RunnerFunctionRuntime(runner, task, product, "op", "host-cpu")
        for n in SIZES:
            x = np.random.default_rng(n).uniform(-1, 1, n).astype(np.float32)
            here = InputSet(0, "timing", {"n": n}, {"x": x.copy(), "y": np.empty(n, np.float32)})
            shared = split.buffers(here.arrays)
            np.copyto(shared["x"], x)
            there = InputSet(0, "timing", {"n": n}, shared)
            before = _timed(local, here, args.calls)
            after = _timed(split, there, args.calls)
            rows.append((name, n, *before, *after, after[0] - before[0]))
        runner.stop()
    # One-off costs.
    started = time.perf_counter()
    runner = Runner("host")
    runner.request("ping")
    start_ms = (time.perf_counter() - started) * 1e3
    started = time.perf_counter()
    split = RunnerFunctionRuntime(runner, task, built["copy"], "op", "host-cpu")
    load_ms = (time.perf_counter() - started) * 1e3
    maps = []
    for n in SIZES:
        mapping = SharedArrays.like({"x": np.empty(n, np.float32), "y": np.empty(n, np.float32)})
        # A mapping goes with its first call (timed with it): that call less a repeat on it.
        started = time.perf_counter()
        runner.call(mapping, {"n": n})
        first = time.perf_counter() - started
        started = time.perf_counter()
        runner.call(mapping, {"n": n})
        maps.append((n, (first - (time.perf_counter() - started)) * 1e6))
    roundtrip_us = split.roundtrip_s * 1e6
    runner.stop()

    lines = [
        f"runner overhead on {platform.node()} ({platform.processor() or platform.machine()}), "
        f"{args.calls} calls each",
        "",
        "| entry | n | in the worker: median us | p90 us | in a runner: median us | p90 us | added us |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        *(
            f"| {r[0]} | {r[1]} | {r[2]:.2f} | {r[3]:.2f} | {r[4]:.2f} | {r[5]:.2f} | {r[6]:.2f} |"
            for r in rows
        ),
        "",
        "| one-off | cost |",
        "| --- | ---: |",
        f"| start a runner until its first answer | {start_ms:.1f} ms |",
        f"| load the library in it (and measure {20} round trips) | {load_ms:.1f} ms |",
        *(
            f"| hand it a mapping of 2 x {n} floats (a first call less a repeat) | {us:.1f} us |"
            for n, us in maps
        ),
        f"| fastest empty round trip (seconds['runner_roundtrip']) | {roundtrip_us:.1f} us |",
        "",
        "| copy | size | out of | median us |",
        "| --- | --- | --- | ---: |",
        *page_rows(args.gpu),
    ]
    text = "\n".join(lines)
    print(text)
    if args.md is not None:
        args.md.parent.mkdir(parents=True, exist_ok=True)
        args.md.write_text(text + "\n")


if __name__ == "__main__":
    main()
