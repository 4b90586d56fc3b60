"""Does GPU work of *other* processes disturb a candidate's timing trials? Device probe, run by hand.

The executor serialises every worker's GPU work behind one lock: a spare's CUDA context creation, a
prepared worker's uploads and the teardown of a finished worker all wait for (and delay) the
candidate being timed. This probe measures, on the lent GPU, what each of those does to the two kinds
of trials the executor takes, when it runs in another process at the same time:

- ``kernel``: a memory-bound kernel (a 256 MB copy) timed with CUDA events after an L2 flush, in
  batches on a stream, as :class:`executor.worker.gpu.GpuKernelRuntime` does;
- ``function``: a host-timed call as a function task makes it (64 MB up, the kernel, 64 MB down,
  device synchronisation), after an L2 flush, as :class:`executor.worker.gpu.GpuFunctionRuntime`.

Conditions, each measured ``--repeats`` times: ``idle``; ``contexts`` (another process keeps starting
processes that make a CUDA context, allocate 64 MB and exit: creation and teardown); ``uploads`` (another
process keeps copying 256 MB from pageable host memory to the device); ``kernels`` (another process keeps
launching kernels: meant as a positive control, it did not move the event-timed trials on the H200, where
the GPU time-slices between the processes' contexts; so the probe shows what does not reach event
timing, not that nothing could); ``function`` (another process keeps making function-like calls: 64 MB
up, the copy kernel, 64 MB down, synchronisation); ``hostcopy`` (another process keeps copying 256 MB
within host memory, touching no GPU: the host's memory bandwidth alone).

Issue 29 (session 21): with a second executor replica on the same host, a function candidate's
host-timed trials went from 11.9 to 19.6 and their robust CoV from 0.029 to 0.053 (two H200s,
``bench/results/2026-11-29_s21/``), while each replica has its own GPU, locks and cores. Which of the
other replica's kinds of work does that? ``--background-device 1`` runs the background work on the
second GPU, and ``--cores``/``--background-cores`` pin the two processes apart as the fleet pins its
replicas; the table's robust CoV (not the median) is what sets a function task's trial count:

    PYTHONPATH=. python3 bench/device/overlap_probe.py --md /tmp/overlap.md
    PYTHONPATH=. python3 bench/device/overlap_probe.py --background-device 1 --cores 0-15 \
        --background-cores 16-31 --conditions idle,contexts,uploads,function,hostcopy --md /tmp/cross.md

Session 32 (``bench/results/2026-11-30_s32/scaling_analysis.md``): with two replicas a function candidate's
calls ran 1.5-40 times their median in a burst right after the other replica's turn ended (when its
spares' CUDA contexts, held back by its function run's turnstile, start, and its finished worker goes),
under either host-memory lock scope, while event-timed kernel trials did not move. ``--alloc-per-call``
makes the host-timed calls allocate and free as the tasks' candidates do (driver calls that another
process's context creation or teardown may hold up), ``--context-mb`` makes the ``contexts`` children hold
as much device memory as a worker does before they exit:

    PYTHONPATH=. python3 bench/device/overlap_probe.py --background-device 1 --cores 0-15 \
        --background-cores 16-31 --alloc-per-call --context-mb 8192 --repeats 2 --trials 200 \
        --conditions idle,contexts,function --md $OUT/cross_alloc.md --out $OUT/cross_alloc.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SOURCE = r"""
extern "C" __global__ void copy(const float4* __restrict__ a, float4* __restrict__ b, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    for (; i < n; i += (long)gridDim.x * blockDim.x) b[i] = a[i];
}
extern "C" __global__ void spin(float* x, int rounds) {
    float v = x[threadIdx.x];
    for (int r = 0; r < rounds; ++r) v = v * 0.999f + 0.001f;
    x[threadIdx.x] = v;
}
"""

CONTEXT_CHILD = (
    "import sys, time, pycuda.driver as c\n"
    "t = time.perf_counter(); c.init(); ctx = c.Device(int(sys.argv[1])).retain_primary_context(); ctx.push()\n"
    "mb = int(sys.argv[2]) if len(sys.argv) > 2 else 64\n"
    "b = c.mem_alloc(mb << 20); c.memset_d32(b, 0, mb << 18); c.Context.synchronize()\n"
    "print(round((time.perf_counter() - t) * 1e3, 1)); ctx.pop()\n"
)


def _context(cuda: Any, device: int = 0) -> Any:
    cuda.init()
    ctx = cuda.Device(device).retain_primary_context()
    ctx.push()
    return ctx


def _cpulist(text: str | None) -> set[int] | None:
    """``0-15,32`` as a set of cores; None for none given."""
    if not text:
        return None
    cores: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cores.update(range(int(low), int(high or low) + 1))
    return cores


def background(
    kind: str, stop: Any, report: Any, device: int = 0, cores: str | None = None, context_mb: int = 64
) -> None:
    """Keep doing ``kind`` on GPU ``device`` (pinned to ``cores``) until ``stop`` is set; put what was
    done on ``report``."""
    pinned = _cpulist(cores)
    if pinned:
        os.sched_setaffinity(0, pinned)  # inherited by the context children
    done: list[float] = []
    if kind == "contexts":
        while not stop.is_set():
            out = subprocess.run(
                [sys.executable, "-c", CONTEXT_CHILD, str(device), str(context_mb)],
                capture_output=True,
                text=True,
            )
            if out.returncode == 0 and out.stdout.strip():
                done.append(float(out.stdout.strip().splitlines()[-1]))
        report.put(("contexts made (ms each)", done))
        return
    import numpy as np

    if kind == "hostcopy":  # no GPU at all
        src, dst = np.ones(64 << 20, dtype=np.float32), np.empty(64 << 20, dtype=np.float32)
        while not stop.is_set():
            t = time.perf_counter()
            np.copyto(dst, src)
            done.append((time.perf_counter() - t) * 1e3)
        report.put(("host copies of 256 MB (ms each)", done))
        return
    import pycuda.driver as cuda

    ctx = _context(cuda, device)
    try:
        if kind == "uploads":
            host = np.ones(64 << 20, dtype=np.float32)
            dev = cuda.mem_alloc(host.nbytes)
            while not stop.is_set():
                t = time.perf_counter()
                cuda.memcpy_htod(dev, host)
                done.append((time.perf_counter() - t) * 1e3)
            report.put(("uploads of 256 MB (ms each)", done))
        elif kind == "kernels":
            from pycuda.compiler import SourceModule

            spin = SourceModule(SOURCE, no_extern_c=True).get_function("spin")
            x = cuda.mem_alloc(4096)
            while not stop.is_set():
                spin(x, np.int32(20000), block=(256, 1, 1), grid=(264, 1))
                cuda.Context.synchronize()
                done.append(1.0)
            report.put(("kernel launches", done))
        elif kind == "function":
            from pycuda.compiler import SourceModule

            copy = SourceModule(SOURCE, no_extern_c=True).get_function("copy")
            host_in = np.ones(16 << 20, dtype=np.float32)
            host_out = np.empty_like(host_in)
            d_in, d_out = cuda.mem_alloc(host_in.nbytes), cuda.mem_alloc(host_in.nbytes)
            while not stop.is_set():
                t = time.perf_counter()
                cuda.memcpy_htod(d_in, host_in)
                copy(d_in, d_out, np.int64(host_in.nbytes // 16), block=(256, 1, 1), grid=(1056, 1))
                cuda.memcpy_dtoh(host_out, d_out)
                cuda.Context.synchronize()
                done.append((time.perf_counter() - t) * 1e3)
            report.put(("function-like calls (ms each)", done))
    finally:
        ctx.pop()


def measure(cuda: Any, mod: Any, trials: int, alloc_per_call: bool = False) -> dict[str, list[float]]:
    """Event-timed kernel trials and host-timed function-like calls (milliseconds); with
    ``alloc_per_call`` each function-like call allocates its device arrays and frees them inside its
    timed region, as the tasks' naive candidates do (every ``naive.cu`` of a function task calls
    ``cudaMalloc``)."""
    import numpy as np

    copy = mod.get_function("copy")
    n4 = (256 << 20) // 16
    a, b = cuda.mem_alloc(n4 * 16), cuda.mem_alloc(n4 * 16)
    flush_bytes = 4 * int(cuda.Device(0).get_attribute(cuda.device_attribute.L2_CACHE_SIZE))
    flush = cuda.mem_alloc(flush_bytes)
    stream = cuda.Stream()
    grid, block = (1056, 1), (256, 1, 1)
    kernel: list[float] = []
    batch = 50
    events = [(cuda.Event(), cuda.Event()) for _ in range(batch)]
    for _ in range(max(1, trials // batch)):
        for start, end in events:
            cuda.memset_d32_async(flush, 0x5A5A5A5A, flush_bytes // 4, stream)
            start.record(stream)
            copy(a, b, np.int64(n4), block=block, grid=grid, stream=stream)
            end.record(stream)
        events[-1][1].synchronize()
        kernel.extend(start.time_till(end) for start, end in events)
    host_in = np.ones(16 << 20, dtype=np.float32)
    host_out = np.empty_like(host_in)
    d_in, d_out = cuda.mem_alloc(host_in.nbytes), cuda.mem_alloc(host_in.nbytes)
    function: list[float] = []
    for _ in range(max(5, trials // 8)):
        cuda.memset_d32(flush, 0x5A5A5A5A, flush_bytes // 4)
        cuda.Context.synchronize()
        t = time.perf_counter()
        if alloc_per_call:
            c_in, c_out = cuda.mem_alloc(host_in.nbytes), cuda.mem_alloc(host_in.nbytes)
        else:
            c_in, c_out = d_in, d_out
        cuda.memcpy_htod(c_in, host_in)
        copy(c_in, c_out, np.int64(host_in.nbytes // 16), block=block, grid=grid)
        cuda.memcpy_dtoh(host_out, c_out)
        if alloc_per_call:
            c_in.free()
            c_out.free()
        cuda.Context.synchronize()
        function.append((time.perf_counter() - t) * 1e3)
    for buf in (a, b, flush, d_in, d_out):
        buf.free()
    return {"kernel": kernel, "function": function}


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    median = statistics.median(ordered)
    mad = statistics.median(abs(v - median) for v in ordered)
    return {
        "n": len(ordered),
        "median": median,
        "p10": ordered[int(0.1 * (len(ordered) - 1))],
        "p90": ordered[int(0.9 * (len(ordered) - 1))],
        # as executor.checking.robust_cov: the spread that sets how many trials the stop rule takes
        "robust_cov": 1.4826 * mad / median if median > 0 else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--conditions", default="idle,contexts,uploads,kernels")
    parser.add_argument("--background-device", type=int, default=0, help="the GPU the background work uses")
    parser.add_argument("--cores", help="pin the measuring process to these cores (e.g. 0-15)")
    parser.add_argument("--background-cores", help="pin the background work to these cores (e.g. 16-31)")
    parser.add_argument(
        "--alloc-per-call",
        action="store_true",
        help="function-like calls allocate and free their device arrays inside the timed call",
    )
    parser.add_argument(
        "--context-mb", type=int, default=64, help="MB each `contexts` child allocates before it exits"
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument("--md", type=Path)
    args = parser.parse_args(argv)
    pinned = _cpulist(args.cores)
    if pinned:
        os.sched_setaffinity(0, pinned)
    import pycuda.driver as cuda
    from pycuda.compiler import SourceModule

    ctx = _context(cuda)
    mod = SourceModule(SOURCE, no_extern_c=True)
    measure(cuda, mod, 100, args.alloc_per_call)  # warm the clocks and the module
    spawn = mp.get_context("spawn")
    rows: list[dict[str, Any]] = []
    for repeat in range(args.repeats):
        for condition in args.conditions.split(","):
            stop, report = spawn.Event(), spawn.Queue()
            proc = None
            if condition != "idle":
                proc = spawn.Process(
                    target=background,
                    args=(
                        condition,
                        stop,
                        report,
                        args.background_device,
                        args.background_cores,
                        args.context_mb,
                    ),
                )
                proc.start()
                time.sleep(2.0)  # the background work under way
            got = measure(cuda, mod, args.trials, args.alloc_per_call)
            done: tuple[str, list[float]] | None = None
            if proc is not None:
                stop.set()
                done = report.get(timeout=60)
                proc.join(30)
            row = {
                "repeat": repeat,
                "condition": condition,
                "background_device": args.background_device,
                "kernel_ms": summary(got["kernel"]),
                "function_ms": summary(got["function"]),
                "background": None if done is None else {"what": done[0], **summary(done[1] or [0.0])},
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    ctx.pop()
    lines = [
        f"Background work on GPU {args.background_device}"
        + (f", cores {args.background_cores}" if args.background_cores else "")
        + (f"; measured on GPU 0, cores {args.cores}" if args.cores else "; measured on GPU 0")
        + ("; function-like calls allocate per call" if args.alloc_per_call else "")
        + (f"; contexts allocate {args.context_mb} MB" if args.context_mb != 64 else "")
        + ".",
        "",
        "| repeat | condition | kernel median ms | kernel p10-p90 | function median ms | function p10-p90 "
        "| function robust CoV | background work (n, median) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        k, f, b = r["kernel_ms"], r["function_ms"], r["background"]
        bg = "-" if b is None else f"{b['what']}: {b['n']}, {b['median']:.1f}"
        lines.append(
            f"| {r['repeat']} | {r['condition']} | {k['median']:.4f} | {k['p10']:.4f}-{k['p90']:.4f} "
            f"| {f['median']:.3f} | {f['p10']:.3f}-{f['p90']:.3f} | {f['robust_cov']:.4f} | {bg} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.md:
        args.md.write_text(text)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
