"""Where a kernel trial's time goes since issue 33 (device probe, one H200, about 100 s; run by hand).

Session 29 (``bench/results/2026-11-30_s29``) found a correct kernel candidate's trials at 1.1-1.2 ms of
wall time per trial against 0.7-0.8 ms at 57d0025 (same kernel medians, ~90 trials), ``last_check``
+0.012-0.016 s; ``launch_gate: false`` took ~0.2 ms off a trial (and brought the first-trial bias back),
``kernel_spot_gather: true`` took nothing off. This probe measures, in one process on one GPU:

1. **Evaluations** (``executor.evaluate.Evaluator`` with ``ExecutorSettings(runtime="gpu")``, as
   ``tests/gpu`` builds it) of each task's ``candidate.cu`` (the known-good kernel that
   ``bench.probes.executor_bench`` evaluates) under the option variants of :data:`VARIANTS`, interleaved:
   each round runs every task, and for each task every variant, the variants' order rotated by one per
   round. One unrecorded evaluation per task first (``first``: it builds the reference, stores the
   timing set and times the serial reference). ``prepare_next`` is off unless ``--prepare-next``: a
   prepared pair is keyed on the options, so with interleaved variants it is never used and its
   reference run and uploads would only overlap the next variant's trials.
2. **An instrumented timing loop** in this process (``GpuKernelRuntime.time`` on ``DeviceSlots`` made as
   the worker makes them, for the first task): per variant, the time of ``reset_timing_state``, of
   ``time()``, of its warm-up, of each batch split into enqueueing (up to the launch gate's release)
   and waiting, of the stop rule's Python, and what of ``time()`` lies outside the batches (gate,
   spot buffers, their read-back, statistics). The product code is called as it is; the probe only
   wraps ``measure_batched``, ``stop_rule``, ``next_batch_size`` and the runtime's ``_gate_release``
   with timers (restored afterwards).
3. **A micro-breakdown** with pycuda on the same buffers: the host microseconds to enqueue each of a
   trial's calls (restore, L2 flush, event record, the candidate's launch, a launch's spot copies, the
   gathered copy, a gate wait), the GPU milliseconds of each alone (CUDA events, held behind a gate so
   that no host time is counted), and 64-trial batches built like ``run_batch`` with the gate and the
   spot copies on and off: host enqueue time per trial against device time per trial says whether a
   trial is host-bound or device-bound.
4. **The stop rule's Python per trial** on made-up samples (0.22 ms +- 1 %, seeded), with the policy
   of today's defaults (two timing sets, repeat pairs) and with one group as at 57d0025: CPU only.

Run (kind ``nvidia-h200``, carry ``[".whlgpu"]``; ``--commit`` names the code, the copy has no git;
about 100 s after the wheels are installed: the evaluations start no new block after ``--budget-s``)::

    rm -rf .whl; mv .whlgpu .whl; source bench/device/gpu_env.sh && \\
        timeout 170 python3 bench/device/kernel_trial_probe.py --commit HASH \\
        --md $OUT/kernel_trial_probe.md --json $OUT/kernel_trial_probe.json

Without a GPU it exits with status 2 and says why; ``--dry-run`` prints the plan, checks every task and
candidate statically, measures part 4, and runs the variant loop and its tables on the host runtime with
a function task (the fixture ``saxpy``, its serial reference as the candidate, worker jobs through
``executor.sandbox.run_job``): plumbing only, no kernel figure.

Reading: in the evaluation table ``ms/trial`` is ``(timing_trials - timing_warmup) / trials`` (the
session 29 figure ``wall ms per trial`` was ``timing_trials / trials``, warm-up included), ``first/med``
the first timed trial over the median (the bias the gate is for), ``spread`` the CoV of the medians of
one task and variant over the rounds. ``timing_trials`` also holds per-evaluation costs that are not
per trial (``reset_timing_state``, the gate's pinned word, the spot buffers): part 2 shows them apart.
In part 3, ``host us/trial`` above ``device us/trial`` means the host sets the pace.

What the parts are meant to decide (a reading of the code against 57d0025, session 29; hypotheses, not
findings): (H1) a trial is host-bound, and a timed launch now costs 8 more driver calls per sampled
output (``DeviceSpots.after_launch``: every launch is sampled, ``SPOT_CALLS`` 256 > ~90 trials) plus a
numpy draw, and 1/8 of a stream wait: parts 3b and 3d; (H2) the gate costs per batch, not per trial:
the stream starts a batch only once its second chunk of 8 is enqueued and runs its last chunk only
after the whole batch is, about 7 x min(host, device time of a trial) per batch, paid by every warm-up
batch too: part 2 (batches, enqueue/wait) and 3d; (H3) part of the 0.3-0.4 ms is per evaluation, not
per trial (``reset_timing_state``, the gate's pinned word, the spot buffers and their read-back, all
inside ``timing_trials`` now): part 2 ``outside batches`` and 3a; (H4) the stop rule's within-set
spread is not it: part 4.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import hashlib
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: the repository's packages
    sys.path.insert(0, str(ROOT))

from executor.protocol import CandidateSource, EvaluationOptions  # noqa: E402
from executor.taskformat import FunctionTask, KernelTask, load_task  # noqa: E402

KERNEL_TASKS = ROOT / "regraph_data" / "kernel_tasks"
FIXTURE_TASKS = ROOT / "tests" / "unit" / "executor" / "fixtures" / "tasks"
# Small and large outputs: 64 MB (gelu), 32 KB out of a 256 MB input (gemv), a graph step (bfs).
DEFAULT_TASKS = ("k_gelu_f32", "k_gemv_f32", "k_bfs_pull_step")
# Option variants over EvaluationOptions' defaults.
VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "gate_off": {"launch_gate": False},
    "spots_off": {"kernel_spot_checks": False},
    "both_off": {"launch_gate": False, "kernel_spot_checks": False},
    "gather": {"kernel_spot_gather": True},
}
# The dry run's function-task options over each variant: few trials (plumbing, not figures).
DRY_BASE: dict[str, Any] = {
    "correctness_sets": 2,
    "min_trials": 5,
    "max_trials": 8,
    "min_timing_ms": 0,
    "reference_repeats": 1,
    "baseline": False,
}
# Files whose content identifies the code measured where the copy has no git.
CODE_FILES = ("executor/worker/gpu.py", "executor/checking.py", "executor/worker/candidate.py")


# --- the plan and the tables (CPU) -----------------------------------------------------------------


def rounds_plan(tasks: list[str], variants: list[str], repeats: int) -> list[list[tuple[str, str]]]:
    """Blocks of (task, variant), in order: round ``r`` runs every task, each with every variant, the
    variants' order rotated by ``r`` so that no variant always follows the same one. A block is one
    task's variants in one round (the budget is checked between blocks)."""
    blocks = []
    for r in range(repeats):
        order = variants[r % len(variants) :] + variants[: r % len(variants)]
        for task in tasks:
            blocks.append([(task, v) for v in order])
    return blocks


def variant_options(name: str, base: dict[str, Any] | None = None) -> EvaluationOptions:
    return EvaluationOptions.model_validate({**(base or {}), **VARIANTS[name]})


def outcome_row(task: str, variant: str, rnd: int, outcome: Any, call_s: float) -> dict[str, Any]:
    """The figures of one verdict (or a worker's outcome: same fields) for the tables."""
    timing = outcome.candidate_timing
    s = dict(outcome.seconds)
    trials = int(timing.trials) if timing is not None else 0
    tt, tw = s.get("timing_trials"), s.get("timing_warmup", 0.0)
    samples = list(timing.samples_ms or []) if timing is not None else []
    median = float(timing.median_ms) if timing is not None else None
    return {
        "task": task,
        "variant": variant,
        "round": rnd,
        "passed": bool(outcome.passed),
        "error": outcome.error.value if outcome.error is not None else None,
        "message": str(outcome.message)[:200],
        "call_s": call_s,
        "trials": trials,
        "stop": timing.stop if timing is not None else None,
        "warmup_calls": timing.warmup_calls if timing is not None else None,
        "timing_trials": tt,
        "timing_warmup": s.get("timing_warmup"),
        "ms_per_trial": 1e3 * (tt - tw) / trials if tt is not None and trials else None,
        "last_check": s.get("last_check"),
        "median_ms": median,
        "robust_cov": timing.robust_cov if timing is not None else None,
        "first_over_median": samples[0] / median if samples and median else None,
        "seconds": s,
    }


def _mean(values: list[Any]) -> float | None:
    kept = [float(v) for v in values if v is not None]
    return statistics.fmean(kept) if kept else None


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per task and variant, over the recorded rounds (``first`` left out): means, and the CoV of the
    medians over the rounds."""
    out = []
    keys = sorted({(r["task"], r["variant"]) for r in rows if r["round"] > 0}, key=lambda k: k[0])
    order = list(VARIANTS)
    keys.sort(key=lambda k: (k[0], order.index(k[1]) if k[1] in order else len(order)))
    for task, variant in keys:
        rs = [r for r in rows if r["task"] == task and r["variant"] == variant and r["round"] > 0]
        medians = [r["median_ms"] for r in rs if r["median_ms"]]
        spread = statistics.pstdev(medians) / statistics.fmean(medians) if len(medians) >= 2 else None
        out.append(
            {
                "task": task,
                "variant": variant,
                "n": len(rs),
                "passed": sum(r["passed"] for r in rs),
                "spread": spread,
                **{
                    k: _mean([r[k] for r in rs])
                    for k in (
                        "trials",
                        "timing_trials",
                        "timing_warmup",
                        "ms_per_trial",
                        "last_check",
                        "median_ms",
                        "robust_cov",
                        "first_over_median",
                    )
                },
                "timing_lock_wait": _mean([r["seconds"].get("timing_lock_wait") for r in rs]),
                "spot_check": _mean([r["seconds"].get("spot_check") for r in rs]),
                "correctness": _mean([r["seconds"].get("correctness") for r in rs]),
            }
        )
    return out


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table(header: list[str], lines: list[list[str]]) -> str:
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    rows += ["| " + " | ".join(line) + " |" for line in lines]
    return "\n".join(rows)


def evaluation_tables(rows: list[dict[str, Any]]) -> str:
    summary = summarize(rows)
    head = [
        "task",
        "variant",
        "n (passed)",
        "trials",
        "timing_trials s",
        "timing_warmup s",
        "ms/trial after warm-up",
        "last_check s",
        "median ms",
        "spread of medians",
        "robust CoV",
        "first/med",
        "timing_lock_wait s",
        "spot_check s",
    ]
    lines = [
        [
            s["task"],
            s["variant"],
            f"{s['n']} ({s['passed']})",
            fmt(s["trials"], 1),
            fmt(s["timing_trials"], 4),
            fmt(s["timing_warmup"], 4),
            fmt(s["ms_per_trial"], 3),
            fmt(s["last_check"], 4),
            fmt(s["median_ms"], 4),
            fmt(s["spread"], 4),
            fmt(s["robust_cov"], 4),
            fmt(s["first_over_median"], 3),
            fmt(s["timing_lock_wait"], 4),
            fmt(s["spot_check"], 4),
        ]
        for s in summary
    ]
    raw_head = ["round", "task", "variant", "passed", "trials", "stop", "warm-up calls", "timing_trials s"]
    raw_head += ["timing_warmup s", "ms/trial", "last_check s", "median ms", "robust CoV", "call s"]
    raw = [
        [
            "first" if r["round"] == 0 else str(r["round"]),
            r["task"],
            r["variant"],
            fmt(r["passed"]) + ("" if r["passed"] else f" ({r['error']}: {r['message'][:80]})"),
            str(r["trials"]),
            fmt(r["stop"]),
            fmt(r["warmup_calls"]),
            fmt(r["timing_trials"], 4),
            fmt(r["timing_warmup"], 4),
            fmt(r["ms_per_trial"], 3),
            fmt(r["last_check"], 4),
            fmt(r["median_ms"], 4),
            fmt(r["robust_cov"], 4),
            fmt(r["call_s"], 2),
        ]
        for r in rows
    ]
    return table(head, lines) + "\n\nEvery evaluation, in the order run:\n\n" + table(raw_head, raw)


def stop_rule_cost(n: int = 91, repeats: int = 5) -> list[dict[str, Any]]:
    """Part 4: the Python of ``measure_batched``'s stop rule per trial, on made-up samples (0.22 ms with
    1 % noise, seeded; ``min_total_ms`` 20 is reached at trial 91), with today's default policy (two
    timing sets, ``repeat_pairs``) and with one group and no repeat pairs (the rule at 57d0025)."""
    from executor.checking import next_batch_size, stop_rule

    rng = np.random.default_rng(33)
    samples = [float(x) for x in 0.22 * (1 + 0.01 * rng.standard_normal(n))]
    today = EvaluationOptions().trial_policy(device_timed=True)
    policies = {
        "today (groups 2, repeat pairs)": dataclasses.replace(today, groups=EvaluationOptions().timing_sets),
        "57d0025 (groups 1)": dataclasses.replace(today, groups=1, repeat_pairs=0),
    }
    out = []
    for name, policy in policies.items():
        best_stop, best_next, best_full = float("inf"), float("inf"), float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            for k in range(1, n + 1):
                stop_rule(samples[:k], policy)
            best_stop = min(best_stop, time.perf_counter() - t0)
            t0 = time.perf_counter()
            stop_rule(samples, policy)  # past min_trials and min_total_ms: the spread is computed
            best_full = min(best_full, time.perf_counter() - t0)
            t0 = time.perf_counter()
            for k in range(5, n + 1, 16):
                next_batch_size(
                    samples[:k], policy, max_batch=64, trial_wall_s=1e-3, elapsed_s=0.0, hint_ms=samples[:5]
                )
            best_next = min(best_next, time.perf_counter() - t0)
        out.append(
            {
                "policy": name,
                "stop_rule_us_per_trial": best_stop / n * 1e6,
                "stop_rule_us_full": best_full * 1e6,
                "next_batch_size_us_per_call": best_next / len(range(5, n + 1, 16)) * 1e6,
            }
        )
    return out


def stop_rule_table(rows: list[dict[str, Any]]) -> str:
    return table(
        [
            "policy",
            "stop_rule us per trial (every prefix of 91)",
            "stop_rule us at 91 samples",
            "next_batch_size us per call",
        ],
        [
            [
                r["policy"],
                fmt(r["stop_rule_us_per_trial"], 1),
                fmt(r["stop_rule_us_full"], 1),
                fmt(r["next_batch_size_us_per_call"], 1),
            ]
            for r in rows
        ],
    )


# --- what was measured, and where ------------------------------------------------------------------


def code_identity(given: str = "") -> dict[str, str]:
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    if given:
        commit = f"{given} (as given{'; git here says ' + commit if commit else ''})"
    ident = {"commit": commit or "unknown (no git checkout here: see the files' hashes)"}
    for name in CODE_FILES:
        path = ROOT / name
        ident[name] = hashlib.sha256(path.read_bytes()).hexdigest()[:12] if path.is_file() else "missing"
    return ident


def gpu_missing() -> str | None:
    """Why the device parts cannot run here (None: they can)."""
    if importlib.util.find_spec("pycuda") is None:
        return "pycuda is not installed"
    if shutil.which("nvidia-smi") is None:
        return "no nvidia-smi (no NVIDIA driver)"
    try:
        import pycuda.driver as cuda

        cuda.init()
        if cuda.Device.count() < 1:
            return "the CUDA driver sees no device"
    except Exception as e:  # any driver failure means no GPU part
        return f"the CUDA driver failed: {e}"
    return None


def device_line() -> str:
    """The GPU's name, driver and memory as the executor reports them (``executor.app.query_gpu``)."""
    from executor.app import query_gpu

    gpu = query_gpu()
    if not gpu:
        return "no GPU (no nvidia-smi, or it failed)"
    return f"{gpu['name']}, driver {gpu['driver']}, {gpu['memory_total_mib']} MiB"


def header(args: argparse.Namespace, device: str) -> str:
    ident = code_identity(args.commit)
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith("REGRAPH_")}
    lines = [
        "# Kernel trial probe (bench/device/kernel_trial_probe.py)",
        "",
        f"- date (UTC): {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())}; host {platform.node()}, "
        f"{os.cpu_count()} CPUs; python {platform.python_version()}",
        f"- device: {device}",
        f"- code: commit {ident.pop('commit')}; sha256[:12] "
        + ", ".join(f"{k} {v}" for k, v in ident.items()),
        f"- tasks: {', '.join(args.tasks)}; rounds asked: {args.repeats}; budget for the evaluations "
        f"{args.budget_s:.0f} s; prepare_next {'on' if args.prepare_next else 'off'}"
        + (f"; background spinners {args.spin}" if args.spin else ""),
        "- variants (over EvaluationOptions' defaults): "
        + "; ".join(f"{k} {json.dumps(v)}" for k, v in VARIANTS.items()),
        f"- REGRAPH_ environment: {json.dumps(env) if env else 'none'}",
    ]
    return "\n".join(lines)


@contextlib.contextmanager
def spinners(count: int) -> Iterator[None]:
    """``count`` processes that keep a CPU busy (``--spin``: the A/B ran beside compiles); none by
    default."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdout=subprocess.DEVNULL)
        for _ in range(count)
    ]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


# --- part 1: evaluations ---------------------------------------------------------------------------


def candidate_for(task_id: str) -> tuple[KernelTask, str]:
    task = load_task(KERNEL_TASKS / task_id)
    if not isinstance(task, KernelTask):
        raise SystemExit(f"{task_id} is not a kernel task")
    path = KERNEL_TASKS / task_id / "candidate.cu"
    if not path.is_file():
        raise SystemExit(f"{task_id} has no candidate.cu")
    return task, path.read_text(encoding="utf-8")


def failed_row(task: str, variant: str, rnd: int, why: str, call_s: float) -> dict[str, Any]:
    """The row of an evaluation that raised instead of giving a verdict (the probe goes on)."""
    row: dict[str, Any] = dict.fromkeys(
        ("trials", "stop", "warmup_calls", "timing_trials", "timing_warmup", "ms_per_trial", "last_check")
    )
    row.update(dict.fromkeys(("median_ms", "robust_cov", "first_over_median")))
    row.update(task=task, variant=variant, round=rnd, passed=False, error="raised", message=why[:200])
    row.update(call_s=call_s, trials=0, seconds={})
    return row


def run_evaluations(
    args: argparse.Namespace,
    evaluate: Callable[[str, str, EvaluationOptions], Any],
    started: float,
    base: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """The ``first`` evaluation of every task, then the interleaved rounds until the budget; the rows
    and a line saying how far the rounds got."""
    rows: list[dict[str, Any]] = []

    def one(task: str, variant: str, rnd: int) -> None:
        t0 = time.perf_counter()
        try:
            outcome = evaluate(task, variant, variant_options(variant, base))
        except Exception as e:  # an infrastructure failure: recorded, and the probe goes on
            row = failed_row(task, variant, rnd, f"{type(e).__name__}: {e}", time.perf_counter() - t0)
        else:
            row = outcome_row(task, variant, rnd, outcome, time.perf_counter() - t0)
        rows.append(row)
        print(
            f"{'first' if rnd == 0 else f'round {rnd}'} {task} {variant}: passed {row['passed']} "
            f"trials {row['trials']} ms/trial {fmt(row['ms_per_trial'])} ({row['call_s']:.1f} s)"
            + ("" if row["passed"] else f" {row['error']}: {row['message'][:160]}"),
            flush=True,
        )

    for task in args.tasks:
        one(task, "defaults", 0)
    blocks = rounds_plan(args.tasks, list(VARIANTS), args.repeats)
    done = 0
    for block in blocks:
        if time.perf_counter() - started > args.budget_s:
            break
        for task, variant in block:
            one(task, variant, done // len(args.tasks) + 1)
        done += 1
    reached = f"{done} of {len(blocks)} blocks (task x round) run"
    if done < len(blocks):
        reached += f"; the budget ({args.budget_s:.0f} s) stopped the rest"
    return rows, reached


# --- parts 2 and 3: in this process, on one task's buffers (GPU) -----------------------------------


class LoopTimers:
    """Timers around the product's timing loop (``GpuKernelRuntime.time``): each batch's enqueueing
    (up to the gate's release, which ``run_batch`` calls once everything is enqueued) and waiting,
    and the stop rule's Python. Installed for one ``time()`` call and removed after it."""

    def __init__(self) -> None:
        self.batches: list[dict[str, Any]] = []
        self.rule_s = 0.0
        self._released: float | None = None

    @contextlib.contextmanager
    def installed(self, runtime: Any) -> Iterator[None]:
        import executor.checking as checking
        import executor.worker.gpu as gpu_module

        # The names the loop looks up when it runs: gpu.py's import of measure_batched, and the
        # checking module's own globals that measure_batched calls.
        saved: dict[tuple[Any, str], Callable[..., Any]] = {
            (module, name): getattr(module, name)
            for module, name in (
                (gpu_module, "measure_batched"),
                (checking, "stop_rule"),
                (checking, "next_batch_size"),
            )
        }
        release = runtime._gate_release

        def gate_release() -> None:
            self._released = time.perf_counter()
            release()

        def timed_rule(original: Callable[..., Any]) -> Callable[..., Any]:
            def call(*a: Any, **k: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return original(*a, **k)
                finally:
                    self.rule_s += time.perf_counter() - t0

            return call

        measure = saved[(gpu_module, "measure_batched")]

        def measure_batched(run_batch: Callable[[list[int]], list[float]], *a: Any, **k: Any) -> Any:
            def timed_batch(indices: list[int]) -> list[float]:
                self._released = None
                began = time.perf_counter()
                out = run_batch(indices)
                end = time.perf_counter()
                released = self._released or end
                self.batches.append(
                    {
                        "n": len(indices),
                        "warm": indices[0] < 0,
                        "enqueue_ms": (released - began) * 1e3,
                        "wait_ms": (end - released) * 1e3,
                    }
                )
                return out

            return measure(timed_batch, *a, **k)

        setattr(runtime, "_gate_release", gate_release)  # noqa: B010
        setattr(gpu_module, "measure_batched", measure_batched)  # noqa: B010
        setattr(checking, "stop_rule", timed_rule(saved[(checking, "stop_rule")]))  # noqa: B010
        setattr(checking, "next_batch_size", timed_rule(saved[(checking, "next_batch_size")]))  # noqa: B010
        try:
            yield
        finally:
            for (module, name), value in saved.items():
                setattr(module, name, value)
            delattr(runtime, "_gate_release")


def _median_us(values: list[float]) -> float:
    return float(statistics.median(values)) * 1e6


def device_parts(
    task_id: str, product: str, symbol: str, compare_product: str | None, cache_dir: Path, repeats: int
) -> dict[str, Any]:
    """Parts 2 and 3 on ``task_id``'s timing-size buffers, in this process's own context."""
    from executor.checking import robust_cov
    from executor.devcompare import DeviceComparer
    from executor.inputs import generate_inputs
    from executor.reference import build_reference
    from executor.worker.gpu import (
        GATE_TRIALS,
        DeviceSlots,
        DeviceSpots,
        GpuContext,
        GpuKernelRuntime,
        LaunchGate,
    )

    task = load_task(KERNEL_TASKS / task_id)
    assert isinstance(task, KernelTask)
    gpu = GpuContext()
    cuda = gpu.cuda
    lib = ctypes.CDLL(str(build_reference(task, cache_dir)))  # a custom generator lives there
    defaults = EvaluationOptions()
    sources = [generate_inputs(task, "timing", 9001 + k, lib) for k in range(defaults.timing_sets)]
    slots = DeviceSlots(
        gpu,
        task,
        sources,
        defaults.rotated_copies(kernel=True),
        warm=generate_inputs(task, "timing", 9000, lib),
    )
    timed_slots = len(slots.rotated) - (slots.warm is not None)
    comparer = DeviceComparer(cuda, compare_product) if compare_product else None
    gather = comparer.spot_gather() if comparer is not None else None
    stream = cuda.Stream()
    runtime = GpuKernelRuntime(gpu, task, product, symbol)
    result: dict[str, Any] = {
        "task": task_id,
        "output_bytes": {a.name: int(sources[0].arrays[a.name].nbytes) for a in task.outputs},
        "flush_bytes": gpu.flush_bytes,
        "slots": timed_slots,
        "gather_ready": gather is not None,
    }

    def where(m: int) -> tuple[int, int]:
        j = m % timed_slots
        return j, j % slots.timed

    def restore(m: int) -> None:
        j, k = where(m)
        slots.enqueue_restore(j, k, stream)

    def flush(m: int) -> None:
        gpu.flush_l2_async(stream)

    def launch(m: int) -> None:
        j, k = where(m)
        runtime._launch(slots.sources[k], slots.rotated[j], slots.sources[k].size, stream)

    def trial(m: int) -> None:
        restore(m)
        flush(m)
        launch(m)

    def spot_op(spots: Any) -> Callable[[int], None]:
        def op(m: int) -> None:
            j, k = where(m)
            spots.after_launch(slots.rotated[j], k, f"timed launch {m + 1}", stream)

        return op

    marker = cuda.Event()

    def record(m: int) -> None:
        marker.record(stream)

    # Part 3a: fixed costs of one timing loop, each made and dropped five times.
    fixed: dict[str, list[float]] = {"reset_timing_state": [], "LaunchGate()": [], "DeviceSpots life": []}
    fixed["Stream()"] = []
    for _ in range(5):
        t0 = time.perf_counter()
        gpu.reset_timing_state()
        fixed["reset_timing_state"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        made, _ = LaunchGate.create_or_none(gpu)
        fixed["LaunchGate()"].append(time.perf_counter() - t0)
        del made
        t0 = time.perf_counter()
        spots = DeviceSpots(gpu, task, slots.sources[0].arrays)
        spots.collect()
        spots.free()
        fixed["DeviceSpots life"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        cuda.Stream()
        fixed["Stream()"].append(time.perf_counter() - t0)
    result["fixed_ms"] = {k: float(statistics.median(v)) * 1e3 for k, v in fixed.items()}

    # Part 3b: host microseconds to enqueue one call, 8 at a time, the stream drained between. Without
    # a gate (the driver refused one: the product then times ungated too) 3c and 3d run ungated.
    gate, result["gate_off"] = LaunchGate.create_or_none(gpu)

    def host_us(op: Callable[[int], None], calls: int = 64, chunk: int = 8) -> float:
        times = []
        for c in range(calls // chunk):
            for m in range(c * chunk, (c + 1) * chunk):
                t0 = time.perf_counter()
                op(m)
                times.append(time.perf_counter() - t0)
            stream.synchronize()
        return _median_us(times)

    def gate_wait(m: int) -> None:
        assert gate is not None
        gate.close(stream)
        gate.release()

    ops: dict[str, Callable[[int], None]] = {
        "restore (all outputs)": restore,
        "flush_l2_async": flush,
        "event record": record,
        "launch (candidate)": launch,
    }
    if gate is not None:
        ops["gate wait + release"] = gate_wait
    host: dict[str, float] = {name: host_us(op) for name, op in ops.items()}
    spots = DeviceSpots(gpu, task, slots.sources[0].arrays)
    host["spot copies (one launch's sample)"] = host_us(spot_op(spots))
    spots.free()
    if gather is not None:
        spots = DeviceSpots(gpu, task, slots.sources[0].arrays, gather)
        host["spot gather (one launch's sample)"] = host_us(spot_op(spots))
        spots.free()
    result["host_us"] = host

    # Part 3c: GPU milliseconds of each alone, 16 pairs of events behind a closed gate.
    def gpu_ms(op: Callable[[int], None], calls: int = 16) -> float:
        pairs = [(cuda.Event(), cuda.Event()) for _ in range(calls)]
        if gate is not None:
            gate.close(stream)
        try:
            for m, (a, b) in enumerate(pairs):
                a.record(stream)
                op(m)
                b.record(stream)
        finally:
            if gate is not None:
                gate.release()
        stream.synchronize()
        return float(statistics.median(a.time_till(b) for a, b in pairs))

    device: dict[str, float] = {
        "restore (all outputs)": gpu_ms(restore),
        "flush_l2_async": gpu_ms(flush),
        "launch (candidate)": gpu_ms(launch),
        "trial (restore + flush + launch)": gpu_ms(trial),
    }
    spots = DeviceSpots(gpu, task, slots.sources[0].arrays)
    device["spot copies (one launch's sample)"] = gpu_ms(spot_op(spots))
    spots.free()
    if gather is not None:
        spots = DeviceSpots(gpu, task, slots.sources[0].arrays, gather)
        device["spot gather (one launch's sample)"] = gpu_ms(spot_op(spots))
        spots.free()
    result["device_ms"] = device

    # Part 3d: batches of 64 trials as run_batch enqueues them (no watch, no stop rule), gate and spot
    # copies on and off, interleaved over the repeats.
    def batch(gated: bool, with_spots: bool, n: int = 64) -> dict[str, float]:
        sampled = DeviceSpots(gpu, task, slots.sources[0].arrays) if with_spots else None
        events = [(cuda.Event(), cuda.Event()) for _ in range(n)]
        first, last = cuda.Event(), cuda.Event()
        held = LaunchGate.create_or_none(gpu)[0] if gated else None
        began = time.perf_counter()
        try:
            for m, (start, end) in enumerate(events):
                if held is not None and m % GATE_TRIALS == 0:
                    held.close(stream)
                    if m:
                        held.word[0] = held.closed - 1
                if m == 0:
                    first.record(stream)
                j, k = where(m)
                slots.enqueue_restore(j, k, stream)
                gpu.flush_l2_async(stream)
                start.record(stream)
                runtime._launch(slots.sources[k], slots.rotated[j], slots.sources[k].size, stream)
                end.record(stream)
                if sampled is not None:
                    sampled.after_launch(slots.rotated[j], k, f"timed launch {m + 1}", stream)
            last.record(stream)
        finally:
            if held is not None:
                held.release()
        enqueued = time.perf_counter()
        last.synchronize()
        ended = time.perf_counter()
        times = [start.time_till(end) for start, end in events]
        if sampled is not None:
            sampled.free()
        median = float(statistics.median(times))
        return {
            "gated": float(held is not None),
            "spots": float(with_spots),
            "host_us_per_trial": (enqueued - began) / n * 1e6,
            "wall_us_per_trial": (ended - began) / n * 1e6,
            "gpu_span_us_per_trial": first.time_till(last) / n * 1e3,
            "median_ms": median,
            "first_over_median": times[0] / median if median > 0 else 0.0,
            "robust_cov": robust_cov(times),
        }

    configs = {
        "gate + spots (defaults)": (True, True),
        "no gate, spots": (False, True),
        "gate, no spots": (True, False),
        "no gate, no spots (57d0025's loop)": (False, False),
    }
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in configs}
    for r in range(max(repeats, 3)):
        names = list(configs)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            runs[name].append(batch(*configs[name]))
    result["batches"] = {
        name: {k: float(statistics.median(v[k] for v in vs)) for k in vs[0]} for name, vs in runs.items()
    }
    device_work = device["trial (restore + flush + launch)"] * 1e3
    result["device_us_per_trial"] = device_work
    result["device_us_per_trial_with_spots"] = device_work + device["spot copies (one launch's sample)"] * 1e3

    # Part 2: the product's timing loop itself, per variant, instrumented.
    loops: dict[str, list[dict[str, Any]]] = {name: [] for name in VARIANTS}
    for r in range(repeats):
        names = list(VARIANTS)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            options = variant_options(name)
            candidate = GpuKernelRuntime(gpu, task, product, symbol)
            if options.kernel_spot_gather and comparer is not None:
                candidate.spot_gather = comparer.spot_gather()
            timers = LoopTimers()
            with timers.installed(candidate):
                t0 = time.perf_counter()
                gpu.reset_timing_state()
                reset_s = time.perf_counter() - t0
                t0 = time.perf_counter()
                stats, last = candidate.time(slots, options)
                wall_s = time.perf_counter() - t0
            timed = [b for b in timers.batches if not b["warm"]]
            warm = [b for b in timers.batches if b["warm"]]
            in_batches_ms = sum(b["enqueue_ms"] + b["wait_ms"] for b in timers.batches)
            # Per trial enqueued (a last batch's trials past the stop are run, then dropped).
            ran = max(sum(b["n"] for b in timed), 1)
            loops[name].append(
                {
                    "reset_ms": reset_s * 1e3,
                    "time_ms": wall_s * 1e3,
                    "warmup_ms": float(last["warmup"]["seconds"]) * 1e3,
                    "warmup_calls": float(last["warmup"]["calls"]),
                    "warm_batches": float(len(warm)),
                    "timed_batches": float(len(timed)),
                    "trials": float(stats.trials),
                    "trials_run": float(ran),
                    "enqueue_us_per_trial": sum(b["enqueue_ms"] for b in timed) / ran * 1e3,
                    "wait_us_per_trial": sum(b["wait_ms"] for b in timed) / ran * 1e3,
                    "timed_batches_us_per_trial": sum(b["enqueue_ms"] + b["wait_ms"] for b in timed)
                    / ran
                    * 1e3,
                    "outside_batches_ms": wall_s * 1e3 - in_batches_ms,
                    "stop_rule_ms": timers.rule_s * 1e3,
                    "median_ms": stats.median_ms,
                    "gated": float(bool(last["gate"]["gated"])),
                }
            )
    result["loops"] = {
        name: {k: float(statistics.fmean(v[k] for v in vs)) for k in vs[0]}
        for name, vs in loops.items()
        if vs
    }
    slots.free()
    gpu.close()  # its context popped: pycuda aborts at exit when one is left on the stack
    return result


def device_tables(d: dict[str, Any]) -> str:
    parts = [
        f"Task {d['task']}: outputs {d['output_bytes']} bytes, L2 flush {d['flush_bytes'] >> 20} MiB, "
        f"{d['slots']} timed slots, gather kernel ready: {fmt(d['gather_ready'])}"
        + (f"; {d['gate_off']}: 3c and 3d ran ungated." if d["gate_off"] else "."),
        "",
        "Part 2, the product's timing loop (GpuKernelRuntime.time) in this process, mean over the rounds "
        "(us/trial: per trial run in the timed batches; outside: time() less all its batches):",
        "",
    ]
    keys = [
        ("reset_ms", "reset_timing_state ms", 3),
        ("time_ms", "time() ms", 2),
        ("warmup_ms", "warm-up ms", 2),
        ("warmup_calls", "warm-up calls", 1),
        ("warm_batches", "warm-up batches", 1),
        ("timed_batches", "timed batches", 1),
        ("trials", "trials", 1),
        ("trials_run", "trials run", 1),
        ("enqueue_us_per_trial", "enqueue us/trial", 1),
        ("wait_us_per_trial", "wait us/trial", 1),
        ("timed_batches_us_per_trial", "timed batches us/trial", 1),
        ("outside_batches_ms", "outside batches ms", 3),
        ("stop_rule_ms", "stop rule ms", 3),
        ("median_ms", "median ms", 4),
        ("gated", "gated", 0),
    ]
    parts.append(
        table(
            ["variant"] + [label for _, label, _ in keys],
            [[name] + [fmt(row[k], n) for k, _, n in keys] for name, row in d["loops"].items()],
        )
    )
    parts += ["", "Part 3a, fixed costs of one timing loop (median of 5, ms):", ""]
    parts.append(table(list(d["fixed_ms"]), [[fmt(v, 3) for v in d["fixed_ms"].values()]]))
    parts += [
        "",
        "Part 3b/3c, one call: host us to enqueue (median of 64) and GPU ms alone (median of 16):",
        "",
    ]
    names = list(dict.fromkeys([*d["host_us"], *d["device_ms"]]))
    parts.append(
        table(
            ["call", "host us to enqueue", "GPU ms alone"],
            [[n, fmt(d["host_us"].get(n), 1), fmt(d["device_ms"].get(n), 4)] for n in names],
        )
    )
    parts += [
        "",
        f"Part 3d, 64-trial batches as run_batch enqueues them (median over the repeats); device work per "
        f"trial from 3c: {d['device_us_per_trial']:.1f} us, with a spot sample "
        f"{d['device_us_per_trial_with_spots']:.1f} us:",
        "",
    ]
    bkeys = [
        ("host_us_per_trial", "host enqueue us/trial", 1),
        ("wall_us_per_trial", "wall us/trial", 1),
        ("gpu_span_us_per_trial", "GPU span us/trial", 1),
        ("median_ms", "kernel median ms", 4),
        ("first_over_median", "first/med", 3),
        ("robust_cov", "robust CoV", 4),
    ]
    lines = []
    for name, row in d["batches"].items():
        work = d["device_us_per_trial_with_spots" if row["spots"] else "device_us_per_trial"]
        bound = "host" if row["host_us_per_trial"] > work else "device"
        gated = "" if row["gated"] or "no gate" in name else " (NOT gated: no gate here)"
        lines.append([name + gated] + [fmt(row[k], n) for k, _, n in bkeys] + [bound])
    parts.append(table(["batch"] + [label for _, label, _ in bkeys] + ["bound by"], lines))
    return "\n".join(parts)


# --- the dry run (CPU) -----------------------------------------------------------------------------


def dry_run(args: argparse.Namespace, started: float) -> str:
    """The plan, the static checks of every task and candidate, part 4, and the variant loop on the
    host runtime with the fixture ``saxpy`` (its reference library as the candidate)."""
    from executor.reference import build_reference
    from executor.sandbox import run_job
    from executor.static import check_source
    from executor.timingset import TimingSetSpec
    from executor.worker.messages import CandidateRun, WorkerJob, seeds_needed

    out = [header(args, f"none (dry run; {gpu_missing() or 'a GPU is here, not used'})"), ""]
    out.append("## Plan\n")
    for task_id in args.tasks:
        kernel_task, source = candidate_for(task_id)
        violations = check_source(kernel_task, source)
        sizes = {a.name: kernel_task.array_length(a, "timing") for a in kernel_task.outputs}
        out.append(
            f"- {task_id}: candidate.cu {len(source)} chars, static check "
            f"{'passed' if not violations else 'FAILED: ' + '; '.join(v.rule for v in violations)}; "
            f"timing-size outputs (elements) {sizes}"
        )
    for name in VARIANTS:
        variant_options(name)  # each variant validates
    blocks = rounds_plan(args.tasks, list(VARIANTS), args.repeats)
    out.append(
        f"- {len(blocks)} blocks (task x round), {sum(len(b) for b in blocks)} evaluations after the firsts"
    )
    for r in range(min(2, args.repeats)):
        out.append(
            f"- round {r + 1}, task {args.tasks[0]}: "
            + " -> ".join(v for _, v in blocks[r * len(args.tasks)])
        )
    out.append(
        f"- parts 2 and 3 on {args.tasks[0]}: {max(args.repeats, 3)} rounds of the timing loop per variant"
    )
    out += [
        "",
        "## Part 4: the stop rule's Python (CPU, made-up samples)",
        "",
        stop_rule_table(stop_rule_cost()),
    ]

    task = load_task(FIXTURE_TASKS / "saxpy")
    assert isinstance(task, FunctionTask)
    with tempfile.TemporaryDirectory(prefix="kernel-trial-dry-") as tmp:
        library = str(build_reference(task, Path(tmp) / "cache"))

        def evaluate(task_id: str, variant: str, options: EvaluationOptions) -> Any:
            job = WorkerJob(
                task=task,
                runtime="host",
                reference_library=library,
                seeds=[11 * (i + 1) for i in range(max(3, seeds_needed(options)))],
                options=options,
                timing_set=TimingSetSpec(dir=str(Path(tmp) / "timing-set"), seed=4242),
            )
            run = CandidateRun(candidate_product=library, candidate_symbol=task.entry)
            return run_job(job, run, timeout_s=120)

        dry = argparse.Namespace(**{**vars(args), "tasks": ["saxpy"]})
        rows, reached = run_evaluations(dry, evaluate, started, DRY_BASE)
    out += [
        "",
        "## Variant loop on the host runtime (plumbing only: a function task, options over "
        f"{json.dumps(DRY_BASE)}; the kernel options change nothing here)",
        "",
        reached,
        "",
        evaluation_tables(rows),
    ]
    return "\n".join(out)


# --- main ------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS), help="kernel task ids")
    parser.add_argument("--repeats", type=int, default=2, help="rounds of every task x variant")
    parser.add_argument("--budget-s", type=float, default=70.0, help="no new block of evaluations after this")
    parser.add_argument(
        "--commit", default="", help="the commit the copy was made from (no git on the device)"
    )
    parser.add_argument("--prepare-next", action="store_true", help="the evaluator's prepare_next on")
    parser.add_argument("--spin", type=int, default=0, help="CPU-spinning processes beside everything")
    parser.add_argument("--skip-device-parts", action="store_true", help="evaluations only")
    parser.add_argument("--dry-run", action="store_true", help="the plan and the host-runtime loop (CPU)")
    parser.add_argument("--md", type=Path, help="write the report here too")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    for task_id in args.tasks:
        if not (KERNEL_TASKS / task_id / "task.json").is_file():
            parser.error(f"no kernel task {task_id!r} under {KERNEL_TASKS}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    if args.dry_run:
        text = dry_run(args, started)
        print(text)
        if args.md:
            args.md.write_text(text + "\n")
        return 0
    missing = gpu_missing()
    if missing is not None:
        print(
            f"kernel_trial_probe: needs pycuda and an NVIDIA GPU ({missing}); --dry-run checks the plan on a CPU"
        )
        return 2

    from executor.compile import kernel_symbol
    from executor.devcompare import compare_source
    from executor.evaluate import Evaluator
    from executor.settings import ExecutorSettings

    report: list[str] = []
    data: dict[str, Any] = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "code": code_identity(args.commit),
    }

    def emit(*sections: str) -> None:
        """Print and keep each section, and write what there is so far (a later part that fails or
        runs out of time leaves the earlier ones written)."""
        for section in sections:
            print(section, flush=True)
            report.append(section)
        if args.md:
            args.md.write_text("\n".join(report) + "\n")
        if args.json:
            args.json.write_text(json.dumps(data, indent=1, default=str))

    emit(header(args, device_line()))
    candidates = {task_id: candidate_for(task_id) for task_id in args.tasks}
    with tempfile.TemporaryDirectory(prefix="kernel-trial-probe-") as tmp, spinners(args.spin):
        cache = Path(tmp) / "cache"
        settings = ExecutorSettings(
            cache_dir=cache, runtime="gpu", run_timeout_s=60, prepare_next=args.prepare_next
        )
        evaluator = Evaluator(settings)
        try:

            def evaluate(task_id: str, variant: str, options: EvaluationOptions) -> Any:
                task, source = candidates[task_id]
                return evaluator.evaluate(task, CandidateSource(source=source), options)

            rows, reached = run_evaluations(args, evaluate, started)
            first_task, first_source = candidates[args.tasks[0]]
            compiled = evaluator.compiler.compile(first_task, first_source)
            compared = evaluator.compiler.compile_source(compare_source(), "cubin")
        finally:
            evaluator.close()
        data["evaluations"] = rows
        emit(
            "",
            f"## Part 1: evaluations ({reached}; {time.perf_counter() - started:.0f} s so far)",
            "",
            evaluation_tables(rows),
        )
        symbol = kernel_symbol(compiled.kernels, first_task.entry) if compiled.ok else None
        if args.skip_device_parts:
            pass
        elif compiled.product is None or symbol is None:
            emit(f"\nParts 2-3 not run: the candidate of {args.tasks[0]} did not compile here.")
        else:
            try:
                parts = device_parts(
                    args.tasks[0],
                    compiled.product,
                    symbol,
                    compared.product if compared.ok else None,
                    cache,
                    max(args.repeats, 3),
                )
            except Exception:  # the evaluations above stay written
                emit("", "## Parts 2 and 3 FAILED", "", "```", traceback.format_exc(), "```")
            else:
                data["device_parts"] = parts
                emit("", "## Parts 2 and 3: in this process", "", device_tables(parts))
    rule = stop_rule_cost()
    data["stop_rule"] = rule
    emit("", "## Part 4: the stop rule's Python (CPU, made-up samples)", "", stop_rule_table(rule))
    emit(f"\nTotal {time.perf_counter() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
