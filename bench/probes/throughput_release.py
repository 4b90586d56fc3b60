"""A function candidate's time under the GPU turn with and without ``release_gpu_early`` (issue 33's cost),
in the ``host`` runtime (no GPU: honest host-code candidates compiled by nvcc and run on the CPU), so it
runs on any machine with nvcc and g++. For each setting, one evaluator evaluates each task's honest
candidate ``--repeats`` times (after one unmeasured evaluation that prepares the task); printed: the
mean seconds under the turn (``gpu_held``), of the worker's run, and of the run after the turn ended.
The two settings' evaluations alternate.

    python -m bench.probes.throughput_release [--repeats 6]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from executor.evaluate import Evaluator
from executor.protocol import CandidateSource, EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, load_task
from executor.verdict import Verdict
from tests.support.hostcode import one_input_task, write_task

ROOT = Path(__file__).resolve().parents[2]
STUB = "\n__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
SAXPY = (
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }" + STUB
)
# 24 Mi floats in (96 MiB): the copies' input check after the trials is what this setting moves.
SUM_TASK = one_input_task(
    "sum_big",
    domain="reduction",
    description="s[0] = the sum of n floats",
    timing=24 << 20,
    output=("s", "float64", "1"),
    low=0.0,
    high=1.0,
)
SUM = (
    'extern "C" void sum_big(int n, const float* x, double* s) {\n'
    "double t = 0; for (int i = 0; i < n; ++i) t += x[i]; s[0] = t; }" + STUB
)
SUM_REFERENCE = (
    'extern "C" void sum_big(int n, const float* x, double* s) {\n'
    "double t = 0; for (int i = 0; i < n; ++i) t += x[i]; s[0] = t; }\n"
)
OPTIONS = EvaluationOptions(min_trials=5, max_trials=12, reference_repeats=1, baseline=False)


def _tasks(tmp: Path) -> list[tuple[FunctionTask | KernelTask, str]]:
    saxpy = load_task(ROOT / "tests" / "unit" / "executor" / "fixtures" / "tasks" / "saxpy")
    return [(saxpy, SAXPY), (write_task(tmp, SUM_TASK, SUM_REFERENCE), SUM)]


def measure(repeats: int, tmp: Path) -> dict[bool, dict[str, dict[str, float]]]:
    """Per setting and task: the mean seconds under the turn, of the run and after the turn, over
    ``repeats`` evaluations. The two settings' evaluators take turns, one evaluation each, so that a
    change in the machine's load falls on both."""
    evaluators = {
        early: Evaluator(
            ExecutorSettings(
                cache_dir=tmp / f"cache-{early}", runtime="host", run_timeout_s=120, release_gpu_early=early
            )
        )
        for early in (False, True)
    }
    out: dict[bool, dict[str, dict[str, float]]] = {False: {}, True: {}}
    try:
        for task, source in _tasks(tmp / "tasks"):
            verdicts: dict[bool, list[Verdict]] = {False: [], True: []}
            for i in range(repeats + 1):  # the first of each: the task's preparation, not measured
                for early, evaluator in evaluators.items():
                    got = evaluator.evaluate(task, CandidateSource(source=source + f"\n// {i}\n"), OPTIONS)
                    if not got.passed:
                        raise SystemExit(f"{task.id}: an honest candidate failed: {got.message}")
                    if i:
                        verdicts[early].append(got)
            for early, done in verdicts.items():
                row = {
                    key: statistics.mean(v.seconds.get(key, 0.0) for v in done)
                    for key in ("gpu_held", "run", "after_release", "input_check", "last_check")
                }
                row["released"] = sum("after_release" in v.seconds for v in done)
                out[early][task.id] = row
    finally:
        for evaluator in evaluators.values():
            evaluator.close()
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rows = measure(args.repeats, Path(tmp))
    print(
        "| task | release_gpu_early | n released | under the turn s | run s | after the turn s | input check s | last check s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for early, per_task in rows.items():
        for task_id, m in per_task.items():
            print(
                f"| {task_id} | {early} | {m['released']:.0f}/{args.repeats} | {m['gpu_held']:.3f} | {m['run']:.3f} | "
                f"{m['after_release']:.3f} | {m['input_check']:.3f} | {m['last_check']:.3f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
