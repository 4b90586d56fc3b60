"""Where a correct candidate's time under its GPU lock goes, 1 vs 2 replicas (session 18 call 1).

Usage: mkdir -p /tmp/s18 && tar -xzf bench/results/2026-11-29_s18/call1_x2/scaling_results.tar.gz -C /tmp/s18
       python bench/results/2026-11-29_s18/lock_time_analysis.py /tmp/s18
Prints the markdown tables of lock_time_analysis.md (means over correct candidates; ``steady``: verdicts
finished after the first 60 s).
"""

from __future__ import annotations

import collections
import json
import statistics
import sys
from pathlib import Path
from typing import Any

PARTS = [
    "gpu_held",
    "handover",
    "load",
    "correctness",
    "compare",
    "timing_lock_wait",
    "timing_trials",
    "last_check",
    "reference_timing",
    "baseline_timing",
    "reap_wait",
]


def records(path: Path, replicas: int) -> list[dict[str, Any]]:
    data = json.loads((path / f"queue_{replicas}.json").read_text())
    return [r for run in data["runs"] for r in run["records"]]


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def main(root: Path) -> None:
    print("| replicas | window | kind | n | " + " | ".join(PARTS) + " | rest | trials | median robust CoV |")
    print("|---|---|---|---|" + "---|" * (len(PARTS) + 3))
    for replicas in (1, 2):
        recs = [
            r for r in records(root, replicas) if r["candidate"] == "correct" and "gpu_held" in r["seconds"]
        ]
        for window, keep in (("all", lambda r: True), ("steady", lambda r: r["finished_s"] >= 60)):
            for kind in ("function", "kernel"):
                rs = [r for r in recs if r["task_kind"] == kind and keep(r)]
                cols = [mean([r["seconds"].get(p, 0.0) for r in rs]) for p in PARTS]
                # compare is part of correctness; reap_wait runs beside the run, in a thread
                inside = [p for p in PARTS[1:] if p not in ("reap_wait", "compare")]
                rest = mean(
                    [r["seconds"]["gpu_held"] - sum(r["seconds"].get(p, 0.0) for p in inside) for r in rs]
                )
                trials = mean([r["trials"] for r in rs if r["trials"]])
                cov = statistics.median([r["robust_cov"] for r in rs if r["robust_cov"] is not None] or [0])
                print(
                    f"| {replicas} | {window} | {kind} | {len(rs)} | "
                    + " | ".join(f"{c:.3f}" for c in cols)
                    + f" | {rest:.3f} | {trials:.1f} | {cov:.4f} |"
                )
    print()
    print(
        "Naive-baseline timings per task (correct function candidates that timed it / all such candidates):"
    )
    print()
    print(
        "| replicas | candidates | timed the baseline | distinct tasks | repeats | their lock seconds | share of function lock time |"
    )
    print("|---|---|---|---|---|---|---|")
    for replicas in (1, 2):
        recs = [
            r
            for r in records(root, replicas)
            if r["task_kind"] == "function" and "gpu_held" in r["seconds"] and "timing_trials" in r["seconds"]
        ]
        timed = [r for r in recs if "baseline_timing" in r["seconds"]]
        tasks = collections.Counter(r["task"] for r in timed)
        held = sum(r["seconds"]["gpu_held"] for r in recs)
        base = sum(r["seconds"]["baseline_timing"] for r in timed)
        print(
            f"| {replicas} | {len(recs)} | {len(timed)} | {len(tasks)} | {len(timed) - len(tasks)} | "
            f"{base:.1f} | {base / held:.0%} |"
        )
    print()
    print(
        "Trials of correct function candidates (host-timed; the stop rule's spread is within each timing set):"
    )
    print()
    print(
        "| replicas | trials 7 | 8-14 | 15-30 | > 30 | mean trials | mean timing_trials s | stopped by the 2 s cap | their share of trials time |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for replicas in (1, 2):
        rs = [
            r
            for r in records(root, replicas)
            if r["task_kind"] == "function" and r["candidate"] == "correct" and r["trials"]
        ]
        t = [r["trials"] for r in rs]
        capped = [r for r in rs if r["stop"] == "time_cap"]
        print(
            f"| {replicas} | {sum(x <= 7 for x in t)} | {sum(8 <= x <= 14 for x in t)} | "
            f"{sum(15 <= x <= 30 for x in t)} | {sum(x > 30 for x in t)} | {mean(t):.1f} | "
            f"{mean([r['seconds']['timing_trials'] for r in rs]):.3f} | {len(capped)} | "
            f"{sum(r['seconds']['timing_trials'] for r in capped) / sum(r['seconds']['timing_trials'] for r in rs):.0%} |"
        )


def avoidable_baselines(root: Path) -> None:
    """The baseline timings that a host-wide cache read at the run's turn would have spared: a run
    whose turn came after another run of its task had stored the task's baseline (its verdict)."""
    print()
    print("Baseline timings a host-wide cache read at the turn spares (upper bound: stored at the verdict):")
    print()
    print("| replicas | timed | spared | lock seconds spared | per correct function candidate |")
    print("|---|---|---|---|---|")
    for replicas in (1, 2):
        recs = [r for r in records(root, replicas) if "baseline_timing" in r["seconds"]]
        function = [
            r
            for r in records(root, replicas)
            if r["task_kind"] == "function" and "timing_trials" in r["seconds"]
        ]
        spared = []
        for r in recs:
            turn = r["finished_s"] - r["seconds"]["gpu_held"]
            if any(o is not r and o["task"] == r["task"] and o["finished_s"] <= turn for o in recs):
                spared.append(r)
        seconds = sum(r["seconds"]["baseline_timing"] for r in spared)
        print(f"| {replicas} | {len(recs)} | {len(spared)} | {seconds:.1f} | {seconds / len(function):.3f} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
    avoidable_baselines(Path(sys.argv[1]))
