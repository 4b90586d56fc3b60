"""How often the executor's clock check refuses an honest saxpy function candidate under CPU load.

    python -m bench.probes.clock_slack_load --runs 60 --busy 3 --gil-threads 1 --json /tmp/slack.jsonl

The executor's clock check (executor.clockcheck) compares the shortest window the executor saw around
the worker's timed calls with twice the worker's median timed call plus a slack; a loaded host makes
the windows longer than the calls (session 32's clean-clone rehearsal refused an honest saxpy: shortest
of 7 windows 7.30 ms against 2 x 1.11 + 5 = 7.22 ms). This runs the fixture task ``saxpy`` (host
runtime, g++-built honest code, the call limit set so that the calls are announced, the options of
tests/integration/executor/test_executor_prepare.py) ``--runs`` times in fresh workers while ``--busy``
processes spin on the host's cores and ``--gil-threads`` threads of this process spin in Python (the
executor's other threads, which the reading thread shares the interpreter's lock with). It prints the
refusals out of the runs and the distribution of (shortest window - 2 x median timed call) and, per run,
of (each first visit's window - 2 x its worker time), the margins the check compares with
``CLOCK_SLACK_MS`` and ``FIRST_VISIT_SLACK_MS``. Where the worker process also keeps the windows by
when the executor read the lines (``read_windows``, session 33 on), the same margins by those are
printed too, from the same runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from executor.clockcheck import CLOCK_FACTOR, CLOCK_SLACK_MS, FIRST_VISIT_SLACK_MS
from executor.protocol import EvaluationOptions
from executor.runlimit import CallLimit
from executor.sandbox import WorkerProcess, run_job
from executor.taskformat import load_task
from executor.worker.messages import CandidateRun
from tests.support.hostcode import (
    FIXTURE_TASKS,
    SAXPY_HEAD,
    build_host_candidates,
    saxpy_timed_at,
    timing_set_job,
)

HONEST = SAXPY_HEAD + "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }\n"
# test_executor_prepare's options (QUICK), and a call limit as the evaluator sets one.
OPTIONS = EvaluationOptions(min_trials=3, max_trials=10, min_timing_ms=5, reference_repeats=1, baseline=False)
LIMIT = CallLimit(seconds=30.0, floor_s=20.0, factor=10.0, basis="reference", basis_ms=1000.0)


def _margins(
    windows_s: list[float | None] | list[float], median_ms: float, first_ms: list[float]
) -> dict[str, float | None]:
    """The shortest window's margin over ``CLOCK_FACTOR`` x the median, and the smallest first-visit
    window's margin over ``CLOCK_FACTOR`` x its own worker time (ms; None without windows; a window
    not known, None, is left out)."""
    known = [w for w in windows_s if w is not None]
    if not known:
        return {"shortest": None, "first": None}
    pairs = [(w, t) for w, t in zip(windows_s, first_ms, strict=False) if w is not None]
    first = min((w * 1e3 - CLOCK_FACTOR * t for w, t in pairs), default=None)
    return {"shortest": min(known) * 1e3 - CLOCK_FACTOR * median_ms, "first": first}


def _spin(stop: threading.Event, burst_s: float) -> None:
    """Hold the interpreter's lock in Python until ``stop``: without a pause, or in bursts of
    ``burst_s`` with a millisecond's sleep between (a thread of the executor that works in bursts)."""
    while not stop.is_set():
        until = time.monotonic() + burst_s
        while time.monotonic() < until or not burst_s:
            if stop.is_set():
                return
        time.sleep(0.001)


def run(
    runs: int, busy: int, gil_threads: int, n: int | None = None, burst_ms: float = 0.0
) -> list[dict[str, Any]]:
    """``runs`` honest saxpy jobs under the load (timed at ``n`` floats: the task's size by default);
    one record each."""
    seen: list[WorkerProcess] = []
    handed = WorkerProcess.hand_untrusted

    def spy(self: WorkerProcess) -> None:
        seen.append(self)
        handed(self)

    records = []
    loops = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(busy)]
    stop = threading.Event()
    spinners = [
        threading.Thread(target=_spin, args=(stop, burst_ms / 1e3), daemon=True) for _ in range(gil_threads)
    ]
    WorkerProcess.hand_untrusted = spy  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            task = load_task(FIXTURE_TASKS / "saxpy") if n is None else saxpy_timed_at(n)
            product = build_host_candidates(Path(tmp), {"honest": HONEST})["honest"]
            job = timing_set_job(task, Path(tmp) / "job", OPTIONS)
            call = CandidateRun(candidate_product=product, candidate_symbol=task.entry, call_limit=LIMIT)
            for t in spinners:
                t.start()
            for i in range(runs):
                began = time.monotonic()
                outcome = run_job(job, call, timeout_s=120)
                proc = seen[-1]
                timing = outcome.candidate_timing
                median_ms = timing.median_ms if timing is not None else float("nan")
                first = list(outcome.first_visits_ms or [])
                record: dict[str, Any] = {
                    "run": i,
                    "passed": outcome.passed,
                    "error": str(outcome.error) if outcome.error else None,
                    "message": outcome.message if not outcome.passed else "",
                    "median_ms": median_ms,
                    "first_visits_ms": first,
                    "windows_ms": [w * 1e3 if w is not None else None for w in proc.timed_windows],
                    "margin": _margins(proc.timed_windows, median_ms, first),
                    "seconds": time.monotonic() - began,
                }
                read = getattr(proc, "read_windows", None)
                if read is not None:
                    record["read_windows_ms"] = [w * 1e3 for w in read]
                    record["read_margin"] = _margins(read, median_ms, first)
                records.append(record)
                print(
                    f"{i}: {'passed' if outcome.passed else 'REFUSED'} median {median_ms:.3g} ms "
                    f"margin {record['margin']['shortest']} {outcome.message[:160] if not outcome.passed else ''}",
                    flush=True,
                )
    finally:
        WorkerProcess.hand_untrusted = handed  # type: ignore[method-assign]
        stop.set()
        for p in loops:
            p.kill()
            p.wait()
    return records


def _dist(values: list[float]) -> str:
    if not values:
        return "none"
    q = sorted(values)

    def at(f: float) -> float:
        return q[min(len(q) - 1, int(f * len(q)))]

    return (
        f"min {q[0]:.2f}, p50 {statistics.median(q):.2f}, p90 {at(0.9):.2f}, p99 {at(0.99):.2f}, "
        f"max {q[-1]:.2f} ms (n={len(q)})"
    )


def summary(records: list[dict[str, Any]]) -> str:
    """Refusals, and the margins' distributions (by the windows compared, and by read time if kept)."""
    refused = [r for r in records if not r["passed"]]
    lines = [
        f"refused {len(refused)} of {len(records)} (clock check: {sum('executor' in r['message'] for r in refused)})",
        f"medians: {_dist([r['median_ms'] for r in records])}",
    ]
    for key, label in (("margin", "windows compared"), ("read_margin", "windows by read time")):
        shortest = [r[key]["shortest"] for r in records if key in r and r[key]["shortest"] is not None]
        first = [r[key]["first"] for r in records if key in r and r[key]["first"] is not None]
        if not shortest:
            continue
        over = sum(s > CLOCK_SLACK_MS for s in shortest)
        lines.append(
            f"{label}: shortest - {CLOCK_FACTOR:g} x median: {_dist(shortest)}; > {CLOCK_SLACK_MS:g}: {over}"
        )
        over_first = sum(f > FIRST_VISIT_SLACK_MS for f in first)
        lines.append(
            f"{label}: least first visit - {CLOCK_FACTOR:g} x its time: {_dist(first)}; > {FIRST_VISIT_SLACK_MS:g}: {over_first}"
        )
    for key, label in (("windows_ms", "windows compared"), ("read_windows_ms", "windows by read time")):
        runs = [r for r in records if r.get(key)]
        if not runs:
            continue
        excess = [w - CLOCK_FACTOR * r["median_ms"] for r in runs for w in r[key] if w is not None]
        zero = sum(w is None or w < 0.05 for r in runs for w in r[key])
        over = sum(e > CLOCK_SLACK_MS for e in excess)
        lines.append(
            f"{label}: every window - {CLOCK_FACTOR:g} x median: {_dist(excess)}; "
            f"> {CLOCK_SLACK_MS:g}: {over} of {len(excess)}; below 0.05 ms (start and end read at once): {zero}"
        )
    for r in refused:
        lines.append(f"  run {r['run']}: {r['error']}: {r['message'][:300]}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--busy", type=int, default=3, help="busy-loop processes on the host")
    parser.add_argument(
        "--gil-threads", type=int, default=1, help="threads of this process spinning in Python"
    )
    parser.add_argument(
        "--n",
        type=int,
        help="the timing size in floats (default: the fixture's 4,194,304; smaller: shorter calls)",
    )
    parser.add_argument(
        "--burst-ms",
        type=float,
        default=0.0,
        help="the spinning threads spin in bursts this long (0: without end)",
    )
    parser.add_argument("--json", type=Path, help="write one record per run here (JSON lines)")
    parser.add_argument("--summarize", type=Path, nargs="+", help="only summarise these earlier --json files")
    args = parser.parse_args()
    if args.summarize:
        for path in args.summarize:
            print(f"== {path}\n{summary([json.loads(line) for line in path.read_text().splitlines()])}")
        return
    records = run(args.runs, args.busy, args.gil_threads, args.n, args.burst_ms)
    if args.json:
        args.json.write_text("".join(json.dumps(r) + "\n" for r in records))
    print(summary(records))


if __name__ == "__main__":
    main()
