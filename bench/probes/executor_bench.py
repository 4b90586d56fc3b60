"""Time the executor's stages over benchmark tasks, the repeatability of its timings, and load_inline.

    python -m bench.probes.executor_bench --tasks regraph_data/tasks --tasks regraph_data/kernel_tasks \\
        --out bench/results/executor_bench.json --md bench/results/executor_bench.md [--load-inline 3]

The candidate of a function task is its ``naive.cu``; that of a kernel task is ``candidate.cu`` in its
directory. For each task it measures:

* ``static``, ``compile_miss`` (an empty cache) and ``compile_hit`` (the same source again), with the
  compiler that was used (nvcc, or NVRTC for kernel tasks);
* where a runtime is available, a ``first`` evaluation (the task's first: builds and times the serial
  reference, stores the task's timing set) and ``--evals`` *steady* evaluations, each of a variant of
  the candidate with different code, so that every one is a compile-cache miss with fresh seeds, as in
  a search. The steady evaluations are what the speed targets are about. ``--gap S`` sleeps S seconds
  before each steady evaluation, as a search's model does while it writes the next candidate; the
  executor uses that time to prepare the evaluation (``prepare_next``).

  The stage table separates what the caller waits for from what was prepared ahead. On the critical
  path: ``call`` (wall time of ``Evaluator.evaluate`` as the caller sees it: the target), the
  verdict's ``total``, and its parts ``static``, ``compile``, ``reference_wait``, ``reap_wait``, ``run``
  (candidate handed over to result; of it ``inputs_wait``, the wait for the worker's preparation,
  ``correctness`` and ``timing``) and ``other`` (``call`` minus those parts: the parent's own work).
  Prepared ahead, while the previous verdict was out: ``inputs``, ``timing_inputs``, ``reference_run``
  and ``timing_set``; they cost the critical path only through ``reference_wait`` and ``inputs_wait``.
  ``compare_behind`` is the check of a kernel's fresh timing-size outputs: on the device after the
  trials (``compare_on_device``, the default), else in a thread during its warm-up and trials (then
  it overlaps them). ``expected_load`` is the reading of the reference's outputs from files and
  ``download`` the copying of kernel outputs that were not passed on the device to the host.

``--cov-tasks K --cov-repeats R`` then evaluates the same candidate of K passing tasks per kind R times
on the task's timing set (``timing_inputs="task"``: the same inputs each time, so the spread of the R
medians is run-to-run spread) and R times on fresh timing-size inputs (``"fresh"``: run-to-run plus
input-dependent spread), each after the same gap, and reports both CoVs of the medians, the
input-dependent part ``sqrt(fresh^2 - same^2)`` and the within-run CoV. ``--load-inline N`` builds the
first N candidates through ``torch.utils.cpp_extension.load_inline`` (KernelBench's route), runs each
once on test-size inputs and compares with the reference.

``--runtime host`` is for profiling on a machine without a GPU: function-task candidates are the task's
``reference.cpp`` made into a candidate (a CUDA candidate cannot run on a CPU), so the worker phases
and the parent's orchestration are measured, not CUDA code.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import platform
import statistics
import sys
import tempfile
import time
from itertools import zip_longest
from pathlib import Path
from typing import Any

import numpy as np

from executor.compile import Compiler
from executor.diagnostics.load_inline import load_inline_check
from executor.evaluate import Evaluator
from executor.protocol import CandidateSource, EvaluationOptions
from executor.settings import ExecutorSettings
from executor.static import check_source
from executor.taskformat import FunctionTask, KernelTask, load_task
from executor.verdict import Verdict
from regraph_data import TASKS_DIR

logger = logging.getLogger("bench.probes.executor_bench")

# A steady evaluation's stages on the critical path (the caller waits for them), in order; "call" and
# "other" are computed here, the rest come from the verdict's seconds.
CRITICAL_STAGES = (
    "call",
    "total",
    "static",
    "compile",
    "reference_wait",
    "reap_wait",
    "run",
    "inputs_wait",
    "correctness",
    "timing",
    "timing_trials",
    "timing_warmup",
    "compare",
    "compare_behind",
    "expected_load",
    "download",
    "other",
)
# The parts of "call" that do not overlap each other ("run" holds inputs_wait, correctness, timing;
# "timing" holds timing_trials; "compare", the output comparisons, is spread over both, and so are
# "expected_load" and "download", the reading of the reference's outputs and of a kernel's outputs
# that the device did not pass; "compare_behind" is part of "timing").
CALL_PARTS = ("static", "compile", "reference_wait", "reap_wait", "run")
# Prepared ahead by the workers of the next candidate while the previous verdict was out.
PREPARED_STAGES = ("inputs", "timing_inputs", "reference_run", "timing_set")
# A kernel shorter than this is not held to the repeatability target.
COV_MIN_KERNEL_MS = 0.05
COV_TARGET = 0.02
HOST_STUB = (
    "\n__global__ void bench_host_stub() {}\nstatic void bench_unused() { bench_host_stub<<<1, 1>>>(); }\n"
)


def candidate_source(task_dir: Path, task: FunctionTask | KernelTask, runtime: str) -> str | None:
    """The candidate the benchmark evaluates for a task (None: the task has none)."""
    if runtime == "host":
        if isinstance(task, KernelTask):
            return None
        # The serial reference, made into a function candidate: it runs on the CPU and passes the
        # static rule that a candidate launches something (the stub is never called).
        return task.reference_source + HOST_STUB
    if isinstance(task, KernelTask):
        path = task_dir / "candidate.cu"
        return path.read_text(encoding="utf-8") if path.is_file() else None
    return task.naive_source


def task_dirs(roots: list[Path]) -> list[Path]:
    """Every task directory under the given roots, in order."""
    return [d for root in roots for d in sorted(root.iterdir()) if (d / "task.json").is_file()]


def _verdict_row(verdict: Verdict, call_s: float | None = None) -> dict[str, Any]:
    timing = verdict.candidate_timing
    seconds = dict(verdict.seconds)
    if call_s is not None:
        seconds["call"] = call_s
        seconds["other"] = max(0.0, call_s - sum(seconds.get(k, 0.0) for k in CALL_PARTS))
    return {
        "passed": verdict.passed,
        "error": verdict.error.value if verdict.error else None,
        "message": verdict.message[:300],
        "seconds": seconds,
        "compiler": verdict.compile.compiler if verdict.compile else None,
        "speedup": verdict.speedup,
        "median_ms": timing.median_ms if timing else None,
        "cov": timing.cov if timing else None,
        "robust_cov": timing.robust_cov if timing else None,
        "trials": timing.trials if timing else None,
        "stop": timing.stop if timing else None,
    }


def _timed_evaluation(
    evaluator: Evaluator, task: FunctionTask | KernelTask, source: str, options: EvaluationOptions
) -> tuple[Verdict, float]:
    """One evaluation and the wall time of the call, as a search waits for it."""
    start = time.perf_counter()
    verdict = evaluator.evaluate(task, CandidateSource(source=source), options)
    return verdict, time.perf_counter() - start


def _variant(source: str, k: int) -> str:
    # A different content hash (our cache misses) *and* different code after preprocessing: NVRTC 13.0
    # keeps its own in-process cache keyed on what it compiles, so a changed comment alone returns in
    # ~20 ms without running ptxas (seen on the H100). An unused device variable changes the module.
    return f"{source}\n__device__ int xbench_variant_{k}_{time.time_ns()};\n"


# --- the benchmark ----------------------------------------------------------------------------------


def bench(args: argparse.Namespace) -> dict[str, Any]:
    """Run every measurement and return the JSON document (also written as it goes)."""
    rows: list[dict[str, Any]] = []
    cov_rows: list[dict[str, Any]] = []
    inline_rows: list[dict[str, Any]] = []
    out: Path = args.out
    with tempfile.TemporaryDirectory(prefix="executor-bench-") as tmp:
        settings = ExecutorSettings(
            cache_dir=Path(tmp) / "cache", runtime=args.runtime, compiler=args.compiler, run_timeout_s=120
        )
        evaluator = Evaluator(settings)
        compiler: Compiler = evaluator.compiler
        # The function candidate is the naive version itself, so a naive baseline would time it twice.
        options = EvaluationOptions.model_validate({"baseline": False, **json.loads(args.options)})
        try:
            dirs = [d for root in args.tasks for d in task_dirs([root])[: args.limit]]
            for d in dirs:
                task = load_task(d)
                source = candidate_source(d, task, args.runtime)
                if source is None:
                    continue
                row = measure_task(evaluator, compiler, task, source, options, args.evals, args.gap)
                rows.append(row)
                _checkpoint(out, rows, cov_rows, inline_rows)
                logger.info("%s", json.dumps(row, default=str)[:600])
            if evaluator.runtime_checks_available and args.cov_repeats > 0:
                for kind in ("kernel", "function"):
                    passing = [
                        r for r in rows if r["kind"] == kind and r.get("steady") and r["steady"][0]["passed"]
                    ]
                    for r in passing[: args.cov_tasks]:
                        d = next(d for d in dirs if d.name == r["task"])
                        task = load_task(d)
                        src = candidate_source(d, task, args.runtime) or ""
                        cov_rows.append(
                            repeatability(evaluator, task, src, options, args.cov_repeats, args.gap)
                        )
                        _checkpoint(out, rows, cov_rows, inline_rows)
            for d in _alternate_kinds(dirs):
                if len(inline_rows) >= args.load_inline:
                    break
                task = load_task(d)
                inline_source = candidate_source(d, task, "gpu")
                if inline_source is None:
                    continue
                inline_rows.append(
                    load_inline_check(
                        task, inline_source, Path(tmp) / f"inline-{task.id}", Path(tmp) / "cache"
                    )
                )
                _checkpoint(out, rows, cov_rows, inline_rows)
        finally:
            evaluator.close()
        nvrtc = compiler.nvrtc if args.compiler != "nvcc" else None
        return {
            "tasks": len(rows),
            "runtime": evaluator.runtime,
            "arch": evaluator.arch,
            "nvcc": compiler.toolchain.release,
            "nvrtc": f"{nvrtc.release} ({nvrtc.path})" if nvrtc else None,
            "host": platform.node(),
            "options": options.model_dump(),
            "rows": rows,
            "summary": summarize(rows),
            "repeatability": cov_rows,
            "load_inline": inline_rows,
        }


def measure_task(
    evaluator: Evaluator,
    compiler: Compiler,
    task: FunctionTask | KernelTask,
    source: str,
    options: EvaluationOptions,
    evals: int,
    gap_s: float = 0.0,
) -> dict[str, Any]:
    """Static, compile miss/hit, then a first and ``evals`` steady evaluations of one task.

    ``gap_s`` is slept before each steady evaluation: the time a search's model spends writing the next
    candidate, during which the executor prepares that evaluation (fresh seeds, reference outputs).
    """
    row: dict[str, Any] = {"task": task.id, "kind": task.kind}
    t0 = time.perf_counter()
    violations = check_source(task, source)
    row["static"] = time.perf_counter() - t0
    row["static_violations"] = [v.rule for v in violations]
    miss = compiler.compile(task, source)
    row.update(compile_miss=miss.seconds, compile_ok=miss.ok, compiler=miss.compiler, fallback=miss.fallback)
    row["kernels"] = [k.model_dump() for k in miss.kernels]
    row["compile_hit"] = compiler.compile(task, source).seconds
    if not miss.ok:
        row["compile_log"] = miss.log[-800:]
    if evaluator.runtime_checks_available and miss.ok and not violations:
        row["first"] = _verdict_row(*_timed_evaluation(evaluator, task, _variant(source, 0), options))
        row["steady"] = []
        for k in range(evals):
            time.sleep(gap_s)
            verdict, call_s = _timed_evaluation(evaluator, task, _variant(source, k + 1), options)
            row["steady"].append(_verdict_row(verdict, call_s))
    return row


def _spread(verdicts: list[Verdict]) -> dict[str, Any]:
    """Medians of the passing evaluations and their CoV, with the median within-run CoVs."""
    timings = [v.candidate_timing for v in verdicts if v.passed and v.candidate_timing]
    medians = [t.median_ms for t in timings]
    if len(medians) < 2:
        return {"passed": len(timings)}
    mean = statistics.fmean(medians)
    return {
        "passed": len(timings),
        "median_ms": statistics.median(medians),
        "medians_ms": medians,
        "cov_of_medians": statistics.pstdev(medians) / mean if mean > 0 else 0.0,
        "within_run_cov": statistics.median(t.cov for t in timings),
        "within_run_robust_cov": statistics.median(t.robust_cov or 0.0 for t in timings),
        "trials": [t.trials for t in timings],
        "stops": [t.stop for t in timings],
    }


def repeatability(
    evaluator: Evaluator,
    task: FunctionTask | KernelTask,
    source: str,
    options: EvaluationOptions,
    repeats: int,
    gap_s: float = 0.0,
) -> dict[str, Any]:
    """The same candidate timed ``repeats`` times on the task's timing set (run-to-run spread) and
    ``repeats`` times on fresh inputs (run-to-run and input-dependent spread), ``gap_s`` before each."""
    row: dict[str, Any] = {"task": task.id, "kind": task.kind, "repeats": repeats}
    for name, inputs in (("same", "task"), ("fresh", "fresh")):
        chosen = options.model_copy(update={"timing_inputs": inputs})
        verdicts = []
        for _ in range(repeats):
            time.sleep(gap_s)
            verdicts.append(evaluator.evaluate(task, CandidateSource(source=source), chosen))
        row[name] = _spread(verdicts)
    same, fresh = row["same"].get("cov_of_medians"), row["fresh"].get("cov_of_medians")
    if same is not None and fresh is not None:
        row["input_cov"] = math.sqrt(max(0.0, fresh**2 - same**2))
    return row


def _stat(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "median_s": None, "p90_s": None, "max_s": None}
    arr = np.asarray(values)
    return {
        "n": len(values),
        "median_s": float(np.median(arr)),
        "p90_s": float(np.percentile(arr, 90)),
        "max_s": float(arr.max()),
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float | int | None]]]:
    """Per task kind: medians of static/compile seconds and of the steady evaluations' stages."""
    summary: dict[str, dict[str, dict[str, float | int | None]]] = {}
    for kind in ("function", "kernel"):
        mine = [r for r in rows if r["kind"] == kind]
        if not mine:
            continue
        stages: dict[str, list[float]] = {
            "static": [r["static"] for r in mine],
            "compile_miss": [r["compile_miss"] for r in mine if r["compile_ok"]],
            "compile_hit": [r["compile_hit"] for r in mine if r["compile_ok"]],
            "first_total": [r["first"]["seconds"].get("total", 0.0) for r in mine if r.get("first")],
        }
        steady = [s for r in mine for s in r.get("steady", [])]
        for stage in (*CRITICAL_STAGES, *PREPARED_STAGES):
            stages[stage] = [s["seconds"][stage] for s in steady if stage in s["seconds"]]
        stages["call_passed"] = [
            s["seconds"]["call"] for s in steady if s["passed"] and "call" in s["seconds"]
        ]
        summary[kind] = {stage: _stat(values) for stage, values in stages.items()}
    return summary


def _alternate_kinds(dirs: list[Path]) -> list[Path]:
    """Kernel and function tasks interleaved, so that a few load_inline builds cover both kinds."""
    kinds: dict[str, list[Path]] = {"kernel": [], "function": []}
    for d in dirs:
        kinds[load_task(d).kind].append(d)
    mixed: list[Path] = []
    for pair in zip_longest(kinds["kernel"], kinds["function"]):
        mixed.extend(p for p in pair if p is not None)
    return mixed


def _checkpoint(out: Path, rows: list[Any], cov: list[Any], inline: list[Any]) -> None:
    # Written after every step, so an interrupted run still leaves what it measured.
    out.parent.mkdir(parents=True, exist_ok=True)
    document = {"partial": True, "rows": rows, "repeatability": cov, "load_inline": inline}
    out.write_text(json.dumps(document, indent=2, default=str) + "\n")


def _path_of(stage: str) -> str:
    """``critical`` (the caller waits for it), ``ahead`` (prepared before the candidate) or ``-``."""
    if stage in CRITICAL_STAGES or stage == "call_passed":
        return "critical"
    if stage in PREPARED_STAGES:
        return "ahead"
    return "-"


def _f(value: object, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, float) else "-"


def render(result: dict[str, Any]) -> str:
    """The markdown tables: stage medians per kind, repeatability, load_inline."""
    lines = [
        f"executor benchmark: runtime={result['runtime']} arch={result['arch']} nvcc={result['nvcc']} "
        f"nvrtc={result['nvrtc']} tasks={result['tasks']}",
        "",
        "| kind | stage | path | n | median s | p90 s | max s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for kind, stages in result["summary"].items():
        for stage, s in stages.items():
            path = _path_of(stage)
            lines.append(
                f"| {kind} | {stage} | {path} | {s['n']} | {_f(s['median_s'])} | {_f(s['p90_s'])} | "
                f"{_f(s['max_s'])} |"
            )
    rows = result["rows"]
    compilers: dict[str, int] = {}
    for r in rows:
        compilers[f"{r['kind']}:{r['compiler']}"] = compilers.get(f"{r['kind']}:{r['compiler']}", 0) + 1
    steady = [s for r in rows for s in r.get("steady", [])]
    lines += [
        "",
        f"compilers used: {compilers}; steady evaluations passed: {sum(s['passed'] for s in steady)}/{len(steady)}",
    ]
    if result["repeatability"]:
        lines += [
            "",
            "Repeatability: CoV of the medians of repeated evaluations of one candidate, on the task's "
            "timing set (same inputs: run-to-run) and on fresh inputs (run-to-run and input-dependent); "
            "the target (<= 2 % for kernels >= 50 us) is about the same-input CoV.",
            "",
            "| task | kind | median ms | CoV same inputs | CoV fresh inputs | input-dependent | "
            "within-run CoV | robust CoV | trials (same) | target met |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in result["repeatability"]:
            # A row of an older run (repeats on fresh inputs only) has its figures at the top.
            same, fresh = r.get("same", {}), r.get("fresh", r if "same" not in r else {})
            basis = same if "median_ms" in same else fresh
            if "median_ms" not in basis:
                lines.append(
                    f"| {r['task']} | {r['kind']} | - | - | - | - | - | - | - | "
                    f"passed {same.get('passed', 0)}+{fresh.get('passed', 0)}/{2 * r['repeats']} |"
                )
                continue
            met = "-"
            if "cov_of_medians" in same:
                held = same["median_ms"] >= COV_MIN_KERNEL_MS
                met = ("yes" if same["cov_of_medians"] <= COV_TARGET else "NO") if held else "n/a (< 50 us)"
            lines.append(
                f"| {r['task']} | {r['kind']} | {basis['median_ms']:.4f} | {_f(same.get('cov_of_medians'), 4)} | "
                f"{_f(fresh.get('cov_of_medians'), 4)} | {_f(r.get('input_cov'), 4)} | "
                f"{basis['within_run_cov']:.4f} | {basis['within_run_robust_cov']:.4f} | "
                f"{same.get('trials', '-')} | {met} |"
            )
    if result["load_inline"]:
        lines += [
            "",
            "| load_inline task | kind | build s | run s | correct | error |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for r in result["load_inline"]:
            err = str(r.get("error", "")).replace("|", "/").replace("\n", " ")[:120]
            lines.append(
                f"| {r['task']} | {r['kind']} | {_f(r.get('build_s'), 1)} | {_f(r.get('run_s'), 3)} | "
                f"{r.get('correct', '-')} | {err} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=Path, action="append", help="a directory of tasks (repeatable)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/executor_bench.json"))
    parser.add_argument("--md", type=Path, default=None, help="also write the tables here")
    parser.add_argument(
        "--limit", type=int, default=1000, help="at most this many tasks per --tasks directory"
    )
    parser.add_argument("--render", type=Path, default=None, help="only print the tables of a (partial) JSON")
    parser.add_argument("--runtime", choices=["auto", "gpu", "host", "none"], default="auto")
    parser.add_argument("--compiler", choices=["auto", "nvrtc", "nvcc"], default="auto")
    parser.add_argument("--evals", type=int, default=2, help="steady evaluations per task")
    parser.add_argument(
        "--options", default="{}", help="EvaluationOptions fields as JSON, over the defaults (baseline off)"
    )
    parser.add_argument(
        "--gap",
        type=float,
        default=0.0,
        help="seconds slept before each steady evaluation (a search's generation time, during which the "
        "executor prepares the next evaluation); 0 = back to back",
    )
    parser.add_argument("--cov-tasks", type=int, default=5, help="tasks per kind in the repeatability table")
    parser.add_argument("--cov-repeats", type=int, default=5, help="evaluations of one candidate for it")
    parser.add_argument("--load-inline", type=int, default=0, metavar="N", help="load_inline the first N")
    args = parser.parse_args(argv)
    args.tasks = args.tasks or [TASKS_DIR]
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    if args.render is not None:  # e.g. the checkpoint of a run that hit its time limit
        partial = json.loads(args.render.read_text())
        header = {"runtime": "?", "arch": "?", "nvcc": "?", "nvrtc": "?", "tasks": len(partial["rows"])}
        table = render({**header, **partial, "summary": summarize(partial["rows"])})
        if args.md is not None:
            args.md.write_text(table)
        sys.stdout.write(table)
        return 0
    result = bench(args)
    result["command"] = " ".join(sys.argv)
    result["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    table = render(result)
    if args.md is not None:
        args.md.write_text(table)
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
