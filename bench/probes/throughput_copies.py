"""Which function candidates another replica on the host slows: copy-bound against compute-bound tasks.

A function task's trials are timed on the host clock, and its candidate copies its arguments between host
memory and the GPU in every call. If what the replicas of a host share is the host's memory and PCIe, a
second replica slows the candidates whose time is mostly copies and leaves the others alone; if it is
the CPU (or the clock), both. This groups the correct function candidates of two scaling runs
(``bench/device/run_scaling.sh``'s ``queue_<n>.json``) by their task's *copy rate* at the smaller fleet:
the bytes of the task's arrays at the timing size over the candidate's median (a pageable copy runs
at 8-10 GB/s on an H200 host, so a task near that is copy-bound). Per class: the tasks timed in both
runs, the median over them of the ratio of the larger fleet's median to the smaller's (each task's
fastest correct candidate in each run), and the mean trials and median robust CoV of the candidates.

Usage: python -m bench.probes.throughput_copies RESULTS_DIR [SMALL LARGE]  (default 1 2: queue_1.json, queue_2.json;
       LARGE may name another run, e.g. 2_device for queue_2_device.json)
       e.g. after ``tar -xzf .../scaling_results.tar.gz -C /tmp/s``: python -m bench.probes.throughput_copies /tmp/s
Session 21's two H200s (bench/results/2026-11-29_s21/call1_x2_scaling), 1 against 2 replicas:
13 tasks at 8 GB/s or more, median ratio 1.24; 10 under 2 GB/s, 1.01.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from executor.taskformat import NUMPY_DTYPES, load_task

ROOT = Path(__file__).resolve().parents[2]
TASK_DIRS = (ROOT / "regraph_data" / "tasks",)
# Copy-rate classes, GB/s of the task's arrays per second of the candidate's median.
CLASSES = ((0.0, 2.0), (2.0, 8.0), (8.0, float("inf")))


def correct_function_runs(path: Path) -> list[dict[str, Any]]:
    """The records of correct, timed function candidates in a throughput probe's JSON."""
    data = json.loads(path.read_text())
    return [
        r
        for run in data.get("runs", [])
        for r in run.get("records", [])
        if r.get("error") is None
        and r.get("task_kind") == "function"
        and r.get("trials")
        and r.get("median_ms")
    ]


def task_bytes(task_id: str, dirs: tuple[Path, ...] = TASK_DIRS) -> int | None:
    """The bytes of a task's array arguments at the timing size (None: no such function task)."""
    for directory in dirs:
        if (directory / task_id / "task.json").exists():
            task = load_task(directory / task_id)
            return sum(
                task.array_length(arg, "timing") * np.dtype(NUMPY_DTYPES[arg.dtype]).itemsize
                for arg in task.arrays
            )
    return None


def compare(
    small: list[dict[str, Any]], large: list[dict[str, Any]], dirs: tuple[Path, ...] = TASK_DIRS
) -> list[dict[str, Any]]:
    """One row per copy-rate class over the tasks timed in both runs."""
    by_task: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: {"small": [], "large": []})
    for name, records in (("small", small), ("large", large)):
        for r in records:
            by_task[r["task"]][name].append(r)
    classed: dict[int, list[tuple[float, list[dict[str, Any]], list[dict[str, Any]]]]] = defaultdict(list)
    for task_id, runs in sorted(by_task.items()):
        if not runs["small"] or not runs["large"]:
            continue
        size = task_bytes(task_id, dirs)
        if size is None:
            continue
        fastest = min(r["median_ms"] for r in runs["small"])
        rate = size / (fastest / 1e3) / 1e9
        ratio = min(r["median_ms"] for r in runs["large"]) / fastest
        index = next(i for i, (low, high) in enumerate(CLASSES) if low <= rate < high)
        classed[index].append((ratio, runs["small"], runs["large"]))
    rows = []
    for index, (low, high) in enumerate(CLASSES):
        tasks = classed.get(index, [])
        if not tasks:
            continue
        row: dict[str, Any] = {
            "class": f"{low:g}-{high:g} GB/s" if high != float("inf") else f">= {low:g} GB/s",
            "tasks": len(tasks),
            "median_ratio": statistics.median(t[0] for t in tasks),
        }
        for name, records in (
            ("small", [r for _, runs, _ in tasks for r in runs]),
            ("large", [r for _, _, runs in tasks for r in runs]),
        ):
            row[f"trials_{name}"] = statistics.fmean(r["trials"] for r in records)
            row[f"cov_{name}"] = statistics.median(r.get("robust_cov") or 0.0 for r in records)
        rows.append(row)
    return rows


def render(rows: list[dict[str, Any]], small: str, large: str) -> list[str]:
    """The markdown table of :func:`compare`'s rows."""
    lines = [
        f"Correct function candidates by their task's copy rate in run {small} (arrays' bytes at the "
        f"timing size / median): median over tasks of the median's ratio {large}:{small}, mean trials, "
        "median robust CoV",
        "",
        f"| copy rate | tasks | median ratio | trials ({small}) | trials ({large}) | robust CoV ({small}) "
        f"| robust CoV ({large}) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['class']} | {r['tasks']} | {r['median_ratio']:.2f} | {r['trials_small']:.1f} | "
            f"{r['trials_large']:.1f} | {r['cov_small']:.3f} | {r['cov_large']:.3f} |"
        )
    return lines


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 3):
        sys.stderr.write(__doc__ or "")
        return 2
    results = Path(argv[0])
    small, large = (argv[1], argv[2]) if len(argv) == 3 else ("1", "2")
    paths = [results / f"queue_{n}.json" for n in (small, large)]
    if not all(p.exists() for p in paths):
        print(f"no copy-rate table: {', '.join(str(p) for p in paths if not p.exists())} missing")
        return 0
    rows = compare(correct_function_runs(paths[0]), correct_function_runs(paths[1]))
    print("\n".join(render(rows, small, large)) if rows else "no task timed in both runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
