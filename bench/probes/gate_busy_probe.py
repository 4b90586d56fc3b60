"""Where a gated kernel timing spends its time while other threads of the worker hold the interpreter
(the GPU test ``test_a_busy_thread_of_the_worker_does_not_reach_a_gated_kernel_timing`` ran past its
limit on an H200 in session 27: its main thread was inside a spot sample's device copy after 40 s).

One condition per line, each a fresh :class:`GpuKernelRuntime` timing of the fixture task
``block_sum`` (the corpus's honest kernel, compiled with nvcc) with the test's options: BUSY threads of
pure Python work, the spot samples on or off, the launch gate on or off. Each condition runs in a child
process with a deadline, so a stuck one is reported as ``stuck`` (with the child's stack, dumped by
faulthandler every 10 s, in the log) instead of stopping the probe. Prints a table: condition, seconds
of each of up to ``--calls`` timings, median ms, trials.

Run on a GPU (kind nvidia-h200): ``python -m bench.probes.gate_busy_probe --out $OUT/gate_busy.md``.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.probes.busy import busy_interpreter

ROOT = Path(__file__).resolve().parents[2]
TASK_DIR = ROOT / "tests" / "unit" / "executor" / "fixtures" / "tasks" / "block_sum"
KERNEL = ROOT / "tests" / "gpu" / "adversarial" / "k_honest.cu"


def child(busy: int, spots: bool, gate: bool, calls: int, switch_us: int) -> None:
    """One condition, in this process: print a JSON line per timing as it ends."""
    faulthandler.dump_traceback_later(10, repeat=True)
    from executor.inputs import generate_inputs
    from executor.protocol import EvaluationOptions
    from executor.taskformat import KernelTask, load_task
    from executor.worker.gpu import DeviceSlots, GpuContext, GpuKernelRuntime

    options = EvaluationOptions(
        min_trials=5,
        max_trials=20,
        min_timing_ms=20,
        reference_repeats=1,
        baseline=False,
        kernel_spot_checks=spots,
        launch_gate=gate,
    )
    task = load_task(TASK_DIR)
    assert isinstance(task, KernelTask)
    gpu = GpuContext()
    major, minor = gpu.dev.compute_capability()
    tmp = Path(tempfile.mkdtemp())
    (tmp / "k.cu").write_text('extern "C" {\n' + KERNEL.read_text() + "\n}\n")
    subprocess.run(
        ["nvcc", "-cubin", f"-arch=sm_{major}{minor}", "-o", str(tmp / "k.cubin"), str(tmp / "k.cu")],
        check=True,
    )
    sources = [generate_inputs(task, "timing", seed) for seed in (21, 22)]
    slots = DeviceSlots(gpu, task, sources, 3, warm=generate_inputs(task, "timing", 23))
    runtime = GpuKernelRuntime(gpu, task, str(tmp / "k.cubin"), "block_sum_kernel")
    try:
        with busy_interpreter(busy, switch_us * 1e-6 if switch_us else None):
            for _ in range(calls):
                began = time.perf_counter()
                stats, last = runtime.time(slots, options)
                print(
                    json.dumps(
                        {
                            "s": round(time.perf_counter() - began, 3),
                            "median_ms": round(stats.median_ms, 4),
                            "trials": stats.trials,
                            "warmup": {k: v for k, v in last.get("warmup", {}).items() if k != "batches"},
                            "gate": last.get("gate"),
                        }
                    ),
                    flush=True,
                )
    finally:
        slots.free()
        gpu.close()  # the context popped before exit (pycuda aborts on a non-empty stack)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help="busy,spots,gate (internal)")
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--deadline", type=float, default=45.0, help="seconds per condition")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--log", type=Path)
    args = parser.parse_args()
    if args.child:
        busy, spots, gate, switch_us = (int(x) for x in args.child.split(","))
        child(busy, bool(spots), bool(gate), args.calls, switch_us)
        return
    conditions = [
        (0, 1, 1, 0),
        (2, 1, 1, 0),
        (2, 0, 1, 0),
        (2, 1, 0, 0),
        (1, 1, 1, 0),
        (2, 1, 1, 100),
        (2, 1, 0, 100),
    ]
    rows = [
        "| busy threads | switch interval | spot samples | gate | outcome | seconds per timing | median ms | trials |",
        "|---|---|---|---|---|---|---|---|",
    ]
    logs = []
    for busy, spots, gate, switch_us in conditions:
        cmd = [
            sys.executable,
            "-m",
            "bench.probes.gate_busy_probe",
            "--child",
            f"{busy},{spots},{gate}",
            "--calls",
            str(args.calls),
        ]
        began = time.perf_counter()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.deadline, cwd=ROOT)
            out, err, outcome = done.stdout, done.stderr, f"rc {done.returncode}"
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
            outcome = f"stuck ({args.deadline:.0f} s)"
        lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
        seconds = ", ".join(str(x["s"]) for x in lines)
        medians = ", ".join(str(x["median_ms"]) for x in lines)
        trials = ", ".join(str(x["trials"]) for x in lines)
        rows.append(
            f"| {busy} | {'on' if spots else 'off'} | {'on' if gate else 'off'} | {outcome} | {seconds} | {medians} | {trials} |"
        )
        logs.append(
            f"== busy {busy} switch {switch_us} spots {spots} gate {gate}: {outcome} in {time.perf_counter() - began:.1f} s\n{out}\n{err[-6000:]}"
        )
        print(rows[-1], flush=True)
    table = "\n".join(rows)
    print(table)
    if args.out:
        args.out.write_text(table + "\n")
    if args.log:
        args.log.write_text("\n".join(logs))


if __name__ == "__main__":
    main()
