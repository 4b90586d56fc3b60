"""Why a candidate's first timed calls run slow, and what stops it (session 26). Device probe, run by hand.

Two findings of session 26's device runs, each tested here against its causes:

``kernel`` (GPU 0): a kernel task's first timed trials took 1.38-1.49 times its median on one H200 (the
second 1.19-1.25, the fourth 1.00; 0.07-0.11 ms more whatever the kernel's own time), and one evaluation
of a 0.08-ms block sum timed 26 % slow on the whole (``test_repeated_timing_on_the_timing_set_agrees``).
Suspected: the start event runs ahead of its launch when the GPU catches up with the host, so the wait
for the host's submission is timed (the fix: ``executor.worker.gpu.LaunchGate``, option
``launch_gate``). The executor's own runtime (``GpuKernelRuntime.time`` on ``DeviceSlots``, the test
fixture ``block_sum``, options as the GPU test's) is timed with the gate off and on, on a quiet host,
with two threads of this process busy in Python (as the worker's own ``check_behind`` thread, or any
thread that holds the interpreter), and with every core busy in other processes.

``function`` (GPU 0, other work on GPU 1): with two replicas on one host, honest function candidates
were refused as ``implausible``: both first calls on the timing sets 4-11 times the median (and 8-29 %
of all timed calls 1.5 times it or more, 10-80 ms more, against about 10 % with one replica; session
26's ``run_honest_x2.sh``). A function-like call as candidates make it (device buffers allocated and
freed in the call, pageable copies up and down, a kernel, device synchronisation; after an L2 flush,
timed on the host clock) is timed in "evaluations" like the worker's: a pause (the wait for the
lock; ``--pause``, 0.5 s), one warm-up call on a buffer of its own, then 8 timed calls over two buffers. Conditions:
``idle``; ``idle_spin`` (a 20-ms busy kernel on GPU 0 right before the warm-up: the GPU's clocks after a
pause); ``kernels`` (GPU 1 busy with kernels, as the other replica's kernel trials); ``processes``
(processes that start and exit one after the other, touching no GPU: the sandbox's process creation
alone); ``allocs`` (a process drawing fresh 256-MB host arrays, first-touched and freed, as a prepared
worker's input generation does outside every lock: page faults and host memory, no GPU); ``contexts`` (GPU 1: processes that load the driver, make a context, allocate and exit, one
after the other, as the other replica's spares and finished workers); ``contexts_locked_made`` (the
same, each holding a lock shared from before the driver's loading until its context is made, the
evaluations holding it alone: the executor's rule with ``REGRAPH_CONTEXT_LOCK_SCOPE=host``);
``contexts_locked`` (the lock held until the process's exit: its teardown under it too).

    PYTHONPATH=. python3 bench/device/first_call_probe.py --md /tmp/out/first_call.md

``bench/device/run_first_call_x2.sh`` runs it on two GPUs in about 130 s.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
TASK_DIR = ROOT / "tests" / "unit" / "executor" / "fixtures" / "tasks" / "block_sum"

# block_sum is the honest kernel of the hack corpus (tests/gpu/adversarial/block_sum_correct.cu), read
# from there; the probe adds a copy and a spin kernel of its own.
BLOCK_SUM = ROOT / "tests" / "gpu" / "adversarial" / "block_sum_correct.cu"
OWN_KERNELS = r"""
extern "C" __global__ void copy(const float4* __restrict__ a, float4* __restrict__ b, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    for (; i < n; i += (long)gridDim.x * blockDim.x) b[i] = a[i];
}
extern "C" __global__ void spin(float* x, long long cycles) {
    long long start = clock64();
    float v = x[threadIdx.x];
    while (clock64() - start < cycles) v = v * 0.999f + 0.001f;
    x[threadIdx.x] = v;
}
"""

# A process that loads the driver, makes a context on the device named, allocates 2 GB (a worker's timing
# buffers and flush buffer are of that order) and exits, its teardown freeing them; with a lock path, it holds that lock shared from before the driver's loading until its
# context is made (``made``: as the executor's context lock does with REGRAPH_CONTEXT_LOCK_SCOPE=host) or
# until its exit (``exit``: the teardown under the lock too).
CONTEXT_CHILD = (
    "import fcntl, sys, time\n"
    "if len(sys.argv) > 2:\n"
    "    f = open(sys.argv[2], 'rb'); fcntl.flock(f, fcntl.LOCK_SH)\n"
    "t = time.perf_counter()\n"
    "import pycuda.driver as c\n"
    "c.init(); ctx = c.Device(int(sys.argv[1])).retain_primary_context(); ctx.push()\n"
    "bs = [c.mem_alloc(256 << 20) for _ in range(8)]\n"
    "for b in bs: c.memset_d32(b, 0, 64 << 20)\n"
    "c.Context.synchronize()\n"
    "print(round((time.perf_counter() - t) * 1e3, 1), flush=True)\n"
    "if len(sys.argv) > 3 and sys.argv[3] == 'made': fcntl.flock(f, fcntl.LOCK_UN)\n"
    "ctx.pop()\n"
)
# Processes that start and exit, touching no GPU (what a sandbox's process creation alone does).
PROCESS_CHILD = "import sys, json, os\nprint(len(os.listdir('/proc/self/fd')))\n"
# A process that keeps drawing fresh host arrays (256 MB, first touched, freed), as a prepared worker's
# input generation does outside every lock: page faults and host memory, no GPU.
ALLOC_CHILD = (
    "import sys, time, numpy as np\n"
    "end = time.time() + float(sys.argv[1])\n"
    "rng = np.random.default_rng(0)\n"
    "while time.time() < end:\n"
    "    a = rng.random(32 << 20); del a\n"
)

KERNEL_CHILD = (
    "import sys, time, numpy as np, pycuda.driver as c\n"
    "c.init(); ctx = c.Device(int(sys.argv[1])).retain_primary_context(); ctx.push()\n"
    "m = c.module_from_file(sys.argv[2]); spin = m.get_function('spin'); x = c.mem_alloc(4096)\n"
    "end = time.time() + float(sys.argv[3])\n"
    "while time.time() < end:\n"
    "    spin(x, np.int64(2_000_000), block=(256, 1, 1), grid=(264, 1)); c.Context.synchronize()\n"
    "ctx.pop()\n"
)


def compile_cubin(out: Path) -> Path:
    """The probe's kernels as a cubin for this GPU (nvcc on the PATH)."""
    import pycuda.driver as cuda

    major, minor = cuda.Device(0).compute_capability()
    src = out / "probe.cu"
    src.write_text('extern "C" ' + BLOCK_SUM.read_text() + OWN_KERNELS)
    cubin = out / "probe.cubin"
    subprocess.run(
        ["nvcc", "-cubin", f"-arch=sm_{major}{minor}", "-O3", "-o", str(cubin), str(src)],
        check=True,
        capture_output=True,
    )
    return cubin


def ratios(evaluations: list[list[float]], first: int = 4) -> dict[str, Any]:
    """Each evaluation's first ``first`` trials over its median (trials 2 on), summed up over the
    evaluations: the median ratio and the share at 1.5 times or more, per trial index."""
    out: dict[str, Any] = {}
    for k in range(first):
        values = []
        for samples in evaluations:
            if len(samples) > k and len(samples) > 3:
                med = statistics.median(samples[2:])
                values.append(samples[k] / med if med > 0 else float("nan"))
        if values:
            out[f"t{k}"] = round(statistics.median(values), 3)
            out[f"t{k}_slow"] = round(sum(v >= 1.5 for v in values) / len(values), 2)
    return out


# ---------------------------------------------------------------------------------------------- kernel


def busy_processes(count: int) -> list[subprocess.Popen[bytes]]:
    """Processes that keep a core busy each."""
    code = "import time\nend = time.time() + 600\nwhile time.time() < end: pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]


def kernel_part(cubin: Path, evaluations: int) -> list[dict[str, Any]]:
    from bench.probes.busy import busy_interpreter
    from executor.inputs import generate_inputs
    from executor.protocol import EvaluationOptions
    from executor.taskformat import KernelTask, load_task
    from executor.worker.gpu import DeviceSlots, GpuContext, GpuKernelRuntime

    task = load_task(TASK_DIR)
    assert isinstance(task, KernelTask)
    gpu = GpuContext()
    sources = [generate_inputs(task, "timing", seed) for seed in (11, 12)]
    warm = generate_inputs(task, "timing", 13)
    slots = DeviceSlots(gpu, task, sources, 3, warm=warm)
    runtime = GpuKernelRuntime(gpu, task, str(cubin), "block_sum_kernel")
    rows = []
    for load in ("quiet", "threads", "cores"):
        for gate in (False, True):
            options = EvaluationOptions(
                min_trials=5, max_trials=20, min_timing_ms=20, reference_repeats=1, launch_gate=gate
            )
            procs = busy_processes(2 * (os.cpu_count() or 2)) if load == "cores" else []
            medians, traces, gated = [], [], []
            try:
                time.sleep(1.0 if procs else 0.0)
                # Two busy threads at a 0.1-ms switch interval (bench.probes.busy: at the default 5 ms
                # one timing took 24 s on the H200's host, the interpreter's hand-over, not the timing).
                with busy_interpreter(2 if load == "threads" else 0):
                    for _ in range(evaluations):
                        gpu.reset_timing_state()
                        stats, last = runtime.time(slots, options)
                        medians.append(stats.median_ms)
                        traces.append(list(stats.samples_ms or []))
                        gated.append(bool(last.get("gate", {}).get("gated")))
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
            rows.append(
                {
                    "load": load,
                    "gate": gate,
                    "gated": sum(gated),
                    "evaluations": len(medians),
                    "median_ms": round(statistics.median(medians), 4),
                    "min_ms": round(min(medians), 4),
                    "max_ms": round(max(medians), 4),
                    "max/min": round(max(medians) / min(medians), 3),
                    **ratios(traces),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    slots.free()
    return rows


# -------------------------------------------------------------------------------------------- function


class Background:
    """Other work on GPU 1 while the evaluations run on GPU 0."""

    def __init__(self, kind: str, cubin: Path, seconds: float, lock: str) -> None:
        self.kind, self.stop = kind, threading.Event()
        self.made_ms: list[float] = []
        self.wall_ms: list[float] = []  # each child's whole life, from its start to its exit
        self.thread: threading.Thread | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        if kind in ("contexts", "contexts_locked_made", "contexts_locked", "processes"):
            args = [sys.executable, "-c", CONTEXT_CHILD, "1"]
            if kind == "contexts_locked_made":
                args += [lock, "made"]
            elif kind == "contexts_locked":
                args += [lock, "exit"]
            elif kind == "processes":
                args = [sys.executable, "-c", PROCESS_CHILD]

            def churn() -> None:
                while not self.stop.is_set():
                    began = time.perf_counter()
                    out = subprocess.run(args, capture_output=True, text=True)
                    self.wall_ms.append((time.perf_counter() - began) * 1e3)
                    if out.returncode == 0 and out.stdout.strip() and kind != "processes":
                        self.made_ms.append(float(out.stdout.strip().splitlines()[-1]))
                    elif kind == "processes":
                        self.made_ms.append(0.0)

            self.thread = threading.Thread(target=churn, daemon=True)
            self.thread.start()
        elif kind == "kernels":
            self.proc = subprocess.Popen(
                [sys.executable, "-c", KERNEL_CHILD, "1", str(cubin), str(seconds + 5)]
            )
        elif kind == "allocs":
            self.proc = subprocess.Popen([sys.executable, "-c", ALLOC_CHILD, str(seconds + 5)])

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def gpu_state() -> str:
    """GPU 0's performance state, SM clock and PCIe link (nvidia-smi), or why not."""
    query = "pstate,clocks.sm,pcie.link.gen.current,pcie.link.width.current"
    try:
        out = subprocess.run(
            ["nvidia-smi", "-i", "0", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"nvidia-smi: {e}"
    return out.stdout.strip() or out.stderr.strip()


def function_part(
    cubin: Path, seconds: float, conditions: list[str], pause: float, states: dict[str, str]
) -> list[dict[str, Any]]:
    import pycuda.driver as cuda

    cuda.init()
    ctx = cuda.Device(0).retain_primary_context()
    ctx.push()
    module = cuda.module_from_file(str(cubin))
    copy, spin = module.get_function("copy"), module.get_function("spin")
    nbytes = 16 << 20
    flush_bytes = max(4 * int(cuda.Device(0).get_attribute(cuda.device_attribute.L2_CACHE_SIZE)), 64 << 20)
    flush = cuda.mem_alloc(flush_bytes)
    spin_buf = cuda.mem_alloc(4096)
    clock_khz = int(cuda.Device(0).get_attribute(cuda.device_attribute.CLOCK_RATE))
    # 2 timed slots, the warm-up's, and the confirming call's (made now: an address no call has seen)
    hosts = [np.full(nbytes // 4, float(k), np.float32) for k in range(4)]
    from executor.worker.candidate import REPEAT_HOST_SLACK_MS
    from executor.worker.host import measure_host_gbps

    # The repeat-visit rule's allowance for this call (Worker._repeat_rule): twice its bytes at the
    # host's bandwidth, and the host clock's slack; its limit 3x.
    allowance_ms = 2 * (2 * nbytes) / (measure_host_gbps() * 1e6) + REPEAT_HOST_SLACK_MS
    outs = [np.empty_like(h) for h in hosts]
    lock = Path(tempfile.gettempdir()) / "first_call_probe.lock"
    lock.touch()

    def call(k: int) -> float:
        cuda.memset_d32(flush, 0x5A5A5A5A, flush_bytes // 4)
        cuda.Context.synchronize()
        t = time.perf_counter()
        d_in, d_out = cuda.mem_alloc(nbytes), cuda.mem_alloc(nbytes)
        cuda.memcpy_htod(d_in, hosts[k])
        copy(d_in, d_out, np.int64(nbytes // 16), block=(256, 1, 1), grid=(1056, 1))
        cuda.memcpy_dtoh(outs[k], d_out)
        d_in.free()
        d_out.free()
        cuda.Context.synchronize()
        return (time.perf_counter() - t) * 1e3

    # GPU 0 after a second idle, and while a 300-ms busy kernel runs (the state a spin brings it to).
    time.sleep(1.0)
    states["idle"] = gpu_state()
    spin(spin_buf, np.int64(300 * clock_khz), block=(256, 1, 1), grid=(264, 1))
    states["spinning"] = gpu_state()
    cuda.Context.synchronize()
    rows = []
    for condition in conditions:
        background = Background(condition, cubin, seconds, str(lock))
        evaluations: list[list[float]] = []
        refused = [0, 0]  # by the repeat-visit rule: without, with its confirming call
        waits: list[float] = []
        time.sleep(1.0)  # the background under way
        end = time.perf_counter() + seconds
        try:
            with open(lock, "rb") as held:
                while time.perf_counter() < end:
                    time.sleep(pause)
                    asked = time.perf_counter()
                    if condition.startswith("contexts_locked"):
                        fcntl.flock(held, fcntl.LOCK_EX)
                    waits.append(time.perf_counter() - asked)
                    try:
                        if condition == "idle_spin":  # 20 ms of a busy kernel: the clocks up again
                            spin(spin_buf, np.int64(20 * clock_khz), block=(256, 1, 1), grid=(264, 1))
                            cuda.Context.synchronize()
                        call(2)  # the warm-up, on a buffer of its own
                        calls = [call(i % 2) for i in range(8)]
                        evaluations.append(calls)
                        median = statistics.median(calls[2:])
                        if min(calls[:2]) - allowance_ms > 3 * median:  # the rule would refuse
                            refused[0] += 1
                            # the confirming call (option repeat_confirm): a first visit, right after
                            if min(min(calls[:2]), call(3)) - allowance_ms > 3 * median:
                                refused[1] += 1
                    finally:
                        if condition.startswith("contexts_locked"):
                            fcntl.flock(held, fcntl.LOCK_UN)
        finally:
            background.close()
        flat = [v for e in evaluations for v in e]
        med = statistics.median(flat)
        both_first = sum(
            1 for e in evaluations if min(e[:2]) >= 2.0 * statistics.median(e[2:])
        )  # the pattern the repeat-visit check refuses (limit 3x, with an allowance)
        rows.append(
            {
                "condition": condition,
                "evaluations": len(evaluations),
                "call_ms": round(med, 3),
                "p90_ms": round(sorted(flat)[int(0.9 * (len(flat) - 1))], 3),
                "max_ms": round(max(flat), 2),
                "slow_share": round(sum(v >= 1.5 * med for v in flat) / len(flat), 3),
                "both_first_2x": both_first,
                "rule_refused": refused[0],
                "after_confirm": refused[1],
                "lock_wait_s": round(statistics.mean(waits), 3) if waits else 0.0,
                "contexts_made": len(background.made_ms),
                "context_ms": round(statistics.median(background.made_ms), 1) if background.made_ms else None,
                "child_ms": round(statistics.median(background.wall_ms), 1) if background.wall_ms else None,
                **ratios(evaluations),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    flush.free()
    spin_buf.free()
    ctx.pop()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r.get(k, "")) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="kernel,function")
    parser.add_argument("--evaluations", type=int, default=6, help="kernel part: evaluations per cell")
    parser.add_argument("--seconds", type=float, default=10.0, help="function part: seconds per condition")
    parser.add_argument("--pause", type=float, default=0.5, help="function part: idle before each evaluation")
    parser.add_argument(
        "--conditions",
        default="idle,idle_spin,kernels,allocs,processes,contexts,contexts_locked_made,contexts_locked",
    )
    parser.add_argument("--md", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    import pycuda.driver as cuda

    cuda.init()
    work = Path(tempfile.mkdtemp(prefix="first_call_"))
    parts = args.parts.split(",")
    # The function part's conditions on GPU 1 need a second GPU.
    gpu1 = ("kernels", "contexts")
    conditions = [c for c in args.conditions.split(",") if cuda.Device.count() > 1 or not c.startswith(gpu1)]
    ctx = cuda.Device(0).retain_primary_context()
    ctx.push()
    cubin = compile_cubin(work)
    ctx.pop()
    result: dict[str, Any] = {"devices": cuda.Device.count(), "name": cuda.Device(0).name()}
    if "kernel" in parts:
        result["kernel"] = kernel_part(cubin, args.evaluations)
    if "function" in parts:
        states: dict[str, str] = {}
        result["function"] = function_part(cubin, args.seconds, conditions, args.pause, states)
        result["gpu0_state"] = states
    text = (
        f"# First timed calls ({result['name']} x{result['devices']}, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())})\n\n"
        "## kernel: block_sum through GpuKernelRuntime.time, launch gate off/on, host quiet/busy\n\n"
        "median_ms etc.: the evaluations' medians; t0..t3: trial k over its evaluation's median (trials 2 on), "
        "the median over the evaluations; tk_slow: the share of evaluations with trial k at 1.5x or more.\n\n"
        f"{table(result.get('kernel', []))}\n\n"
        "## function: function-like calls on GPU 0, other work on GPU 1\n\n"
        "t0/t1: the first calls on the two buffers (the repeat-visit check's first visits); both_first_2x: "
        "evaluations whose two first calls were both 2x the median of the rest or more; rule_refused: "
        "evaluations the repeat-visit rule would refuse (limit 3x, its allowance), after_confirm: those "
        "still refused once a confirming call on a buffer of its own counts (repeat_confirm); lock_wait_s: "
        "the evaluations' wait for the lock (contexts_locked*).\n\n"
        f"{table(result.get('function', []))}\n\n"
        f"GPU 0 (pstate, SM clock, PCIe gen, width): {json.dumps(result.get('gpu0_state', {}))}\n"
    )
    print(text)
    if args.md:
        args.md.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
