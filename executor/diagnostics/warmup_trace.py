"""Trace a kernel's trial times from a cold start: what the executor's warm-up waits for.

    python3 -m executor.diagnostics.warmup_trace [--tasks regraph_data/kernel_tasks] [--limit 4] [--trials 600] \\
        [--idle 1.5] [--out FILE]

For each kernel task's ``candidate.cu`` (compiled as the executor does) it builds the timing buffers
on the task's timing set. For the first task it first times the kernel as the executor does (its
default warm-up and stopping rules), as the first timing of a fresh process after one
correctness-like run, and prints the wall time of each warm-up batch next to the warm-up's whole wall
time: the difference is spent between batches, in the rules' own code. Then, for every task, it runs
``--trials`` trials with no warm-up at all, in the executor's batches (restore outputs, flush L2,
timed launch), after ``--idle`` seconds with the GPU idle (``cold``) and right after (``hot``), and
prints the wall time and the median of each window of 25 trials, so a drift of the times (clocks,
caches) shows; then the executor's timing again, after the idle spell and right after.
``--prime`` primes the statistics of the rules first, as a worker does when it starts (see
``executor.checking.prime``). ``--other-context`` keeps another process with an idle CUDA context
alive meanwhile, as the executor's spare worker is. Needs pycuda. The runs of 2026-11-22 used
earlier forms of this script (bench/results/2026-11-22_h100/executor_s5/README.md says which).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from executor.checking import prime as prime_statistics
from executor.compile import Compiler, device_arch, kernel_symbol
from executor.inputs import generate_inputs
from executor.protocol import EvaluationOptions
from executor.reference import build_reference, load_library
from executor.taskformat import KernelTask, load_task
from executor.timingset import timing_seed
from executor.trialpolicy import TrialPolicy
from executor.worker.gpu import DeviceSlots, GpuContext, GpuKernelRuntime

WINDOW = 25


class _Raw(EvaluationOptions):
    """Options whose trial policy has no warm-up and a fixed number of trials."""

    def trial_policy(self, device_timed: bool = False) -> TrialPolicy:
        return TrialPolicy(warmup=0, min_trials=self.min_trials, max_trials=self.max_trials, min_total_ms=0.0)


def windows(times: list[float]) -> list[float]:
    """The median of each window of WINDOW trials."""
    return [float(np.median(times[i : i + WINDOW])) for i in range(0, len(times), WINDOW)]


def main() -> None:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=Path, default=Path("regraph_data/kernel_tasks"))
    parser.add_argument("--limit", type=int, default=4)
    parser.add_argument("--trials", type=int, default=600)
    parser.add_argument("--idle", type=float, default=1.5)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--other-context",
        action="store_true",
        help="keep a second process with an idle CUDA context alive meanwhile (as the executor's spare)",
    )
    parser.add_argument("--prime", action="store_true", help="prime the statistics first, as a worker does")
    args = parser.parse_args()
    other = None
    if args.other_context:
        idle = "import time, pycuda.autoinit; print('ready', flush=True); time.sleep(3600)"
        other = subprocess.Popen([sys.executable, "-c", idle], stdout=subprocess.PIPE, text=True)
        assert other.stdout is not None and other.stdout.readline().strip() == "ready"
    cache = Path(tempfile.mkdtemp(prefix="warmup-trace-"))
    compiler = Compiler(cache_dir=cache, arch=device_arch() or "sm_90")
    gpu = GpuContext()
    report: list[dict[str, Any]] = []
    dirs = [d for d in sorted(args.tasks.iterdir()) if (d / "candidate.cu").is_file()][: args.limit]
    for d in dirs:
        task = load_task(d)
        assert isinstance(task, KernelTask)
        compiled = compiler.compile(task, (d / "candidate.cu").read_text())
        symbol = kernel_symbol(compiled.kernels, task.entry)
        assert compiled.ok and symbol, compiled.log
        lib = load_library(build_reference(task, cache))
        source = generate_inputs(task, "timing", timing_seed(task), lib)
        slots = DeviceSlots(gpu, task, [source], 3)
        runtime = GpuKernelRuntime(gpu, task, str(compiled.product), symbol)
        row: dict[str, Any] = {"task": task.id}
        if not report:  # the process's first trials, right after a correctness-like run
            if args.prime:
                prime_statistics()
            runtime.run(source)
            began = time.perf_counter()
            stats, last = runtime.time(slots, EvaluationOptions())
            batches = last["warmup"]["batches"]
            row["policy_first"] = {
                "wall_ms": (time.perf_counter() - began) * 1000,
                "warmup_ms": last["warmup"]["seconds"] * 1000,
                "warmup_calls": stats.warmup_calls,
                "warmup_in_batches_ms": sum(wall for _, wall in batches),
            }
            row["policy_first_batches"] = batches
            print("first warm-up's batches (trials:wall ms):", " ".join(f"{n}:{w:.1f}" for n, w in batches))
            print(
                f"{task.id:22s} policy_first "
                + " ".join(f"{k}={v:.4g}" for k, v in row["policy_first"].items())
            )
        for condition in ("cold", "hot"):
            if condition != "hot":
                time.sleep(args.idle)
            times, wall_ms = _times(runtime, slots, args.trials)
            row[condition] = {"window_medians_ms": windows(times), "wall_ms": wall_ms, "times_ms": times}
            line = " ".join(f"{m:.4f}" for m in row[condition]["window_medians_ms"])
            print(f"{task.id:22s} {condition:6s} {wall_ms:6.0f} ms wall; medians of {WINDOW}: {line}")
        for condition in ("policy_cold", "policy_hot"):
            if condition == "policy_cold":
                time.sleep(args.idle)
            began = time.perf_counter()
            stats, last = runtime.time(slots, EvaluationOptions())
            row[condition] = {
                "wall_ms": (time.perf_counter() - began) * 1000,
                "warmup_ms": last["warmup"]["seconds"] * 1000,
                "warmup_calls": stats.warmup_calls,
                "trials": stats.trials,
                "median_ms": stats.median_ms,
            }
            print(
                f"{task.id:22s} {condition:11s} "
                + " ".join(f"{k}={v:.4g}" for k, v in row[condition].items())
            )
        slots.free()
        report.append(row)
    gpu.close()
    if other is not None:
        other.kill()
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


def _times(runtime: GpuKernelRuntime, slots: DeviceSlots, trials: int) -> tuple[list[float], float]:
    """Each trial's time (the executor's batches, no warm-up) and the wall time of them all (ms)."""
    began = time.perf_counter()
    _, last = runtime.time(slots, _Raw(min_trials=trials, max_trials=trials))
    return list(last["samples_ms"]), (time.perf_counter() - began) * 1000


if __name__ == "__main__":
    main()
