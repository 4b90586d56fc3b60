"""What the worker does inside a function task's timed windows beyond the timed call itself.

    python -m bench.probes.window_overhead --runs 3 --trials 40

Each timed call's window is the kernel-stamped time between the worker's start and end lines on its
done channel (executor.clockcheck); the worker's own report of the call is its timed region. Their
difference is the worker's work inside the window: the announcements, and since session 36 the two
samples of the call's outputs (before the call and after it, ``FunctionRuntime.time``), which the
shortest-window rule (2 x the median + 5 ms) must absorb. This runs honest code on the host runtime
(g++-built, with a call limit so that every call is announced) in fresh workers: the polynomial task of
the clock-attack tests at its timing size (131,072 floats) and the fixture saxpy at 256 Ki and 4 Mi
floats, and prints, per run, the median, smallest and largest (window - reported) over the timed calls.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from executor.sandbox import WorkerProcess, _job_dirs, finish_candidate, start_candidate
from executor.worker.messages import CandidateRun
from tests.integration.executor.test_clock_attack import HONEST, LIMIT
from tests.integration.executor.test_clock_confirmation import SAXPY
from tests.integration.executor.test_executor_hacks_host import POLY_TASK
from tests.support.hostcode import FAST, build_host_candidates, saxpy_timed_at, timing_set_job, write_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh workers per case")
    parser.add_argument("--trials", type=int, default=40, help="timed calls per run")
    args = parser.parse_args()
    options = FAST.model_copy(update={"min_trials": args.trials, "max_trials": args.trials, "warmup_ms": 0.0})
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        cases = {
            "poly 131072": (write_task(tmp / "poly", POLY_TASK, HONEST), HONEST),
            "saxpy 262144": (saxpy_timed_at(1 << 18), SAXPY),
            "saxpy 4194304": (saxpy_timed_at(1 << 22), SAXPY),
        }
        for label, (task, source) in cases.items():
            where = tmp / label.replace(" ", "_")
            where.mkdir(exist_ok=True)
            product = build_host_candidates(where, {"honest": source})["honest"]
            job = timing_set_job(task, where / "job", options)
            for _ in range(args.runs):
                proc = WorkerProcess("candidate", job.runtime, None, binds=_job_dirs(job), timing_cores=0)
                try:
                    start_candidate(proc, job, None)
                    run = CandidateRun(
                        candidate_product=product, candidate_symbol=task.entry, call_limit=LIMIT
                    )
                    outcome = finish_candidate(proc, run, 120, None, None)
                    windows = [w * 1e3 for w in proc.timed_windows if w is not None]
                finally:
                    proc.close()
                timing = outcome.candidate_timing
                if not outcome.passed or timing is None or not timing.samples_ms:
                    print(f"{label}: not passed: {outcome.message}", flush=True)
                    continue
                extra = [w - s for w, s in zip(windows, timing.samples_ms, strict=False)]
                print(
                    f"{label}: median call {timing.median_ms:.4g} ms, {len(windows)} windows; window - reported: "
                    f"median {statistics.median(extra):.3f} ms, min {min(extra):.3f}, max {max(extra):.3f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
