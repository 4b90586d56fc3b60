"""Time the executor's stages over the benchmark tasks' naive CUDA candidates.

    python -m bench.executor_bench --tasks bench/tasks --out bench/results/executor_bench.json

For each task with a naive.cu it measures: static checks, a compile with an empty cache (miss), the same
compile again (hit) and, where a runtime is available (GPU with pycuda), the correctness and timing
stages. ``--load-inline`` also times a KernelBench-style ``torch.utils.cpp_extension.load_inline`` build of
the same source for comparison (needs torch with its CUDA toolchain).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from executor.compile import Compiler
from executor.evaluate import Candidate, Evaluator
from executor.settings import ExecutorSettings
from executor.static import check_source
from executor.taskformat import FunctionTask, KernelTask, load_task
from executor.worker import EvaluationOptions

logger = logging.getLogger("bench.executor_bench")

STAGES = ("static", "compile_miss", "compile_hit", "correctness", "timing")


def _load_inline_seconds(task: FunctionTask | KernelTask, source: str, build_dir: Path) -> float | None:
    """Compile time of the same source through torch's load_inline (the KernelBench route)."""
    try:
        from torch.utils.cpp_extension import load_inline
    except ImportError:
        return None
    start = time.perf_counter()
    load_inline(
        name=f"bench_{task.id}",
        cpp_sources=["void regraph_bench_unused() {}"],
        cuda_sources=[source],
        functions=["regraph_bench_unused"],
        build_directory=str(build_dir),
        verbose=False,
    )
    return time.perf_counter() - start


def bench(
    tasks_dir: Path, limit: int, load_inline: bool, runtime: str, out: Path | None = None
) -> dict[str, Any]:
    """Evaluate every task's naive candidate once and collect per-stage wall times."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="executor-bench-") as tmp:
        settings = ExecutorSettings(cache_dir=Path(tmp) / "cache", runtime=runtime)
        evaluator = Evaluator(settings)
        compiler: Compiler = evaluator.compiler
        # The candidate is the naive version itself, so a naive baseline would only time it twice.
        options = EvaluationOptions(
            min_trials=10, max_trials=50, min_timing_ms=50, reference_repeats=1, baseline=False
        )
        dirs = [
            d
            for d in sorted(tasks_dir.iterdir())
            if (d / "task.json").is_file() and (d / "naive.cu").is_file()
        ]
        for d in dirs[:limit]:
            task = load_task(d)
            source = task.naive_source or ""
            row: dict[str, Any] = {"task": task.id, "kind": task.kind}
            t0 = time.perf_counter()
            violations = check_source(task, source)
            row["static"] = time.perf_counter() - t0
            row["static_violations"] = [v.rule for v in violations]
            miss = compiler.compile(task, source)
            row["compile_miss"] = miss.seconds
            row["compile_ok"] = miss.ok
            hit = compiler.compile(task, source)
            row["compile_hit"] = hit.seconds
            if not miss.ok:
                row["compile_log"] = miss.log[-800:]
            if evaluator.runtime_checks_available and miss.ok and not violations:
                verdict = evaluator.evaluate(task, Candidate(source=source), options)
                row["correctness"] = verdict.seconds.get("correctness")
                row["timing"] = verdict.seconds.get("timing")
                row["passed"] = verdict.passed
                row["error"] = verdict.error
                row["message"] = verdict.message[:300]
                row["speedup"] = verdict.speedup
                row["candidate_median_ms"] = (
                    verdict.candidate_timing.median_ms if verdict.candidate_timing else None
                )
                row["candidate_cov"] = verdict.candidate_timing.cov if verdict.candidate_timing else None
            if load_inline:
                row["load_inline"] = _load_inline_seconds(task, source, Path(tmp) / f"inline-{task.id}")
            rows.append(row)
            if out is not None:  # written after every task, so an interrupted run still leaves its rows
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(json.dumps({"partial": True, "rows": rows}, indent=2, default=str) + "\n")
            logger.info("%s", json.dumps({k: v for k, v in row.items() if k != "compile_log"}, default=str))
        summary = {
            stage: _summary([r[stage] for r in rows if isinstance(r.get(stage), float)]) for stage in STAGES
        }
        return {
            "tasks": len(rows),
            "runtime": evaluator.runtime,
            "arch": evaluator.arch,
            "nvcc": compiler.toolchain.release,
            "host": platform.node(),
            "rows": rows,
            "summary": summary,
        }


def _summary(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "median_s": None, "mean_s": None, "max_s": None}
    return {
        "n": len(values),
        "median_s": statistics.median(values),
        "mean_s": statistics.fmean(values),
        "max_s": max(values),
    }


def _cell(value: object) -> str:
    return f"{value:12.4f}" if isinstance(value, float) else f"{'-':>12}"


def print_table(result: dict[str, Any]) -> None:
    """A plain table of the per-stage summary (stdout is this script's product)."""
    lines = [f"{'stage':<14}{'n':>4}{'median s':>12}{'mean s':>12}{'max s':>12}"]
    for stage, s in result["summary"].items():
        lines.append(f"{stage:<14}{s['n']:>4}{_cell(s['median_s'])}{_cell(s['mean_s'])}{_cell(s['max_s'])}")
    sys.stdout.write("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=Path, default=Path("bench/tasks"))
    parser.add_argument("--out", type=Path, default=Path("bench/results/executor_bench.json"))
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--runtime", choices=["auto", "gpu", "none"], default="auto")
    parser.add_argument("--load-inline", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    result = bench(args.tasks, args.limit, args.load_inline, args.runtime, args.out)
    result["command"] = " ".join(sys.argv)
    result["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
