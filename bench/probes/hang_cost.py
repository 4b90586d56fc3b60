"""What a hanging candidate costs: the seconds its run holds the executor (the GPU lock), with each
call's own limit (the default) and without it (only the run limit), for a candidate that hangs in its
first call and one that hangs in its warm-up.

Issue 20's target is a hang costing at most 10 s of GPU time. The candidates are the ``saxpy`` fixture
task's (a function task: on the ``gpu`` runtime its library is called as on a GPU, on the test-only
``host`` runtime on the CPU), evaluated in process by an :class:`~executor.evaluate.Evaluator` with the
default settings and options; "no call limit" raises ``run_call_floor_s`` to ``run_timeout_s``, so that
only the run limit applies, as before the call limit. The seconds are the verdict's ``seconds["run"]``
(from the hand-over of the compiled candidate to the kill).

    python -m bench.probes.hang_cost --runtime host --runs 3 \\
        --out bench/results/2026-11-27_cpu/hang_cost.json --md bench/results/2026-11-27_cpu/hang_cost.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.probes.healthz_load import save
from executor.evaluate import Evaluator
from executor.protocol import CandidateSource, EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import load_task

ROOT = Path(__file__).resolve().parents[2]
TASK_DIR = ROOT / "tests" / "unit" / "executor" / "fixtures" / "tasks" / "saxpy"
# The static checks want a kernel launch in a candidate: one that is never reached.
STUB = "\n__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
HEAD = 'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
SAXPY = "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];"
SPIN = "volatile int spin = 1; while (spin) {}"
CANDIDATES = {
    "hangs in its first call": HEAD + SPIN + " }" + STUB,
    # The default options make five correctness calls (three test-size sets, one timing-size set, the
    # first set again); the sixth is the first warm-up call, the seventh hangs.
    "hangs in its 7th call (warm-up)": HEAD
    + "static int calls = 0; if (++calls >= 7) { "
    + SPIN
    + " } "
    + SAXPY
    + " }"
    + STUB,
}


def measure(runtime: str, runs: int) -> list[dict[str, Any]]:
    """Each candidate ``runs`` times, with and without the call limit."""
    rows = []
    task = load_task(TASK_DIR)
    for config in ("call limit", "no call limit"):
        with tempfile.TemporaryDirectory() as tmp:
            settings = ExecutorSettings(cache_dir=Path(tmp), runtime=runtime)
            if config == "no call limit":
                settings = settings.model_copy(update={"run_call_floor_s": settings.run_timeout_s})
            evaluator = Evaluator(settings)
            try:
                for name, source in CANDIDATES.items():
                    for k in range(runs):
                        candidate = CandidateSource(source=source + f"// run {k}\n")
                        verdict = evaluator.evaluate(task, candidate, EvaluationOptions())
                        limit = verdict.run_limit
                        rows.append(
                            {
                                "config": config,
                                "candidate": name,
                                "error": verdict.error.value if verdict.error else None,
                                "held_s": round(verdict.seconds.get("run", 0.0), 2),
                                "run_limit_s": round(limit.seconds, 2) if limit else None,
                                "call_limit_s": round(limit.call.seconds, 2)
                                if limit and limit.call
                                else None,
                                "stopped_by": limit.stopped_by if limit else None,
                                "message": verdict.message[:300],
                            }
                        )
                        print(rows[-1], file=sys.stderr, flush=True)
            finally:
                evaluator.close()
    return rows


def table(report: dict[str, Any]) -> str:
    """The report as Markdown."""
    lines = [
        "# What a hanging candidate costs, with and without the call limit",
        "",
        f"- date: {report['date']}",
        f"- machine: {report['machine']}",
        f"- command: `{report['command']}`",
        "- seconds: the verdict's `seconds['run']`, from the hand-over of the compiled candidate to its kill",
        "",
        "| config | candidate | verdict | held s: median (min-max) | run limit s | call limit s | stopped by |",
        "| --- | --- | --- | --- | ---: | ---: | --- |",
    ]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in report["rows"]:
        groups.setdefault((row["config"], row["candidate"]), []).append(row)
    for (config, candidate), rows in groups.items():
        held = [r["held_s"] for r in rows]
        errors = sorted({str(r["error"]) for r in rows})
        stopped = sorted({str(r["stopped_by"]) for r in rows})
        lines.append(
            f"| {config} | {candidate} | {', '.join(errors)} | {statistics.median(held):.2f} "
            f"({min(held):.2f}-{max(held):.2f}) | {rows[0]['run_limit_s']} | {rows[0]['call_limit_s']} "
            f"| {', '.join(stopped)} |"
        )
    lines += ["", "One message of each:", ""]
    for (config, candidate), rows in groups.items():
        lines.append(f"- {config}, {candidate}: {rows[0]['message']}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runtime", choices=("host", "gpu"), default="host")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--md", type=Path)
    args = parser.parse_args(argv)
    rows = measure(args.runtime, args.runs)
    load = [round(x, 1) for x in os.getloadavg()]
    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}); load average (1, 5, 15 min) at the end {load}",
        "command": "python -m bench.probes.hang_cost " + " ".join(sys.argv[1:] if argv is None else argv),
        "runtime": args.runtime,
        "rows": rows,
    }
    text = table(report)
    save(report, text, args.out, args.md)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
